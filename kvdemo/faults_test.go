package kvdemo

// Fault-injection tests, one per fault of issue #10 (D1..D7) and more,
// through the injectable filesystem (internal/errorfs). Each asserts that
// every acknowledged write is present afterwards, that no write's outcome
// was misreported (a write reported ErrNotStored is absent; only one
// reported ErrOutcomeUnknown may go either way), and that no file was
// destroyed: checkNothingDestroyed (evidence_test.go) compares a snapshot
// taken before the fault, or the test compares the listing itself.

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/errorfs"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// ledger records what each write was told.
type ledger struct {
	mu        sync.Mutex
	acked     map[string]string // key -> value: the write succeeded
	notStored map[string]bool   // reported ErrNotStored
	unknown   map[string]bool   // reported ErrOutcomeUnknown
}

func newLedger() *ledger {
	return &ledger{acked: map[string]string{}, notStored: map[string]bool{}, unknown: map[string]bool{}}
}

// put writes a fresh key and files the outcome; it fails the test on an
// error that says neither "not stored" nor "unknown".
func (l *ledger) put(t testing.TB, db *DB, k, v string) error {
	err := db.Put([]byte(k), []byte(v))
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
		l.acked[k] = v
	case errors.Is(err, ErrOutcomeUnknown):
		l.unknown[k] = true
	case errors.Is(err, ErrNotStored):
		l.notStored[k] = true
	default:
		t.Errorf("Put(%s): an error that says neither not-stored nor unknown: %v", k, err)
	}
	return err
}

// verify: acknowledged writes present with their value, not-stored ones
// absent.
func (l *ledger) verify(t testing.TB, db *DB, when string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range l.acked {
		got, err := db.Get([]byte(k))
		if err != nil || string(got) != v {
			t.Fatalf("%s: acknowledged %s = %q, %v; want %q", when, k, got, err, v)
		}
	}
	for k := range l.notStored {
		if got, err := db.Get([]byte(k)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: %s was reported not stored, yet Get = %q, %v", when, k, got, err)
		}
	}
}

func faultOpen(t testing.TB, dir string, fs vfs.FS, o Options) (*DB, error) {
	t.Helper()
	if o.Logger == nil {
		o.Logger = quiet()
	}
	o.FS = fs
	return Open(dir, &o)
}

// faultStore opens a new store in a temporary directory on an errorfs
// with no rules yet, and writes n acknowledged keys a000, a001, ... into
// it through a ledger.
func faultStore(t *testing.T, o Options, n int) (string, *errorfs.FS, *DB, *ledger) {
	t.Helper()
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	db, err := faultOpen(t, dir, efs, o)
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	for i := 0; i < n; i++ {
		l.put(t, db, fmt.Sprintf("a%03d", i), "v")
	}
	return dir, efs, db, l
}

func isExt(ext string) func(string) bool {
	return func(p string) bool { return strings.HasSuffix(p, "."+ext) }
}

// filesOnDisk lists the numbers of dir's files of kind ext (extTable,
// extLog, ...), ascending. An unreadable dir fails the test.
func filesOnDisk(t testing.TB, dir, ext string) []uint64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, e := range entries {
		if id, x, ok := parseFileName(e.Name()); ok && x == ext {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestFaultFullDisk (D1, D2): the disk fills while three writers run.
// Nothing crashes (tables are written with write(2), not through a
// growing mmap); every failed write says ErrNotStored or
// ErrOutcomeUnknown; a failed flush leaves no partial table behind; reads
// keep working; a restart on the still-full disk works; once space comes
// back, writes and flushes resume without a restart; and nothing
// acknowledged is lost.
func TestFaultFullDisk(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	efs.SetSpace(200 << 10)
	o := Options{MemtableBytes: 16 << 10, MaxTables: 4}
	db, err := faultOpen(t, dir, efs, o)
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	var wg sync.WaitGroup
	var failures sync.Map
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 3000; i++ {
				k := fmt.Sprintf("w%d-%05d", w, i)
				if err := l.put(t, db, k, strings.Repeat(k, 4)); err != nil {
					failures.Store(k, err)
				}
			}
		}(w)
	}
	wg.Wait()
	nfail := 0
	failures.Range(func(any, any) bool { nfail++; return true })
	if nfail == 0 {
		t.Fatal("the disk never filled: the test exercised nothing")
	}
	if len(l.unknown) != 0 {
		t.Errorf("%d writes reported unknown on a full disk (only fsync failures should be)", len(l.unknown))
	}
	t.Logf("%d acknowledged, %d not stored before the disk filled", len(l.acked), len(l.notStored))
	l.verify(t, db, "disk full")
	// D2: no partial table: every .sst on disk is named by the manifest,
	// and tmp/ is empty.
	man, err := readManifestFS(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := filesOnDisk(t, dir, extTable); !slices.Equal(got, sortedCopy(man.Tables)) {
		t.Errorf("tables on disk %v, manifest %v: a failed flush left a file behind", got, man.Tables)
	}
	if tmp, _ := os.ReadDir(filepath.Join(dir, tmpDir)); len(tmp) != 0 {
		t.Errorf("tmp/ holds %d files after failed writes", len(tmp))
	}
	if err := db.Close(); err != nil && !errors.Is(err, ErrReadOnly) {
		t.Logf("Close on a full disk: %v", err)
	}

	// Restart on the still-full disk.
	files := snapshotDir(t, dir)
	efs2 := errorfs.New(vfs.Default)
	efs2.SetSpace(0)
	db, err = faultOpen(t, dir, efs2, o)
	if err != nil {
		t.Fatalf("restart on a full disk: %v", err)
	}
	l.verify(t, db, "restarted on a full disk")
	if err := l.put(t, db, "while-full", "x"); !errors.Is(err, ErrNotStored) {
		t.Errorf("write on a full disk: %v", err)
	}
	// Space comes back: writes and flushes resume, no restart needed.
	efs2.SetSpace(-1)
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("after-%05d", i)
		if err := l.put(t, db, k, k); err != nil {
			t.Fatalf("write after space came back: %v", err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatalf("flush after space came back: %v", err)
	}
	l.verify(t, db, "space back")
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	l.verify(t, db, "reopened")
	checkNothingDestroyed(t, dir, files, filesKept{manifestChanged: true})
}

func sortedCopy(ids []uint64) []uint64 {
	c := slices.Clone(ids)
	slices.Sort(c)
	return c
}

// TestFaultLogWriteFailsCleanly (D3): a log write fails with ENOSPC after
// writing half its batch. The write is reported ErrNotStored, the log is
// cut back, the next write goes to a new log and succeeds (no restart),
// the counters count only what happened, and after a crash that drops
// everything unsynced the failed write is absent and the rest present.
func TestFaultLogWriteFailsCleanly(t *testing.T) {
	dir, efs, db, l := faultStore(t, Options{}, 50)
	before := db.Stats()
	files := snapshotDir(t, dir)
	efs.Add(&errorfs.Rule{Op: errorfs.OpWrite, Match: isExt(extLog), Times: 1, Short: true, Err: errorfs.ENOSPC})
	if err := l.put(t, db, "failed", "v"); !errors.Is(err, ErrNotStored) {
		t.Fatalf("write that hit ENOSPC: %v", err)
	}
	after := db.Stats()
	if after.Seq != before.Seq || after.MemtableEntries != before.MemtableEntries || after.Puts != before.Puts {
		t.Errorf("a write that did not happen was counted: seq %d->%d, entries %d->%d, puts %d->%d",
			before.Seq, after.Seq, before.MemtableEntries, after.MemtableEntries, before.Puts, after.Puts)
	}
	for i := 0; i < 50; i++ {
		if err := l.put(t, db, fmt.Sprintf("b%03d", i), "v"); err != nil {
			t.Fatalf("write after a cleanly failed one: %v", err)
		}
	}
	l.verify(t, db, "after the failed write")
	if err := efs.Crash(); err != nil {
		t.Fatal(err)
	}
	db.Close() // fails on the crashed filesystem; the lock goes with it
	db = open(t, dir, Options{})
	defer db.Close()
	l.verify(t, db, "after a crash")
	checkNothingDestroyed(t, dir, files, filesKept{})
	if st := db.Stats(); st.TornWALTails != 0 {
		t.Errorf("%d torn tails: the failed write was not cut back", st.TornWALTails)
	}
}

// TestFaultLogWriteUndoFails (D3): a log write fails and cutting the log
// back fails too, so the bytes may be there: the write is reported
// ErrOutcomeUnknown, not ErrNotStored, and the store turns read-only.
func TestFaultLogWriteUndoFails(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	db, err := faultOpen(t, dir, efs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	l.put(t, db, "before", "v")
	files := snapshotDir(t, dir)
	efs.Add(&errorfs.Rule{Op: errorfs.OpWrite, Match: isExt(extLog), Times: 1, Short: true, Err: errorfs.EIO})
	efs.Add(&errorfs.Rule{Op: errorfs.OpTruncate, Match: isExt(extLog), Times: 1, Err: errorfs.EIO})
	if err := l.put(t, db, "torn", "v"); !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotStored) {
		t.Fatalf("write whose undo failed: %v", err)
	}
	if err := l.put(t, db, "next", "v"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write after it: %v", err)
	}
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	l.verify(t, db, "reopened")
	checkNothingDestroyed(t, dir, files, filesKept{})
}

// TestFaultConcurrentWriteFailures: eight writers while every 7th log
// write fails with ENOSPC after writing half its batch, then a crash that
// drops everything not durable. Group commit puts many writers' records in
// one batch, and a writer may find the failure of a batch after the one
// that carried its record: each must be told the truth about its own.
func TestFaultConcurrentWriteFailures(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	db, err := faultOpen(t, dir, efs, Options{MemtableBytes: 32 << 10, MaxTables: 4})
	if err != nil {
		t.Fatal(err)
	}
	files := snapshotDir(t, dir)
	efs.Add(&errorfs.Rule{Op: errorfs.OpWrite, Match: isExt(extLog), Every: 7, Short: true, Err: errorfs.ENOSPC})
	l := newLedger()
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 400; i++ {
				k := fmt.Sprintf("w%d-%04d", w, i)
				l.put(t, db, k, k)
			}
		}(w)
	}
	wg.Wait()
	if len(l.notStored) == 0 || len(l.acked) == 0 || len(l.unknown) != 0 {
		t.Fatalf("%d acknowledged, %d not stored, %d unknown", len(l.acked), len(l.notStored), len(l.unknown))
	}
	t.Logf("%d acknowledged, %d not stored", len(l.acked), len(l.notStored))
	l.verify(t, db, "live")
	if st := db.Stats(); st.Puts != int64(len(l.acked)) {
		t.Errorf("Stats.Puts %d, acknowledged %d", st.Puts, len(l.acked))
	}
	efs.Crash()
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	l.verify(t, db, "after a crash")
	checkNothingDestroyed(t, dir, files, filesKept{manifestChanged: true})
}

// TestFaultLogFsyncFails (D3): an fsync of the log fails. The write's
// outcome is unknown and says so; the store turns read-only, really
// (every later write is refused with ErrReadOnly and ErrNotStored, and
// counted nowhere), until it is closed and reopened, which is the
// documented step; after reopening, writes work and nothing acknowledged
// is lost.
func TestFaultLogFsyncFails(t *testing.T) {
	dir, efs, db, l := faultStore(t, Options{MemtableBytes: 8 << 10}, 100)
	files := snapshotDir(t, dir)
	efs.Add(&errorfs.Rule{Op: errorfs.OpSync, Match: isExt(extLog), Times: 1, Err: errorfs.EIO})
	err := l.put(t, db, "unknown", "v")
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("write whose fsync failed: %v", err)
	}
	before := db.Stats()
	for i := 0; i < 300; i++ { // enough to need a memtable switch
		err := l.put(t, db, fmt.Sprintf("ro%03d", i), "v")
		if !errors.Is(err, ErrReadOnly) || !errors.Is(err, ErrNotStored) || strings.Count(err.Error(), "kvdemo") != 1 {
			t.Fatalf("write to a read-only store: %v", err)
		}
	}
	if after := db.Stats(); after.Seq != before.Seq || after.MemtableEntries != before.MemtableEntries || after.Puts != before.Puts {
		t.Errorf("refused writes were counted: %+v -> %+v", before, after)
	}
	l.verify(t, db, "read-only")
	db.Close()
	db = open(t, dir, Options{MemtableBytes: 8 << 10})
	defer db.Close()
	l.verify(t, db, "reopened")
	checkNothingDestroyed(t, dir, files, filesKept{manifestChanged: true})
	if err := l.put(t, db, "after", "v"); err != nil {
		t.Fatalf("write after reopening: %v", err)
	}
}

// TestFaultCrashMidFlush: a crash at each step of a flush (table written,
// filter written, manifest renamed, manifest made durable) loses nothing
// acknowledged, and the files an unfinished flush left are removed, not
// moved aside (they are numbered at or above the manifest's NextFile).
func TestFaultCrashMidFlush(t *testing.T) {
	for _, step := range []struct {
		name string
		rule errorfs.Rule
	}{
		{"table fsync", errorfs.Rule{Op: errorfs.OpSync, Match: isExt(extTable)}},
		{"filter rename", errorfs.Rule{Op: errorfs.OpRename, Match: isExt(extFilter)}},
		{"manifest rename", errorfs.Rule{Op: errorfs.OpRename, Match: func(p string) bool { return filepath.Base(p) == manifestName }}},
		{"directory fsync before the manifest", errorfs.Rule{Op: errorfs.OpSyncDir, Skip: 1}},
		// The manifest is renamed into place but not made durable: which
		// one a crash leaves is unknown, so the store turns read-only.
		{"manifest directory fsync", errorfs.Rule{Op: errorfs.OpSyncDir, Skip: 2, Times: 1}},
	} {
		t.Run(step.name, func(t *testing.T) {
			dir, efs, db, l := faultStore(t, Options{MemtableBytes: 8 << 10}, 100)
			files := snapshotDir(t, dir)
			r := step.rule
			efs.Add(&r)
			err := db.Flush()
			if err == nil {
				t.Fatal("flush succeeded through a failing step")
			}
			if wantRO := strings.HasPrefix(step.name, "manifest directory"); errors.Is(err, ErrReadOnly) != wantRO {
				t.Errorf("flush error %v; read-only expected: %v", err, wantRO)
			}
			if errors.Is(err, ErrReadOnly) {
				if err := l.put(t, db, "after", "v"); !errors.Is(err, ErrReadOnly) {
					t.Errorf("write after an unsynced manifest: %v", err)
				}
			}
			efs.Crash()
			db.Close()
			var warnings logBuffer
			db = open(t, dir, Options{Logger: log.New(&warnings, "", 0)})
			defer db.Close()
			l.verify(t, db, "after the crash")
			if st := db.Stats(); st.MovedAside != 0 {
				t.Errorf("%d files moved aside after an unfinished flush: %s", st.MovedAside, warnings.String())
			}
			checkNothingDestroyed(t, dir, files, filesKept{manifestChanged: true})
		})
	}
}

// TestFaultWALDamage (D4): damage in the middle of a log (an intact record
// follows) refuses to open, naming the file and the offset, and changes
// nothing; a torn tail is cut off with the bytes kept in lost/; damage
// followed by a later log is not a torn tail; each recovery mode does what
// it says and moves the damaged log to lost/ intact; a log the manifest
// names that is missing is an error.
// forgetCleanClose makes a store closed cleanly look like one whose
// process was killed after its last write: the MANIFEST without the
// closed_seq mark Close wrote. A torn tail is what a crash leaves, so the
// tests that tear a log's tail start from there (after a clean Close, a
// log that lost acknowledged records is damage: TestFaultLogCutAfterCleanClose).
func forgetCleanClose(t testing.TB, dir string) {
	t.Helper()
	man, err := readManifestFS(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	if man.ClosedSeq == 0 {
		t.Fatal("the MANIFEST holds no clean-close mark to forget")
	}
	man.ClosedSeq = 0
	db := &DB{dir: dir, fs: vfs.Default, opts: Options{Logger: quiet()}}
	if err := db.writeManifest(man); err != nil {
		t.Fatal(err)
	}
}

func TestFaultWALDamage(t *testing.T) {
	const n = 60
	build := func(t *testing.T) (dir string, offsets []int64) {
		dir = t.TempDir()
		db := open(t, dir, Options{})
		for i := 0; i < n; i++ {
			k, v := kv(i)
			mustPut(t, db, k, v)
			st, _ := os.Stat(onlyLog(t, dir))
			offsets = append(offsets, st.Size())
		}
		db.Close()
		return dir, offsets
	}
	flip := func(t *testing.T, path string, at int64) []byte {
		b, _ := os.ReadFile(path)
		b[at] ^= 0x01
		os.WriteFile(path, b, 0o644)
		return b
	}
	present := func(db *DB, i int) bool {
		k, v := kv(i)
		got, err := db.Get(k)
		return err == nil && bytes.Equal(got, v)
	}

	t.Run("middle refuses", func(t *testing.T) {
		dir, off := build(t)
		path := onlyLog(t, dir)
		damaged := flip(t, path, off[29]+15) // inside record 30
		for _, mode := range []WALRecoveryMode{"", AbsoluteConsistency} {
			_, err := Open(dir, &Options{Logger: quiet(), WALRecovery: mode})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(path)) ||
				!strings.Contains(err.Error(), fmt.Sprintf("offset %d", off[29])) {
				t.Fatalf("mode %q: %v", mode, err)
			}
		}
		if b, _ := os.ReadFile(path); !bytes.Equal(b, damaged) {
			t.Error("the refused log was changed")
		}
	})
	t.Run("point in time", func(t *testing.T) {
		dir, off := build(t)
		path := onlyLog(t, dir)
		damaged := flip(t, path, off[29]+15)
		db := open(t, dir, Options{WALRecovery: PointInTimeRecovery})
		for i := 0; i < n; i++ {
			if want := i < 30; present(db, i) != want {
				t.Fatalf("record %d present=%v, want %v", i, !want, want)
			}
		}
		db.Close()
		if b, err := os.ReadFile(filepath.Join(dir, lostDir, filepath.Base(path))); err != nil || !bytes.Equal(b, damaged) {
			t.Errorf("damaged log not kept intact in lost/: %v", err)
		}
		// The recovered state is durable without the damaged log.
		db = open(t, dir, Options{})
		defer db.Close()
		if !present(db, 29) || present(db, 31) {
			t.Error("recovered state did not survive a reopen")
		}
	})
	t.Run("skip any", func(t *testing.T) {
		dir, off := build(t)
		flip(t, onlyLog(t, dir), off[29]+15)
		db := open(t, dir, Options{WALRecovery: SkipAnyCorruptedRecords})
		defer db.Close()
		for i := 0; i < n; i++ {
			if want := i != 30; present(db, i) != want {
				t.Fatalf("record %d present=%v, want %v", i, !want, want)
			}
		}
	})
	t.Run("torn tail", func(t *testing.T) {
		dir, _ := build(t)
		forgetCleanClose(t, dir)
		path := onlyLog(t, dir)
		b, _ := os.ReadFile(path)
		os.WriteFile(path, b[:len(b)-5], 0o644)
		if _, err := Open(dir, &Options{Logger: quiet(), WALRecovery: AbsoluteConsistency}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("absolute consistency accepted a torn tail: %v", err)
		}
		db := open(t, dir, Options{})
		defer db.Close()
		if !present(db, n-2) || present(db, n-1) || db.Stats().TornWALTails != 1 {
			t.Fatal("torn tail not handled")
		}
		lost, _ := filepath.Glob(filepath.Join(dir, lostDir, "*.tail-at-*"))
		if len(lost) != 1 {
			t.Fatalf("torn tail not kept: %v", lost)
		}
		if tail, _ := os.ReadFile(lost[0]); !bytes.Equal(tail, b[len(b)-len(tail)-5:len(b)-5]) {
			t.Error("kept tail differs from the cut bytes")
		}
	})
	t.Run("torn tail on a full disk", func(t *testing.T) {
		dir, _ := build(t)
		forgetCleanClose(t, dir)
		path := onlyLog(t, dir)
		b, _ := os.ReadFile(path)
		torn := b[:len(b)-5]
		os.WriteFile(path, torn, 0o644)
		efs := errorfs.New(vfs.Default)
		efs.SetSpace(0)
		_, err := faultOpen(t, dir, efs, Options{})
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "torn tail") {
			t.Fatalf("open on a full disk with a torn tail that cannot be kept: %v", err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, torn) {
			t.Fatal("the log was changed though its tail could not be kept")
		}
		// Space comes back: the tail is kept, then cut.
		db, err := faultOpen(t, dir, errorfs.New(vfs.Default), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if !present(db, n-2) || present(db, n-1) {
			t.Fatal("torn tail recovery once space came back")
		}
		if kept := globAll(filepath.Join(dir, lostDir, "*.tail-at-*")); len(kept) != 1 {
			t.Fatalf("kept tails: %v", kept)
		}
	})
	t.Run("torn tail name in use", func(t *testing.T) {
		dir, _ := build(t)
		forgetCleanClose(t, dir)
		path := onlyLog(t, dir)
		b, _ := os.ReadFile(path)
		os.WriteFile(path, b[:len(b)-5], 0o644)
		first := open(t, dir, Options{})
		first.Close()
		kept := globAll(filepath.Join(dir, lostDir, "*.tail-at-*"))
		if len(kept) != 1 {
			t.Fatalf("kept tails: %v", kept)
		}
		// The same log torn at the same offset again (a second crash).
		os.WriteFile(path, b[:len(b)-5], 0o644)
		os.WriteFile(kept[0], []byte("earlier evidence"), 0o644)
		second := open(t, dir, Options{})
		second.Close()
		if got, _ := os.ReadFile(kept[0]); string(got) != "earlier evidence" {
			t.Error("an earlier kept tail was replaced")
		}
		all := globAll(filepath.Join(dir, lostDir, "*.tail-at-*"))
		if len(all) != 2 {
			t.Fatalf("kept tails after the second cut: %v", all)
		}
	})
	t.Run("later log follows", func(t *testing.T) {
		dir, _ := build(t)
		path := onlyLog(t, dir)
		id, _, _ := parseFileName(filepath.Base(path))
		// A later log with later records, as a memtable switch makes.
		w, err := createWAL(vfs.Default, dir, id+1)
		if err != nil {
			t.Fatal(err)
		}
		w.append(walRecord{seq: n + 1, kind: kindPut, key: []byte("later"), value: []byte("v")})
		if err := w.sync(); err != nil {
			t.Fatal(err)
		}
		w.close()
		b, _ := os.ReadFile(path)
		os.WriteFile(path, b[:len(b)-3], 0o644) // the older log's tail
		_, err = Open(dir, &Options{Logger: quiet()})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "later log") {
			t.Fatalf("torn older log with a later one: %v", err)
		}
		db := open(t, dir, Options{WALRecovery: SkipAnyCorruptedRecords})
		defer db.Close()
		if !present(db, n-2) || present(db, n-1) {
			t.Fatal("skip-any recovery")
		}
		if got, err := db.Get([]byte("later")); err != nil || string(got) != "v" {
			t.Fatalf("record of the later log: %q, %v", got, err)
		}
	})
	t.Run("missing log", func(t *testing.T) {
		dir := t.TempDir()
		db := open(t, dir, Options{MemtableBytes: 4 << 10})
		for i := 0; i < 300; i++ {
			k, v := kv(i)
			mustPut(t, db, k, v)
		}
		db.Flush()
		db.Close()
		man, _ := readManifestFS(vfs.Default, dir)
		os.Remove(fileName(dir, man.Log, extLog))
		if _, err := Open(dir, &Options{Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "missing") {
			t.Fatalf("missing log: %v", err)
		}
	})
}

// TestFaultManifest (D5): a manifest edited by hand, or damaged, fails its
// checksum and Open refuses without deleting anything; a table an old
// (unchecksummed) manifest does not list is moved to lost/, not deleted.
func TestFaultManifest(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{MemtableBytes: 4 << 10, MaxTables: -1})
	l := newLedger()
	for i := 0; i < 600; i++ {
		l.put(t, db, fmt.Sprintf("k%04d", i), "v")
	}
	db.Flush()
	db.Close()
	listing := func() []string {
		var names []string
		filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() && filepath.Base(p) != "LOCK" {
				names = append(names, strings.TrimPrefix(p, dir))
			}
			return nil
		})
		slices.Sort(names)
		return names
	}
	mpath := filepath.Join(dir, manifestName)
	orig, _ := os.ReadFile(mpath)
	man, _ := parseManifest(orig, dir)
	if len(man.Tables) < 3 {
		t.Fatalf("tables: %v", man.Tables)
	}
	victim := fmt.Sprint(man.Tables[1])
	edited := bytes.Replace(orig, []byte(victim+",\n"), nil, 1)
	if bytes.Equal(edited, orig) {
		t.Fatalf("could not edit %q", orig)
	}
	before := listing()
	os.WriteFile(mpath, edited, 0o644)
	if _, err := Open(dir, &Options{Logger: quiet()}); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("edited manifest: %v", err)
	}
	flipped := slices.Clone(orig)
	flipped[len(flipped)/2] ^= 0x20
	os.WriteFile(mpath, flipped, 0o644)
	if _, err := Open(dir, &Options{Logger: quiet()}); err == nil {
		t.Fatal("damaged manifest accepted")
	}
	os.WriteFile(mpath, orig, 0o644)
	if after := listing(); !slices.Equal(before, after) {
		t.Fatalf("files changed by refused opens:\n%v\n%v", before, after)
	}

	// An old-format manifest (no checksum) that does not list a table:
	// the table is moved aside and reported, not deleted.
	old := edited[:bytes.LastIndex(edited, []byte(manifestSumPrefix))]
	old = bytes.Replace(old, []byte(`"version": 2`), []byte(`"version": 1`), 1)
	os.WriteFile(mpath, old, 0o644)
	var warnings logBuffer
	db = open(t, dir, Options{Logger: log.New(&warnings, "", 0)})
	st := db.Stats()
	db.Close()
	id := man.Tables[1]
	if st.MovedAside != 2 { // the table and its filter
		t.Errorf("MovedAside = %d: %s", st.MovedAside, warnings.String())
	}
	for _, ext := range []string{extTable, extFilter} {
		if _, err := os.Stat(filepath.Join(dir, lostDir, fmt.Sprintf("%06d.%s", id, ext))); err != nil {
			t.Errorf("unlisted %s not kept in lost/: %v", ext, err)
		}
	}
	if !strings.Contains(warnings.String(), "not named by the MANIFEST") {
		t.Errorf("not reported: %q", warnings.String())
	}
}

// TestFaultFilterOfAnotherTable (D6): a filter file copied over another
// table's passes its own CRC but names another table: it is not used, the
// table is read unfiltered (no key missed) and its filter rebuilt. A bit
// flipped on read is caught the same way.
func TestFaultFilterOfAnotherTable(t *testing.T) {
	dir := t.TempDir()
	o := Options{MemtableBytes: 16 << 10, MaxTables: -1}
	db := open(t, dir, o)
	l := newLedger()
	for i := 0; i < 3000; i++ {
		l.put(t, db, fmt.Sprintf("k%05d", i), "v")
	}
	db.Flush()
	db.Close()
	man, _ := readManifestFS(vfs.Default, dir)
	a, b := man.Tables[0], man.Tables[len(man.Tables)-1]
	src, _ := os.ReadFile(fileName(dir, b, extFilter))
	os.WriteFile(fileName(dir, a, extFilter), src, 0o644)

	files := snapshotDir(t, dir)
	efs := errorfs.New(vfs.Default)
	c := man.Tables[1]
	efs.Add(&errorfs.Rule{Op: errorfs.OpRead, Match: func(p string) bool { return p == fileName(dir, c, extFilter) }, FlipAt: 200})
	var warnings logBuffer
	o.Logger = log.New(&warnings, "", 0)
	db, err := faultOpen(t, dir, efs, o)
	if err != nil {
		t.Fatal(err)
	}
	l.verify(t, db, "with a foreign and a flipped filter")
	waitFor(t, "filters rebuilt", func() bool { return db.Stats().RebuiltFilters == 2 })
	l.verify(t, db, "after the rebuild")
	db.Close()
	checkNothingDestroyed(t, dir, files, filesKept{filtersRebuilt: true})
	if !strings.Contains(warnings.String(), fmt.Sprintf("filter belongs to table %06d", b)) {
		t.Errorf("foreign filter not reported: %q", warnings.String())
	}
	// The rebuilt filter is bound to its own table.
	db = open(t, dir, o)
	defer db.Close()
	if st := db.Stats(); st.UnfilteredTables != 0 || st.RebuiltFilters != 0 {
		t.Errorf("after rebuild and reopen: %d unfiltered, %d rebuilt", st.UnfilteredTables, st.RebuiltFilters)
	}
	l.verify(t, db, "reopened")
}

// TestFaultDamagedTable (D7): a flipped byte in one table's data. The
// store opens; a Get that needs that table returns ErrCorrupt naming it
// (never a wrong value or a false "not found"); keys in other tables are
// served (those behind the damaged table too, where its filter rules
// them out); Check reports the table. Compaction runs (MaxTables is
// exceeded), merges the tables newer than the damaged one, and leaves the
// damaged one as it is; no file is destroyed.
func TestFaultDamagedTable(t *testing.T) {
	for _, kind := range []FilterKind{FilterCuckoo, FilterBloom} {
		t.Run(string(kind), func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Filter: kind, MemtableBytes: 1 << 20, MaxTables: -1}
			db := open(t, dir, o)
			const per, tables = 500, 6
			flushTables(t, db, tables, per)
			db.Close()
			man, _ := readManifestFS(vfs.Default, dir)
			mid := man.Tables[1] // holds t1-*
			path := fileName(dir, mid, extTable)
			b, _ := os.ReadFile(path)
			b[100] ^= 0x40 // inside the first data block
			os.WriteFile(path, b, 0o644)
			files := snapshotDir(t, dir)

			var out bytes.Buffer
			res, err := Check(dir, &out, nil)
			if err != nil || res.Problems != 1 || !strings.Contains(out.String(), fmt.Sprintf("BAD  %06d.sst", mid)) {
				t.Errorf("Check: %+v, %v\n%s", res, err, out.String())
			}

			o.MaxTables = 2 // the four newest tables merge; every other run holds the damaged one
			db = open(t, dir, o)
			waitFor(t, "a compaction", func() bool { return db.Stats().Compactions >= 1 })
			if st := db.Stats(); st.DamagedTables != 1 || st.Tables != 3 {
				t.Fatalf("DamagedTables = %d, %d tables", st.DamagedTables, st.Tables)
			}
			servedBehind := 0
			for tbl := 0; tbl < tables; tbl++ {
				for i := 0; i < per; i++ {
					k := fmt.Sprintf("t%d-%04d", tbl, i)
					got, err := db.Get([]byte(k))
					switch {
					case err == nil && string(got) != k:
						t.Fatalf("%s = %q", k, got)
					case err != nil && !errors.Is(err, ErrCorrupt):
						t.Fatalf("%s: %v (a present key must be found or reported corrupt)", k, err)
					case errors.Is(err, ErrCorrupt) && !strings.Contains(err.Error(), fmt.Sprintf("%06d", mid)):
						t.Fatalf("%s: corruption error does not name the table: %v", k, err)
					case err != nil && strings.Count(err.Error(), "kvdemo") != 1:
						t.Fatalf("%s: the error names the package more than once: %v", k, err)
					case tbl >= 2 && err != nil:
						t.Fatalf("%s in a newer table: %v", k, err)
					case tbl == 1 && err == nil:
						t.Fatalf("%s read from a damaged table", k)
					case tbl == 0 && err == nil:
						servedBehind++
					}
				}
			}
			t.Logf("%s: %d of %d keys behind the damaged table served", kind, servedBehind, per)
			if kind == FilterCuckoo && servedBehind < per*9/10 {
				t.Errorf("only %d of %d keys behind the damaged table served: its bound filter should rule them out", servedBehind, per)
			}
			// No write is refused, and compaction leaves the damaged table be.
			mustPut(t, db, []byte("new"), []byte("v"))
			db.Close()
			checkNothingDestroyed(t, dir, files, filesKept{manifestChanged: true})
			if man, _ := readManifestFS(vfs.Default, dir); !slices.Contains(man.Tables, mid) {
				t.Errorf("manifest %v no longer names the damaged table %06d", man.Tables, mid)
			}
		})
	}
}

// TestFaultCrashMidCompaction: a compaction's manifest is renamed into
// place but the directory fsync fails, then the power goes. Which manifest
// survives is unknown, so the tables the compaction replaced must not be
// removed (the old manifest may be the one that survives and name them),
// the store turns read-only and makes no further edits, and after the
// crash the store opens with everything acknowledged.
func TestFaultCrashMidCompaction(t *testing.T) {
	dir := t.TempDir()
	o := Options{MemtableBytes: 8 << 10, MaxTables: -1}
	db := open(t, dir, o)
	l := newLedger()
	for tbl := 0; tbl < 5; tbl++ {
		for i := 0; i < 100; i++ {
			l.put(t, db, fmt.Sprintf("t%d-%03d", tbl, i), fmt.Sprint(tbl))
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	before := filesOnDisk(t, dir, extTable)

	efs := errorfs.New(vfs.Default)
	var armed atomic.Bool
	efs.Add(&errorfs.Rule{Op: errorfs.OpRename, Match: func(p string) bool {
		if filepath.Base(p) == manifestName {
			armed.Store(true)
		}
		return false
	}})
	efs.Add(&errorfs.Rule{Op: errorfs.OpSyncDir, Times: 1, Match: func(string) bool { return armed.Swap(false) }})
	o.MaxTables = 2
	db, err := faultOpen(t, dir, efs, o)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the compaction's manifest fsync to fail", func() bool { return db.readOnlyErr() != nil })
	// Background work stops editing: no second compaction, no removal.
	time.Sleep(100 * time.Millisecond)
	for _, id := range before {
		if _, err := os.Stat(fileName(dir, id, extTable)); err != nil {
			t.Errorf("table %06d, named by the manifest a crash may leave, was removed: %v", id, err)
		}
	}
	if err := l.put(t, db, "after", "v"); !errors.Is(err, ErrReadOnly) {
		t.Errorf("write after an unsynced manifest: %v", err)
	}
	efs.Crash()
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	l.verify(t, db, "after the crash")
}

// TestFaultCrashDuringRecovery: a point-in-time recovery past a damaged
// log is interrupted right after its manifest is durable (every later
// operation fails, then the power goes). The damaged log is evidence: it
// must survive, in the store directory or in lost/, whatever the next
// Open does with logs the manifest no longer needs.
func TestFaultCrashDuringRecovery(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	for i := 0; i < 60; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
	}
	db.Close()
	path := onlyLog(t, dir)
	damaged, _ := os.ReadFile(path)
	damaged[len(damaged)/2] ^= 0x01
	os.WriteFile(path, damaged, 0o644)

	efs := errorfs.New(vfs.Default)
	var stage atomic.Int32 // 1: MANIFEST renamed; 2: and made durable
	efs.Add(&errorfs.Rule{Op: errorfs.OpRename, Match: func(p string) bool {
		if filepath.Base(p) == manifestName && stage.Load() == 0 {
			stage.Store(1)
			return false
		}
		return stage.Load() == 2
	}})
	efs.Add(&errorfs.Rule{Op: errorfs.OpSyncDir, Match: func(string) bool {
		return !stage.CompareAndSwap(1, 2) && stage.Load() == 2
	}})
	for _, op := range []errorfs.Op{errorfs.OpRemove, errorfs.OpCreate} {
		efs.Add(&errorfs.Rule{Op: op, Match: func(string) bool { return stage.Load() == 2 }})
	}
	if db, err := faultOpen(t, dir, efs, Options{WALRecovery: PointInTimeRecovery}); err == nil {
		db.Close()
	}
	efs.Crash()
	db, err := faultOpen(t, dir, vfs.Default, Options{})
	if err != nil {
		t.Fatalf("open after the interrupted recovery: %v", err)
	}
	db.Close()
	found := false
	for _, p := range append([]string{path}, globAll(filepath.Join(dir, lostDir, "*"))...) {
		if b, err := os.ReadFile(p); err == nil && bytes.Equal(b, damaged) {
			found = true
		}
	}
	if !found {
		t.Fatal("the damaged log was destroyed: neither in the store nor in lost/")
	}
}

func globAll(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}

// TestFaultTableReadAfterOpen: a table passed its checks at Open, then a
// block reads back different (a flipped bit in what the table is read
// from). A Get that needs that block returns ErrCorrupt naming the table,
// never a wrong value or a false "not found"; a compaction over the table
// is abandoned with ErrCorrupt, and the table stays, named by the manifest.
func TestFaultTableReadAfterOpen(t *testing.T) {
	for _, c := range []Compression{CompressionZSTD, CompressionNone} {
		t.Run(string(c), func(t *testing.T) {
			dir := t.TempDir()
			// Without the block cache, which would answer from the copy
			// it checked when it decoded the block before the damage
			// (TestBlockCacheKeepsCheckedCopy).
			o := Options{Compression: c, MemtableBytes: 1 << 20, MaxTables: -1, BlockCacheBytes: -1}
			db := open(t, dir, o)
			const per = 300
			flushTables(t, db, 3, per)
			db.Close()
			// Through errorfs: the tables are read with read(2).
			db, err := faultOpen(t, dir, errorfs.New(vfs.Default), o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			v, _ := db.acquire()
			defer v.release()
			mid := v.tables[1]
			mid.t.Data[40] ^= 0x04 // inside the first data block
			checkGetsOrCorrupt(t, db, "t1-%04d", per, mid.id)
			before := filesOnDisk(t, dir, extTable)
			err = db.compactRun(v, 0, len(v.tables))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), fmt.Sprintf("%06d", mid.id)) {
				t.Fatalf("compaction over a damaged block: %v", err)
			}
			if after := filesOnDisk(t, dir, extTable); !slices.Equal(before, after) {
				t.Errorf("tables %v after an abandoned compaction, %v before", after, before)
			}
			if man, _ := readManifestFS(vfs.Default, dir); !slices.Contains(man.Tables, mid.id) {
				t.Errorf("manifest %v dropped the damaged table", man.Tables)
			}
			// Rebuilding its filter from a partial read would make a
			// filter that misses keys the table holds.
			cf := mid.cf.Load()
			if err := db.filter.rebuild(mid); !errors.Is(err, ErrCorrupt) || mid.cf.Load() != cf {
				t.Errorf("filter rebuilt from a table that cannot be read to its end: %v", err)
			}
		})
	}
}

// TestFaultRefusedOpenChangesNothing: Open refuses over damage in the
// middle of a log that holds more than a memtable's worth of records
// before the damage. The refusal says nothing was changed, and it is so:
// no table was flushed from the records before the damage, the MANIFEST
// is the same, no file appeared or vanished.
func TestFaultRefusedOpenChangesNothing(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{MemtableBytes: 4 << 20})
	var offsets []int64
	for i := 0; i < 2000; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
		st, _ := os.Stat(onlyLog(t, dir))
		offsets = append(offsets, st.Size())
	}
	db.Close()
	path := onlyLog(t, dir)
	b, _ := os.ReadFile(path)
	b[offsets[1900]+15] ^= 0x01 // inside record 1901: intact records follow
	os.WriteFile(path, b, 0o644)
	before := snapshotDir(t, dir)
	_, err := Open(dir, &Options{Logger: quiet(), MemtableBytes: 16 << 10})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "not changed") {
		t.Fatalf("open over damage in the middle: %v", err)
	}
	after := snapshotDir(t, dir)
	if !slices.Equal(slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after))) {
		t.Fatalf("files before the refused open %v, after %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}
	for name, content := range before {
		if !bytes.Equal(after[name], content) {
			t.Errorf("%s changed by a refused open", name)
		}
	}
}

// TestFaultSyncFails: with NoSyncEachWrite, Sync's fsync fails. Sync says
// the outcome is unknown, the store turns read-only, and later writes are
// refused as not stored (ErrNotStored, ErrReadOnly), not misreported as
// of unknown outcome.
func TestFaultSyncFails(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	db, err := faultOpen(t, dir, efs, Options{NoSyncEachWrite: true})
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	l.put(t, db, "before", "v")
	files := snapshotDir(t, dir)
	efs.Add(&errorfs.Rule{Op: errorfs.OpSync, Match: isExt(extLog), Times: 1, Err: errorfs.EIO})
	if err := db.Sync(); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("Sync whose fsync failed: %v", err)
	}
	err = l.put(t, db, "after", "v")
	if !errors.Is(err, ErrNotStored) || !errors.Is(err, ErrReadOnly) || errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("write after a failed Sync: %v", err)
	}
	db.Close()
	db = open(t, dir, Options{})
	defer db.Close()
	l.mu.Lock()
	delete(l.acked, "before") // its fsync failed: it may go either way
	l.mu.Unlock()
	l.verify(t, db, "reopened")
	checkNothingDestroyed(t, dir, files, filesKept{})
}

// TestFaultTableCannotBeOpened: a table's file cannot be opened for a
// reason that says nothing about its content (EMFILE). Open fails with
// that error, naming the table, and does not call the table damaged;
// once the cause is gone, Open works and the table is served.
func TestFaultTableCannotBeOpened(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{MemtableBytes: 4 << 10, MaxTables: -1})
	l := newLedger()
	for i := 0; i < 300; i++ {
		l.put(t, db, fmt.Sprintf("k%04d", i), "v")
	}
	db.Flush()
	db.Close()
	man, _ := readManifestFS(vfs.Default, dir)
	victim := fileName(dir, man.Tables[0], extTable)
	efs := errorfs.New(vfs.Default)
	efs.Add(&errorfs.Rule{Op: errorfs.OpOpen, Match: func(p string) bool { return p == victim }, Err: syscall.EMFILE})
	before := snapshotDir(t, dir)
	_, err := faultOpen(t, dir, efs, Options{MaxTables: -1})
	if err == nil || errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.EMFILE) || !strings.Contains(err.Error(), fmt.Sprintf("%06d", man.Tables[0])) {
		t.Fatalf("open with a table that cannot be opened: %v", err)
	}
	checkNothingDestroyed(t, dir, before, filesKept{})
	db = open(t, dir, Options{MaxTables: -1})
	defer db.Close()
	if st := db.Stats(); st.DamagedTables != 0 {
		t.Errorf("%d tables damaged", st.DamagedTables)
	}
	l.verify(t, db, "reopened")
}

// TestFaultGlobalIndexFromDamagedTable: the global index is rebuilt from
// the tables' keys; a table whose block cannot be read ends its iterator
// early, as if at its end. Indexing that part would make the index answer
// "absent" for the keys after it, so the table must stay unindexed and be
// searched by every Get: a key it holds is returned or reported as
// ErrCorrupt naming it, never "not found".
func TestFaultGlobalIndexFromDamagedTable(t *testing.T) {
	dir := t.TempDir()
	o := Options{Filter: FilterGlobal, Compression: CompressionNone, MemtableBytes: 1 << 20, MaxTables: -1}
	db := open(t, dir, o)
	const per = 300
	flushTables(t, db, 3, per)
	v, _ := db.acquire()
	defer v.release()
	mid := v.tables[1]
	g := db.filter.(*globalFilter)
	// Take mid out of the index, damage its first block, and index it
	// again as Open would.
	if err := g.idx.Load().RemoveTable(mid.id); err != nil {
		t.Fatal(err)
	}
	mid.indexed.Store(false)
	mid.t.Data[40] ^= 0x04
	if _, err := g.indexTable(mid); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("indexing a table read short: %v (want ErrCorrupt)", err)
	}
	if mid.indexed.Load() || !g.unfiltered(mid) {
		t.Fatal("a table read short is marked indexed")
	}
	checkGetsOrCorrupt(t, db, "t1-%04d", per, mid.id)
	for _, tbl := range []int{0, 2} {
		for i := 0; i < per; i++ {
			k := fmt.Sprintf("t%d-%04d", tbl, i)
			if got, err := db.Get([]byte(k)); err != nil || string(got) != k {
				t.Fatalf("%s in a healthy table: %q, %v", k, got, err)
			}
		}
	}
	db.Close()
}

// checkGetsOrCorrupt gets the n keys fmt.Sprintf(format, i), each stored
// with itself as value, from a store where table id has a damaged block:
// each Get must return the value or ErrCorrupt naming that table (never a
// wrong value, another error, or "not found"), and at least one must meet
// the damage.
func checkGetsOrCorrupt(t *testing.T, db *DB, format string, n int, id uint64) {
	t.Helper()
	corrupt := 0
	for i := 0; i < n; i++ {
		k := fmt.Sprintf(format, i)
		got, err := db.Get([]byte(k))
		switch {
		case err == nil && string(got) != k:
			t.Fatalf("%s = %q: a wrong value from a damaged block", k, got)
		case errors.Is(err, ErrCorrupt) && strings.Contains(err.Error(), fmt.Sprintf("%06d", id)):
			corrupt++
		case err != nil:
			t.Fatalf("%s: %v (want the value or ErrCorrupt naming table %06d)", k, err, id)
		}
	}
	if corrupt == 0 {
		t.Fatal("no Get saw the damaged block")
	}
}

// TestFaultReopenAfterUnsyncedManifest, found by the fault sweep (cuckoo,
// error #43 of kind syncdir): a flush renames its MANIFEST into place but
// the directory fsync fails, so the store turns read-only. The user
// reopens it, as ErrReadOnly says to. Open read the new MANIFEST and
// removed the flushed log below it, though nothing had made that MANIFEST
// durable: a power loss then brought the old MANIFEST back, which names
// the removed log (Open refused: "log ... is missing") and treats the
// flushed table as an unfinished output. Every acknowledged write since
// the previous flush hung on a file that was gone.
func TestFaultReopenAfterUnsyncedManifest(t *testing.T) {
	for _, f := range []FilterKind{FilterCuckoo, FilterGlobal} {
		t.Run(string(f), func(t *testing.T) {
			dir := t.TempDir()
			efs := errorfs.New(vfs.Default)
			o := Options{Filter: f, MaxTables: -1}
			db, err := faultOpen(t, dir, efs, o)
			if err != nil {
				t.Fatal(err)
			}
			l := newLedger()
			for i := 0; i < 50; i++ {
				l.put(t, db, fmt.Sprintf("k%03d", i), "v")
			}
			// A flush fsyncs the directory for its new log, for its
			// table, then for the MANIFEST it renamed into place: fail
			// the third.
			efs.Add(&errorfs.Rule{Op: errorfs.OpSyncDir, Skip: 2, Times: 1})
			if err := db.Flush(); !errors.Is(err, ErrReadOnly) {
				t.Fatalf("Flush with the MANIFEST's directory fsync failing: %v", err)
			}
			db.Close()
			db, err = faultOpen(t, dir, efs, o)
			if err != nil {
				t.Fatalf("reopen after the failed fsync: %v", err)
			}
			db.Close()
			efs.Crash()
			db, err = faultOpen(t, dir, vfs.Default, o)
			if err != nil {
				t.Fatalf("open after a power loss: %v", err)
			}
			defer db.Close()
			l.verify(t, db, "after a power loss")
		})
	}
}

// TestFaultReplayedLogMadeDurable, found by the fault sweep (batched
// cuckoo, error #115 of kind fsync; then every kind, error at the last
// fsync): an fsync of the log fails, so the store turns read-only and is
// reopened. Open replayed the log from what the OS held, served those
// writes, and reopened the log counting every byte in it as already
// durable: the next Sync and Close returned nil without an fsync, and a
// power loss then took back values Gets had returned. With
// NoSyncEachWrite the writes were acknowledged, unsynced; by default the
// one whose fsync failed was reported ErrOutcomeUnknown, and the reopened
// store answered that question (it served the write) before a power loss
// answered it the other way. A store must not serve, and vouch for at
// Sync or Close, what it has not made durable.
func TestFaultReplayedLogMadeDurable(t *testing.T) {
	for _, batched := range []bool{true, false} {
		t.Run(fmt.Sprintf("NoSyncEachWrite=%v", batched), func(t *testing.T) {
			dir := t.TempDir()
			efs := errorfs.New(vfs.Default)
			o := Options{NoSyncEachWrite: batched, MaxTables: -1}
			db, err := faultOpen(t, dir, efs, o)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 20; i++ {
				if i == 19 && !batched {
					efs.Add(&errorfs.Rule{Op: errorfs.OpSync, Times: 1})
				}
				err := db.Put([]byte(fmt.Sprintf("k%02d", i)), []byte("v"))
				if i == 19 && !batched {
					if !errors.Is(err, ErrOutcomeUnknown) {
						t.Fatalf("a write whose fsync fails: %v", err)
					}
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if batched {
				efs.Add(&errorfs.Rule{Op: errorfs.OpSync, Times: 1})
				if err := db.Sync(); !errors.Is(err, ErrOutcomeUnknown) {
					t.Fatalf("Sync with its fsync failing: %v", err)
				}
			}
			db.Close()
			db, err = faultOpen(t, dir, efs, o)
			if err != nil {
				t.Fatal(err)
			}
			l := newLedger()
			for i := 0; i < 20; i++ {
				k := fmt.Sprintf("k%02d", i)
				if v, err := db.Get([]byte(k)); err == nil {
					l.acked[k] = string(v) // served after the reopen
				}
			}
			if _, ok := l.acked["k19"]; !ok {
				t.Fatal("the reopened store does not serve the write in doubt: the test exercises nothing")
			}
			if err := db.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			efs.Crash()
			db, err = faultOpen(t, dir, vfs.Default, o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			l.verify(t, db, "after a Sync, a Close and a power loss")
		})
	}
}

// TestFaultTableReplacedByAnother, found by the damage sweep (every
// filter kind, table/replaced-by-...): a valid table of the same store
// copied over another's file (a restore from the wrong place, files
// swapped by hand). Badger's format holds no table number, so the copy
// opened as the table it replaced, passing every checksum: Gets for keys
// only the replaced table held answered "not found", or an older value,
// with no error; with cuckoo, its filter (bound to the real table) was
// then "rebuilt" from the impostor, overwriting the one file that said
// what went wrong. The MANIFEST now records each table's size and
// xxhash64: the impostor is a damaged table, Gets that need it return
// ErrCorrupt naming it, Check reports it, and nothing is rewritten.
func TestFaultTableReplacedByAnother(t *testing.T) {
	for _, kind := range []FilterKind{FilterCuckoo, FilterBloom, FilterNone, FilterGlobal} {
		t.Run(string(kind), func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Filter: kind, MemtableBytes: 1 << 20, MaxTables: -1}
			db := open(t, dir, o)
			const per, tables = 200, 3
			flushTables(t, db, tables, per)
			db.Close()
			man, _ := readManifestFS(vfs.Default, dir)
			mid, newest := man.Tables[1], man.Tables[2]
			impostor, err := os.ReadFile(fileName(dir, newest, extTable))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(fileName(dir, mid, extTable), impostor, 0o644); err != nil {
				t.Fatal(err)
			}
			files := snapshotDir(t, dir)

			var out bytes.Buffer
			if res, err := Check(dir, &out, nil); err != nil || res.Problems == 0 || !strings.Contains(out.String(), fmt.Sprintf("BAD  %06d.sst", mid)) {
				t.Errorf("Check does not report the replaced table: %+v, %v\n%s", res, err, out.String())
			}
			db = open(t, dir, o)
			checkGetsOrCorrupt(t, db, "t1-%04d", per, mid)
			for _, tbl := range []int{0, 2} {
				for i := 0; i < per; i++ {
					k := fmt.Sprintf("t%d-%04d", tbl, i)
					if got, err := db.Get([]byte(k)); err != nil && !errors.Is(err, ErrCorrupt) || err == nil && string(got) != k {
						t.Fatalf("%s: %q, %v (want its value or ErrCorrupt)", k, got, err)
					}
				}
			}
			if st := db.Stats(); st.DamagedTables != 1 {
				t.Errorf("DamagedTables = %d, want 1", st.DamagedTables)
			}
			// A flush rewrites the MANIFEST: the replaced table keeps the
			// identity recorded for it, not the impostor's.
			mustPut(t, db, []byte("new"), []byte("v"))
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			db.Close()
			checkNothingDestroyed(t, dir, files, filesKept{manifestChanged: true})
			db = open(t, dir, o)
			defer db.Close()
			if st := db.Stats(); st.DamagedTables != 1 {
				t.Errorf("after a flush and a reopen, DamagedTables = %d, want 1", st.DamagedTables)
			}
			checkGetsOrCorrupt(t, db, "t1-%04d", per, mid)
		})
	}
}

// TestFaultLogCutAfterCleanClose, found by the damage sweep (every filter
// kind, log/truncate@record-...): the log of a store closed cleanly is
// cut at a record boundary, or emptied, at rest. What remains parses
// whole, so Open replayed it and served older values, or nothing, for
// the keys of the records cut, with no error, no counter and no word in
// the log. Close now records the last acknowledged write in the MANIFEST
// (closed_seq): Open refuses logs that end below it, naming the log,
// without changing anything, and Check reports it; point-in-time recovery
// opens with what is left, says what was lost, and clears the mark.
func TestFaultLogCutAfterCleanClose(t *testing.T) {
	for _, cut := range []string{"boundary", "empty"} {
		t.Run(cut, func(t *testing.T) {
			dir := t.TempDir()
			o := Options{MemtableBytes: 1 << 20, MaxTables: -1}
			db := open(t, dir, o)
			const n = 50
			for i := 0; i < n; i++ {
				mustPut(t, db, []byte(fmt.Sprintf("k%03d", i)), []byte("v"))
			}
			db.Close()
			path := onlyLog(t, dir)
			b, _ := os.ReadFile(path)
			var starts []int64
			for off := int64(0); ; {
				_, sz, ok := parseRecord(b, off, 0)
				if !ok {
					break
				}
				starts = append(starts, off)
				off += sz
			}
			keep := starts[n-3] // the last three records go
			if cut == "empty" {
				keep = 0
			}
			if err := os.WriteFile(path, b[:keep], 0o644); err != nil {
				t.Fatal(err)
			}
			files := snapshotDir(t, dir)

			_, err := Open(dir, &Options{Logger: quiet()})
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(path)) || !strings.Contains(err.Error(), "closed cleanly") {
				t.Fatalf("Open over a log cut after a clean close: %v (want ErrCorrupt naming the log)", err)
			}
			if after := snapshotDir(t, dir); !maps.EqualFunc(files, after, bytes.Equal) {
				t.Error("the refused Open changed files")
			}
			var out bytes.Buffer
			if res, err := Check(dir, &out, nil); err != nil || res.Problems == 0 || !strings.Contains(out.String(), "closed cleanly") {
				t.Errorf("Check: %+v, %v\n%s", res, err, out.String())
			}

			var warnings logBuffer
			db, err = Open(dir, &Options{WALRecovery: PointInTimeRecovery, Logger: log.New(&warnings, "", 0)})
			if err != nil {
				t.Fatalf("point-in-time recovery: %v", err)
			}
			kept := n - 3
			if cut == "empty" {
				kept = 0
			}
			for i := 0; i < n; i++ {
				_, err := db.Get([]byte(fmt.Sprintf("k%03d", i)))
				if i < kept && err != nil || i >= kept && !errors.Is(err, ErrNotFound) {
					t.Fatalf("k%03d after recovery: %v", i, err)
				}
			}
			if !strings.Contains(warnings.String(), "are lost") {
				t.Errorf("the loss was not said: %q", warnings.String())
			}
			db.Close()
			db = open(t, dir, Options{}) // the default mode again: the loss was accepted once
			db.Close()
		})
	}
}

// flushTables writes tables tables of per keys each, "t<table>-<i>" with
// the key as its value, flushing after each, so that table tbl holds
// exactly the keys t<tbl>-*.
func flushTables(t testing.TB, db *DB, tables, per int) {
	t.Helper()
	for tbl := 0; tbl < tables; tbl++ {
		for i := 0; i < per; i++ {
			k := fmt.Sprintf("t%d-%04d", tbl, i)
			mustPut(t, db, []byte(k), []byte(k))
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
}
