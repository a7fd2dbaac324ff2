package linev4

import (
	"math"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
)

// fewestLinesOneByOne is fewestLines by trying one line count after
// another: the reference the bisection must agree with.
func fewestLinesOneByOne(n float64, r uint32) Plan {
	if s, _, ok := shapeFor(n, true, r); ok {
		return Plan{s, 1, uint32(n)}
	}
	for lines := uint32(max(2, math.Ceil(n/(0.9*MaxHeight)))); ; lines++ {
		if s, k, ok := shapeFor(n/float64(lines), false, r); ok {
			return Plan{s, lines, k}
		}
	}
}

// TestFewestLinesBisects: the plan of the fewest lines is the one trying
// every line count finds, for every fixed r and sizes from one line to
// thousands of keys.
func TestFewestLinesBisects(t *testing.T) {
	for _, r := range []uint32{0, 5, 8, 12, 16} {
		for n := 1.0; n < 20_000; n = math.Ceil(n*1.3) + 1 {
			if got, want := fewestLines(n, r), fewestLinesOneByOne(n, r); got != want {
				t.Fatalf("n=%v r=%d: %+v, one line count after another gives %+v", n, r, got, want)
			}
		}
	}
}

// TestPlanForHugeBelowBudget plans a billion keys under a budget no line
// holds, with the widest fixed fingerprint: a number of shape searches
// logarithmic in the keys (one per line count, as the planner once
// searched, would not end within the test's timeout).
func TestPlanForHugeBelowBudget(t *testing.T) {
	p, ok := PlanFor(&frame.Sizing{BitsPerKey: 4, FingerprintBits: 16}, 1<<30)
	if ok || p.Shape.R != 16 || !p.Shape.Valid() || float64(p.Lines)*float64(p.K) < 1<<30 {
		t.Fatalf("plan %+v ok %v", p, ok)
	}
}
