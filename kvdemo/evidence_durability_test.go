package kvdemo

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/errorfs"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// What Open keeps in lost/ must be durable before what it replaces is
// gone: a crash right after Open must leave the damaged log, or the torn
// tail, either where it was or in lost/, byte for byte. The filesystem
// here defers removals to the directory fsync, as POSIX allows.

// storeWithLog writes n records to a new store's one log and closes it;
// it returns the log's path and the offset at which each record ends.
func storeWithLog(t *testing.T, n int) (dir, path string, ends []int64) {
	t.Helper()
	dir = t.TempDir()
	db := open(t, dir, Options{})
	for i := 0; i < n; i++ {
		k, v := kv(i)
		mustPut(t, db, k, v)
		st, err := os.Stat(onlyLog(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, st.Size())
	}
	db.Close()
	return dir, onlyLog(t, dir), ends
}

// keptSomewhere says whether b is, whole, the content of path or of a
// file in dir's lost/.
func keptSomewhere(dir, path string, b []byte) bool {
	if a, err := os.ReadFile(path); err == nil && bytes.Equal(a, b) {
		return true
	}
	lost, _ := os.ReadDir(filepath.Join(dir, lostDir))
	for _, e := range lost {
		if a, err := os.ReadFile(filepath.Join(dir, lostDir, e.Name())); err == nil && bytes.Equal(a, b) {
			return true
		}
	}
	return false
}

// TestRecoveredLogKeptAcrossCrash: point-in-time recovery past a log
// damaged in the middle copies the log to lost/ and removes it once the
// recovered state is in a table. A crash just after Open must find the
// damaged log in one of the two places.
func TestRecoveredLogKeptAcrossCrash(t *testing.T) {
	dir, path, ends := storeWithLog(t, 40)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[ends[19]+15] ^= 1 // inside record 20: intact records follow
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	openAndCrash(t, dir, Options{WALRecovery: PointInTimeRecovery}, (*errorfs.FS).DeferRemoves)
	if !keptSomewhere(dir, path, b) {
		t.Fatal("after a crash right after point-in-time recovery, the damaged log is neither in place nor in lost/")
	}
	db := open(t, dir, Options{WALRecovery: PointInTimeRecovery})
	defer db.Close()
	mustHaveKV(t, db, 20, "before the damage")
}

// TestTornTailKeptAcrossCrash: Open keeps a torn tail in lost/ and only
// then cuts it off the log. A crash just after Open must find the tail in
// the log or in lost/.
func TestTornTailKeptAcrossCrash(t *testing.T) {
	dir, path, _ := storeWithLog(t, 40)
	forgetCleanClose(t, dir)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	torn := b[:len(b)-5]
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	efs := errorfs.New(vfs.Default)
	efs.DeferRemoves()
	db, err := faultOpen(t, dir, efs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if db.Stats().TornWALTails != 1 {
		t.Fatal("the torn tail was not cut")
	}
	if err := efs.Crash(); err != nil {
		t.Fatal(err)
	}
	db.Close() // fails on the crashed filesystem; the lock goes with it
	tail := torn[len(torn)-int(tornTailLen(t, torn)):]
	if a, err := os.ReadFile(path); err == nil && bytes.Equal(a, torn) {
		return // the cut was undone: the tail is where it was
	}
	if !keptSomewhere(dir, path, tail) {
		t.Fatal("after a crash right after the tail was cut, the tail is neither in the log nor in lost/")
	}
}

// tornTailLen is the length of the torn record at the end of a log: the
// bytes after the last intact record.
func tornTailLen(t *testing.T, log []byte) int64 {
	t.Helper()
	sc, err := scanLog(log, false, func(walRecord) error { return nil })
	if err != nil || sc.damageAt < 0 {
		t.Fatalf("no torn tail in the log: %v", err)
	}
	return sc.size - sc.damageAt
}

// openAndCrash opens the store in dir on a fresh errorfs with o, then
// crashes that filesystem right after Open returned, and closes the store
// (which fails on the crashed filesystem; the lock goes with it).
func openAndCrash(t *testing.T, dir string, o Options, prepare func(*errorfs.FS)) {
	t.Helper()
	efs := errorfs.New(vfs.Default)
	if prepare != nil {
		prepare(efs)
	}
	db, err := faultOpen(t, dir, efs, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := efs.Crash(); err != nil {
		t.Fatal(err)
	}
	db.Close()
}
