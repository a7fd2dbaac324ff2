package kvdemo

import (
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// sizeTiered returns n random key hashes split into tables whose sizes
// halve, oldest (largest) first, as a size-tiered store holds them.
func sizeTiered(n int, seed uint64) (ids []uint64, sets [][]uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	for id, left := uint64(1), n; left > 0; id++ {
		size := max(left/2, 1)
		if id == 20 {
			size = left
		}
		hs := make([]uint64, size)
		for i := range hs {
			hs[i] = rng.Uint64()
		}
		ids, sets = append(ids, id), append(sets, hs)
		left -= size
	}
	return ids, sets
}

// TestIndexCapacityWithinBudget: the index kvdemo builds at once (at Open
// and at each rebuild) holds every table's keys in one segment, with room
// for the next flushes, and takes at most 1% more memory than the
// bits-per-key budget, as Stats counts it (buckets, counters, codebook,
// tag-offset table): wherever the budget buys 10-bit slots, in stores
// large enough that the index's fixed memory (a few kilobytes) is a small
// part of the budget.
func TestIndexCapacityWithinBudget(t *testing.T) {
	// Millions of index inserts in one goroutine: nothing for the race
	// detector, which made this the package's longest test by far.
	race.SkipLong(t)
	// Within the budget: every budget from 8 to 20 bits in quarters,
	// tables without keys (the memory is the same); keys for whole bits.
	for _, entries := range []int{1_000_000, 4_000_000} {
		for bits := 8.0; bits <= 20; bits += 0.25 {
			if dynamic.IndexEntryBits(bits) > bits {
				continue // under the 10-bit slots' floor: the budget cannot be met
			}
			var ids []uint64
			var sets [][]uint64
			if entries == 1_000_000 && bits == float64(int(bits)) {
				ids, sets = sizeTiered(entries, uint64(bits))
			} else {
				for id := uint64(1); id <= 20; id++ {
					ids, sets = append(ids, id), append(sets, nil)
				}
			}
			x := dynamic.NewIndex(indexCapacity(entries, bits), bits)
			if err := x.AddTables(ids, sets); err != nil {
				t.Fatal(err)
			}
			st := x.Stats()
			if spent := float64(st.Bytes*8) / float64(entries); spent > 1.01*bits {
				t.Errorf("%d entries at %v bits/key: the index takes %.3f bits/key (%+v)", entries, bits, spent, st)
			}
			if st.Segments != 1 || st.Stashed != 0 || st.Always != 0 {
				t.Errorf("%d entries at %v bits/key: %+v", entries, bits, st)
			}
		}
	}
	// Room, at any size: the keys fit in one segment at once, and the
	// capacity leaves at least half a percent or 1024 entries more.
	for _, entries := range []int{0, 1, 1023, 1024, 10_000, 100_000, 300_000} {
		for bits := 8.0; bits <= 20; bits += 0.5 {
			c := indexCapacity(entries, bits)
			if c < entries+entries/200 || c < entries+1024 {
				t.Errorf("%d entries at %v bits/key: capacity %d leaves too little room", entries, bits, c)
			}
			ids, sets := sizeTiered(entries, uint64(4*bits))
			x := dynamic.NewIndex(c, bits)
			if err := x.AddTables(ids, sets); err != nil {
				t.Fatal(err)
			}
			if st := x.Stats(); st.Segments != 1 || st.Stashed != 0 || st.Always != 0 {
				t.Errorf("%d entries at %v bits/key, capacity %d: %+v", entries, bits, c, st)
			}
		}
	}
}
