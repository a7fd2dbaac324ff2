package kvdemo

import (
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// TestGlobalTinyStoresAtOpen: a store of one, 1023 or 1024 keys (in two
// tables, or one) at budgets from 8 to 20 bits per key, reopened: Open
// builds the index at once in one segment (indexCapacity), every key is
// found and every absent one is not, and the room the capacity promises
// (1024 entries for a store this small) is really there: a flush of 1000
// more keys after the reopen does not grow the index.
func TestGlobalTinyStoresAtOpen(t *testing.T) {
	race.SkipLong(t)
	for _, bits := range []float64{8, 10, 14, 20} {
		for _, n := range []int{1, 1023, 1024} {
			t.Run(fmt.Sprintf("bits=%v/keys=%d", bits, n), func(t *testing.T) {
				dir := t.TempDir()
				o := Options{Filter: FilterGlobal, BitsPerKey: bits, MaxTables: -1, NoSyncEachWrite: true, noIdleRebuild: true}
				db := open(t, dir, o)
				m := model{}
				var keys [][]byte
				put := func(from, to int) {
					for i := from; i < to; i++ {
						k, v := kv(i)
						mustPut(t, db, k, v)
						m[string(k)] = string(v)
						keys = append(keys, k)
					}
					if err := db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				put(0, (n+1)/2)
				if n > 1 {
					put((n+1)/2, n)
				}
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				db = open(t, dir, o)
				defer db.Close()
				st := db.Stats().Index
				if st.Segments != 1 || st.Stashed != 0 || st.Always != 0 || st.Entries > int64(n) || st.Tables != min(n, 2) {
					t.Fatalf("after the reopen: %+v", st)
				}
				absent := [][]byte{[]byte("absent"), []byte("key99999999")}
				m.check(t, db, "after the reopen", append(keys, absent...))
				put(n, n+1000)
				if st := db.Stats().Index; st.Segments != 1 || st.Stashed != 0 || st.Tables != min(n, 2)+1 {
					t.Fatalf("a flush of 1000 keys after the reopen: %+v", st)
				}
				m.check(t, db, "after a flush", append(keys, absent...))
			})
		}
	}
}

// TestGlobalIdleSmallStoreIndexAsOpenBuildsIt: a new store sizes its index
// at its first flush for a few tables like the first, so that the next
// flushes fit. A store that then goes quiet with one to three tables must
// not keep that index: once idle (Settle), its index may take at most a
// quarter more than the one Open builds for the same tables, at budgets
// of 10 and 14 bits per key.
func TestGlobalIdleSmallStoreIndexAsOpenBuildsIt(t *testing.T) {
	for _, bits := range []float64{10, 14} {
		for _, flushes := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("bits=%v/flushes=%d", bits, flushes), func(t *testing.T) {
				dir := t.TempDir()
				o := Options{Filter: FilterGlobal, BitsPerKey: bits, MaxTables: -1, NoSyncEachWrite: true, noIdleRebuild: true}
				db := open(t, dir, o)
				m := model{}
				var keys [][]byte
				for f := 0; f < flushes; f++ {
					for i := f * 10_000; i < (f+1)*10_000; i++ {
						k, v := kv(i)
						mustPut(t, db, k, v)
						m[string(k)] = string(v)
						keys = append(keys, k)
					}
					if err := db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				if err := db.Settle(); err != nil {
					t.Fatal(err)
				}
				idle := db.Stats().Index
				m.check(t, db, "idle", append(keys, []byte("absent")))
				if err := db.Close(); err != nil {
					t.Fatal(err)
				}
				db = open(t, dir, o)
				defer db.Close()
				reopened := db.Stats().Index
				if idle.Bytes > reopened.Bytes+reopened.Bytes/4 {
					t.Fatalf("idle with %d tables, the index takes %d bytes (%.1f bits/key); Open builds one of %d (%.1f)", flushes, idle.Bytes, idle.BitsPerKey, reopened.Bytes, reopened.BitsPerKey)
				}
			})
		}
	}
}
