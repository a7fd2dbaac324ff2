package pebblev1_test

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// checkEveryTableFiltered probes absent prefixes of a store of n prefixes
// (every 4*probeStride-th odd one) with SeekPrefixGE (L6
// filters on), each through an iterator of its own, which consults the
// filter of every table whose key range holds the prefix, and checks with
// Pebble's filter metrics that at least that many filter checks were
// made: a table read without its filter would make none.
func checkEveryTableFiltered(t *testing.T, db *pebble.DB, n int) {
	t.Helper()
	checkTablesFiltered(t, db, n, pebblev1.NumLevels)
}

// checkTablesFiltered is checkEveryTableFiltered for the tables of the
// top filteredLevels levels (the others have no filter to consult).
func checkTablesFiltered(t *testing.T, db *pebble.DB, n, filteredLevels int) {
	t.Helper()
	levels, err := db.SSTables()
	if err != nil {
		t.Fatal(err)
	}
	before := db.Metrics().Filter
	spanning, probes := 0, 0
	for i := 1; i < n; i += 2 * probeStride * 4 {
		p := atPrefix(i)
		for _, ts := range levels[:filteredLevels] {
			for _, tab := range ts {
				lo, hi := tab.Smallest.UserKey, tab.Largest.UserKey
				if atCompare(lo[:atSplit(lo)], p) <= 0 && atCompare(p, hi[:atSplit(hi)]) <= 0 {
					spanning++
				}
			}
		}
		it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
		if err != nil {
			t.Fatal(err)
		}
		if it.SeekPrefixGE(p) {
			t.Fatalf("SeekPrefixGE found absent %s", p)
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		probes++
	}
	after := db.Metrics().Filter
	checks := (after.Hits - before.Hits) + (after.Misses - before.Misses)
	t.Logf("%d absent prefixes: %d tables span them, %d filter checks, %d passed", probes, spanning, checks, after.Misses-before.Misses)
	if checks < int64(spanning) || spanning == 0 {
		t.Errorf("%d filter checks for %d tables spanning the absent prefixes: a table was read without its filter", checks, spanning)
	}
}

// TestStoreV4: a store whose first session, under SetLevelPoliciesV4 with
// compactions on, fills L6 and a level above it with version-4 tables,
// and whose later sessions, under SetLevelPolicies (version 3), add L0
// tables. Reopened under either setter, every table carries a registered
// name and is consulted through its filter (Pebble's filter metrics), Get
// and SeekPrefixGE find every version of every present key, and absent
// Gets are answered by the filters.
func TestStoreV4(t *testing.T) {
	dir := t.TempDir()
	sessions := 0
	opts := func(set func(*pebble.Options, float64)) func() *pebble.Options {
		return func() *pebble.Options {
			o := storeOptions(atComparer)
			set(o, 10)
			return o
		}
	}
	writeStore(t, dir, func() *pebble.Options {
		sessions++
		if sessions == 1 {
			return opts(pebblev1.SetLevelPoliciesV4)()
		}
		return opts(pebblev1.SetLevelPolicies)()
	})
	for name, o := range map[string]func() *pebble.Options{
		"SetLevelPoliciesV4": opts(pebblev1.SetLevelPoliciesV4),
		"SetLevelPolicies":   opts(pebblev1.SetLevelPolicies),
	} {
		t.Run(name, func(t *testing.T) {
			o := o()
			db, err := pebble.Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			names := tableFilters(t, db)
			t.Logf("tables %s", levelsSummary(t, names))
			versions := map[string]int{}
			for l, tables := range names {
				for _, n := range tables {
					if _, ok := o.Filters[n]; !ok {
						t.Errorf("an L%d table's filter %q is not registered", l, n)
					}
					versions[n[:strings.IndexByte(n, '=')+1]]++
					if l == len(names)-1 && !strings.HasPrefix(n, "lsmcuckoo.v4.bpk=") {
						t.Errorf("an L6 table's filter is %q, want version 4", n)
					}
				}
			}
			if len(versions) != 2 || versions["lsmcuckoo.v4.bpk="] == 0 || versions["lsmcuckoo.v3.bpk="] == 0 {
				t.Errorf("tables by name %v, want versions 3 and 4", versions)
			}
			probes, hits, misses := checkStore(t, db, true)
			checkFiltered(t, probes, hits, misses)
			checkEveryTableFiltered(t, db, storeN)
		})
	}
}
