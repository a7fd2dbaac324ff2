package tablefilter

import (
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// v4Cost is modelCost under format version 4's planned rate.
func v4Cost(s LevelShape, b [NumLevels]float64) float64 {
	var c float64
	for l, k := range s.Keys {
		if k > 0 {
			c += max(1, s.L0Runs*float64(1-min(l, 1))) * pebblecore.ModelVersionFPR(b[l], codec.NewestVersion)
		}
	}
	return c
}

// TestLevelBudgetsV4: version 4's fit returns budgets of the grid that
// every setter registers, spends the average given, and costs no more
// tables read in vain under version 4's rate than a uniform allocation or
// version 3's fit at the same average (up to the search's rounding of
// each level's spend); SetLevelBudgetsV4 writes version 4
// at exactly those budgets and registers every writer's name of every
// budget either fit can return, so a store moved between the setters keeps
// every table's filter.
func TestLevelBudgetsV4(t *testing.T) {
	race.SkipLong(t) // searches and registrations, one goroutine
	var names []string
	for _, b := range pebblecore.RegisteredBudgets() {
		names = append(names, NewPolicy(b).Name(), NewV4Policy(b).Name(), NewDensestPolicy(b).Name())
	}
	for shapeName, s := range testShapes() {
		for _, avg := range []float64{4, 5, 8, 9.5, 12, 40} {
			b := LevelBudgetsV4(s, avg)
			var uniform [NumLevels]float64
			for l := range uniform {
				uniform[l] = pebblecore.BudgetFloor(avg)
			}
			if got := weightedAvg(s, b); got > avg+1e-9 || got < min(avg, MaxBitsPerKey)-pebblecore.BudgetStep {
				t.Errorf("%s avg %v: spends %.4f bits/key: %v", shapeName, avg, got, b)
			}
			if c, u, v3 := v4Cost(s, b), v4Cost(s, uniform), v4Cost(s, LevelBudgets(s, avg)); c > u*(1+1e-9) || c > v3*(1+1e-3) {
				t.Errorf("%s avg %v: v4 cost %.3g, uniform %.3g, v3's budgets %.3g: %v", shapeName, avg, c, u, v3, b)
			}
			o := &pebble.Options{}
			SetLevelBudgetsV4(o, b)
			for l, x := range b {
				p, ok := o.Levels[l].FilterPolicy.(Policy)
				if !ok || p.Version() != codec.NewestVersion || p.BitsPerKey() != x || o.Filters[p.Name()] == nil {
					t.Fatalf("%s avg %v: L%d has %v for budget %v", shapeName, avg, l, o.Levels[l].FilterPolicy, x)
				}
			}
			for _, n := range names {
				if o.Filters[n] == nil {
					t.Fatalf("%s avg %v: %s not registered", shapeName, avg, n)
				}
			}
		}
	}
}

// TestLevelBudgetsV4SpendWhatTheyPromise: version 4's budgets, built into
// real blocks on Pebble's default shape, spend at most the average asked,
// down to the grid's smallest budget.
func TestLevelBudgetsV4SpendWhatTheyPromise(t *testing.T) {
	race.SkipLong(t) // builds blocks, one goroutine
	keys := testkeys.Random(50_000, 16, 92)
	spent := map[float64]float64{}
	shape := ModelLevelShape(&pebble.Options{})
	for _, avg := range []float64{4.5, 5, 6, 8, 10} {
		b := LevelBudgetsV4(shape, avg)
		var sum, tot float64
		for l, k := range shape.Keys {
			if _, ok := spent[b[l]]; !ok {
				spent[b[l]] = float64(8*len(pebbleBuild(NewV4Policy(b[l]), keys))) / float64(len(keys))
			}
			sum += k * spent[b[l]]
			tot += k
		}
		if got := sum / tot; got > avg*1.005 || math.IsNaN(got) {
			t.Errorf("avg %v: budgets %v spend %.3f bits/key", avg, b, got)
		}
	}
}

// TestSetLevelBudgetsV4InvalidWritesNothing: an invalid budget panics
// before the options change.
func TestSetLevelBudgetsV4InvalidWritesNothing(t *testing.T) {
	o := &pebble.Options{}
	b := LevelBudgetsV4(ModelLevelShape(o), 10)
	b[6] = MinBitsPerKey / 2
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
		if o.Filters != nil || o.Levels[0].FilterPolicy != nil {
			t.Errorf("options written: %v", o.Filters)
		}
	}()
	SetLevelBudgetsV4(o, b)
}
