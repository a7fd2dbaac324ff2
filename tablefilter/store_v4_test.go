package tablefilter

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// v4StoreN is the prefixes the version-4 store tests write, v4Stride the
// step between the prefixes probeMVCC reads back, and v4Probes the absent
// prefixes checkEveryTableFiltered probes: fewer under the race detector,
// where Pebble's invariant checks slow every write and lookup many times
// over, so that each test stays within a few seconds; without it, every
// present key is read back.
var (
	v4StoreN = map[bool]int{false: 6000, true: 1500}[race.Enabled]
	v4Stride = map[bool]int{false: 1, true: 4}[race.Enabled]
	v4Probes = map[bool]int{false: 300, true: 100}[race.Enabled]
)

// sample returns every stride-th present and absent prefix of w.
func (w mvccWorkload) sample(stride int) mvccWorkload {
	var s mvccWorkload
	for i := 0; i < len(w.prefixes); i += stride {
		s.prefixes, s.versions = append(s.prefixes, w.prefixes[i]), append(s.versions, w.versions[i])
	}
	for i := 0; i < len(w.absent); i += stride {
		s.absent = append(s.absent, w.absent[i])
	}
	return s
}

// half returns the workload of w's first (first true) or second half of
// prefixes, with all of w's absent prefixes.
func (w mvccWorkload) half(first bool) mvccWorkload {
	n := len(w.prefixes) / 2
	if first {
		return mvccWorkload{prefixes: w.prefixes[:n], versions: w.versions[:n], absent: w.absent}
	}
	return mvccWorkload{prefixes: w.prefixes[n:], versions: w.versions[n:], absent: w.absent}
}

// filterNames returns how many of db's tables carry a filter under each
// name prefix ("lsmcuckoo.v4.bpk=", ...), and checks that every table
// carries one under a name opts registers: Pebble reads a table's filter
// only through a policy registered under its exact name.
func filterNames(tb testing.TB, db *pebble.DB, opts *pebble.Options) map[string]int {
	tb.Helper()
	treeFilterBits(tb, db, opts)
	levels, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		tb.Fatal(err)
	}
	count := map[string]int{}
	for _, ts := range levels {
		for _, t := range ts {
			name := t.Properties.FilterPolicyName
			count[name[:strings.LastIndexByte(name, '=')+1]]++
		}
	}
	return count
}

// checkEveryTableFiltered probes each absent prefix with SeekPrefixGE (L6
// filters on) through an iterator of its own, which consults the filter of
// every table whose key range holds the prefix, and checks with Pebble's
// filter metrics that at least that many filter checks were made: a table
// read without its filter would make none.
func checkEveryTableFiltered(tb testing.TB, db *pebble.DB, w mvccWorkload, probes int) {
	tb.Helper()
	checkTablesFiltered(tb, db, w, probes, NumLevels)
}

// checkTablesFiltered is checkEveryTableFiltered for the tables of the
// top filteredLevels levels (the others have no filter to consult).
func checkTablesFiltered(tb testing.TB, db *pebble.DB, w mvccWorkload, probes, filteredLevels int) {
	tb.Helper()
	levels, err := db.SSTables()
	if err != nil {
		tb.Fatal(err)
	}
	cmp := pebbleAtComparer.Compare
	before := db.Metrics().Filter
	spanning := 0
	for _, p := range w.absent[:probes] {
		for _, ts := range levels[:filteredLevels] {
			for _, t := range ts {
				lo, hi := t.Smallest.UserKey, t.Largest.UserKey
				if cmp(lo[:pebbleAtSplit(lo)], p) <= 0 && cmp(p, hi[:pebbleAtSplit(hi)]) <= 0 {
					spanning++
				}
			}
		}
		it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
		if err != nil {
			tb.Fatal(err)
		}
		if it.SeekPrefixGE(p) {
			tb.Fatalf("SeekPrefixGE found an absent prefix %q", p)
		}
		if err := it.Close(); err != nil {
			tb.Fatal(err)
		}
	}
	after := db.Metrics().Filter
	checks := (after.Hits - before.Hits) + (after.Misses - before.Misses)
	tb.Logf("%d absent prefixes: %d tables span them, %d filter checks, %d passed", probes, spanning, checks, after.Misses-before.Misses)
	if checks < int64(spanning) || spanning == 0 {
		tb.Errorf("%d filter checks for %d tables spanning the absent prefixes: a table was read without its filter", checks, spanning)
	}
}

// TestLevelPoliciesV4Pebble writes a real store under SetLevelPoliciesV4,
// reopens it under SetLevelPolicies (version 3) and writes more, then
// reopens it under SetLevelPoliciesV4 again. The first session's tables
// carry version-4 names only; after each reopen every table, of either
// version, carries a registered name and is consulted through its filter
// (Pebble's filter metrics), Get and SeekPrefixGE (L6 filters on) find
// every present key, and the filters skip tables for absent ones.
func TestLevelPoliciesV4Pebble(t *testing.T) {
	const avg = 10
	w := newMVCCWorkload(v4StoreN, 31)
	dir := t.TempDir()
	v3 := func(o *pebble.Options) { SetLevelPolicies(o, avg) }
	v4 := func(o *pebble.Options) { SetLevelPoliciesV4(o, avg) }
	session := func(what string, set func(*pebble.Options), write, present mvccWorkload) map[string]int {
		o := adaptiveTestOptions()
		// Compactions only in the first session: the tables of the
		// first setter's version outlive the reopens.
		o.DisableAutomaticCompactions = what != "v4"
		set(o)
		db, err := pebble.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}()
		if len(write.prefixes) > 0 {
			// Many flushes under compactions, a tree of several
			// levels; two without, two L0 tables over it.
			flushEvery := v4StoreN / 12
			if o.DisableAutomaticCompactions {
				flushEvery = len(write.prefixes)/2 + 1
			}
			write.write(t, db, flushEvery, func() {})
			waitQuiet(db)
		}
		names := filterNames(t, db, o)
		t.Logf("%s: tables by name %v", what, names)
		probeMVCC(t, db, present.sample(v4Stride))
		checkEveryTableFiltered(t, db, present, v4Probes)
		return names
	}
	names := session("v4", v4, w.half(true), w.half(true))
	if len(names) != 1 || names[pebblecore.NamePrefix(4, false)] == 0 {
		t.Errorf("SetLevelPoliciesV4 wrote tables named %v, want version 4 only", names)
	}
	names = session("v3 over v4", v3, w.half(false), w)
	if names[pebblecore.NamePrefix(3, false)] == 0 || names[pebblecore.NamePrefix(4, false)] == 0 {
		t.Errorf("want tables of both versions, have %v", names)
	}
	session("v4 again", v4, mvccWorkload{}, w)
}

// TestAdaptiveBudgetsV4RefitsUnderWrites is TestAdaptiveBudgetsRefitsUnderWrites
// for SetAdaptiveBudgetsV4, then a reopen under SetAdaptiveBudgets: refits
// as fast as the loop allows while flushes and compactions write version-4
// tables, for the race detector; every table carries a version-4 name, no
// key goes missing, and the version-3 setup reads every table through its
// filter.
func TestAdaptiveBudgetsV4RefitsUnderWrites(t *testing.T) {
	w := newMVCCWorkload(v4StoreN*2/3, 33)
	dir := t.TempDir()
	o := adaptiveTestOptions()
	tuned := SetAdaptiveBudgetsV4(o, 8)
	tuned.core.Loop = pebblecore.NewRefitLoop(tuned.core.Tuner, time.Millisecond)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	tuned.Attach(db)
	w.write(t, db, 500, func() {})
	waitQuiet(db)
	tuned.Detach()
	if names := filterNames(t, db, o); len(names) != 1 || names[pebblecore.NamePrefix(4, false)] == 0 {
		t.Errorf("SetAdaptiveBudgetsV4 wrote tables named %v, want version 4 only", names)
	}
	probeMVCC(t, db, w.sample(v4Stride))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	o = adaptiveTestOptions()
	tuned = SetAdaptiveBudgets(o, 8)
	if db, err = pebble.Open(dir, o); err != nil {
		t.Fatal(err)
	}
	tuned.Attach(db)
	filterNames(t, db, o)
	probeMVCC(t, db, w.sample(v4Stride))
	checkEveryTableFiltered(t, db, w, v4Probes)
	tuned.Detach()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestV4SettersRegisterWhatV3Do: Pebble reads a table's filter only
// through a policy registered under its exact name, so a store moved
// between the version-3 and version-4 setters, per-level or adaptive,
// keeps every table's filter when all four register the same names: every
// writer's name of every budget any of them can choose, and the average's.
func TestV4SettersRegisterWhatV3Do(t *testing.T) {
	setters := map[string]func(*pebble.Options, float64){
		"SetLevelPolicies":     SetLevelPolicies,
		"SetLevelPoliciesV4":   SetLevelPoliciesV4,
		"SetAdaptiveBudgets":   func(o *pebble.Options, avg float64) { SetAdaptiveBudgets(o, avg) },
		"SetAdaptiveBudgetsV4": func(o *pebble.Options, avg float64) { SetAdaptiveBudgetsV4(o, avg) },
	}
	for _, avg := range []float64{5, 10.3} {
		var want []string
		for name, set := range setters {
			o := levelsTestOptions()
			set(o, avg)
			got := slices.Sorted(maps.Keys(o.Filters))
			if want == nil {
				want = got
			} else if !slices.Equal(got, want) {
				t.Errorf("avg %v: %s registers %d names, another setter %d", avg, name, len(got), len(want))
			}
			if o.Filters[NewV4Policy(avg).Name()] == nil || o.Filters[NewPolicy(avg).Name()] == nil {
				t.Errorf("avg %v: %s does not register the average's names", avg, name)
			}
		}
	}
}
