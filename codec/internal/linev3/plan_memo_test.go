package linev3

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
)

// TestRecentPlansMatchSearch: plans remembered for recent budgets are the
// plans a fresh search gives. Budgets of both layouts are asked in turn,
// more of them than the table of recent plans has slots (so that they
// share slots), and each answer must equal the search with nothing
// remembered.
func TestRecentPlansMatchSearch(t *testing.T) {
	forget := func() {
		for l := range LargeLast {
			LargeLast[l].Store(nil)
			for i := range recentLarge[l] {
				recentLarge[l][i].Store(nil)
			}
		}
	}
	defer forget()
	var budgets []float64
	for b := 6.0; len(budgets) < 3*RecentSlots; b += 0.37 {
		budgets = append(budgets, b)
	}
	fresh := map[frame.Sizing]Plan{}
	for _, b := range budgets {
		for _, densest := range []bool{false, true} {
			o := frame.Sizing{BitsPerKey: b, Densest: densest}
			forget()
			fresh[o] = PlanFor(&o, 100_000)
		}
	}
	forget()
	for round := range 3 {
		for i := range budgets {
			b := budgets[(i*7+round)%len(budgets)]
			for _, densest := range []bool{round%2 == 0, round%2 != 0} {
				o := frame.Sizing{BitsPerKey: b, Densest: densest}
				if got := PlanFor(&o, 100_000); got != fresh[o] {
					t.Fatalf("round %d, %+v: remembered plan %+v, searched %+v", round, o, got, fresh[o])
				}
			}
		}
	}
}

// TestPlanForAnyFingerprintWidth: PlanFor ends with a usable plan for any
// forced width, those outside a shape's 1..16 bits included (codec's
// builder clamps them first; this holds the planner without it), on tiny
// and large key counts and with a budget, a target rate or neither.
func TestPlanForAnyFingerprintWidth(t *testing.T) {
	for _, fp := range []int{-1 << 40, -17, -1, 1, 5, 16, 17, 31, 40, 1 << 20} {
		for _, n := range []int{0, 1, 7, 300, 100_000} {
			for _, o := range []frame.Sizing{
				{FingerprintBits: fp},
				{FingerprintBits: fp, BitsPerKey: 0.5},
				{FingerprintBits: fp, BitsPerKey: 12},
				{FingerprintBits: fp, FalsePositiveRate: 1e-9},
				{FingerprintBits: fp, FalsePositiveRate: 0.3, Densest: true},
			} {
				p := PlanFor(&o, n)
				s := p.Shape
				if p.Lines < 1 || s.Q < 1 || s.K < 1 || s.R < 1 || s.R > 16 || s.Q+s.K > HeaderMax {
					t.Fatalf("%+v, %d keys: plan %+v", o, n, p)
				}
				if want := uint32(min(max(fp, 1), 16)); fp > 0 && s.R != want {
					t.Fatalf("%+v, %d keys: remainders of %d bits, want %d", o, n, s.R, want)
				}
				if uint64(p.Lines)*uint64(s.K) < uint64(n) {
					t.Fatalf("%+v, %d keys: %d lines of %d keys", o, n, p.Lines, s.K)
				}
			}
		}
	}
}
