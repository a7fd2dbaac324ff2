package dynamic

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// FuzzIndexHistory drives an index through a history the fuzzer writes:
// tables added (keys from a universe that holds crowds of keys sharing
// buckets and tag, so entries are shared within and across tables), runs
// of adjacent tables merged by Replace (dropping some keys, adding keys
// the index never held), tables removed; at every slot width from 8 to 17
// bits, in indexes from two buckets up, and with every segment prefetched
// and segments capped at 16 buckets when the capacity is odd. After every
// step every key of every live table must be named by that table, and at
// the end every bucket must be canonical with exact counts.
func FuzzIndexHistory(f *testing.F) {
	f.Add(uint8(2), uint16(40), []byte{0, 20, 0, 20, 1, 33, 2, 0x11, 0, 7, 3, 1, 2, 0x20})
	f.Add(uint8(5), uint16(1), []byte{0, 250, 1, 250, 0, 250, 2, 0x31, 2, 0x22, 3, 0})
	f.Add(uint8(9), uint16(301), []byte{1, 9, 1, 8, 1, 7, 1, 6, 2, 0x30, 2, 0x10, 2, 0})
	f.Fuzz(func(t *testing.T, bits uint8, capacity uint16, ops []byte) {
		if len(ops) > 256 {
			ops = ops[:256]
		}
		if capacity%2 == 1 {
			defer func(p, i uint64) { idxPrefetchBytes, idxMaxBuckets = p, i }(idxPrefetchBytes, idxMaxBuckets)
			idxPrefetchBytes, idxMaxBuckets = 0, 16
		}
		x := newIndexSeeded(int(capacity%400), 8+float64(bits%10), uint32(bits)+7)
		rng := rand.New(rand.NewPCG(uint64(bits), uint64(capacity)))
		var universe []uint64
		for range 48 {
			universe = append(universe, rng.Uint64())
		}
		if (*x.segs.Load())[0].n > 4 {
			universe = append(universe, crowd(x, rng, 16)...)
			universe = append(universe, crowd(x, rng, 16)...)
		}
		type table struct {
			id   uint64
			keys []uint64
		}
		var live []table // oldest first
		next := uint64(1)
		pick := func(n int, r *rand.Rand) []uint64 {
			hs := make([]uint64, n)
			for i := range hs {
				hs[i] = universe[r.IntN(len(universe))]
			}
			return hs
		}
		check := func(what string) {
			t.Helper()
			for _, tb := range live {
				for _, h := range tb.keys {
					if !holds(x.LookupHash(h, nil), tb.id) {
						t.Fatalf("after %s: a key of table %d is not named", what, tb.id)
					}
				}
			}
		}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i], ops[i+1]
			r := rand.New(rand.NewPCG(uint64(op), uint64(arg)+uint64(i)))
			switch {
			case op%4 <= 1 || len(live) == 0:
				keys := pick(int(arg%25), r)
				if err := x.AddTable(next, keys); err != nil {
					t.Fatal(err)
				}
				live = append(live, table{next, keys})
				next++
				check("AddTable")
			case op%4 == 2:
				at := int(arg) % len(live)
				width := min(1+int(arg>>4)%3, len(live)-at)
				run := live[at : at+width]
				var ids, merged []uint64
				for _, tb := range run {
					ids = append(ids, tb.id)
					for _, h := range tb.keys {
						if !slices.Contains(merged, h) {
							merged = append(merged, h)
						}
					}
				}
				var dropped []uint64
				if op&0x10 != 0 && len(merged) > 1 {
					k := 1 + r.IntN(len(merged)-1)
					merged, dropped = merged[k:], merged[:k]
				}
				if op&0x20 != 0 {
					merged = append(merged, pick(1+r.IntN(8), r)...)
					for range 1 + r.IntN(8) {
						merged = append(merged, rng.Uint64()) // never held
					}
				}
				if err := x.Replace(ids, next, merged, dropped); err != nil {
					t.Fatal(err)
				}
				live = slices.Replace(live, at, at+width, table{next, merged})
				next++
				check("Replace")
			default:
				at := int(arg) % len(live)
				if err := x.RemoveTable(live[at].id); err != nil {
					t.Fatal(err)
				}
				live = slices.Delete(live, at, at+1)
				check("RemoveTable")
			}
		}
		checkCanonical(t, x)
	})
}
