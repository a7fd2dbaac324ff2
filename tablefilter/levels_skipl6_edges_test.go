package tablefilter

import "testing"

// TestLevelBudgetsSkipL6AtWideAverages pins what LevelBudgets' doc says
// of SkipL6 1: the levels above L6 stop at 32 bits per key while the
// average is under 32, and from 32 on every level but L6 takes the
// average rounded down to a half bit, the uniform allocation, with L6
// still NoFilter.
func TestLevelBudgetsSkipL6AtWideAverages(t *testing.T) {
	shape := ModelLevelShape(levelsTestOptions())
	shape.SkipL6 = 1
	for _, c := range []struct{ avg, upper float64 }{{10, 32}, {31.9, 32}, {32, 32}, {40.3, 40}, {64, 64}} {
		for version, b := range map[int][NumLevels]float64{3: LevelBudgets(shape, c.avg), 4: LevelBudgetsV4(shape, c.avg)} {
			for l, x := range b {
				want := c.upper
				if l == NumLevels-1 {
					want = NoFilter
				}
				if x != want {
					t.Errorf("avg %v, version %d: L%d gets %v, want %v (budgets %v)", c.avg, version, l, x, want, b)
				}
			}
		}
	}
}
