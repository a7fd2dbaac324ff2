package dynamic

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// TestIndexOneKeyInEveryTableAtLimit: one key held by every table, up to
// IndexMaxTables of them, added in batches with IDs counting down from
// 2^64−1. The key's entries crowd its buckets, so its tables go to the
// stash (whose entries carry table slots) and, once it is full, become
// tables every lookup names; that key must name every table at the limit,
// after compactions that merge pairs of tables at the limit, after a
// removal of a run, and after a refill with removed IDs reused and IDs
// near 2^64 and 0, while every table's own key names it too.
func TestIndexOneKeyInEveryTableAtLimit(t *testing.T) {
	race.SkipLong(t) // lookups that each name thousands of tables: no goroutines to check
	const hot = 0x1234_5678_9abc_def0
	x := newIndexSeeded(1000, 17, 5) // 16-bit slots: 255 codes
	rng := rand.New(rand.NewPCG(1, 2))
	keys := map[uint64][]uint64{}
	var live []uint64 // oldest first
	for len(live) < IndexMaxTables {
		var ids []uint64
		var sets [][]uint64
		for range 512 {
			id := math.MaxUint64 - uint64(len(live)+len(ids))
			ks := []uint64{hot, hot, rng.Uint64()}
			ids, sets = append(ids, id), append(sets, ks)
			keys[id] = ks
		}
		if err := x.AddTables(ids, sets); err != nil {
			t.Fatal(err)
		}
		live = append(live, ids...)
	}
	check := func(what string) {
		t.Helper()
		got := x.LookupHash(hot, nil)
		if len(got) != len(live) {
			t.Fatalf("%s: the key of every table names %d tables, %d held", what, len(got), len(live))
		}
		for _, id := range live {
			if !holds(got, id) {
				t.Fatalf("%s: the key of every table does not name table %d (false negative)", what, id)
			}
		}
		for i, id := range live {
			if i%7 != 0 && i < len(live)-64 {
				continue
			}
			for _, k := range keys[id] {
				if !holds(x.LookupHash(k, nil), id) {
					t.Fatalf("%s: key %x does not name its table %d (false negative)", what, k, id)
				}
			}
		}
	}
	check("at the limit")
	if st := x.Stats(); st.Stashed < 100 || st.Always == 0 {
		t.Fatalf("the stash holds %d entries and %d tables are named by every lookup: both regimes not reached", st.Stashed, st.Always)
	}
	if err := x.AddTable(0, []uint64{hot}); err == nil {
		t.Fatal("a table past the limit was added")
	}
	for r := range 200 {
		a := rng.IntN(len(live) - 1)
		in := slices.Clone(live[a : a+2])
		merged := append(slices.Clone(keys[in[0]]), keys[in[1]]...)
		id := uint64(r)
		if err := x.Replace(in, id, merged, nil); err != nil {
			t.Fatal(err)
		}
		delete(keys, in[0])
		delete(keys, in[1])
		keys[id] = merged
		live = slices.Insert(slices.Delete(live, a, a+2), a, id)
	}
	check("after compactions at the limit")
	gone := slices.Clone(live[100:1000])
	if err := x.RemoveTables(gone...); err != nil {
		t.Fatal(err)
	}
	live = slices.DeleteFunc(live, func(id uint64) bool { return slices.Contains(gone, id) })
	check("after a removal")
	var ids []uint64
	var sets [][]uint64
	refill := append(gone, math.MaxUint64-1<<20)
	for i := uint64(0); len(refill) < IndexMaxTables-len(live); i++ {
		refill = append(refill, 1<<40+i)
	}
	for _, id := range refill {
		ks := []uint64{hot, rng.Uint64()}
		ids, sets = append(ids, id), append(sets, ks)
		keys[id] = ks
	}
	if err := x.AddTables(ids, sets); err != nil {
		t.Fatal(err)
	}
	live = append(live, ids...)
	check("after a refill with reused IDs")
	checkCanonical(t, x)
}
