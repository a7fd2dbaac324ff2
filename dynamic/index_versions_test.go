package dynamic

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestIndexReplaceVersionsAcrossGrowthNoPass: a small merge whose keys have
// versions on both sides of a growth (a flush just before the index grew,
// one or two after) must clear its inputs' entries itself, by the keys'
// hashes, and leave none for the removal's pass over the segments: that
// pass costs the whole of a large older segment, the index's size rather
// than the merge's, which a compaction in place is meant not to pay.
// Lookups of every key are checked while the Replace runs, and after.
func TestIndexReplaceVersionsAcrossGrowthNoPass(t *testing.T) {
	race.SkipLong(t)
	// One budget per slot width class: 8 (10-bit slots), 12, 14 (the
	// first 6-bit tag) and 16.
	for _, bits := range []float64{8, 12, 14, 16} {
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
	x.hooks.recoded = func() {
		if steps++; steps%29 == 0 {
			check("during the Replace", true)
		}
	}
	x.hooks.cleared = func() {
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
	defer func() { x.hooks.recoded, x.hooks.cleared = nil, nil }()
	if err := x.Replace(inputs, m, hotKeys, nil); err != nil {
		t.Fatal(err)
	}
	x.hooks.recoded, x.hooks.cleared = nil, nil
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

// TestIndexReplaceStashedKeyAlsoDropped: a caller that lists a key both in
// merged's keys and among the dropped ones (a bug of the store's, say) must
// not lose it: a key whose input entry was only in the stash keeps its
// stash entry, now naming the merge, however dropped lists it.
func TestIndexReplaceStashedKeyAlsoDropped(t *testing.T) {
	for bits := 8; bits <= 17; bits += 3 {
		x := newIndexSeeded(1000, float64(bits), uint32(bits)+50)
		h := uint64(0x0fed_cba9_8765_4321) + uint64(bits)
		for id := uint64(1); id <= 2*idxSlots+3; id++ {
			if err := x.AddTable(id, []uint64{h}); err != nil {
				t.Fatal(err)
			}
		}
		book := x.book.Load()
		if len(book.stash) == 0 {
			t.Fatalf("bits %d: no version stashed: not exercised", bits)
		}
		in := book.tables[book.stash[0].table].id
		other := hashesOf([][]byte{[]byte("other key")})
		if err := x.Replace([]uint64{in}, 100, append(other, h), []uint64{h}); err != nil {
			t.Fatal(err)
		}
		if got := x.LookupHash(h, nil); !holds(got, 100) {
			t.Fatalf("bits %d: the merge of stashed table %d names the key in %v", bits, in, got)
		}
		checkCanonical(t, x)
	}
}

// TestIndexReplaceVersionsInOlderSegments: Replace stops searching a key's
// segments (newest first) at the first that holds its merged entry or an
// input entry of it, so the key's other versions, in older segments, are
// left to the inputs' removal. Here every key of K has a version in table
// 1, whose entries fill the first segment, and one in table 3, added after
// the index grew, and sometimes a third, in table 5, after a second
// growth. Merging 1, 3 and 5 must leave each key of K named by the merged
// table alone, with exactly one entry, while every key of the other tables
// keeps its own; at every step of the Replace each key of K must be named
// by a table holding it; and no entry of an input may stay behind.
func TestIndexReplaceVersionsInOlderSegments(t *testing.T) {
	for _, bits := range []float64{10, 12, 14, 16} {
		for seed := uint32(1); seed <= 4; seed++ {
			testReplaceVersionsInOlderSegments(t, bits, seed)
		}
	}
}

func testReplaceVersionsInOlderSegments(t *testing.T, bits float64, seed uint32) {
	const n = 400
	x := newIndexSeeded(n, bits, seed)
	keys := hashesOf(testkeys.Random(n, 16, uint64(seed)))
	fresh := hashesOf(testkeys.Random(3*n, 16, uint64(seed)+100))
	third := keys[:n/2]
	steps := []struct {
		id     uint64
		hashes []uint64
	}{
		{1, keys},           // fills the first segment
		{2, fresh[:n]},      // grows the index
		{3, keys},           // versions, mostly in the second segment
		{4, fresh[n : 3*n]}, // grows it again
		{5, third},          // versions in the third segment
	}
	for _, s := range steps {
		if err := x.AddTable(s.id, s.hashes); err != nil {
			t.Fatal(err)
		}
	}
	segs := *x.segs.Load()
	if len(segs) < 3 {
		t.Fatalf("bits %v seed %d: %d segments, want 3 or more: not exercised", bits, seed, len(segs))
	}
	t1, t3 := x.byID[1], x.byID[3]
	if segs[0].byTable[t1] == 0 || len(segs[1].byTable) <= t3 || segs[1].byTable[t3] == 0 {
		t.Fatalf("bits %v seed %d: table 1 not in the first segment or table 3 not in the second: not exercised", bits, seed)
	}
	check := func(when string, inputsLive bool) {
		for i, h := range keys {
			got := x.LookupHash(h, nil)
			ok := holds(got, 6)
			if inputsLive {
				ok = ok || holds(got, 1) || holds(got, 3)
			}
			if !ok {
				t.Fatalf("bits %v seed %d %s: key %d named %v", bits, seed, when, i, got)
			}
		}
	}
	steps2 := 0
	x.hooks.recoded = func() {
		if steps2++; steps2%37 == 0 {
			check("during the Replace", true)
		}
	}
	defer func() { x.hooks.recoded = nil }()
	if err := x.Replace([]uint64{1, 3, 5}, 6, keys, nil); err != nil {
		t.Fatal(err)
	}
	x.hooks.recoded = nil
	check("after the Replace", false)
	for i, h := range keys {
		got := x.LookupHash(h, nil)
		n6 := 0
		for _, id := range got {
			if id == 1 || id == 3 || id == 5 {
				t.Fatalf("bits %v seed %d: key %d names removed table %d: %v", bits, seed, i, id, got)
			}
			if id == 6 {
				n6++
			}
		}
		if n6 != 1 {
			t.Fatalf("bits %v seed %d: key %d names the merge %d times: %v", bits, seed, i, n6, got)
		}
	}
	for _, s := range []struct {
		id     uint64
		hashes []uint64
	}{{2, fresh[:n]}, {4, fresh[n : 3*n]}} {
		for i, h := range s.hashes {
			if !holds(x.LookupHash(h, nil), s.id) {
				t.Fatalf("bits %v seed %d: key %d of table %d lost", bits, seed, i, s.id)
			}
		}
	}
	checkCanonical(t, x)
	t6 := x.byID[6]
	if c := x.count[t6]; c > int64(len(keys)) {
		t.Fatalf("bits %v seed %d: the merge holds %d entries for %d keys: versions left behind", bits, seed, c, len(keys))
	}
	for _, t0 := range []int{t1, t3} {
		if x.book.Load().tables[t0].live && x.book.Load().tables[t0].id != 6 {
			t.Fatalf("bits %v seed %d: input slot %d still live", bits, seed, t0)
		}
	}
}
