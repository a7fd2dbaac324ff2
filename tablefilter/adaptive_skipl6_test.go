package tablefilter

import (
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// TestAdaptiveBudgetsSkipL6Pebble runs a real store under the self-tuning
// setup told that every absent lookup skips L6's filters (SkipL6(1)): L6
// has Pebble's "no filter", and the tables compactions rewrite into it
// carry none; every table of L0-L5 carries a registered lsmcuckoo name
// and is consulted through its filter; the budgets refit while the store
// runs; every present key is found by Get and by SeekPrefixGE with L6
// filters (which reads the unfiltered L6 tables), absent Gets skip tables
// by the upper levels' filters; the live tree, L6's keys counted, spends
// no more than asked; and the store reopens under the same call and reads
// the same.
func TestAdaptiveBudgetsSkipL6Pebble(t *testing.T) {
	// An average low enough that the levels above L6 cannot take the
	// grid's top each: the fit, and the budgets, follow the tree.
	race.SkipLong(t)
	const avg, n = 6, 12000
	w := newMVCCWorkload(n, 29)
	dir := t.TempDir()
	set := func(o *pebble.Options, avg float64, _ ...AdaptiveOption) *AdaptiveBudgets {
		return SetAdaptiveBudgets(o, avg, SkipL6(1))
	}
	o := adaptiveTestOptions()
	db, tuned := openAdaptiveWith(t, dir, o, avg, set)
	if p := o.Levels[NumLevels-1].FilterPolicy; p != pebble.NoFilterPolicy {
		t.Fatalf("L6 policy %v, want pebble.NoFilterPolicy", p)
	}
	if b := tuned.Budgets(); b[NumLevels-1] != NoFilter {
		t.Fatalf("budgets %v: L6 has a filter", b)
	}
	part := func(lo, hi int) mvccWorkload {
		return mvccWorkload{prefixes: w.prefixes[lo:hi], versions: w.versions[lo:hi]}
	}
	// An eighth of the keys, in two overlapping flushes compacted into
	// L6: rewritten there (a move would keep an upper level's filter).
	part(0, n/8).write(t, db, n/16, func() {})
	if err := db.Compact(t.Context(), []byte{0}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, false); err != nil {
		t.Fatal(err)
	}
	seen := map[[NumLevels]float64]bool{tuned.Budgets(): true}
	refit := func() {
		if err := tuned.Refit(db); err != nil {
			t.Fatal(err)
		}
		seen[tuned.Budgets()] = true
	}
	part(n/8, n).write(t, db, n/24, refit)
	waitQuiet(db)
	refit()
	if len(seen) < 2 {
		t.Errorf("budgets never changed: %v", tuned.Budgets())
	}

	check := func(what string, db *pebble.DB, o *pebble.Options, tuned *AdaptiveBudgets) {
		t.Helper()
		levels, err := db.SSTables(pebble.WithProperties())
		if err != nil {
			t.Fatal(err)
		}
		if len(levels[NumLevels-1]) == 0 {
			t.Fatalf("%s: no L6 tables", what)
		}
		upper, bare := 0, 0
		for l, ts := range levels {
			for _, tab := range ts {
				name, size := tab.Properties.FilterPolicyName, tab.Properties.FilterSize
				if l == NumLevels-1 {
					// A table compactions wrote into L6 carries no filter;
					// one moved down from above keeps the filter it was
					// written with, which must then be read.
					if name == "" && size == 0 {
						bare++
					} else if _, ok := o.Filters[name]; !ok || !strings.HasPrefix(name, "lsmcuckoo.") {
						t.Errorf("%s: L6 table %s carries filter %q of %d bytes, registered %v", what, tab.FileNum, name, size, ok)
					}
					continue
				}
				upper++
				_, registered := o.Filters[name]
				if _, ours := pebblecore.FromName(name); !ours || !registered || size == 0 {
					t.Errorf("%s: L%d table %s: filter %q of %d bytes, registered %v", what, l, tab.FileNum, name, size, registered)
				}
			}
		}
		if bare == 0 {
			t.Errorf("%s: every L6 table carries a filter", what)
		}
		if upper == 0 {
			t.Fatalf("%s: no tables above L6", what)
		}
		live, keys, err := tuned.LiveBitsPerKey(db)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: budgets %v, live %.3f bits/key over %d keys (L6's counted), %d budget sets seen\n%s",
			what, tuned.Budgets(), live, keys, len(seen), db.Metrics())
		// Within 6% over, as TestAdaptiveBudgetsPebble allows, and a
		// small tree's tables' rounding to whole lines besides.
		tables := 0
		for _, ts := range levels {
			tables += len(ts)
		}
		if slack := float64(tables) / float64(keys); live > avg*(1.06+slack) {
			t.Errorf("%s: the tree spends %.3f bits/key, asked %v", what, live, avg)
		}
		perGet, _ := probeMVCC(t, db, w)
		if perGet >= 1 {
			t.Errorf("%s: %.3f tables read in vain per absent Get", what, perGet)
		}
		checkTablesFiltered(t, db, w, 200, NumLevels-1)
	}
	check("first open", db, o, tuned)
	tuned.Detach()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	o = adaptiveTestOptions()
	db, tuned = openAdaptiveWith(t, dir, o, avg, set)
	check("reopened", db, o, tuned)
	tuned.Detach()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
