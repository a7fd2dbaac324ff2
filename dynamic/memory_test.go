package dynamic

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
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
	race.SkipLong(t)
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

// TestIndexHintCapped: a capacity hint past MaxCapacityHint sizes the
// index, and IndexBytes its memory, as MaxCapacityHint does, at once
// instead of allocating gigabytes; the index still takes and names keys.
func TestIndexHintCapped(t *testing.T) {
	for _, bits := range []float64{10, 16} {
		want := IndexBytes(MaxCapacityHint, bits)
		if per := float64(want*8) / MaxCapacityHint; per > 2*bits {
			t.Fatalf("bits %v: an index for MaxCapacityHint entries takes %.1f bits per entry", bits, per)
		}
		for _, hint := range []int{MaxCapacityHint + 1, 1 << 40, math.MaxInt} {
			if got := IndexBytes(hint, bits); got != want {
				t.Fatalf("bits %v: IndexBytes(%d) = %d, want %d", bits, hint, got, want)
			}
			x := NewIndex(hint, bits)
			if got := x.Stats().Bytes; got != want {
				t.Fatalf("bits %v: NewIndex(%d) holds %d bytes, want %d", bits, hint, got, want)
			}
			hs := hashesOf(testkeys.Random(1000, 16, uint64(bits)))
			if err := x.AddTable(1, hs); err != nil {
				t.Fatal(err)
			}
			for _, h := range hs {
				if !holds(x.LookupHash(h, nil), 1) {
					t.Fatalf("bits %v, hint %d: a key of the table is not named", bits, hint)
				}
			}
		}
	}
}
