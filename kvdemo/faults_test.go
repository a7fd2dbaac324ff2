package kvdemo

// Fault-injection tests, one per fault of issue #10 (D1..D7), through the
// injectable filesystem (internal/errorfs). Each asserts that every
// acknowledged write is present afterwards, that no write's outcome was
// misreported (a write reported ErrNotStored is absent; only one reported
// ErrOutcomeUnknown may go either way), and that no file was destroyed.

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

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

func isExt(ext string) func(string) bool {
	return func(p string) bool { return strings.HasSuffix(p, "."+ext) }
}

// tablesOnDisk lists the .sst files in dir.
func tablesOnDisk(t testing.TB, dir string) []uint64 {
	t.Helper()
	var ids []uint64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if id, ext, ok := parseFileName(e.Name()); ok && ext == extTable {
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
	if got := tablesOnDisk(t, dir); !slices.Equal(got, sortedCopy(man.Tables)) {
		t.Errorf("tables on disk %v, manifest %v: a failed flush left a file behind", got, man.Tables)
	}
	if tmp, _ := os.ReadDir(filepath.Join(dir, tmpDir)); len(tmp) != 0 {
		t.Errorf("tmp/ holds %d files after failed writes", len(tmp))
	}
	if err := db.Close(); err != nil && !errors.Is(err, ErrReadOnly) {
		t.Logf("Close on a full disk: %v", err)
	}

	// Restart on the still-full disk.
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
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	db, err := faultOpen(t, dir, efs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	for i := 0; i < 50; i++ {
		l.put(t, db, fmt.Sprintf("a%03d", i), "v")
	}
	before := db.Stats()
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
}

// TestFaultLogFsyncFails (D3): an fsync of the log fails. The write's
// outcome is unknown and says so; the store turns read-only, really
// (every later write is refused with ErrReadOnly and ErrNotStored, and
// counted nowhere), until it is closed and reopened, which is the
// documented step; after reopening, writes work and nothing acknowledged
// is lost.
func TestFaultLogFsyncFails(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	db, err := faultOpen(t, dir, efs, Options{MemtableBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	for i := 0; i < 100; i++ {
		l.put(t, db, fmt.Sprintf("a%03d", i), "v")
	}
	efs.Add(&errorfs.Rule{Op: errorfs.OpSync, Match: isExt(extLog), Times: 1, Err: errorfs.EIO})
	err = l.put(t, db, "unknown", "v")
	if !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("write whose fsync failed: %v", err)
	}
	before := db.Stats()
	for i := 0; i < 300; i++ { // enough to need a memtable switch
		err := l.put(t, db, fmt.Sprintf("ro%03d", i), "v")
		if !errors.Is(err, ErrReadOnly) || !errors.Is(err, ErrNotStored) {
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
			dir := t.TempDir()
			efs := errorfs.New(vfs.Default)
			db, err := faultOpen(t, dir, efs, Options{MemtableBytes: 8 << 10})
			if err != nil {
				t.Fatal(err)
			}
			l := newLedger()
			for i := 0; i < 100; i++ {
				l.put(t, db, fmt.Sprintf("a%03d", i), "v")
			}
			r := step.rule
			efs.Add(&r)
			err = db.Flush()
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
		})
	}
}

// TestFaultWALDamage (D4): damage in the middle of a log (an intact record
// follows) refuses to open, naming the file and the offset, and changes
// nothing; a torn tail is cut off with the bytes kept in lost/; damage
// followed by a later log is not a torn tail; each recovery mode does what
// it says and moves the damaged log to lost/ intact; a log the manifest
// names that is missing is an error.
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
		path := onlyLog(t, dir)
		b, _ := os.ReadFile(path)
		os.WriteFile(path, b[:len(b)-5], 0o644)
		efs := errorfs.New(vfs.Default)
		efs.SetSpace(0)
		var warnings logBuffer
		db, err := faultOpen(t, dir, efs, Options{Logger: log.New(&warnings, "", 0)})
		if err != nil {
			t.Fatalf("restart on a full disk with a torn tail: %v", err)
		}
		defer db.Close()
		if !present(db, n-2) || present(db, n-1) || !strings.Contains(warnings.String(), "NOT kept: no space") {
			t.Fatalf("torn tail on a full disk: %q", warnings.String())
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
// them out); Check reports the table.
func TestFaultDamagedTable(t *testing.T) {
	for _, kind := range []FilterKind{FilterCuckoo, FilterBloom} {
		t.Run(string(kind), func(t *testing.T) {
			dir := t.TempDir()
			o := Options{Filter: kind, MemtableBytes: 1 << 20, MaxTables: -1}
			db := open(t, dir, o)
			const per = 500
			for tbl := 0; tbl < 3; tbl++ {
				for i := 0; i < per; i++ {
					k := fmt.Sprintf("t%d-%04d", tbl, i)
					mustPut(t, db, []byte(k), []byte(k))
				}
				if err := db.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			man, _ := readManifestFS(vfs.Default, dir)
			mid := man.Tables[1] // holds t1-*
			path := fileName(dir, mid, extTable)
			b, _ := os.ReadFile(path)
			b[100] ^= 0x40 // inside the first data block
			os.WriteFile(path, b, 0o644)

			var out bytes.Buffer
			res, err := Check(dir, &out, nil)
			if err != nil || res.Problems != 1 || !strings.Contains(out.String(), fmt.Sprintf("BAD  %06d.sst", mid)) {
				t.Errorf("Check: %+v, %v\n%s", res, err, out.String())
			}

			db = open(t, dir, o)
			defer db.Close()
			if st := db.Stats(); st.DamagedTables != 1 {
				t.Fatalf("DamagedTables = %d", st.DamagedTables)
			}
			servedBehind := 0
			for tbl := 0; tbl < 3; tbl++ {
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
					case tbl == 2 && err != nil:
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
		})
	}
}
