package dynamic

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestIndexReplaceVersionsAcrossGrowthNoPass: a small merge whose keys have
// versions on both sides of a growth (a flush just before the index grew,
// one or two after) must clear its inputs' entries itself, by the keys'
// hashes, and leave none for the removal's pass over the segments: that
// pass costs the whole of a large older segment, the index's size rather
// than the merge's, which a compaction in place is meant not to pay.
// Lookups of every key are checked while the Replace runs, and after.
func TestIndexReplaceVersionsAcrossGrowthNoPass(t *testing.T) {
	for _, bits := range []float64{8, 10, 12, 14, 16, 17} {
		for seed := uint32(1); seed <= 3; seed++ {
			for _, three := range []bool{false, true} {
				t.Run(fmt.Sprintf("bits=%v/seed=%d/three=%v", bits, seed, three), func(t *testing.T) {
					testVersionsAcrossGrowthNoPass(t, bits, seed, three)
				})
			}
		}
	}
}

func testVersionsAcrossGrowthNoPass(t *testing.T, bits float64, seed uint32, three bool) {
	const big, hot = 20_000, 300
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(bits)))
	gen := func(n int) []uint64 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = rng.Uint64()
		}
		return out
	}
	x := newIndexSeeded(big+hot, bits, seed)
	tables := map[uint64][]uint64{1: gen(big)}
	hotKeys := gen(hot)
	tables[2] = hotKeys
	next := uint64(3)
	grow := func() {
		newest := (*x.segs.Load())[len(*x.segs.Load())-1]
		for n := len(*x.segs.Load()); len(*x.segs.Load()) == n; next++ {
			tables[next] = gen(int(newest.n) / 2)
			if err := x.AddTable(next, tables[next]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, id := range []uint64{1, 2} {
		if err := x.AddTable(id, tables[id]); err != nil {
			t.Fatal(err)
		}
	}
	if len(*x.segs.Load()) != 1 {
		t.Fatal("the index grew before the first flush of the hot keys: not exercised")
	}
	grow()
	const second, third, m = 1 << 40, 1<<40 + 1, 1<<40 + 2
	inputs := []uint64{2, second}
	tables[second] = hotKeys
	if err := x.AddTable(second, hotKeys); err != nil {
		t.Fatal(err)
	}
	if three {
		grow()
		tables[third] = hotKeys[:hot/2]
		if err := x.AddTable(third, tables[third]); err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, third)
	}
	segs := *x.segs.Load()
	if s0 := segs[0]; s0.byTable[x.byID[2]] == 0 || int(s0.n) < 8*hot {
		t.Fatal("the first flush of the hot keys is not in a large first segment: not exercised")
	}
	slots := make([]int, len(inputs))
	for i, id := range inputs {
		slots[i] = x.byID[id]
	}
	var buf []uint64
	check := func(when string, during bool) {
		t.Helper()
		for id, hs := range tables {
			if id == 2 || id >= second {
				continue
			}
			for _, h := range hs {
				if buf = x.LookupHash(h, buf[:0]); !holds(buf, id) {
					t.Fatalf("%s: key %#x of table %d names %v", when, h, id, buf)
				}
			}
		}
		for _, h := range hotKeys {
			buf = x.LookupHash(h, buf[:0])
			ok := holds(buf, m) || during && (holds(buf, 2) || holds(buf, second))
			if !ok {
				t.Fatalf("%s: hot key %#x names %v", when, h, buf)
			}
		}
	}
	steps, cleared := 0, false
	idxTestHookRecoded = func() {
		if steps++; steps%29 == 0 {
			check("during the Replace", true)
		}
	}
	idxTestHookCleared = func() {
		cleared = true
		check("once the inputs' entries are cleared", true)
		for k, s := range *x.segs.Load() {
			for _, it := range slots {
				if it < len(s.byTable) && s.byTable[it] > 0 {
					t.Errorf("segment %d of %d (%d buckets) still holds %d entries of input slot %d: the removal must pass over it", k, len(*x.segs.Load()), s.n, s.byTable[it], it)
				}
			}
		}
	}
	defer func() { idxTestHookRecoded, idxTestHookCleared = nil, nil }()
	if err := x.Replace(inputs, m, hotKeys, nil); err != nil {
		t.Fatal(err)
	}
	idxTestHookRecoded, idxTestHookCleared = nil, nil
	if !cleared || steps < hot {
		t.Fatalf("cleared hook %v, %d keys recoded: not exercised", cleared, steps)
	}
	for _, id := range inputs {
		delete(tables, id)
	}
	check("after the Replace", false)
	for _, h := range hotKeys {
		n := 0
		for _, id := range x.LookupHash(h, nil) {
			if id == 2 || id == second || id == third {
				t.Fatalf("hot key %#x names removed table %d", h, id)
			}
			if id == m {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("hot key %#x names the merge %d times", h, n)
		}
	}
	checkCanonical(t, x)
}
