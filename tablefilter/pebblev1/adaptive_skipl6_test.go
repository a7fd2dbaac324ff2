package pebblev1_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// TestAdaptiveBudgetsSkipL6 runs a Pebble v1 store under the self-tuning
// setup told that every absent lookup skips L6's filters (SkipL6(1)): L6
// gets a nil policy, Pebble v1's "no filter", and the tables compactions
// rewrite into it carry none; every table of L0-L5 carries a registered
// lsmcuckoo name and is consulted through its filter; the budgets refit
// while the store runs; every version of every present key is found by
// Get and every present prefix by SeekPrefixGE with L6 filters; absent
// Gets skip tables by the upper levels' filters; the live tree, L6's keys
// counted, spends no more than asked; and the store reopens under the
// same call and reads the same.
func TestAdaptiveBudgetsSkipL6(t *testing.T) {
	race.SkipLong(t)
	const n, avg = 24000, 6 // even prefixes present, odd ones absent
	dir := t.TempDir()
	opts := func() *pebble.Options {
		o := &pebble.Options{
			Comparer:              atComparer,
			Logger:                quietLogger{},
			MemTableSize:          128 << 10,
			LBaseMaxBytes:         32 << 10,
			L0CompactionThreshold: 2,
		}
		for range pebblev1.NumLevels {
			o.Levels = append(o.Levels, pebble.LevelOptions{TargetFileSize: 32 << 10})
		}
		return o
	}
	open := func() (*pebble.DB, *pebble.Options, *pebblev1.AdaptiveBudgets) {
		o := opts()
		tuned := pebblev1.SetAdaptiveBudgets(o, avg, pebblev1.SkipL6(1))
		if p := o.Levels[pebblev1.NumLevels-1].FilterPolicy; p != nil {
			t.Fatalf("L6 policy %v, want nil", p)
		}
		db, err := pebble.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		tuned.Attach(db)
		return db, o, tuned
	}
	db, o, tuned := open()
	if b := tuned.Budgets(); b[pebblev1.NumLevels-1] != pebblev1.NoFilter {
		t.Fatalf("budgets %v: L6 has a filter", b)
	}
	val := make([]byte, 48) // incompressible, so the data fills levels
	src := rand.NewChaCha8([32]byte{5})
	put := func(i int) {
		b := db.NewBatch()
		for v := 1; v <= atVersions(i); v++ {
			src.Read(val)
			if err := b.Set(atKey(i, v), val, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	flush := func() {
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	order := rand.New(rand.NewPCG(9, 9)).Perm(n / 2)
	// An eighth of the keys, in two overlapping flushes compacted into
	// L6: rewritten there (a move would keep an upper level's filter).
	for j, p := range order[:n/16] {
		put(2 * p)
		if j == n/32 {
			flush()
		}
	}
	flush()
	if err := db.Compact([]byte("user"), []byte("user~"), false); err != nil {
		t.Fatal(err)
	}
	seen := map[[pebblev1.NumLevels]float64]bool{tuned.Budgets(): true}
	for j, p := range order[n/16:] {
		put(2 * p)
		if j%200 == 199 {
			if err := tuned.Refit(db); err != nil {
				t.Fatal(err)
			}
			seen[tuned.Budgets()] = true
		}
	}
	flush()
	quiet, last := 0, db.Metrics().Compact.Count
	for deadline := time.Now().Add(time.Minute); quiet < 10 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		if m := db.Metrics(); m.Compact.NumInProgress == 0 && m.Compact.Count == last {
			quiet++
		} else {
			quiet, last = 0, m.Compact.Count
		}
	}
	if err := tuned.Refit(db); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 {
		t.Errorf("budgets never changed: %v", tuned.Budgets())
	}

	check := func(what string, db *pebble.DB, o *pebble.Options, tuned *pebblev1.AdaptiveBudgets) {
		t.Helper()
		levels, err := db.SSTables(pebble.WithProperties())
		if err != nil {
			t.Fatal(err)
		}
		upper, tables, bare := 0, 0, 0
		for l, ts := range levels {
			for _, tab := range ts {
				tables++
				name, size := tab.Properties.FilterPolicyName, tab.Properties.FilterSize
				if l == pebblev1.NumLevels-1 {
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
				if _, ok := o.Filters[name]; !ok || !strings.HasPrefix(name, "lsmcuckoo.") || size == 0 {
					t.Errorf("%s: L%d table %s: filter %q of %d bytes, registered %v", what, l, tab.FileNum, name, size, ok)
				}
			}
		}
		if bare == 0 {
			t.Errorf("%s: every L6 table carries a filter", what)
		}
		if upper == 0 || len(levels[pebblev1.NumLevels-1]) == 0 {
			t.Fatalf("%s: %d tables above L6, %d on L6: want both", what, upper, len(levels[pebblev1.NumLevels-1]))
		}
		live, keys, err := tuned.LiveBitsPerKey(db)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: budgets %v, live %.3f bits/key over %d keys (L6's counted)", what, tuned.Budgets(), live, keys)
		if slack := float64(tables) / float64(keys); live > avg*(1.06+slack) {
			t.Errorf("%s: the tree spends %.3f bits/key, asked %v", what, live, avg)
		}
		it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		for i := 0; i < n; i += 2 {
			for v := 1; v <= atVersions(i); v++ {
				_, closer, err := db.Get(atKey(i, v))
				if err != nil {
					t.Fatalf("%s: Get of present %s: %v", what, atKey(i, v), err)
				}
				closer.Close()
			}
			if !it.SeekPrefixGE(atPrefix(i)) {
				t.Fatalf("%s: SeekPrefixGE missed present %s", what, atPrefix(i))
			}
		}
		before := db.Metrics().Filter
		for i := 1; i < n; i += 2 {
			if _, _, err := db.Get(atKey(i, 1)); err != pebble.ErrNotFound {
				t.Fatalf("%s: Get of absent %s: %v", what, atKey(i, 1), err)
			}
		}
		// How many upper-level tables an absent Get meets depends on
		// where compactions left the keys; what must hold is that they
		// were consulted through their filters, which at the upper levels'
		// wide budgets let almost nothing through.
		after := db.Metrics().Filter
		hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
		if hits == 0 || misses > (hits+misses)/100+2 {
			t.Errorf("%s: over %d absent Gets the upper levels' filters ruled out %d tables and let %d through", what, n/2, hits, misses)
		}
		checkTablesFiltered(t, db, n, pebblev1.NumLevels-1)
	}
	check("first open", db, o, tuned)
	tuned.Detach()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, o, tuned = open()
	check("reopened", db, o, tuned)
	tuned.Detach()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}
