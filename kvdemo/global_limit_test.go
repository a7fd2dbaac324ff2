package kvdemo

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// TestGlobalPastIndexTableLimit grows a global store past the index's
// table limit (dynamic.IndexMaxTables) by flushing one table per Put and
// never merging. The tables the index refuses stay unindexed: every Get
// searches them, so no key is missed, before or after a reopen (where
// AddTables would refuse the whole batch), and check stays clean.
func TestGlobalPastIndexTableLimit(t *testing.T) {
	if testing.Short() || race.Enabled {
		t.Skip("writes more than 4,096 tables: run without -short and without the race detector")
	}
	dir := t.TempDir()
	// Durability is not what this test is about: without fsyncs its four
	// thousand flushes take seconds, not minutes.
	opts := &Options{Filter: FilterGlobal, MemtableBytes: 1 << 10, MaxTables: -1, NoSyncEachWrite: true, Compression: CompressionNone, FS: noSyncFS{OSFS()}}
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	const extra = 24
	n := dynamic.IndexMaxTables + extra
	value := make([]byte, 1100) // over the memtable's threshold: each Put is flushed alone
	key := func(i int) []byte { return []byte(fmt.Sprintf("key-%06d", i)) }
	for i := 0; i < n; i++ {
		if err := db.Put(key(i), value); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	// Every Put in a table (the last ones may still be in the memtable or
	// in flight), then the index settled.
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Settle(); err != nil {
		t.Fatal(err)
	}
	verify := func(db *DB, when string) {
		t.Helper()
		st := db.Stats()
		if st.Tables != n {
			t.Fatalf("%s: %d tables, want %d (one per Put)", when, st.Tables, n)
		}
		if st.Index.Tables > dynamic.IndexMaxTables {
			t.Fatalf("%s: the index holds %d tables, past its limit %d", when, st.Index.Tables, dynamic.IndexMaxTables)
		}
		if st.UnfilteredTables < st.Tables-dynamic.IndexMaxTables {
			t.Fatalf("%s: %d tables, %d in the index, but only %d unfiltered", when, st.Tables, st.Index.Tables, st.UnfilteredTables)
		}
		for i := 0; i < n; i++ {
			if _, err := db.Get(key(i)); err != nil {
				t.Fatalf("%s: get %s: %v (a key missed past the index's table limit)", when, key(i), err)
			}
		}
		for i := 0; i < 200; i++ {
			if _, err := db.Get([]byte(fmt.Sprintf("absent-%d", i))); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: get of an absent key: %v", when, err)
			}
		}
	}
	verify(db, "open")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, opts)
	if err != nil {
		t.Fatalf("reopen past the index's table limit: %v", err)
	}
	verify(db, "reopened")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := Check(dir, io.Discard, nil)
	if err != nil || res.Problems != 0 {
		t.Fatalf("check: %+v, %v", res, err)
	}
}

// noSyncFS is the operating system's filesystem with every fsync made a
// no-op, for tests that need many files and no crash.
type noSyncFS struct{ FS }

type noSyncFile struct{ File }

func (noSyncFile) Sync() error        { return nil }
func (noSyncFS) SyncDir(string) error { return nil }

func (fs noSyncFS) Create(name string) (File, error) {
	f, err := fs.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (fs noSyncFS) OpenAppend(name string) (File, error) {
	f, err := fs.FS.OpenAppend(name)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}
