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
