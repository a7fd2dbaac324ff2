package tablefilter

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// Review tests (branch review7b): a demanding Pebble user's attacks on
// the per-level policies, the names and the read path.

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
		{Keys: [numLevels]float64{6: 1}},
		{Keys: [numLevels]float64{0: 1, 6: 100}, L0Runs: 4},
		{Keys: [numLevels]float64{3: 5, 4: 50, 5: 500, 6: 5000}},
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
		SetLevelBudgets(o2, LevelBudgets(LevelShape{Keys: [numLevels]float64{6: 1}}, now))
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
// nothing, so the filter metrics are the only witness.
func TestLevelPoliciesReopenUnderAnotherAverage(t *testing.T) {
	dir := t.TempDir()
	keys := testkeys.Random(20_000, 16, 71)
	present, absent := keys[:10_000], keys[10_000:]
	o := &pebble.Options{DisableAutomaticCompactions: true, Logger: testLogger{}}
	SetLevelPolicies(o, 40)
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
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	o = &pebble.Options{DisableAutomaticCompactions: true, Logger: testLogger{}}
	SetLevelPolicies(o, 10)
	db, err = pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tables := db.Metrics().Levels[0].TablesCount
	if tables < 2 {
		t.Fatalf("%d L0 tables, want 2", tables)
	}
	before := db.Metrics().Filter
	for _, k := range absent {
		if _, _, err := db.Get(k); !errors.Is(err, pebble.ErrNotFound) {
			t.Fatalf("Get(absent): %v", err)
		}
	}
	for _, k := range present[:2000] {
		v, c, err := db.Get(k)
		if err != nil || string(v) != string(k) {
			t.Fatalf("Get(present) = %q, %v", v, err)
		}
		c.Close()
	}
	after := db.Metrics().Filter
	checks := after.Hits - before.Hits + after.Misses - before.Misses
	t.Logf("%d L0 tables written at avg 40, reopened at 10: %d filter checks, %d rejected, for %d absent Gets", tables, checks, after.Hits-before.Hits, len(absent))
	if checks < int64(len(absent))*tables {
		t.Errorf("only %d filter checks for %d absent Gets over %d tables: tables written under another average are read without their filters", checks, len(absent), tables)
	}
}
