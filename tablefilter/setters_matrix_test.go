package tablefilter

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestSettersMatrixWithoutL6Filters writes one store in sessions under
// four setters in turn (budgets fitted for Gets, whose L6 has no filter,
// in versions 3 and 4, and the self-tuning setups of either version):
// each session compacts the whole store (L0 into L6, and L6 rewritten
// under the session's L6 policy, filter or none) and flushes a range of
// its own, then a last session under the setter without L6 filters
// rewrites part of L6, so L6 holds tables with and without a filter.
// Reopened under each setter, every table carries no filter or a
// registered name, every table with a filter spanning an absent key is
// consulted through it by SeekPrefixGE with L6 filters (Pebble's filter
// metrics), and Get and SeekPrefixGE, with and without L6 filters, find
// every present key.
func TestSettersMatrixWithoutL6Filters(t *testing.T) {
	race.SkipLong(t)
	shape := ModelLevelShape(levelsTestOptions())
	shape.SkipL6 = 1
	setters := []struct {
		what string
		set  func(*pebble.Options)
	}{
		{"SetLevelBudgets SkipL6", func(o *pebble.Options) { SetLevelBudgets(o, LevelBudgets(shape, 10)) }},
		{"SetAdaptiveBudgetsV4", func(o *pebble.Options) { SetAdaptiveBudgetsV4(o, 10) }},
		{"SetLevelBudgetsV4 SkipL6", func(o *pebble.Options) { SetLevelBudgetsV4(o, LevelBudgetsV4(shape, 10)) }},
		{"SetAdaptiveBudgets", func(o *pebble.Options) { SetAdaptiveBudgets(o, 10) }},
	}
	opts := func(set func(*pebble.Options)) *pebble.Options {
		o := levelsTestOptions()
		o.DisableAutomaticCompactions = true
		for l := range o.TargetFileSizes {
			o.TargetFileSizes[l] = 4 << 10 // many L6 tables: a compaction rewrites only some
		}
		set(o)
		return o
	}
	const n = 4000
	keys := testkeys.Random(2*n, 16, 77)
	present, absent := keys[:n], keys[n:]
	slices.SortFunc(present, bytes.Compare) // each session a range of its own
	dir := t.TempDir()
	per := n / (2 * len(setters))
	for round := range 2 {
		for i, s := range setters {
			db, err := pebble.Open(dir, opts(s.set))
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Compact(t.Context(), []byte{0}, bytes.Repeat([]byte{0xff}, 17), false); err != nil {
				t.Fatal(err)
			}
			// The first round's ranges are disjoint (the next compaction
			// moves them onto L6), the second's overlap the range before
			// (it rewrites them with L6's table).
			lo := (round*len(setters) + i) * per
			from := lo
			if round == 1 {
				from -= per / 2
			}
			b := db.NewBatch()
			for _, k := range present[from : lo+per] {
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
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	present = present[:2*len(setters)*per]
	// Last, under the setter without L6 filters, a flush over half the
	// first range and a compaction of that half, which rewrites the L6
	// tables under it without a filter and leaves the others' filters.
	db, err := pebble.Open(dir, opts(setters[0].set))
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for _, k := range present[:per/2] {
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
	if err := db.Compact(t.Context(), present[0], present[per/2], false); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range setters {
		o := opts(s.set)
		db, err := pebble.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := db.SSTables(pebble.WithProperties())
		if err != nil {
			t.Fatal(err)
		}
		var unfiltered, filteredL6 int
		for l, ts := range tables {
			for _, tab := range ts {
				name := tab.Properties.FilterPolicyName
				switch {
				case name == "":
					unfiltered++
				case o.Filters[name] == nil:
					t.Errorf("%s: an L%d table's filter %q is not registered", s.what, l, name)
				case l == NumLevels-1:
					filteredL6++
				}
			}
		}
		if unfiltered == 0 || filteredL6 == 0 {
			t.Errorf("%s: %d tables without a filter, %d L6 tables with one: the store misses a case", s.what, unfiltered, filteredL6)
		}
		for _, useL6 := range []bool{false, true} {
			it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: useL6})
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range present {
				if !it.SeekPrefixGE(k) || !bytes.Equal(it.Key(), k) {
					t.Fatalf("%s: SeekPrefixGE(%x) (L6 filters %v) missed a present key (err %v)", s.what, k, useL6, it.Error())
				}
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range present {
			v, closer, err := db.Get(k)
			if err != nil || !bytes.Equal(v, k) {
				t.Fatalf("%s: Get(%x) = %x, %v", s.what, k, v, err)
			}
			closer.Close()
		}
		spanning := 0
		before := db.Metrics().Filter
		for _, k := range absent[:200] {
			for _, ts := range tables {
				for _, tab := range ts {
					if tab.Properties.FilterPolicyName != "" && bytes.Compare(tab.Smallest.UserKey, k) <= 0 && bytes.Compare(k, tab.Largest.UserKey) <= 0 {
						spanning++
					}
				}
			}
			it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
			if err != nil {
				t.Fatal(err)
			}
			if it.SeekPrefixGE(k) {
				t.Fatalf("%s: SeekPrefixGE found absent %x", s.what, k)
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := db.Get(k); !errors.Is(err, pebble.ErrNotFound) {
				t.Fatalf("%s: Get(absent %x): %v", s.what, k, err)
			}
		}
		after := db.Metrics().Filter
		checks := after.Hits - before.Hits + after.Misses - before.Misses
		t.Logf("%s: %d tables without a filter, %d L6 tables with one; %d filter checks for %d filtered tables spanning absent keys", s.what, unfiltered, filteredL6, checks, spanning)
		if checks < int64(spanning) || spanning == 0 {
			t.Errorf("%s: %d filter checks for %d filtered tables spanning absent keys: a table was read without its filter", s.what, checks, spanning)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
