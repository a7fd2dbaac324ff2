package kvdemo

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// TestOpenStoreWithOlderFilterFiles: a store whose filter files were
// written by an earlier release (codec format version 2, and version 1
// before it) opens with this release and serves with those filters: no
// rebuild, no table read unfiltered, absent keys skipped by the old
// filters. New flushes write version-3 filters beside them, and a
// compaction turns the old tables into one with a version-3 filter. Keys
// present and absent interleave, so that only a filter can skip a table.
func TestOpenStoreWithOlderFilterFiles(t *testing.T) {
	for _, version := range []int{2, 1} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { testOpenStoreWithOlderFilterFiles(t, version) })
	}
}

func testOpenStoreWithOlderFilterFiles(t *testing.T, version int) {
	const n = 6000 // indexes; a release writes the even ones below its bound
	dir := t.TempDir()
	key := func(i int) ([]byte, []byte) { return fmt.Appendf(nil, "key%08d", i), fmt.Appendf(nil, "value-%d", i) }
	write := func(db *DB, from, to int) {
		for i := from; i < to; i += 2 {
			k, v := key(i)
			mustPut(t, db, k, v)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// served checks every present key below upTo and every absent one,
	// and returns how the tables' filters answered the absent Gets.
	served := func(db *DB, upTo int, when string) (skipped, probed int64) {
		t.Helper()
		for i := 0; i < upTo; i += 2 {
			k, v := key(i)
			if got, err := db.Get(k); err != nil || !bytes.Equal(got, v) {
				t.Fatalf("%s: Get(%s) = %q, %v", when, k, got, err)
			}
		}
		before := db.Stats()
		for i := 1; i < upTo; i += 2 {
			k, _ := key(i)
			if got, err := db.Get(k); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: Get(absent %s) = %q, %v", when, k, got, err)
			}
		}
		after := db.Stats()
		return after.TableFilterNegatives - before.TableFilterNegatives, after.TablesProbed - before.TablesProbed
	}
	versions := func(db *DB) map[int]int {
		t.Helper()
		v, err := db.acquire()
		if err != nil {
			t.Fatal(err)
		}
		defer v.release()
		out := map[int]int{}
		for _, st := range v.tables {
			f := st.cf.Load()
			if f == nil {
				t.Fatalf("table %06d has no filter attached", st.id)
			}
			out[f.Info().Version]++
		}
		return out
	}
	o := Options{MemtableBytes: 16 << 10, MaxTables: -1}

	// The earlier release.
	old := o
	old.filterVersion = version
	db := open(t, dir, old)
	write(db, 0, n/2)
	if got := versions(db); len(got) != 1 || got[version] < 2 {
		t.Fatalf("the earlier release wrote filters of versions %v, want several tables of version %d", got, version)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// This release opens it: the old filters serve as they are.
	db = open(t, dir, o)
	st := db.Stats()
	if st.RebuiltFilters != 0 || st.UnfilteredTables != 0 {
		t.Fatalf("opening a store with version-%d filters: %d rebuilt, %d unfiltered", version, st.RebuiltFilters, st.UnfilteredTables)
	}
	oldTables := versions(db)[version]
	skipped, probed := served(db, n/2, "reopened")
	t.Logf("%d version-%d tables; absent Gets: %d tables skipped by their filter, %d searched", oldTables, version, skipped, probed)
	if skipped < int64(n/4) || probed*20 > skipped {
		t.Errorf("absent Gets over version-%d filters: %d tables skipped, %d searched: the old filters do not filter", version, skipped, probed)
	}

	// New flushes write this release's version beside the old tables.
	write(db, n/2, n)
	got := versions(db)
	if got[version] != oldTables || got[codec.FormatVersion] < 2 {
		t.Fatalf("after new flushes: filters of versions %v, want the %d old tables of version %d and new ones of version %d", got, oldTables, version, codec.FormatVersion)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = open(t, dir, o)
	defer db.Close()
	if got2 := versions(db); !maps.Equal(got, got2) {
		t.Fatalf("reopened mixed store: filters of versions %v, before %v", got2, got)
	}
	if st := db.Stats(); st.RebuiltFilters != 0 || st.UnfilteredTables != 0 {
		t.Fatalf("reopened mixed store: %d rebuilt, %d unfiltered", st.RebuiltFilters, st.UnfilteredTables)
	}
	skipped, probed = served(db, n, "mixed versions")
	if skipped < int64(n/2) || probed*20 > skipped {
		t.Errorf("absent Gets over mixed filters: %d tables skipped, %d searched", skipped, probed)
	}

	// A compaction of every table writes one filter of this release's
	// version from the old tables' keys.
	v, err := db.acquire()
	if err != nil {
		t.Fatal(err)
	}
	err = db.compactRun(v, 0, len(v.tables))
	v.release()
	if err != nil {
		t.Fatal(err)
	}
	if got := versions(db); !slices.Equal(slices.Collect(maps.Keys(got)), []int{codec.FormatVersion}) {
		t.Fatalf("after a full compaction: filters of versions %v, want only %d", got, codec.FormatVersion)
	}
	served(db, n, "compacted")
}
