package dynamic

import (
	"math/rand/v2"
	"runtime"
	"testing"
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
		rng := rand.New(rand.NewPCG(6, uint64(n)))
		keys := make([][]uint64, indexes)
		for i := range keys {
			keys[i] = make([]uint64, n)
			for j := range keys[i] {
				keys[i][j] = rng.Uint64()
			}
		}
		xs := make([]*Index, indexes)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&before)
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
		// Twice: pooled memory outlives one collection.
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&after)
		held := float64(after.HeapAlloc-before.HeapAlloc) / indexes
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
