package codec

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestV3RunRelievedBySecondary: a run longer than linev3.MaxRun is judged
// on a line as finally written, after keys from other lines came to it
// and evicted some of its own, not on its primary keys alone. Line 0
// (under the fixed line hash) is filled to its capacity with primary
// keys, MaxRun+1 of them on its highest quotient: a run no lookup could
// measure. With nothing else sent to line 0 the pinned seed must fail
// and a reseed hold every key. With one key from a full line 1 whose
// secondary line is line 0 (on another quotient), that key evicts the
// run's last key, which leaves for its own secondary line, the run
// shrinks to MaxRun, and the pinned seed must hold every key. Every
// variant runs in the default and densest layouts; no key may be lost.
func TestV3RunRelievedBySecondary(t *testing.T) {
	for _, densest := range []bool{false, true} {
		for _, relieved := range []bool{false, true} {
			testV3RunRelieved(t, densest, relieved)
		}
	}
}

func testV3RunRelieved(t *testing.T, densest, relieved bool) {
	const seed, total = 9191, 5000
	r := rand.New(rand.NewPCG(41, 42))
	o := Options{BitsPerKey: 8, Seed: seed, Version: 3, Densest: densest}
	p := v3PlanFor(t, o, total)
	k, top := int(p.Shape.K), uint64(p.Shape.Q-1)
	name := fmt.Sprintf("densest %v, relieved %v, plan %+v", densest, relieved, p)
	if k <= linev3.MaxRun || p.Lines < 4 {
		t.Fatalf("%s: want a plan of several lines holding more than %d keys each", name, linev3.MaxRun)
	}
	inLine := func(line uint64, want func(prim, sec v3Spot) bool) func(h uint64) bool {
		return func(h uint64) bool {
			prim, sec := v3Where(h, seed, p, false)
			return prim.line == line && want(prim, sec)
		}
	}
	outside := func(sec v3Spot) bool { return sec.line > 1 }
	// Line 0: MaxRun+1 keys on the top quotient, the rest of its
	// capacity below it; their secondary lines are elsewhere.
	gen := inFixedLines(r, p.Lines, 2)
	run := craftV3(t, linev3.MaxRun+1, gen, inLine(0, func(prim, sec v3Spot) bool { return prim.q == top && outside(sec) }))
	low := craftV3(t, k-len(run), gen, inLine(0, func(prim, sec v3Spot) bool { return prim.q < top && outside(sec) }))
	all := append(append([]uint64{}, run...), low...)
	if relieved {
		// Line 1: full to capacity below the top quotient, and one key
		// on it whose secondary line is line 0, off the run's quotient.
		all = append(all, craftV3(t, k, gen, inLine(1, func(prim, sec v3Spot) bool { return prim.q < top && outside(sec) }))...)
		all = append(all, craftV3(t, 1, gen, inLine(1, func(prim, sec v3Spot) bool { return prim.q == top && sec.line == 0 && sec.q != top }))...)
	}
	for _, h := range hashesOf(testkeys.Random(4*total, 16, 43)) {
		if prim, sec := v3Where(h, seed, p, false); prim.line > 1 && outside(sec) && len(all) < total {
			all = append(all, h)
		}
	}
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	block, st := buildHashes(o, all)
	mustHoldHashesV3(t, name, block, all, HashKey64)
	checkV3Bounded(t, name, block, st, p)
	if st.Fallback || st.Keys != len(all) {
		t.Errorf("%s: fallback %v, %d keys stored of %d", name, st.Fallback, st.Keys, len(all))
	}
	if relieved && st.Reseeds != 0 {
		t.Errorf("%s: the line's run was cut to %d by an eviction, yet the pinned seed failed (%d reseeds)", name, linev3.MaxRun, st.Reseeds)
	}
	if !relieved && st.Reseeds == 0 {
		t.Errorf("%s: a line holding a run of %d keys was written under the pinned seed", name, linev3.MaxRun+1)
	}
	if !relieved {
		return
	}
	// The line as written: the run cut to MaxRun, every key found by
	// FORMAT.md's reader.
	spec := newSpecV3(t, block)
	if runs, ok := spec.runs(0); !ok || runs[top] != linev3.MaxRun {
		t.Errorf("%s: line 0 holds runs %v, want %d keys on its top quotient", name, runs, linev3.MaxRun)
	}
	for _, h := range all {
		if !spec.contains(h) {
			t.Fatalf("%s: FORMAT.md's reader misses %#x", name, h)
		}
	}
}
