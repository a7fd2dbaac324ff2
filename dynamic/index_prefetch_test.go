package dynamic

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// withPrefetchedCappedSegments runs f with every segment prefetched by
// bulk updates (idxPrefetchBytes 0: the prefetch path runs on segments of
// two buckets, where the key idxAhead ahead is often past the batch's end
// or in a segment added mid-batch) and segments capped at maxBuckets (so
// growth hits the cap again and again and adds segments of the cap's
// size), then puts both back.
func withPrefetchedCappedSegments(maxBuckets uint64, f func()) {
	defer func(p, i, m uint64) { idxPrefetchBytes, idxMaxBuckets, memMaxBuckets = p, i, m }(idxPrefetchBytes, idxMaxBuckets, memMaxBuckets)
	idxPrefetchBytes, idxMaxBuckets, memMaxBuckets = 0, maxBuckets, maxBuckets
	f()
}

// TestIndexPrefetchBatchEdges: AddTable, AddTables and Replace with every
// batch length from 0 to a few times idxAhead, into indexes of two-bucket
// segments capped at a few buckets, at every slot width: the prefetch of
// the key idxAhead ahead must never index past the batch or the segment
// (a panic), and no key may be lost, whether the index grows during the
// batch or not.
func TestIndexPrefetchBatchEdges(t *testing.T) {
	withPrefetchedCappedSegments(8, func() {
		grew := 0
		for bits := 8; bits <= 17; bits++ {
			x := newIndexSeeded(1, float64(bits), uint32(bits))
			rng := rand.New(rand.NewPCG(uint64(bits), 66))
			gen := func(n int) []uint64 {
				hs := make([]uint64, n)
				for i := range hs {
					hs[i] = rng.Uint64()
				}
				return hs
			}
			tables := map[uint64][]uint64{}
			next := uint64(1)
			check := func(when string) {
				t.Helper()
				for id, hs := range tables {
					for _, h := range hs {
						if !holds(x.LookupHash(h, nil), id) {
							t.Fatalf("bits %d, %s: a key of table %d is not named", bits, when, id)
						}
					}
				}
				checkCanonical(t, x)
			}
			for n := 0; n <= 3*idxAhead+2; n++ {
				before := len(*x.segs.Load())
				// A table of n new keys.
				tables[next] = gen(n)
				if err := x.AddTable(next, tables[next]); err != nil {
					t.Fatal(err)
				}
				next++
				check(fmt.Sprintf("AddTable of %d keys", n))
				// Two tables at once, of n and n/2 keys.
				ids := []uint64{next, next + 1}
				sets := [][]uint64{gen(n), gen(n / 2)}
				if err := x.AddTables(ids, sets); err != nil {
					t.Fatal(err)
				}
				tables[ids[0]], tables[ids[1]] = sets[0], sets[1]
				next += 2
				check(fmt.Sprintf("AddTables of %d and %d keys", n, n/2))
				// The last two tables merged with n new keys: versions
				// of the merged keys sit in older segments, and the new
				// keys grow the index during the Replace.
				merged := append(append(append([]uint64(nil), sets[0]...), sets[1]...), gen(n)...)
				var dropped []uint64
				if n > 2 {
					merged, dropped = merged[1:], merged[:1]
				}
				if err := x.Replace(ids, next, merged, dropped); err != nil {
					t.Fatal(err)
				}
				delete(tables, ids[0])
				delete(tables, ids[1])
				tables[next] = merged
				next++
				check(fmt.Sprintf("Replace into %d keys", len(merged)))
				if len(*x.segs.Load()) > before {
					grew++
				}
				// Keep the index small enough to check after every step.
				if len(tables) > 12 {
					for id := range tables {
						if err := x.RemoveTable(id); err != nil {
							t.Fatal(err)
						}
						delete(tables, id)
						break
					}
					check("RemoveTable")
				}
			}
			for k, s := range *x.segs.Load() {
				if !s.large || uint64(s.n) > idxMaxBuckets || s.n < 2 {
					t.Fatalf("bits %d: segment %d: large %v, %d buckets, cap %d", bits, k, s.large, s.n, idxMaxBuckets)
				}
			}
		}
		if grew < 20 {
			t.Fatalf("the index grew in %d batches only: not exercised", grew)
		}
	})
}

// TestIndexPrefetchCappedModel replays the model histories and the
// overwrite histories (index_model_test.go), which check every key after
// each step of every Replace, with every segment prefetched and segments
// capped at 16 buckets.
func TestIndexPrefetchCappedModel(t *testing.T) {
	race.SkipLong(t)
	withPrefetchedCappedSegments(16, func() {
		for _, bits := range everyIndexShape() {
			t.Run(fmt.Sprintf("bits=%v", bits), func(t *testing.T) {
				testModel(t, bits, 3, 150)
				testOverwriteHistory(t, bits, uint32(bits)*17, 40)
			})
		}
	})
}

// TestIndexPrefetchCappedConcurrent: the concurrent attacks of
// index_concurrent_test.go (lookups during AddTable, Replace across
// growth and removals) with every segment prefetched and segments capped at 16
// buckets. Run with -race.
func TestIndexPrefetchCappedConcurrent(t *testing.T) {
	dur := 100 * time.Millisecond
	if testing.Short() {
		dur = 30 * time.Millisecond
	}
	withPrefetchedCappedSegments(16, func() {
		for _, bits := range []int{8, 10, 13, 16, 17} {
			t.Run(fmt.Sprintf("bits=%d", bits), func(t *testing.T) {
				testConcurrent(t, float64(bits), uint32(bits)*7, dur)
				testConcurrentOverwrites(t, float64(bits), uint32(bits)*13, dur)
			})
		}
	})
}

// TestHashedProbesAgree: a store that hashes a key once (KeyHash) and asks
// MemFilter.MayContainHash and Index.LookupHash, after Index.PrefetchHash,
// gets what MayContain and Lookup answer for the key, and no added key is
// missed, in filters grown to several segments.
func TestHashedProbesAgree(t *testing.T) {
	withPrefetchedCappedSegments(64, func() {
		rng := rand.New(rand.NewPCG(5, 6))
		mf := NewMemFilter(16)
		x := newIndexSeeded(16, 10, 7)
		var keys [][]byte
		for tbl := uint64(1); tbl <= 6; tbl++ {
			var hs []uint64
			for range 300 {
				k := fmt.Appendf(nil, "key-%d-%d", tbl, rng.Uint64())
				keys = append(keys, k)
				mf.Add(k)
				hs = append(hs, KeyHash(k))
			}
			if err := x.AddTable(tbl, hs); err != nil {
				t.Fatal(err)
			}
		}
		if st := x.Stats(); st.Segments < 2 {
			t.Fatalf("the index did not grow (%d segment)", st.Segments)
		}
		for i := range 4000 {
			k := fmt.Appendf(nil, "probe-%d", i)
			if i < len(keys) {
				k = keys[i]
			}
			h := KeyHash(k)
			x.PrefetchHash(h)
			if mf.MayContainHash(h) != mf.MayContain(k) {
				t.Fatalf("%q: MayContainHash disagrees with MayContain", k)
			}
			if i < len(keys) && !mf.MayContainHash(h) {
				t.Fatalf("%q: added, and MayContainHash says absent", k)
			}
			a, b := x.LookupHash(h, nil), x.Lookup(k, nil)
			if fmt.Sprint(a) != fmt.Sprint(b) {
				t.Fatalf("%q: LookupHash %v, Lookup %v", k, a, b)
			}
			if i < len(keys) && len(a) == 0 {
				t.Fatalf("%q: added, and the index names no table", k)
			}
		}
	})
}
