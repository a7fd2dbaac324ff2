package linev4

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
)

// TestSavedSystemsMatchPlainSolves builds the same keys with lines solved
// again from their saved systems and solved from scratch every time: the
// blocks, statistics and outcome must be the same, on shapes whose lines
// are full (many keys given up and contradicted, and keys returned to
// their primary lines), on columns of few rows, where equations
// contradict each other in most lines and systems are rank-deficient,
// and on keys drawn from small pools, whose repeats give equal equations.
func TestSavedSystemsMatchPlainSolves(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 29))
	var fast, plain Encoder
	plain.plain = true
	resolved := 0
	for it := range 1500 {
		s := Shape{R: 1 + rng.Uint32N(MaxColumns), M: 1 + rng.Uint32N(64)}
		if rng.IntN(3) == 0 {
			s.U = rng.Uint32N(256)
		}
		if !s.Valid() {
			continue
		}
		k := 1 + rng.Uint32N(s.M)
		if rng.IntN(2) == 0 {
			k = Capacity(s)
		}
		lines := 1 + rng.Uint32N(60)
		n := rng.IntN(int(lines*k)*11/10 + 2)
		pool := n + 1
		if rng.IntN(4) == 0 {
			pool = 1 + rng.IntN(n+1)
		}
		hashes := make([]uint64, n)
		for i := range hashes {
			hashes[i] = uint64(rng.IntN(pool))*0x9e3779b97f4a7c15 + uint64(it)
		}
		seed, seeded := rng.Uint32(), rng.IntN(2) == 0
		p := Plan{Shape: s, Lines: lines, K: k}
		fast.Start()
		plain.Start()
		a, sa, oka := fast.Encode(nil, [][]uint64{hashes}, n, 0, seed, seeded, p, lines)
		b, sb, okb := plain.Encode(nil, [][]uint64{hashes}, n, 0, seed, seeded, p, lines)
		if oka != okb || sa != sb || !bytes.Equal(a, b) || fast.Repeats() != plain.Repeats() {
			t.Fatalf("shape %+v, capacity %d, %d lines, %d keys: saved systems give %v %+v, plain solves %v %+v", s, k, lines, n, oka, sa, okb, sb)
		}
		if oka && sa.Overflowed > 0 {
			resolved++
		}
	}
	if resolved < 100 {
		t.Fatalf("only %d builds solved lines again", resolved)
	}
}

// TestSavedSystemsMatchPlainAtBudgets compares them on planned filters
// of thousands of keys at fuse's budgets, where most lines are solved
// again, and looks every key up.
func TestSavedSystemsMatchPlainAtBudgets(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 37))
	var fast, plain Encoder
	plain.plain = true
	for _, bpk := range []float64{4.5, 6, 9.5, 11.87, 14.25, 19} {
		n := 5000 + rng.IntN(5000)
		hashes := make([]uint64, n)
		for i := range hashes {
			hashes[i] = rng.Uint64()
		}
		p, _ := PlanFor(&frame.Sizing{BitsPerKey: bpk, Densest: true}, n)
		a, sa, oka := fast.Encode(nil, [][]uint64{hashes}, n, 1, 7, false, p, p.Lines)
		b, sb, okb := plain.Encode(nil, [][]uint64{hashes}, n, 1, 7, false, p, p.Lines)
		if oka != okb || sa != sb || !bytes.Equal(a, b) {
			t.Fatalf("%v bits/key, plan %+v: saved systems give %v %+v, plain solves %v %+v", bpk, p, oka, sa, okb, sb)
		}
		for _, h := range hashes {
			if maybe, _ := Lookup(a, h, 1); oka && !maybe {
				t.Fatalf("%v bits/key: hash %#x lost", bpk, h)
			}
		}
	}
}
