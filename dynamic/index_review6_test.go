package dynamic

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// TestIndexHeldMemoryCounted: the memory an index keeps between writer
// calls is what Stats reports, give or take its few per-table maps: a
// store budgets its index by Stats (kvdemo's INFO, its bits-per-key
// budget), so memory the index holds and does not count breaks the
// budget unseen. The heap an index keeps is measured over many indexes
// filled high enough that every one ran relocation searches, whose
// working memory (a visited-bucket set and a queue) is larger than a
// small index's buckets.
func TestIndexHeldMemoryCounted(t *testing.T) {
	for _, n := range []int{1024, 20_000} {
		const indexes = 40
		keys := randomHashSets(indexes, n, 6)
		xs := make([]*Index, indexes)
		held := heldPer(indexes, func() {
			for i := range xs {
				xs[i] = newIndexSeeded(n, 10, uint32(i+1))
				// Past the segment's relocation load, and a second table,
				// so that every index searched.
				if err := xs[i].AddTable(1, keys[i]); err != nil {
					t.Fatal(err)
				}
				if err := xs[i].AddTable(2, keys[i][:n/10]); err != nil {
					t.Fatal(err)
				}
			}
		})
		var counted int64
		for _, x := range xs {
			counted += x.Stats().Bytes
		}
		perIndex := float64(counted) / indexes
		t.Logf("%d keys: %.0f bytes held per index, Stats counts %.0f", n, held, perIndex)
		// The slack covers what Stats leaves out on purpose (the table-ID
		// map, the Index and segment headers: about a kilobyte) and the
		// allocator's rounding of a segment's arrays up to a size class or
		// a whole page (up to an eighth for these sizes).
		if held > perIndex*1.15+2048 {
			t.Errorf("%d keys: each index holds %.0f bytes, Stats counts %.0f", n, held, perIndex)
		}
		runtime.KeepAlive(xs)
		runtime.KeepAlive(keys)
	}
}

// TestIndexBytesIsStats: IndexBytes predicts exactly what Stats reports
// for a new index, at every budget and at sizes from the smallest segment
// to ones past the prefetch threshold; a store sizes its index to a budget
// with it.
func TestIndexBytesIsStats(t *testing.T) {
	for _, hint := range []int{-1, 0, 1, 7, 1023, 1024, 99_999, 1_000_003} {
		for bits := 6.0; bits <= 22; bits += 0.25 {
			if got, want := IndexBytes(hint, bits), NewIndex(hint, bits).Stats().Bytes; got != want {
				t.Fatalf("capacity %d at %v bits/key: IndexBytes %d, Stats %d", hint, bits, got, want)
			}
		}
	}
}

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

// TestIndexPrefetchCappedModel replays the review model and the overwrite
// histories (index_review4_test.go, index_review5_test.go), which check
// every key after each step of every Replace, with every segment
// prefetched and segments capped at 16 buckets.
func TestIndexPrefetchCappedModel(t *testing.T) {
	withPrefetchedCappedSegments(16, func() {
		for bits := 8; bits <= 17; bits++ {
			t.Run(fmt.Sprintf("bits=%d", bits), func(t *testing.T) {
				testReviewModel(t, float64(bits), 3, 150)
				testOverwriteHistory(t, float64(bits), uint32(bits)*17, 40)
			})
		}
	})
}

// TestIndexPrefetchCappedConcurrent: the concurrent attacks of the
// earlier reviews (lookups during AddTable, Replace across growth and
// removals) with every segment prefetched and segments capped at 16
// buckets. Run with -race.
func TestIndexPrefetchCappedConcurrent(t *testing.T) {
	dur := 100 * time.Millisecond
	if testing.Short() {
		dur = 30 * time.Millisecond
	}
	withPrefetchedCappedSegments(16, func() {
		for _, bits := range []int{8, 10, 13, 16, 17} {
			t.Run(fmt.Sprintf("bits=%d", bits), func(t *testing.T) {
				testReviewConcurrent(t, float64(bits), uint32(bits)*7, dur)
				testConcurrentOverwrites(t, float64(bits), uint32(bits)*13, dur)
			})
		}
	})
}

// TestBucketArithmeticToTheCap: a key's two buckets are computed in 32-bit
// arithmetic. For every slot and tag width the index can choose (tags of 5
// to 9 bits, so every tag has its own entry of the 512-entry tag-offset
// table), every tag, and segment sizes up to the cap of 2^31 buckets
// (where (offset + n − i) comes within one of 2^32), the second bucket
// must lie in the segment and map back to the first; likewise for the
// MemFilter's fingerprints, and a key's primary bucket for any hash. No
// segment is allocated: the arithmetic needs only the size.
func TestBucketArithmeticToTheCap(t *testing.T) {
	if idxMaxBuckets != 1<<31 || memMaxBuckets != 1<<31 {
		t.Fatalf("caps %d and %d: this test checks 2^31", idxMaxBuckets, memMaxBuckets)
	}
	sizes := []uint32{2, 3, 255, 256, 257, 1<<31 - 1, 1 << 31}
	shapes := map[[2]uint]bool{}
	for bits := 0.0; bits <= 24; bits += 0.125 {
		w, m, _ := indexShape(bits)
		if 1<<m > idxMaxTags || m < 4 || w-m < idxMinDepth || w > 16 {
			t.Fatalf("bits %v: w=%d m=%d: tags wider than the tag-offset table, or no nibble to compare", bits, w, m)
		}
		shapes[[2]uint{w, m}] = true
	}
	// Every combination the table must serve, chosen by a budget or not.
	for w := uint(idxMinSlot); w <= 16; w++ {
		for m := uint(idxTag); m <= 9 && w-m >= idxMinDepth; m++ {
			shapes[[2]uint{w, m}] = true
		}
	}
	for shape := range shapes {
		w, m := shape[0], shape[1]
		x := newIndexSeeded(1, 10, uint32(w*31+m))
		x.w, x.m, x.d = w, m, w-m
		for _, n := range sizes {
			s := &idxSegment{n: n}
			for tag := uint32(0); tag < 1<<m; tag++ {
				h, _ := keyhash.Reduce(x.altHash[tag], n)
				for _, i := range []uint32{0, 1, n / 2, n - 2, n - 1, h, (h + 1) % n, (h + n - 1) % n} {
					j := x.alt(s, i, tag)
					if j >= n || x.alt(s, j, tag) != i {
						t.Fatalf("w=%d m=%d n=%d tag %d: alt(%d) = %d, back %d", w, m, n, tag, i, j, x.alt(s, j, tag))
					}
				}
			}
			// The tag a stored entry gives the search, and a probe's.
			for _, v := range []uint32{1, 1<<w - 1, 1 << (w - 1)} {
				if tag := v >> (w - m); tag >= 1<<m || x.alt(s, 0, tag) >= n {
					t.Fatalf("w=%d m=%d n=%d: entry %#x gives tag %d", w, m, n, v, tag)
				}
			}
			for _, hv := range []uint64{0, 1, 1<<64 - 1, 1 << 63, 0xffff_ffff, 0xffff_ffff_0000_0000} {
				p := x.probeOf(hv)
				if i := s.primary(p.hi); i >= n || p.tag >= 1<<m || x.alt(s, i, p.tag) >= n {
					t.Fatalf("w=%d m=%d n=%d: hash %#x: primary %d, tag %d", w, m, n, hv, i, p.tag)
				}
			}
		}
	}
	for _, n := range sizes {
		s := &memSegment{n: n}
		for fp := uint32(1); fp <= memFPMask; fp++ {
			h, _ := keyhash.Reduce(keyhash.FingerprintHash(fp), n)
			for _, i := range []uint32{0, n - 1, h, (h + 1) % n, (h + n - 1) % n} {
				if j := s.alt(i, fp); j >= n || s.alt(j, fp) != i {
					t.Fatalf("MemFilter n=%d fp %d: alt(%d) = %d, back %d", n, fp, i, j, s.alt(j, fp))
				}
			}
		}
		if i := s.primary(1<<32 - 1); i >= n {
			t.Fatalf("MemFilter n=%d: primary %d", n, i)
		}
	}
}

// TestMemFilterHeldMemoryCounted: a MemFilter keeps the memory Stats
// reports (its buckets and stash), give or take its headers, after Adds
// that relocated and grew it.
func TestMemFilterHeldMemoryCounted(t *testing.T) {
	for _, n := range []int{1000, 20_000} {
		const filters = 40
		hashes := randomHashSets(filters, n, 7)
		fs := make([]*MemFilter, filters)
		held := heldPer(filters, func() {
			for i := range fs {
				fs[i] = NewMemFilter(n / 3) // grows twice or so
				for _, h := range hashes[i] {
					fs[i].addHash(h)
				}
			}
		})
		var counted int
		for _, f := range fs {
			counted += f.Stats().Bytes
			if f.Stats().Segments < 2 {
				t.Fatalf("%d keys: the filter did not grow: not exercised", n)
			}
		}
		perFilter := float64(counted) / filters
		t.Logf("%d keys: %.0f bytes held per filter, Stats counts %.0f", n, held, perFilter)
		if held > perFilter*1.15+1024 {
			t.Errorf("%d keys: each filter holds %.0f bytes, Stats counts %.0f", n, held, perFilter)
		}
		runtime.KeepAlive(fs)
		runtime.KeepAlive(hashes)
	}
}

// randomHashSets returns sets of n random key hashes.
func randomHashSets(sets, n int, seed uint64) [][]uint64 {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	out := make([][]uint64, sets)
	for i := range out {
		out[i] = make([]uint64, n)
		for j := range out[i] {
			out[i][j] = rng.Uint64()
		}
	}
	return out
}

// heldPer is the heap that build leaves allocated, per each of its
// objects, after two collections (pooled memory outlives one). The caller
// keeps the objects reachable until it has counted them.
func heldPer(objects int, build func()) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	build()
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(objects)
}
