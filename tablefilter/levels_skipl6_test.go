package tablefilter

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// mixedCost is the expected number of tables an absent lookup reads in
// vain that a filter could have skipped, on the rate model, when a share
// skipL6 of lookups never reads L6's filters (a level of budget NoFilter
// is read in full).
func mixedCost(s LevelShape, b [NumLevels]float64, skipL6 float64, version int) float64 {
	var c float64
	for l, k := range s.Keys {
		if k <= 0 {
			continue
		}
		runs := 1.0
		if l == 0 {
			runs = math.Max(s.L0Runs, 1)
		}
		if l == NumLevels-1 {
			runs *= 1 - skipL6
		}
		c += runs * pebblecore.ModelVersionFPR(b[l], version)
	}
	return c
}

// TestLevelBudgetsSkipL6 fits every test shape for lookups that skip L6's
// filters in several shares: the budgets stay on the registered grid or
// NoFilter, the average is never exceeded, at SkipL6 1 L6 gets NoFilter
// and no other level does, and each fit reads no more tables in vain
// under its own share than the fits for the other shares do (up to the
// search's rounding), so SkipL6 0 is the fit for prefix seeks with L6
// filters and the others buy fewer reads per Get.
//
// Averages start at 5: at 4 the fit for SkipL6 0 falls back to the uniform
// budget (rounding makes every grid point past 4.5 look unaffordable),
// which reads more in vain than leaving L6 without a filter.
func TestLevelBudgetsSkipL6(t *testing.T) {
	race.SkipLong(t)
	shares := []float64{0, 0.5, 1}
	shapes := testShapes()
	for _, name := range []string{"default", "4-levels", "bottom-only", "multiplier-4"} {
		s0 := shapes[name]
		for _, avg := range []float64{5, 10} {
			for _, fit := range []struct {
				version int
				budgets func(LevelShape, float64) [NumLevels]float64
			}{{3, LevelBudgets}, {4, LevelBudgetsV4}} {
				var byShare [][NumLevels]float64
				for _, skip := range shares {
					s := s0
					s.SkipL6 = skip
					b := fit.budgets(s, avg)
					byShare = append(byShare, b)
					for l, x := range b {
						if x != NoFilter && (!pebblecore.ValidBitsPerKey(x) || x != pebblecore.BudgetFloor(x)) {
							t.Fatalf("%s avg %v skip %v: L%d budget %v off the registered grid", name, avg, skip, l, x)
						}
						if x == NoFilter && !(skip == 1 && l == NumLevels-1 || skip > 0 && s.Keys[l] > 0) {
							t.Fatalf("%s avg %v skip %v: L%d (keys %v) has no filter: %v", name, avg, skip, l, s.Keys[l], b)
						}
					}
					if skip == 1 && b[NumLevels-1] != NoFilter {
						t.Fatalf("%s avg %v: no lookup reads L6's filters, yet it gets %v", name, avg, b[NumLevels-1])
					}
					if got := weightedAvg(s, b); got > avg*(1+1e-9) {
						t.Errorf("%s avg %v skip %v: spends %v: %v", name, avg, skip, got, b)
					}
				}
				for i, skip := range shares {
					own := mixedCost(s0, byShare[i], skip, fit.version)
					for j, other := range byShare {
						if c := mixedCost(s0, other, skip, fit.version); own > c*1.02+1e-12 {
							t.Errorf("%s v%d avg %v skip %v: fit %v reads %.4g in vain, the fit for skip %v (%v) %.4g",
								name, fit.version, avg, skip, byShare[i], own, shares[j], other, c)
						}
					}
				}
			}
		}
	}
}

// TestLevelBudgetsSkipL6EmptyLevels: a level without keys never takes
// NoFilter from L6 below it (a level that opens later is read by every
// lookup), and a tree whose keys all sit on an L6 no lookup consults
// leaves the levels above at the uniform budget.
func TestLevelBudgetsSkipL6EmptyLevels(t *testing.T) {
	race.SkipLong(t)
	s := LevelShape{Keys: [NumLevels]float64{0: 3, 6: 100}, L0Runs: 3, SkipL6: 1}
	b := LevelBudgets(s, 10)
	for l := range NumLevels - 1 {
		if b[l] != b[0] || b[l] == NoFilter {
			t.Errorf("L%d gets %v; want L0's %v, above an L6 without filter: %v", l, b[l], b[0], b)
		}
	}
	if b[NumLevels-1] != NoFilter || b[0] <= 10 {
		t.Errorf("L0 and L6 with Gets only: %v; want L6 NoFilter and L0 over the average", b)
	}
	b = LevelBudgets(LevelShape{Keys: [NumLevels]float64{6: 1}, SkipL6: 1}, 10)
	want := [NumLevels]float64{10, 10, 10, 10, 10, 10, NoFilter}
	if b != want {
		t.Errorf("keys on an unconsulted L6 only: %v, want %v", b, want)
	}
	r := rand.New(rand.NewPCG(9, 9))
	for i := range 40 {
		var s LevelShape
		for l := range s.Keys {
			if r.IntN(3) > 0 {
				s.Keys[l] = math.Pow(10, 6*r.Float64())
			}
		}
		s.L0Runs, s.SkipL6 = float64(r.IntN(6)), r.Float64()
		if r.IntN(3) == 0 {
			s.SkipL6 = 1
		}
		b := LevelBudgets(s, MinBitsPerKey+20*r.Float64())
		for l := range NumLevels - 1 {
			if b[l] == NoFilter && s.Keys[l] <= 0 {
				t.Fatalf("case %d: empty L%d has no filter: shape %+v, budgets %v", i, l, s, b)
			}
		}
	}
}

// TestLevelBudgetsSkipL6Invalid: a share outside [0, 1] is a
// configuration error.
func TestLevelBudgetsSkipL6Invalid(t *testing.T) {
	for _, skip := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("SkipL6 %v: no panic", skip)
				}
			}()
			LevelBudgets(LevelShape{Keys: [NumLevels]float64{1, 1, 1, 1, 1, 1, 1}, SkipL6: skip}, 10)
		}()
	}
}

// TestSetLevelBudgetsNoFilter: a level of budget NoFilter gets
// pebble.NoFilterPolicy (nil would inherit the level above's), under both
// setters, and registers no name; RegisterPolicies takes NoFilter and
// adds nothing for it, and still panics on another invalid budget.
func TestSetLevelBudgetsNoFilter(t *testing.T) {
	b := [NumLevels]float64{20, 19, 18, 17, 16, 15, NoFilter}
	for _, set := range []struct {
		name string
		set  func(*pebble.Options, [NumLevels]float64)
		new  func(float64) Policy
	}{{"SetLevelBudgets", SetLevelBudgets, NewPolicy}, {"SetLevelBudgetsV4", SetLevelBudgetsV4, NewV4Policy}} {
		o := &pebble.Options{}
		set.set(o, b)
		if o.Levels[NumLevels-1].FilterPolicy != pebble.NoFilterPolicy {
			t.Errorf("%s: L6 policy %v, want NoFilterPolicy", set.name, o.Levels[NumLevels-1].FilterPolicy)
		}
		for l := range NumLevels - 1 {
			if got := o.Levels[l].FilterPolicy; got != set.new(b[l]) {
				t.Errorf("%s: L%d policy %v, want %v", set.name, l, got, set.new(b[l]))
			}
		}
		if _, ok := o.Filters[pebble.NoFilterPolicy.Name()]; ok {
			t.Errorf("%s registered %q", set.name, pebble.NoFilterPolicy.Name())
		}
		if _, ok := o.Filters[NewPolicy(20).Name()]; !ok {
			t.Errorf("%s did not register the budgets", set.name)
		}
	}
	o := &pebble.Options{}
	RegisterPolicies(o, NoFilter)
	if len(o.Filters) != 0 {
		t.Errorf("RegisterPolicies(NoFilter) registered %d names", len(o.Filters))
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("RegisterPolicies(NoFilter, 2): no panic")
			}
		}()
		RegisterPolicies(o, NoFilter, 2)
	}()
	if len(o.Filters) != 0 {
		t.Errorf("a panicking RegisterPolicies wrote %d names", len(o.Filters))
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("NewPolicy(NoFilter): no panic")
			}
		}()
		NewPolicy(NoFilter)
	}()
}

// TestStoreWithoutL6Filters runs a real store under budgets fitted for
// absent Gets (SkipL6 1): tables compacted into L6 carry no filter, L0's
// carry L0's policy, every present key is found by Get and by SeekPrefixGE
// with L6 filters (which reads the unfiltered L6 tables), absent Gets are
// answered by the upper levels' filters, and the store reopens and reads
// the same under the same setter and under SetLevelPolicies, whose L6
// has a filter.
func TestStoreWithoutL6Filters(t *testing.T) {
	dir := t.TempDir()
	setup := func(o *pebble.Options) {
		shape := ModelLevelShape(o)
		shape.SkipL6 = 1
		SetLevelBudgets(o, LevelBudgets(shape, 10))
	}
	opts := func(set func(*pebble.Options)) *pebble.Options {
		o := levelsTestOptions()
		o.DisableAutomaticCompactions = true
		set(o)
		return o
	}
	o := opts(setup)
	if o.Levels[NumLevels-1].FilterPolicy != pebble.NoFilterPolicy {
		t.Fatalf("fitted for Gets, L6 has policy %v", o.Levels[NumLevels-1].FilterPolicy)
	}
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	// Under the race detector Pebble's reads are slow: a smaller store.
	n := map[bool]int{false: 6000, true: 500}[race.Enabled]
	keys := testkeys.Random(2*n, 16, 21)
	present, absent := keys[:n], keys[n:]
	write := func(ks [][]byte) {
		b := db.NewBatch()
		for _, k := range ks {
			if err := b.Set(k, k, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Two flushes over the same key range, so the compaction into L6
	// rewrites them (a move would keep L0's filter).
	write(present[:n/4])
	write(present[n/4 : n/2])
	if err := db.Compact(t.Context(), []byte{0}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false); err != nil {
		t.Fatal(err)
	}
	write(present[n/2 : 3*n/4])
	write(present[3*n/4:])
	check := func(db *pebble.DB, what string) {
		t.Helper()
		tables, err := db.SSTables(pebble.WithProperties())
		if err != nil {
			t.Fatal(err)
		}
		if len(tables[0]) == 0 || len(tables[NumLevels-1]) == 0 {
			t.Fatalf("%s: want tables on L0 and L6, have %d and %d", what, len(tables[0]), len(tables[NumLevels-1]))
		}
		for _, tab := range tables[NumLevels-1] {
			if name := tab.Properties.FilterPolicyName; name != "" {
				t.Errorf("%s: L6 table %s carries filter %q", what, tab.FileNum, name)
			}
		}
		for _, tab := range tables[0] {
			if name := tab.Properties.FilterPolicyName; name != o.Levels[0].FilterPolicy.Name() {
				t.Errorf("%s: L0 table %s carries filter %q, want %q", what, tab.FileNum, name, o.Levels[0].FilterPolicy.Name())
			}
		}
		it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		for _, k := range present {
			v, closer, err := db.Get(k)
			if err != nil || string(v) != string(k) {
				t.Fatalf("%s: Get(%x) = %x, %v", what, k, v, err)
			}
			closer.Close()
			if !it.SeekPrefixGE(k) || string(it.Key()) != string(k) {
				t.Fatalf("%s: SeekPrefixGE(%x) missed a present key (err %v)", what, k, it.Error())
			}
		}
		m0 := db.Metrics()
		for _, k := range absent {
			if _, _, err := db.Get(k); !errors.Is(err, pebble.ErrNotFound) {
				t.Fatalf("%s: Get(absent %x): %v", what, k, err)
			}
		}
		m := db.Metrics()
		if hits := m.Filter.Hits - m0.Filter.Hits; hits < int64(len(absent)) {
			t.Errorf("%s: %d absent Gets, %d skipped by a filter: L0's filters are not read", what, len(absent), hits)
		}
	}
	check(db, "written")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, reopen := range []struct {
		what string
		set  func(*pebble.Options)
	}{{"reopened", setup}, {"reopened under SetLevelPolicies", func(o *pebble.Options) { SetLevelPolicies(o, 10) }}} {
		db, err := pebble.Open(dir, opts(reopen.set))
		if err != nil {
			t.Fatal(err)
		}
		check(db, reopen.what)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
