package pebblecore

import (
	"math"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// treeSpend returns the bits per key targets spend over shape, L0 counted
// as targetsFor counts it (half its fullest share l0Full), NoFilter
// levels' keys included at no bits.
func treeSpend(shape LevelShape, targets [NumLevels]float64, l0Full float64) float64 {
	var below, bits float64
	for l := 1; l < NumLevels; l++ {
		below, bits = below+shape.Keys[l], bits+shape.Keys[l]*targets[l]
	}
	share := min(maxL0Share, l0Full/2)
	w0 := below * share / (1 - share)
	return (bits + w0*targets[0]) / (below + w0)
}

// TestTargetsForUnfilteredL6: with L6 at NoFilter, its keys count in the
// average but spend nothing. Where the levels above can spend the
// average's bytes, the targets spend the average exactly over the whole
// tree; where they cannot (a full tree, L6 holding most keys), each
// level's target stops at the grid's top, the tree spends under the
// average, and L6's target stays NoFilter.
func TestTargetsForUnfilteredL6(t *testing.T) {
	for _, tc := range []struct {
		name      string
		shape     LevelShape
		avg       float64
		l0Full    float64
		reachable bool
	}{
		{"full tree", ModelShape(10, 4, 64<<20, 64<<20), 10, 0.02, false},
		{"full tree, no L0", ModelShape(10, 4, 64<<20, 64<<20), 10, 0, false},
		{"half on L6", LevelShape{Keys: [NumLevels]float64{0, 0, 0, 0, 0.2, 0.3, 0.5}, L0Runs: 1}, 6, 0, true},
		{"half on L6, L0 filling", LevelShape{Keys: [NumLevels]float64{0.01, 0, 0, 0, 0.2, 0.3, 0.5}, L0Runs: 2}, 6, 0.04, true},
	} {
		shape := tc.shape
		shape.SkipL6 = 1
		budgets := tunedBudgets("test", shape, tc.avg, 3)
		if budgets[NumLevels-1] != NoFilter {
			t.Fatalf("%s: budgets %v: L6 has a filter", tc.name, budgets)
		}
		targets := targetsFor(shape, budgets, tc.avg, tc.l0Full)
		spend := treeSpend(shape, targets, tc.l0Full)
		t.Logf("%s: budgets %v, targets %.3f, tree spends %.4f of %v", tc.name, budgets, targets, spend, tc.avg)
		if targets[NumLevels-1] != NoFilter {
			t.Errorf("%s: L6's target %v, want NoFilter", tc.name, targets[NumLevels-1])
		}
		for l := range NumLevels - 1 {
			if targets[l] < MinBitsPerKey || targets[l] > topTarget(budgets[l]) {
				t.Errorf("%s: L%d target %v outside [%v, %v]", tc.name, l, targets[l], MinBitsPerKey, topTarget(budgets[l]))
			}
		}
		if tc.reachable {
			if math.Abs(spend-tc.avg) > 1e-9*tc.avg {
				t.Errorf("%s: the tree spends %v, asked %v", tc.name, spend, tc.avg)
			}
		} else {
			if spend >= tc.avg*0.9 {
				t.Errorf("%s: the tree spends %v of %v: the levels above L6 cannot", tc.name, spend, tc.avg)
			}
			for l := range NumLevels - 1 {
				if shape.Keys[l] > 0 && targets[l] != BudgetMax {
					t.Errorf("%s: L%d target %v: out of reach, every level takes the grid's top", tc.name, l, targets[l])
				}
			}
		}
	}
}

// TestTunerSkipL6DebtStaysSmall: a tuner at SkipL6 1 whose upper levels'
// tables spend their targets, over a tree whose unfiltered L6 holds most
// keys, owes no more than its tables' rounding after a refit: it aims at
// what the upper levels can spend, not at an average they cannot reach,
// so its writers ask for about their targets. L6's unfiltered tables
// count in the live average at their point entries; at SkipL6 0 the same
// tables count nowhere, as before SkipL6.
func TestTunerSkipL6DebtStaysSmall(t *testing.T) {
	model := ModelShape(10, 4, 64<<20, 64<<20)
	model.SkipL6 = 1
	a := NewAdaptive("test", 10, model, 3, 4, 64<<20)
	tu := a.Tuner
	if !a.Unfiltered(NumLevels-1) || a.Unfiltered(NumLevels-2) || tu.SkipL6() != 1 {
		t.Fatalf("Unfiltered: L6 %v, L5 %v", a.Unfiltered(NumLevels-1), a.Unfiltered(NumLevels-2))
	}
	keys := testkeys.Random(44000, 16, 9)
	var tables []LiveTable
	for i, l := range []int{4, 5, 5, 5} {
		tables = append(tables, writeTable(tu, l, keys[i*11000:(i+1)*11000], 1))
	}
	l6 := LiveTable{Level: NumLevels - 1, PointKeys: 400_000}
	tables = append(tables, l6, LiveTable{Level: NumLevels - 1, PointKeys: 1000, FilterBytes: 900}) // a foreign filter: not ours, not unfiltered
	live, _ := tu.Refit(LevelShape{}, tables)
	if b := tu.Budgets(); b[NumLevels-1] != NoFilter || tu.Target(NumLevels-1) != NoFilter {
		t.Fatalf("budgets %v, L6 target %v", b, tu.Target(NumLevels-1))
	}
	for _, l := range []int{4, 5} {
		target := tu.Target(l)
		if target > BudgetMax {
			t.Errorf("L%d target %v over the grid's top", l, target)
		}
		if w := tu.writeBudget(l, target); math.Abs(w-target) > 0.05*target {
			t.Errorf("L%d: a writer asks for %v, target %v: the debt chases bytes out of reach", l, w, target)
		}
	}
	bpk, n := tu.LiveAverage(tables)
	if n != 44000+400_000 || bpk != live || bpk > 10 {
		t.Errorf("LiveAverage %v over %d keys (refit measured %v), want L6's point entries counted", bpk, n, live)
	}
	flat := NewTuner("test", 10, tu.Budgets()) // SkipL6 0: L6 has a filter, its unfiltered tables are not counted
	if _, n := flat.LiveAverage([]LiveTable{l6}); n != 0 {
		t.Errorf("SkipL6 0 counts %d keys of tables without a filter", n)
	}
}

// TestTunedBudgetsKeepFilters: between shares 0 and 1 the tuner's fit
// gives every level a filter (a tuned level's policy cannot drop its
// filter while the store runs), even where LevelBudgets would leave L6
// without one; at 0 and 1 it is VersionBudgets' fit.
func TestTunedBudgetsKeepFilters(t *testing.T) {
	model := ModelShape(10, 4, 64<<20, 64<<20)
	dropped := false
	for _, skip := range []float64{0, 0.5, 0.9, 0.97, 0.99, 0.999, 1} {
		shape := model
		shape.SkipL6 = skip
		// A tight average, where the fit finds L6's filter worth less
		// than the bits it would free above at high shares.
		tuned := tunedBudgets("test", shape, 5, 3)
		fitted := VersionBudgets("test", shape, 5, 3)
		switch skip {
		case 0, 1:
			if tuned != fitted {
				t.Errorf("SkipL6 %v: tuned %v, LevelBudgets %v", skip, tuned, fitted)
			}
		default:
			if slices.Contains(tuned[:], NoFilter) {
				t.Errorf("SkipL6 %v: tuned budgets %v leave a level without a filter", skip, tuned)
			}
			dropped = dropped || fitted[NumLevels-1] == NoFilter
		}
	}
	if !dropped {
		t.Error("no share under 1 where LevelBudgets leaves L6 without a filter: the test checks nothing there")
	}
	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewAdaptive with SkipL6 %v did not panic", bad)
				}
			}()
			shape := model
			shape.SkipL6 = bad
			NewAdaptive("test", 10, shape, 3, 4, 64<<20)
		}()
	}
}
