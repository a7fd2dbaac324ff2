package tablefilter

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// modelCost is the expected number of tables an absent-key lookup reads in
// vain under budgets b, on the FPR model.
func modelCost(s LevelShape, b [NumLevels]float64) float64 {
	var c float64
	for l, k := range s.Keys {
		if k <= 0 {
			continue
		}
		runs := 1.0
		if l == 0 {
			runs = math.Max(s.L0Runs, 1)
		}
		c += runs * pebblecore.ModelFPR(b[l])
	}
	return c
}

func weightedAvg(s LevelShape, b [NumLevels]float64) float64 {
	var sum, tot float64
	for l, k := range s.Keys {
		if k > 0 {
			sum += k * b[l]
			tot += k
		}
	}
	return sum / tot
}

// TestModelFPRMatchesCodec checks the allocator's rate model against the
// rate the codec itself reports for blocks it built at each budget.
func TestModelFPRMatchesCodec(t *testing.T) {
	keys := testkeys.Random(40_000, 16, 3)
	for _, b := range []float64{5, 6, 8, 9.5, 10, 12, 13.5, 16, 20, 24, 32} {
		w := NewPolicy(b).NewWriter(pebble.TableFilter)
		for _, k := range keys {
			w.AddKey(k)
		}
		f, err := codec.Decode(w.Finish(nil))
		if err != nil {
			t.Fatal(err)
		}
		got, want := pebblecore.ModelFPR(b), f.Info().ExpectedFPR
		if math.Abs(got-want) > 0.08*want {
			t.Errorf("%v bits/key: model FPR %.3g, codec block's expected FPR %.3g (f=%d load %.3f)", b, got, want, f.Info().V2.FingerprintBits+f.Info().V3.RemainderBits, f.Info().V2.Load+f.Info().V3.Load)
		}
	}
}

func testShapes() map[string]LevelShape {
	shapes := map[string]LevelShape{
		"default":     ModelLevelShape(&pebble.Options{}),
		"L0-only":     {Keys: [7]float64{5}, L0Runs: 5},
		"bottom-only": {Keys: [7]float64{6: 1}},
		"4-levels":    {Keys: [7]float64{3, 0, 0, 1, 3, 10, 34}, L0Runs: 4},
		"flat":        {Keys: [7]float64{1, 1, 1, 1, 1, 1, 1}, L0Runs: 1},
	}
	for _, m := range []int{4, 8, 20} {
		o := &pebble.Options{}
		o.Experimental.LevelMultiplier = m
		shapes[fmt.Sprintf("multiplier-%d", m)] = ModelLevelShape(o)
	}
	return shapes
}

func TestLevelBudgetsProperties(t *testing.T) {
	for name, s := range testShapes() {
		for _, avg := range []float64{4, 5, 6, 8, 9.5, 10, 12, 16, 20, 31} {
			b := LevelBudgets(s, avg)
			for l, x := range b {
				if !pebblecore.ValidBitsPerKey(x) {
					t.Fatalf("%s avg %v: L%d budget %v invalid", name, avg, l, x)
				}
			}
			// The average is spent, to within one grid step on the
			// smallest level (the remainder no step fits in).
			if got := weightedAvg(s, b); got > avg+1e-9 || got < avg-pebblecore.BudgetStep {
				t.Errorf("%s avg %v: spends %.4f bits/key: %v", name, avg, got, b)
			}
			var uniform [NumLevels]float64
			for l := range uniform {
				uniform[l] = avg
			}
			if c, u := modelCost(s, b), modelCost(s, uniform); c > u*(1+1e-9) {
				t.Errorf("%s avg %v: cost %.3g worse than uniform %.3g: %v", name, avg, c, u, b)
			}
			// In a Pebble-shaped tree (keys per run grow with depth) the
			// budgets never grow toward L6.
			if name == "default" || strings.HasPrefix(name, "multiplier") {
				for l := 1; l < NumLevels; l++ {
					if b[l] > b[l-1] {
						t.Errorf("%s avg %v: L%d gets %v > L%d's %v", name, avg, l, b[l], l-1, b[l-1])
					}
				}
			}
		}
	}
	// On a full tree the saving is large, not marginal: the bottom level
	// gives up a little and every upper level gains a lot.
	s := ModelLevelShape(&pebble.Options{})
	b := LevelBudgets(s, 10)
	var u [NumLevels]float64
	for l := range u {
		u[l] = 10
	}
	if c, uc := modelCost(s, b), modelCost(s, u); c > 0.5*uc {
		t.Errorf("default shape at 10 bits/key: per-level cost %.3g, uniform %.3g: want at most half", c, uc)
	}
}

// TestLevelBudgetsNearOptimal compares the allocator with an exhaustive
// search of the grid on trees of three populated levels.
func TestLevelBudgetsNearOptimal(t *testing.T) {
	race.SkipLong(t)
	grid := pebblecore.BudgetGrid()
	for _, s := range []LevelShape{
		{Keys: [7]float64{0.5, 0, 0, 0, 1, 10, 100}, L0Runs: 3},
		{Keys: [7]float64{2, 0, 0, 0, 0, 3, 40}, L0Runs: 6},
		{Keys: [7]float64{0, 0, 0, 0, 1, 4, 12}},
		{Keys: [7]float64{1, 0, 0, 0, 0, 1, 1}, L0Runs: 1},
	} {
		var pop []int
		for l, k := range s.Keys {
			if k > 0 {
				pop = append(pop, l)
			}
		}
		// The model's rate at each grid budget, computed once: the search
		// below visits every triple of them.
		fpr := make([]float64, len(grid))
		for i, x := range grid {
			fpr[i] = pebblecore.ModelFPR(x)
		}
		runs := [3]float64{1, 1, 1}
		if pop[0] == 0 {
			runs[0] = math.Max(s.L0Runs, 1)
		}
		tot := s.Keys[pop[0]] + s.Keys[pop[1]] + s.Keys[pop[2]]
		for _, avg := range []float64{6, 8, 10, 13} {
			best := math.Inf(1)
			var bestB [NumLevels]float64
			for i, x := range grid {
				for j, y := range grid {
					for k, z := range grid {
						if (s.Keys[pop[0]]*x+s.Keys[pop[1]]*y+s.Keys[pop[2]]*z)/tot > avg+1e-9 {
							continue
						}
						if c := runs[0]*fpr[i] + runs[1]*fpr[j] + runs[2]*fpr[k]; c < best {
							best = c
							bestB = [NumLevels]float64{}
							bestB[pop[0]], bestB[pop[1]], bestB[pop[2]] = x, y, z
						}
					}
				}
			}
			got := LevelBudgets(s, avg)
			if c := modelCost(s, got); c > best*1.05+1e-12 {
				t.Errorf("shape %v avg %v: cost %.4g with %v; exhaustive optimum %.4g with %v", s.Keys, avg, c, got, best, bestB)
			}
		}
	}
}

func TestLevelBudgetsEdges(t *testing.T) {
	if b := LevelBudgets(LevelShape{}, 9); b != [7]float64{9, 9, 9, 9, 9, 9, 9} {
		t.Errorf("empty tree: %v, want uniform 9", b)
	}
	if b := LevelBudgets(LevelShape{Keys: [7]float64{0, 0, 0, 0, 1, 1, 1}}, 40); b != [7]float64{40, 40, 40, 40, 40, 40, 40} {
		t.Errorf("avg above the grid: %v, want uniform 40", b)
	}
	// Garbage weights are ignored, not propagated as NaN budgets.
	b := LevelBudgets(LevelShape{Keys: [7]float64{math.NaN(), math.Inf(1), -3, 0, 1, 10, 100}, L0Runs: math.NaN()}, 10)
	for l, x := range b {
		if !pebblecore.ValidBitsPerKey(x) {
			t.Fatalf("garbage shape: L%d budget %v", l, x)
		}
	}
	// Empty levels take the budget of the populated level below them, and
	// levels under the lowest populated one take its budget.
	b = LevelBudgets(LevelShape{Keys: [7]float64{0, 0, 0, 1, 0, 20, 0}}, 10)
	if b[0] != b[3] || b[1] != b[3] || b[2] != b[3] || b[4] != b[5] || b[6] != b[5] {
		t.Errorf("empty levels not filled from their neighbours: %v", b)
	}
	for _, bad := range []float64{3.9, 65, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("LevelBudgets(avg %v) did not panic", bad)
				}
			}()
			LevelBudgets(LevelShape{}, bad)
		}()
	}
}

func TestSetLevelPoliciesKeepsOtherOptions(t *testing.T) {
	o := &pebble.Options{}
	for l := range o.Levels {
		o.Levels[l].BlockSize = 8192 + l
	}
	o.Filters = map[string]pebble.FilterPolicy{"other": NewPolicy(7.3)}
	SetLevelPolicies(o, 10)
	want := LevelBudgets(ModelLevelShape(o), 10)
	for l := range o.Levels {
		if o.Levels[l].BlockSize != 8192+l {
			t.Errorf("L%d block size changed to %d", l, o.Levels[l].BlockSize)
		}
		p, ok := o.Levels[l].FilterPolicy.(Policy)
		if !ok || p.BitsPerKey() != want[l] {
			t.Errorf("L%d policy %v, want %v bits/key", l, o.Levels[l].FilterPolicy, want[l])
		}
	}
	if _, ok := o.Filters["other"]; !ok {
		t.Error("an existing Filters entry was dropped")
	}
	for _, b := range append(pebblecore.BudgetGrid(), 10) {
		if _, ok := o.Filters[NewPolicy(b).Name()]; !ok {
			t.Errorf("%s not registered", NewPolicy(b).Name())
		}
	}
	// The caller's other options are not defaulted behind their back.
	if o.Comparer != nil || o.Cache != nil || o.MemTableSize != 0 {
		t.Error("SetLevelPolicies filled in unrelated defaults")
	}
}

// TestSetLevelBudgetsInvalidWritesNothing: a configuration error panics
// before opts changes, so a caller that recovers (a config reloader, say)
// is not left with some levels on the new budgets and some on the old.
func TestSetLevelBudgetsInvalidWritesNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(o *pebble.Options)
	}{
		{"SetLevelBudgets with a budget below the range", func(o *pebble.Options) {
			SetLevelBudgets(o, [NumLevels]float64{12, 12, 12, 12, MinBitsPerKey - 1, 10, 9})
		}},
		{"SetLevelBudgets with NaN on L6", func(o *pebble.Options) {
			SetLevelBudgets(o, [NumLevels]float64{12, 12, 12, 12, 12, 10, math.NaN()})
		}},
		{"SetLevelPolicies with an average above the range", func(o *pebble.Options) {
			SetLevelPolicies(o, MaxBitsPerKey+1)
		}},
	} {
		o := &pebble.Options{}
		o.Levels[0].FilterPolicy = NewPolicy(10)
		o.Filters = map[string]pebble.FilterPolicy{"before": NewPolicy(10)}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", c.name)
				}
			}()
			c.set(o)
		}()
		if o.Levels[0].FilterPolicy != pebble.FilterPolicy(NewPolicy(10)) {
			t.Errorf("%s: L0 policy changed to %v", c.name, o.Levels[0].FilterPolicy)
		}
		for l := 1; l < NumLevels; l++ {
			if o.Levels[l].FilterPolicy != nil {
				t.Errorf("%s: L%d policy set to %v", c.name, l, o.Levels[l].FilterPolicy)
			}
		}
		if len(o.Filters) != 1 {
			t.Errorf("%s: Filters changed (%d entries)", c.name, len(o.Filters))
		}
	}
}

// levelsTestOptions is a store scaled down so a few megabytes of keys
// spread over L0 and several levels below it.
func levelsTestOptions() *pebble.Options {
	o := &pebble.Options{
		MemTableSize:          256 << 10,
		LBaseMaxBytes:         32 << 10,
		L0CompactionThreshold: 2,
		Logger:                testLogger{},
	}
	for l := range o.TargetFileSizes {
		o.TargetFileSizes[l] = 64 << 10
	}
	return o
}

type testLogger struct{}

func (testLogger) Infof(string, ...any)  {}
func (testLogger) Errorf(string, ...any) {}
func (testLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// TestSetLevelPoliciesPebble grows a real store under per-level policies
// and checks that each level's tables carry a policy the configuration
// wrote there, that Get and SeekPrefixGE with L6 filters skip tables and
// never miss a present key, that the OPTIONS file names each level's
// policy, and that a reopen under another average still reads every
// table's filter.
func TestSetLevelPoliciesPebble(t *testing.T) {
	race.SkipLong(t)
	dir := t.TempDir()
	o := levelsTestOptions()
	SetLevelPolicies(o, 10)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	const n = 60_000
	keys := testkeys.Random(2*n, 16, 11)
	present, absent := keys[:n], keys[n:]
	// Incompressible values, so a few megabytes of data fill several levels.
	val := make([]byte, 48)
	valueSource := rand.NewChaCha8([32]byte{1})
	const l0Keys = 6000 // written last, into L0, with compactions off
	for i, k := range present[:n-l0Keys] {
		valueSource.Read(val)
		if err := db.Set(k, val, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if i%5000 == 4999 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	// Let compactions finish, then measure a frozen tree: compactions
	// running under the lookups would change which tables they meet.
	quiet, last := 0, db.Metrics().Compact.Count
	for deadline := time.Now().Add(time.Minute); quiet < 10 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		if m := db.Metrics(); m.Compact.NumInProgress == 0 && m.Compact.Count == last {
			quiet++
		} else {
			quiet, last = 0, m.Compact.Count
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	o = levelsTestOptions()
	o.DisableAutomaticCompactions = true
	SetLevelPolicies(o, 10)
	if db, err = pebble.Open(dir, o); err != nil {
		t.Fatal(err)
	}
	for i, k := range present[n-l0Keys:] {
		valueSource.Read(val)
		if err := db.Set(k, val, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if i%(l0Keys/2) == l0Keys/2-1 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	tables, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	populated := 0
	for level, ts := range tables {
		if len(ts) > 0 {
			populated++
		}
		// A table carries the policy of the level it was written to; a
		// move compaction carries it down unchanged, so a table may hold
		// the policy of a level above its own, never one below.
		var allowed []string
		for l := 0; l <= level; l++ {
			allowed = append(allowed, o.Levels[l].FilterPolicy.Name())
		}
		exact := 0
		for _, tab := range ts {
			name := tab.Properties.FilterPolicyName
			if !slices.Contains(allowed, name) {
				t.Errorf("L%d table %s carries filter %q, want one of %v", level, tab.FileNum, name, allowed)
			}
			if name == o.Levels[level].FilterPolicy.Name() {
				exact++
			}
		}
		// Flushes write L0 afresh, and the bottom level is written mostly by
		// compactions into it; a level between may hold only tables that
		// moves brought down from above.
		if (level == 0 || level == NumLevels-1) && len(ts) > 0 && exact == 0 {
			t.Errorf("L%d: none of %d tables carries the level's own policy %s", level, len(ts), o.Levels[level].FilterPolicy.Name())
		}
		if level == 0 && exact != len(ts) {
			t.Errorf("L0: %d of %d flushed tables carry L0's policy", exact, len(ts))
		}
		t.Logf("L%d: %d tables, %d with the level's own policy", level, len(ts), exact)
	}
	if populated < 3 {
		t.Fatalf("only %d populated levels; the test needs a taller tree:\n%s", populated, db.Metrics())
	}
	checkLookups := func(db *pebble.DB, what string) {
		t.Helper()
		before := db.Metrics().Filter
		for _, k := range present[:5000] {
			v, closer, err := db.Get(k)
			if err != nil {
				t.Fatalf("%s: Get of a present key: %v", what, err)
			}
			if len(v) != len(val) {
				t.Fatalf("%s: wrong value length %d", what, len(v))
			}
			closer.Close()
		}
		for _, k := range absent[:5000] {
			if _, _, err := db.Get(k); err != pebble.ErrNotFound {
				t.Fatalf("%s: Get of an absent key: %v", what, err)
			}
		}
		afterGet := db.Metrics().Filter
		it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range absent[:5000] {
			if it.SeekPrefixGE(k) {
				t.Fatalf("%s: SeekPrefixGE found an absent key", what)
			}
		}
		for _, k := range present[:5000] {
			if !it.SeekPrefixGE(k) {
				t.Fatalf("%s: SeekPrefixGE missed a present key", what)
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		afterSeek := db.Metrics().Filter
		if afterGet.Hits-before.Hits < 5000 {
			t.Errorf("%s: Gets skipped only %d tables by filter", what, afterGet.Hits-before.Hits)
		}
		// L6 holds tables, so the seeks must skip more than the Gets did.
		if afterSeek.Hits-afterGet.Hits <= afterGet.Hits-before.Hits {
			t.Errorf("%s: SeekPrefixGE with L6 filters skipped %d tables, Gets %d", what, afterSeek.Hits-afterGet.Hits, afterGet.Hits-before.Hits)
		}
	}
	checkLookups(db, "first open")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Pebble v2.1.7 records each level's policy name in OPTIONS (issue
	// #3164 was a report that it did not).
	opt, err := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if err != nil || len(opt) == 0 {
		t.Fatalf("no OPTIONS file: %v", err)
	}
	text, err := os.ReadFile(opt[len(opt)-1])
	if err != nil {
		t.Fatal(err)
	}
	for l := range o.Levels {
		if !strings.Contains(string(text), "filter_policy="+o.Levels[l].FilterPolicy.Name()) {
			t.Errorf("OPTIONS lacks L%d's policy %s", l, o.Levels[l].FilterPolicy.Name())
		}
	}

	// Reopen under another average: the old tables' budgets are not the
	// new levels' budgets, and their filters must still be used.
	o2 := levelsTestOptions()
	o2.DisableAutomaticCompactions = true
	SetLevelPolicies(o2, 7)
	db, err = pebble.Open(dir, o2)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkLookups(db, "reopened at 7 bits/key")
}

// TestLevelBudgetsRandomShapes throws random trees (weights over nine
// orders of magnitude, empty levels, any L0 run count) and averages at the
// allocator: budgets stay valid and on the registered grid, the average is
// never exceeded, and the model cost never exceeds that of the uniform
// allocation at the grid point under the average (an average off the grid
// would be a filter name that a later process does not register).
func TestLevelBudgetsRandomShapes(t *testing.T) {
	race.SkipLong(t)
	r := rand.New(rand.NewPCG(7, 7))
	for i := range 200 {
		var s LevelShape
		for l := range s.Keys {
			if r.IntN(4) > 0 {
				s.Keys[l] = math.Pow(10, 9*r.Float64())
			}
		}
		s.L0Runs = float64(r.IntN(12))
		avg := MinBitsPerKey + r.Float64()*40
		b := LevelBudgets(s, avg)
		var uniform [NumLevels]float64
		for l := range b {
			if !pebblecore.ValidBitsPerKey(b[l]) {
				t.Fatalf("case %d: L%d budget %v (shape %v, avg %v)", i, l, b[l], s, avg)
			}
			if b[l] != pebblecore.BudgetFloor(b[l]) {
				t.Fatalf("case %d: L%d budget %v is off the registered grid (shape %v, avg %v)", i, l, b[l], s, avg)
			}
			uniform[l] = pebblecore.BudgetFloor(avg)
		}
		if s.Keys == ([NumLevels]float64{}) {
			continue
		}
		if got := weightedAvg(s, b); got > avg*(1+1e-9) {
			t.Errorf("case %d: spends %v > %v (shape %v): %v", i, got, avg, s, b)
		}
		if c, u := modelCost(s, b), modelCost(s, uniform); c > u*(1+1e-9) {
			t.Errorf("case %d: cost %v > uniform %v (shape %v, avg %v): %v", i, c, u, s, avg, b)
		}
	}
}

// TestLevelBudgetsAlwaysRegistered: whatever budgets LevelBudgets chose
// for a store before (any shape, any average), SetLevelPolicies and
// SetLevelBudgets under any other average or shape register their names,
// so the tables written with them keep their filters. It failed when
// LevelBudgets fell back to the average itself off the grid it registers
// (every average of 32 and above, and any off-grid average for a tree
// whose keys sit on one level, as after a bulk load into L6).
func TestLevelBudgetsAlwaysRegistered(t *testing.T) {
	shapes := []LevelShape{
		ModelLevelShape(&pebble.Options{}),
		{Keys: [NumLevels]float64{6: 1}},
		{Keys: [NumLevels]float64{0: 1, 6: 100}, L0Runs: 4},
		{Keys: [NumLevels]float64{3: 5, 4: 50, 5: 500, 6: 5000}},
		{},
	}
	avgs := []float64{4, 4.2, 7, 9.75, 10, 10.3, 12.2, 15.9, 31.9, 32, 33.3, 40, 63.7, 64}
	type config struct {
		what string
		o    *pebble.Options
	}
	var later []config
	for _, now := range []float64{7, 10, 16} {
		o := &pebble.Options{}
		SetLevelPolicies(o, now)
		o2 := &pebble.Options{}
		SetLevelBudgets(o2, LevelBudgets(LevelShape{Keys: [NumLevels]float64{6: 1}}, now))
		later = append(later, config{fmt.Sprintf("SetLevelPolicies(%v)", now), o},
			config{fmt.Sprintf("SetLevelBudgets(L6-only shape, %v)", now), o2})
	}
	for _, s := range shapes {
		for _, old := range avgs {
			for l, b := range LevelBudgets(s, old) {
				name := NewPolicy(b).Name()
				for _, c := range later {
					if _, ok := c.o.Filters[name]; !ok {
						t.Errorf("shape %v avg %v wrote L%d tables as %s; %s does not register it", s.Keys, old, l, name, c.what)
					}
				}
			}
		}
	}
}

// TestLevelPoliciesReopenUnderAnotherAverage is the same on a real store:
// tables written under SetLevelPolicies(opts, 40) (a valid average, above
// the grid), reopened under SetLevelPolicies(opts, 10). Pebble reads a
// table whose filter name is not registered without its filter and says
// nothing, so the filter metrics are the only witness. Likewise a store
// whose levels were written by the version-1 per-level policies (what
// SetLevelPolicies wrote before format version 2), reopened under the
// version-2 SetLevelPolicies at another average.
func TestLevelPoliciesReopenUnderAnotherAverage(t *testing.T) {
	t.Run("avg 40 then 10", func(t *testing.T) {
		reopenUnderOtherPolicies(t, func(o *pebble.Options) { SetLevelPolicies(o, 40) },
			func(o *pebble.Options) { SetLevelPolicies(o, 10) })
	})
	t.Run("v1 per-level then v2 at 7", func(t *testing.T) {
		reopenUnderOtherPolicies(t, func(o *pebble.Options) {
			for l, b := range LevelBudgets(ModelLevelShape(o), 10) {
				o.Levels[l].FilterPolicy = NewV1Policy(b)
			}
		}, func(o *pebble.Options) { SetLevelPolicies(o, 7) })
	})
}

// reopenUnderOtherPolicies writes two L0 tables under the policies write
// sets, reopens the store under those read sets, and checks with Pebble's
// filter metrics that absent-key Gets consult both tables' filters.
func reopenUnderOtherPolicies(t *testing.T, write, read func(o *pebble.Options)) {
	dir := t.TempDir()
	keys := testkeys.Random(20_000, 16, 71)
	present, absent := keys[:10_000], keys[10_000:]
	o := &pebble.Options{DisableAutomaticCompactions: true, Logger: testLogger{}}
	write(o)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for half := range 2 {
		for _, k := range present[half*5000 : (half+1)*5000] {
			if err := db.Set(k, k, pebble.NoSync); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	written := o.Levels[0].FilterPolicy.Name()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	o = &pebble.Options{DisableAutomaticCompactions: true, Logger: testLogger{}}
	read(o)
	db, err = pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := db.Metrics().Levels[0].TablesCount
	if tables < 2 {
		t.Fatalf("%d L0 tables, want 2", tables)
	}
	// Under the race detector Pebble's invariant checks slow every lookup
	// a hundredfold: probe every pebbleStride-th key there.
	absent = stride(absent)
	before := db.Metrics().Filter
	for _, k := range absent {
		if _, _, err := db.Get(k); !errors.Is(err, pebble.ErrNotFound) {
			t.Fatalf("Get(absent): %v", err)
		}
	}
	mid := db.Metrics().Filter
	for _, k := range stride(present[:2000]) {
		v, c, err := db.Get(k)
		if err != nil || string(v) != string(k) {
			t.Fatalf("Get(present) = %q, %v", v, err)
		}
		c.Close()
	}
	checks := mid.Hits - before.Hits + mid.Misses - before.Misses
	t.Logf("%d L0 tables written as %s, reopened with L0 at %s: %d filter checks, %d rejected, for %d absent Gets",
		tables, written, o.Levels[0].FilterPolicy.Name(), checks, mid.Hits-before.Hits, len(absent))
	// A few absent keys fall outside a table's range and skip it unchecked.
	if checks < int64(len(absent))*tables*98/100 {
		t.Errorf("only %d filter checks for %d absent Gets over %d tables: tables written as %s are read without their filters", checks, len(absent), tables, written)
	}
}

// TestOptionsFiltersNotWrittenInPlace: pebble.Open clones the Options
// shallowly, so an open store reads the very Filters map of the Options it
// was opened with, each time it opens a table. README's way to fit budgets
// to a live tree computes them from db.Metrics() and sets them on the
// Options before reopening: had SetLevelBudgets, RegisterPolicies or
// ModelLevelShape (through Pebble's EnsureDefaults) written into that map
// in place, the open store would be racing with the write (the runtime's
// "concurrent map iteration and map write" ends the process). They must
// leave the map they were handed untouched and install a new one.
func TestOptionsFiltersNotWrittenInPlace(t *testing.T) {
	for _, c := range []struct {
		what string
		call func(o *pebble.Options)
	}{
		{"RegisterPolicies", func(o *pebble.Options) { RegisterPolicies(o, 12, 16) }},
		{"SetLevelPolicies", func(o *pebble.Options) { SetLevelPolicies(o, 12) }},
		{"SetLevelBudgets", func(o *pebble.Options) {
			SetLevelBudgets(o, LevelBudgets(LevelShape{Keys: [NumLevels]float64{0, 0, 0, 0, 1, 10, 100}}, 12))
		}},
		{"ModelLevelShape", func(o *pebble.Options) { ModelLevelShape(o) }},
	} {
		o := &pebble.Options{}
		o.Levels[0].FilterPolicy = NewPolicy(10)
		o.Levels[3].FilterPolicy = NewPolicy(13) // not in Filters yet: EnsureDefaults adds it
		o.Filters = map[string]pebble.FilterPolicy{"lsmcuckoo.v1.bpk=10": NewV1Policy(10)}
		shared := o.Filters
		c.call(o)
		if len(shared) != 1 || shared["lsmcuckoo.v1.bpk=10"] != pebble.FilterPolicy(NewV1Policy(10)) {
			t.Errorf("%s wrote into the Filters map the Options held (now %d entries)", c.what, len(shared))
		}
		if _, ok := o.Filters["lsmcuckoo.v1.bpk=10"]; !ok {
			t.Errorf("%s dropped an entry of Filters", c.what)
		}
	}
}

// TestSetLevelBudgetsWhileOpen is the README's flow on a real store, with
// lookups running: budgets fitted to db.Metrics() are set on the Options
// the store was opened with, while it opens tables (a file cache of a few
// tables makes every lookup reopen some). Under the race detector (make
// test) it fails if the Options' Filters map is written in place.
func TestSetLevelBudgetsWhileOpen(t *testing.T) {
	dir := t.TempDir()
	o := &pebble.Options{DisableAutomaticCompactions: true, Logger: testLogger{}, MaxOpenFiles: 16}
	SetLevelPolicies(o, 10)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	keys := testkeys.Random(1600, 16, 81)
	for i, k := range keys {
		if err := db.Set(k, k, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	budgets := LevelBudgets(MeasuredLevelShape(db.Metrics()), 10)
	done := make(chan error, 1)
	go func() {
		for _, k := range keys {
			_, c, err := db.Get(k)
			if err != nil {
				done <- err
				return
			}
			c.Close()
		}
		done <- nil
	}()
	for i := 0; ; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			return
		default:
			SetLevelBudgets(o, budgets)
		}
	}
}

// TestLevelBudgetsSpendWhatTheyPromise measures the bits per key the
// policies LevelBudgets chooses really spend, level by level, by building
// their filters: the key-weighted average must stay at or under the
// average asked for, as LevelBudgets promises. It failed at small averages
// when the search could pick a budget of 4, which the codec cannot honour
// (its smallest filter, 5-bit fingerprints at the planned load, takes
// about 4.45 bits per key), so the bottom level overspent.
func TestLevelBudgetsSpendWhatTheyPromise(t *testing.T) {
	keys := testkeys.Random(100_000, 16, 91)
	spent := map[float64]float64{}
	spend := func(b float64) float64 {
		if s, ok := spent[b]; ok {
			return s
		}
		block := pebbleBuild(NewPolicy(b), keys)
		spent[b] = float64(8*len(block)) / float64(len(keys))
		return spent[b]
	}
	shape := ModelLevelShape(&pebble.Options{})
	for _, avg := range []float64{4.5, 5, 5.5, 6, 7, 10} {
		b := LevelBudgets(shape, avg)
		var sum, tot float64
		for l, k := range shape.Keys {
			sum += k * spend(b[l])
			tot += k
		}
		if got := sum / tot; got > avg*1.005 {
			t.Errorf("avg %v: budgets %v spend %.3f bits/key", avg, b, got)
		}
	}
}

// TestReadmeLevelBudgets checks the allocation the Pebble guide
// (docs/pebble.md) quotes for SetLevelPolicies at 10 bits/key on Pebble's
// default tree against what LevelBudgets computes, so that the quoted
// figures cannot drift from the code.
func TestReadmeLevelBudgets(t *testing.T) {
	readme, err := os.ReadFile("../docs/pebble.md")
	if err != nil {
		t.Skip("docs/pebble.md not found:", err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ")
	want := "at 10 bits/key on a full tree it gives " + levelBudgetsSentence(LevelBudgets(ModelLevelShape(&pebble.Options{}), 10)) + "."
	if !strings.Contains(text, want) {
		i := strings.Index(text, "at 10 bits/key on a full tree")
		t.Errorf("docs/pebble.md should say %q; it says %q", want, text[max(i, 0):min(max(i, 0)+len(want)+10, len(text))])
	}
}

// levelBudgetsSentence words budgets as the README does, from L6 up, the
// top levels that share a budget as one range: "L6 9.5 bits/key, L5 14,
// L4 17.5, L3 25.5 and L0–L2 32".
func levelBudgetsSentence(b [NumLevels]float64) string {
	g := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	top := 0 // L0..Ltop share L0's budget
	for top+1 < NumLevels-1 && b[top+1] == b[0] {
		top++
	}
	var parts []string
	for l := NumLevels - 1; l > top; l-- {
		parts = append(parts, fmt.Sprintf("L%d %s", l, g(b[l])))
	}
	if top == 0 {
		parts = append(parts, "L0 "+g(b[0]))
	} else {
		parts = append(parts, fmt.Sprintf("L0–L%d %s", top, g(b[0])))
	}
	parts[0] += " bits/key"
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

func TestLevelBudgetsSentence(t *testing.T) {
	for _, c := range []struct {
		b    [NumLevels]float64
		want string
	}{
		{[NumLevels]float64{32, 32, 32, 25.5, 17.5, 14, 9.5}, "L6 9.5 bits/key, L5 14, L4 17.5, L3 25.5 and L0–L2 32"},
		{[NumLevels]float64{31.5, 31.5, 27, 23, 18, 14, 9.5}, "L6 9.5 bits/key, L5 14, L4 18, L3 23, L2 27 and L0–L1 31.5"},
		{[NumLevels]float64{20, 19, 18, 17, 16, 15, 14}, "L6 14 bits/key, L5 15, L4 16, L3 17, L2 18, L1 19 and L0 20"},
	} {
		if got := levelBudgetsSentence(c.b); got != c.want {
			t.Errorf("levelBudgetsSentence(%v) = %q, want %q", c.b, got, c.want)
		}
	}
}

// TestLeavingLevelPoliciesKeepsOldFilters: a store that leaves per-level
// budgets for one budget everywhere keeps reading the tables written under
// the per-level budgets with their filters if it sets the uniform budget
// with SetLevelBudgets (as the README advises), and silently loses them if
// it sets Levels[0].FilterPolicy alone: the case the advice is for.
func TestLeavingLevelPoliciesKeepsOldFilters(t *testing.T) {
	dir := t.TempDir()
	o := &pebble.Options{Logger: testLogger{}}
	SetLevelPolicies(o, 10)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4000; i += 2 {
		if err := db.Set(fmt.Appendf(nil, "k%06d", i), []byte("v"), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil { // one L0 table, under L0's budget
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	l0 := o.Levels[0].FilterPolicy.Name()
	if l0 == NewPolicy(10).Name() {
		t.Fatalf("L0's per-level budget is the uniform one (%s): the test shows nothing", l0)
	}
	rejections := func(o *pebble.Options) int64 {
		t.Helper()
		db, err := pebble.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for i := 1; i < 4000; i += 2 {
			if _, _, err := db.Get(fmt.Appendf(nil, "k%06d", i)); err != pebble.ErrNotFound {
				t.Fatalf("absent key: %v", err)
			}
		}
		for i := 0; i < 4000; i += 200 {
			_, closer, err := db.Get(fmt.Appendf(nil, "k%06d", i))
			if err != nil {
				t.Fatalf("present key k%06d: %v", i, err)
			}
			closer.Close()
		}
		return db.Metrics().Filter.Hits
	}
	uniform := &pebble.Options{Logger: testLogger{}}
	SetLevelBudgets(uniform, [NumLevels]float64{10, 10, 10, 10, 10, 10, 10})
	if hits := rejections(uniform); hits < 1900 {
		t.Errorf("SetLevelBudgets(uniform 10): the %s table's filter ruled out %d of 2000 absent keys", l0, hits)
	}
	alone := &pebble.Options{Logger: testLogger{}}
	alone.Levels[0].FilterPolicy = NewPolicy(10)
	if hits := rejections(alone); hits != 0 {
		t.Errorf("Levels[0] = NewPolicy(10) alone: %d rejections from a table carrying %s, which it does not register", hits, l0)
	}
}

// TestSetLevelBudgetsRegistersDensest: after SetLevelBudgets, every
// budget LevelBudgets can return is registered under its densest name too,
// so a user who swaps each level's policy for NewDensestPolicy of the same
// budget (README.md, per-level budgets) keeps every table's filter.
func TestSetLevelBudgetsRegistersDensest(t *testing.T) {
	for _, avg := range []float64{4, 7.5, 10, 14, 33} {
		o := &pebble.Options{}
		b := LevelBudgets(ModelLevelShape(o), avg)
		SetLevelBudgets(o, b)
		for l, budget := range b {
			d := NewDensestPolicy(budget)
			o.Levels[l].FilterPolicy = d
			if got, ok := o.Filters[d.Name()]; !ok || got != pebble.FilterPolicy(d) {
				t.Errorf("avg %v, L%d: %s not registered (%v)", avg, l, d.Name(), got)
			}
		}
	}
}
