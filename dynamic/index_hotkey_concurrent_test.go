package dynamic

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// TestIndexHotKeyConcurrent: one key is in every table (a counter
// overwritten in every flush), so its buckets fill with its versions and
// its tables go to the stash (and, at 10-bit slots, become tables every
// lookup names), while codes are lengthened as tables come and go. Lookups of the keys of 20
// tables added first and never removed (IDs from 2^63) run beside
// AddTable, AddTables, Replace and RemoveTables, in segments capped small
// (many segments, dropped when drained) and not; each lookup must name
// its key's table.
func TestIndexHotKeyConcurrent(t *testing.T) {
	for _, c := range []struct {
		bits       float64
		maxBuckets uint64
	}{{10, 16}, {13, 1 << 31}, {17, 40}} {
		t.Run(fmt.Sprintf("bits=%v/maxBuckets=%d", c.bits, c.maxBuckets), func(t *testing.T) {
			defer func(p, i uint64) { idxPrefetchBytes, idxMaxBuckets = p, i }(idxPrefetchBytes, idxMaxBuckets)
			idxPrefetchBytes, idxMaxBuckets = 0, c.maxBuckets
			testIndexHotKeyConcurrent(t, c.bits)
		})
	}
}

func testIndexHotKeyConcurrent(t *testing.T, bits float64) {
	const hot = 0xfeedface
	x := newIndexSeeded(50, bits, 9)
	rng := rand.New(rand.NewPCG(3, 4))
	var stable []uint64
	keysOf := map[uint64][]uint64{}
	for id := uint64(1 << 63); id < 1<<63+20; id++ {
		ks := []uint64{hot, rng.Uint64(), rng.Uint64()}
		if err := x.AddTable(id, ks); err != nil {
			t.Fatal(err)
		}
		stable, keysOf[id] = append(stable, id), ks
	}
	var stop atomic.Bool
	var lookups atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []uint64
			for i := r; !stop.Load(); i++ {
				id := stable[i%len(stable)]
				k := keysOf[id][i%3]
				if buf = x.LookupHash(k, buf[:0]); !holds(buf, id) {
					errc <- fmt.Errorf("a lookup of key %x named %v, not its table %d", k, buf, id)
					return
				}
				lookups.Add(1)
			}
		}()
	}
	var live []uint64 // not stable, oldest first
	next := uint64(1)
	for range 400 {
		switch op := rng.IntN(4); {
		case op == 0 || len(live) < 3:
			ks := []uint64{hot, hot}
			for range rng.IntN(60) {
				ks = append(ks, rng.Uint64())
			}
			if err := x.AddTable(next, ks); err != nil {
				t.Fatal(err)
			}
			live = append(live, next)
			next++
		case op == 1:
			a := rng.IntN(len(live) - 1)
			merged := []uint64{hot}
			for range rng.IntN(100) {
				merged = append(merged, rng.Uint64())
			}
			if err := x.Replace(slices.Clone(live[a:a+2]), next, merged, nil); err != nil {
				t.Fatal(err)
			}
			live = slices.Insert(slices.Delete(live, a, a+2), a, next)
			next++
		case op == 2:
			k := rng.IntN(len(live))
			if err := x.RemoveTables(live[k]); err != nil {
				t.Fatal(err)
			}
			live = slices.Delete(live, k, k+1)
		default:
			var ids []uint64
			var sets [][]uint64
			for range 1 + rng.IntN(5) {
				ids, sets = append(ids, next), append(sets, []uint64{hot, rng.Uint64()})
				next++
			}
			if err := x.AddTables(ids, sets); err != nil {
				t.Fatal(err)
			}
			live = append(live, ids...)
		}
		if len(live) > 200 {
			if err := x.RemoveTables(live[:100]...); err != nil {
				t.Fatal(err)
			}
			live = slices.Delete(live, 0, 100)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	if lookups.Load() == 0 {
		t.Fatal("no lookup ran beside the writer")
	}
	if st := x.Stats(); st.Stashed+st.Always == 0 {
		t.Fatalf("nothing stashed and no table named by every lookup: the hot key never crowded its buckets (%+v)", st)
	}
	checkCanonical(t, x)
}
