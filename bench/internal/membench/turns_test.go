package membench

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestRunOnceSameRowsWhateverTheTurn checks that rotating which filter
// runs first keeps every row in its place, so Run's medians compare each
// row with itself across repetitions.
func TestRunOnceSameRowsWhateverTheTurn(t *testing.T) {
	keys := testkeys.Random(2000, 16, 3)
	var first []Result
	for r := range len(implNames) {
		res, err := runOnce(keys, 2000, r)
		if err != nil {
			t.Fatal(err)
		}
		if r == 0 {
			first = res
			if len(res) == 0 || res[0].Impl != implNames[0] {
				t.Fatalf("round 0 starts with %+v", res)
			}
			continue
		}
		if len(res) != len(first) {
			t.Fatalf("round %d: %d rows, round 0 %d", r, len(res), len(first))
		}
		for i := range res {
			if res[i].Impl != first[i].Impl || res[i].Workload != first[i].Workload || res[i].Goroutines != first[i].Goroutines {
				t.Errorf("round %d row %d is %s/%s/%d, round 0's %s/%s/%d", r, i,
					res[i].Impl, res[i].Workload, res[i].Goroutines, first[i].Impl, first[i].Workload, first[i].Goroutines)
			}
		}
	}
}
