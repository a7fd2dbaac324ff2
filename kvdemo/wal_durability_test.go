package kvdemo

import (
	"bytes"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/errorfs"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// TestSyncAfterFailedFsyncFails: once an fsync of the log has failed, no
// later Sync or Close may report the log durable. A failed fsync may have
// dropped the dirty pages and marked them clean (Linux does), so a second
// fsync can succeed without writing them: the failure must stick.
func TestSyncAfterFailedFsyncFails(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	db, err := faultOpen(t, dir, efs, Options{NoSyncEachWrite: true})
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	l.put(t, db, "a", "v")
	efs.Add(&errorfs.Rule{Op: errorfs.OpSync, Match: isExt(extLog), Times: 1, Err: errorfs.EIO})
	if err := db.Sync(); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Sync whose fsync failed: %v", err)
	}
	if err := db.Sync(); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Sync after a failed fsync (the next fsync succeeds): %v; want ErrOutcomeUnknown, never nil", err)
	}
	if err := db.Close(); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Close after a failed fsync: %v; want ErrOutcomeUnknown, never nil", err)
	}
	db = open(t, dir, Options{})
	defer db.Close()
	if got, err := db.Get([]byte("a")); err == nil && string(got) != "v" {
		t.Fatalf("a (outcome unknown) reads back %q", got)
	}
}

// TestUndoneLogWriteStaysUndoneAfterTornCrash: a log write that failed
// half-way is cut back and reported ErrNotStored, and the store moves on
// to a new log. The cut must be durable before that (an fsync after the
// truncate): otherwise a power loss may bring the half-written record
// back at the end of a log that a later one follows, which Open must
// treat as damage in the middle of the history, and a failed write could
// come back as stored. Here the crash tears what was never fsynced.
func TestUndoneLogWriteStaysUndoneAfterTornCrash(t *testing.T) {
	dir, efs, db, l := faultStore(t, Options{}, 20)
	efs.Add(&errorfs.Rule{Op: errorfs.OpWrite, Match: isExt(extLog), Times: 1, Short: true, Err: errorfs.ENOSPC})
	if err := l.put(t, db, "failed", "v"); !errors.Is(err, ErrNotStored) {
		t.Fatalf("Put whose log write failed half-way: %v; want ErrNotStored", err)
	}
	for i := 0; i < 5; i++ {
		if err := l.put(t, db, "after"+string(rune('0'+i)), "v"); err != nil {
			t.Fatalf("Put after the failed write was undone: %v", err)
		}
	}
	if err := efs.CrashTorn(); err != nil {
		t.Fatal(err)
	}
	db.Close() // fails on the crashed filesystem; the lock goes with it
	db, err := faultOpen(t, dir, vfs.Default, Options{})
	if err != nil {
		t.Fatalf("Open after the undone write and a torn crash: %v", err)
	}
	defer db.Close()
	l.verify(t, db, "after a torn crash")
}

// TestFullLogDurableBeforeTheNext: with NoSyncEachWrite, the log of a
// memtable that fills up is fsynced before any record goes to the next
// log, so that a crash can only tear the newest log. Otherwise a power
// loss while the full memtable's flush is failing could tear the older
// log (its records never fsynced) under a newer one that holds intact
// records, which Open must refuse as damage in the middle of the history.
func TestFullLogDurableBeforeTheNext(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	db, err := faultOpen(t, dir, efs, Options{NoSyncEachWrite: true, MemtableBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	// Flushes fail (the table cannot be created), so the full memtable
	// and its log stay.
	efs.Add(&errorfs.Rule{Op: errorfs.OpCreate, Match: isExt(extTable), Err: errorfs.ENOSPC})
	rotated := func() bool {
		db.mu.RLock()
		defer db.mu.RUnlock()
		return db.cur.imm != nil
	}
	i := 0
	for ; !rotated(); i++ {
		if i > 1000 {
			t.Fatal("the memtable never filled")
		}
		k, v := kv(i)
		mustPut(t, db, k, append(v, bytes.Repeat([]byte{'x'}, i%7)...))
	}
	first := filesOnDisk(t, dir, extLog)[0]
	data, err := os.ReadFile(fileName(dir, first, extLog))
	if err != nil {
		t.Fatal(err)
	}
	if sc, _ := scanLog(data[:len(data)/2], false, func(walRecord) error { return nil }); sc.damageAt < 0 {
		t.Fatalf("test setup: half of the full log (%d bytes) ends on a record boundary, so a torn crash would not show", len(data))
	}
	for j := 0; j < 5; j++ {
		k, v := kv(i + j)
		mustPut(t, db, k, v)
	}
	if err := efs.CrashTorn(); err != nil {
		t.Fatal(err)
	}
	db.Close() // fails on the crashed filesystem; the lock goes with it
	db, err = faultOpen(t, dir, vfs.Default, Options{})
	if err != nil {
		t.Fatalf("Open after a torn crash while a full memtable's flush was failing: %v", err)
	}
	defer db.Close()
	for j := 0; j < i+5; j++ {
		k, _ := kv(j)
		if _, err := db.Get(k); err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%s): %v", k, err)
		}
	}
}

// TestCloseWhoseSyncFailedIsNotClean: a Close whose final log fsync
// fails returns the error and must not record a clean close in the
// MANIFEST: the writes since the last Sync may then be lost by a crash,
// and a recorded ClosedSeq would make the next Open refuse the store as
// damaged at rest instead of recovering what the logs hold.
func TestCloseWhoseSyncFailedIsNotClean(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	db, err := faultOpen(t, dir, efs, Options{NoSyncEachWrite: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	for i := 10; i < 20; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	efs.Add(&errorfs.Rule{Op: errorfs.OpSync, Match: isExt(extLog), Err: errorfs.EIO})
	if err := db.Close(); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Close whose log fsync failed: %v; want ErrOutcomeUnknown", err)
	}
	if err := efs.Crash(); err != nil {
		t.Fatal(err)
	}
	db, err = faultOpen(t, dir, vfs.Default, Options{})
	if err != nil {
		t.Fatalf("Open after a failed Close and a crash: %v", err)
	}
	defer db.Close()
	mustHaveKV(t, db, 10, "synced before the failed Close")
}

// TestFlushWaitsForCommittedWrites: a write whose record is in the log
// but not yet in its memtable when the memtable fills and is flushed
// must be in the table: once the MANIFEST names the table, the log that
// also holds the record is removed. Here the write is held at that point
// while other writers fill the memtable and its flush starts.
func TestFlushWaitsForCommittedWrites(t *testing.T) {
	dir := t.TempDir()
	var armed atomic.Bool
	release := make(chan struct{})
	held := make(chan struct{})
	pause := func(at pausePoint) {
		if at == pauseWriteCommitted && armed.Swap(false) {
			close(held)
			<-release
		}
	}
	db := open(t, dir, Options{MemtableBytes: 4 << 10, MaxTables: -1, pause: pause})
	armed.Store(true)
	done := make(chan error)
	go func() { done <- db.Put([]byte("held"), []byte("v")) }()
	<-held
	// Fill the memtable the held write is in; its flush starts.
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("the memtable never filled")
		}
		k, v := kv(i)
		mustPut(t, db, k, v)
		db.mu.RLock()
		rotated := db.cur.imm != nil
		db.mu.RUnlock()
		if rotated {
			break
		}
	}
	time.Sleep(100 * time.Millisecond) // a flush that does not wait finishes meanwhile
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the held Put: %v", err)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	if got, err := db.Get([]byte("held")); err != nil || string(got) != "v" {
		t.Fatalf("acknowledged write held between its log and its memtable during a flush: %q, %v", got, err)
	}
}
