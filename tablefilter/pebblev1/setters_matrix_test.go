package pebblev1_test

import (
	"bytes"
	"testing"

	"github.com/cockroachdb/pebble"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// TestSettersMatrixWithoutL6Filters writes one store through sessions
// under four setters in turn (budgets fitted for Gets, whose L6 has no
// filter, in versions 3 and 4, and the self-tuning setups of either
// version), so that it holds unfiltered L6 tables, filtered tables a move
// carried onto L6, and tables of both versions' names above. Reopened
// under the first two setters, every table carries no filter or a registered name,
// each table with a filter is consulted through it by SeekPrefixGE with
// L6 filters (Pebble's filter metrics), and Get and SeekPrefixGE, with and
// without L6 filters, find every version of every present key.
func TestSettersMatrixWithoutL6Filters(t *testing.T) {
	race.SkipLong(t)
	shape := pebblev1.ModelLevelShape(storeOptions(atComparer))
	shape.SkipL6 = 1
	setters := []struct {
		what string
		set  func(*pebble.Options)
	}{
		{"SetLevelBudgets SkipL6", func(o *pebble.Options) { pebblev1.SetLevelBudgets(o, pebblev1.LevelBudgets(shape, 10)) }},
		{"SetAdaptiveBudgetsV4", func(o *pebble.Options) { pebblev1.SetAdaptiveBudgetsV4(o, 10) }},
		{"SetLevelBudgetsV4 SkipL6", func(o *pebble.Options) { pebblev1.SetLevelBudgetsV4(o, pebblev1.LevelBudgetsV4(shape, 10)) }},
		{"SetAdaptiveBudgets", func(o *pebble.Options) { pebblev1.SetAdaptiveBudgets(o, 10) }},
	}
	dir := t.TempDir()
	session := 0
	writeStore(t, dir, func() *pebble.Options {
		o := storeOptions(atComparer)
		setters[session%len(setters)].set(o)
		session++
		return o
	})
	for _, s := range []int{0, 1} { // each of the versions, with and without L6 filters
		s := setters[s]
		t.Run(s.what, func(t *testing.T) {
			o := storeOptions(atComparer)
			s.set(o)
			db, err := pebble.Open(dir, o)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			names := tableFilters(t, db)
			t.Logf("tables %s", levelsSummary(t, names))
			unfiltered := 0
			for l, tables := range names {
				for _, n := range tables {
					if n == "" {
						unfiltered++
					} else if _, ok := o.Filters[n]; !ok {
						t.Errorf("an L%d table's filter %q is not registered", l, n)
					}
				}
			}
			if unfiltered == 0 {
				t.Errorf("no table without a filter: the store does not test NoFilter")
			}
			checkStore(t, db, true)
			checkFilteredTablesConsulted(t, db)
			it, err := db.NewIter(nil) // SeekPrefixGE without L6 filters
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			for i := 0; i < storeN; i += 2 * probeStride {
				versions := 0
				for ok := it.SeekPrefixGE(atPrefix(i)); ok; ok = it.Next() {
					if !bytes.HasPrefix(it.Key(), atPrefix(i)) {
						break
					}
					versions++
				}
				if versions != atVersions(i) {
					t.Fatalf("SeekPrefixGE(%s) without L6 filters found %d versions, want %d", atPrefix(i), versions, atVersions(i))
				}
			}
		})
	}
}

// checkFilteredTablesConsulted is checkEveryTableFiltered counting only
// the tables that carry a filter: SeekPrefixGE with L6 filters makes at
// least one filter check for each of them that spans an absent prefix.
func checkFilteredTablesConsulted(t *testing.T, db *pebble.DB) {
	t.Helper()
	levels, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	before := db.Metrics().Filter
	spanning := 0
	for i := 1; i < storeN; i += 2 * probeStride * 4 {
		p := atPrefix(i)
		for _, ts := range levels {
			for _, tab := range ts {
				lo, hi := tab.Smallest.UserKey, tab.Largest.UserKey
				if tab.Properties.FilterPolicyName != "" && atCompare(lo[:atSplit(lo)], p) <= 0 && atCompare(p, hi[:atSplit(hi)]) <= 0 {
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
	}
	after := db.Metrics().Filter
	checks := (after.Hits - before.Hits) + (after.Misses - before.Misses)
	t.Logf("%d filter checks for %d filtered tables spanning absent prefixes", checks, spanning)
	if checks < int64(spanning) || spanning == 0 {
		t.Errorf("%d filter checks for %d filtered tables spanning the absent prefixes: a table was read without its filter", checks, spanning)
	}
}
