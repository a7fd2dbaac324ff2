package pebblev1_test

import (
	"bytes"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble"
	pebblev2 "github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// atComparerV2 is atComparer for Pebble v2, under the same name, which the
// store records and v2 checks at open.
var atComparerV2 = func() *pebblev2.Comparer {
	c := *pebblev2.DefaultComparer
	c.Name = atComparer.Name
	c.Split = atSplit
	c.Compare = atCompare
	c.Equal = func(a, b []byte) bool { return atCompare(a, b) == 0 }
	suffixes := func(a, b []byte) int { return atCompare(append([]byte("x"), a...), append([]byte("x"), b...)) }
	c.ComparePointSuffixes = suffixes
	c.CompareRangeSuffixes = suffixes
	c.AbbreviatedKey = func(k []byte) uint64 { return pebblev2.DefaultComparer.AbbreviatedKey(k[:atSplit(k)]) }
	c.Separator = func(dst, a, b []byte) []byte { return append(dst, a...) }
	c.Successor = func(dst, a []byte) []byte { return append(dst, a...) }
	return &c
}()

// TestMoveToPebbleV2 is the move go-ethereum made: a store written by
// Pebble v1 with this package's per-level policies, reopened by Pebble v2
// with package tablefilter's. v2 finds every key, and its filter metrics
// show every L0 sublevel's table and the middle levels' answering absent
// Gets: the names and the blocks are the same. The store was written at
// FormatFlushableIngest, the oldest format major version Pebble v2 opens.
// The same tables measured by either Pebble give the same shape, and both
// adapters fit the same budgets to it.
func TestMoveToPebbleV2(t *testing.T) {
	dir := t.TempDir()
	opts := func() *pebble.Options {
		o := storeOptions(atComparer)
		o.FormatMajorVersion = pebble.FormatFlushableIngest
		pebblev1.SetLevelPolicies(o, 10)
		return o
	}
	writeStore(t, dir, opts)
	db1, err := pebble.Open(dir, opts())
	if err != nil {
		t.Fatal(err)
	}
	shape1 := pebblev1.MeasuredLevelShape(db1.Metrics())
	levelsSummary(t, tableFilters(t, db1))
	if err := db1.Close(); err != nil {
		t.Fatal(err)
	}

	o2 := &pebblev2.Options{Comparer: atComparerV2, Logger: quietLogger{}, DisableAutomaticCompactions: true}
	tablefilter.SetLevelPolicies(o2, 10)
	db2, err := pebblev2.Open(dir, o2)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if v := db2.FormatMajorVersion(); v != pebblev2.FormatFlushableIngest {
		t.Errorf("v2 opened the store at format %d, want %d", v, pebblev2.FormatFlushableIngest)
	}
	m := db2.Metrics()
	shape2 := tablefilter.MeasuredLevelShape(m)
	if shape1.Keys != shape2.Keys || shape1.L0Runs != shape2.L0Runs {
		t.Errorf("v1 measures %+v, v2 %+v", shape1, shape2)
	}
	if b1, b2 := pebblev1.LevelBudgets(shape1, 10), tablefilter.LevelBudgets(shape2, 10); b1 != b2 {
		t.Errorf("budgets for the measured shape: v1 %v, v2 %v", b1, b2)
	}

	get := func(k []byte) ([]byte, error) {
		v, c, err := db2.Get(k)
		if err != nil {
			return nil, err
		}
		v = slices.Clone(v)
		return v, c.Close()
	}
	step := 2 * probeStride
	for i := 0; i < storeN; i += step {
		for v := 1; v <= atVersions(i); v++ {
			if got, err := get(atKey(i, v)); err != nil || !bytes.Equal(got, atValue(i, v)) {
				t.Fatalf("v2 Get(%s) = %q, %v; want %q", atKey(i, v), got, err, atValue(i, v))
			}
		}
	}
	it, err := db2.NewIter(&pebblev2.IterOptions{UseL6Filters: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < storeN; i += step {
		versions := 0
		for ok := it.SeekPrefixGE(atPrefix(i)); ok; ok = it.Next() {
			versions++
		}
		if versions != atVersions(i) {
			t.Fatalf("v2 SeekPrefixGE(%s) found %d versions, want %d (err %v)", atPrefix(i), versions, atVersions(i), it.Error())
		}
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	m0 := db2.Metrics()
	probes := 0
	for i := 1; i < storeN; i += step {
		if _, err := get(atKey(i, 1)); !errors.Is(err, pebblev2.ErrNotFound) {
			t.Fatalf("v2 Get(absent %s) err = %v", atKey(i, 1), err)
		}
		probes++
	}
	m1 := db2.Metrics()
	hits, misses := m1.Filter.Hits-m0.Filter.Hits, m1.Filter.Misses-m0.Filter.Misses
	// Every absent Get meets one table per L0 sublevel, all written by v1.
	if sub := int64(m.Levels[0].Sublevels); hits+misses < int64(probes)*sub {
		t.Errorf("%d filter checks for %d absent Gets over %d L0 sublevels: v1's tables are read unfiltered", hits+misses, probes, sub)
	}
	checkFiltered(t, probes, hits, misses)
}

// TestPebbleV2RefusesOlderFormats pins the fact behind the move: Pebble v2
// refuses a store below FormatFlushableIngest, and Pebble v1's default,
// FormatMostCompatible, is below it.
func TestPebbleV2RefusesOlderFormats(t *testing.T) {
	for _, c := range []struct {
		v1    pebble.FormatMajorVersion
		opens bool
	}{
		{pebble.FormatDefault, false}, // v1 writes FormatMostCompatible
		{pebble.FormatSSTableValueBlocks, false},
		{pebble.FormatFlushableIngest, true},
		{pebble.FormatNewest, true},
	} {
		dir := t.TempDir()
		db, err := pebble.Open(dir, &pebble.Options{FormatMajorVersion: c.v1, Logger: quietLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db2, err := pebblev2.Open(dir, &pebblev2.Options{Logger: quietLogger{}})
		if err == nil {
			err = db2.Close()
		}
		if opened := err == nil; opened != c.opens {
			t.Errorf("v1 format %d: v2 opened it: %v (%v), want %v", c.v1, opened, err, c.opens)
		}
	}
	if int(pebble.FormatFlushableIngest) != int(pebblev2.FormatMinSupported) {
		t.Errorf("v1's FormatFlushableIngest is %d, v2's minimum %d", pebble.FormatFlushableIngest, pebblev2.FormatMinSupported)
	}
}

// TestLevelBudgetsMatchV2: on the same shape both adapters allocate the
// same budgets, for the modelled shape of the same options and for random
// shapes.
func TestLevelBudgetsMatchV2(t *testing.T) {
	o1 := &pebble.Options{MemTableSize: 64 << 20, L0CompactionThreshold: 2, LBaseMaxBytes: 256 << 20}
	o1.Experimental.LevelMultiplier = 8
	o2 := &pebblev2.Options{MemTableSize: 64 << 20, L0CompactionThreshold: 2, LBaseMaxBytes: 256 << 20}
	o2.Experimental.LevelMultiplier = 8
	s1, s2 := pebblev1.ModelLevelShape(o1), tablefilter.ModelLevelShape(o2)
	if s1.Keys != s2.Keys || s1.L0Runs != s2.L0Runs {
		t.Errorf("ModelLevelShape: v1 %+v, v2 %+v", s1, s2)
	}
	// Defaults differ between the two Pebbles; each fits its own.
	t.Logf("defaults at 10 bits/key: v1 %v, v2 %v", pebblev1.LevelBudgets(pebblev1.ModelLevelShape(&pebble.Options{}), 10),
		tablefilter.LevelBudgets(tablefilter.ModelLevelShape(&pebblev2.Options{}), 10))
	r := rand.New(rand.NewPCG(30, 1))
	shapes := []pebblev1.LevelShape{s1, {}}
	for range map[bool]int{false: 10, true: 3}[race.Enabled] { // LevelBudgets is slow under the detector
		var s pebblev1.LevelShape
		for l := range s.Keys {
			if r.IntN(3) > 0 {
				s.Keys[l] = r.ExpFloat64() * float64(int(1)<<(2*l))
			}
		}
		s.L0Runs = float64(r.IntN(12))
		shapes = append(shapes, s)
	}
	for _, s := range shapes {
		for _, avg := range []float64{4.5, 10, 33} {
			if b1, b2 := pebblev1.LevelBudgets(s, avg), tablefilter.LevelBudgets(tablefilter.LevelShape(s), avg); b1 != b2 {
				t.Errorf("shape %+v at %v: v1 %v, v2 %v", s, avg, b1, b2)
			}
		}
	}
	// Fitted for Gets, with NoFilter in the grid, in either version (the
	// model shape and one drawn).
	for _, s := range []pebblev1.LevelShape{shapes[0], shapes[2]} {
		for _, skip := range []float64{0.5, 1} {
			s.SkipL6 = skip
			if b1, b2 := pebblev1.LevelBudgets(s, 10), tablefilter.LevelBudgets(tablefilter.LevelShape(s), 10); b1 != b2 {
				t.Errorf("shape %+v: v1 %v, v2 %v", s, b1, b2)
			}
			if b1, b2 := pebblev1.LevelBudgetsV4(s, 4.5), tablefilter.LevelBudgetsV4(tablefilter.LevelShape(s), 4.5); b1 != b2 {
				t.Errorf("shape %+v, version 4: v1 %v, v2 %v", s, b1, b2)
			}
		}
	}
}

// TestV4NamesMatchV2: a store moved between the two Pebble modules reads
// its version-4 tables only if both adapters write the same names and
// register the same ones. For every budget of the grid the two adapters'
// version-4 policies have one name; the version-4 per-level and adaptive
// setters, given the same options, set the same names on every level and
// register the same set of names; and both fit the same version-4 budgets
// to the same shape.
func TestV4NamesMatchV2(t *testing.T) {
	for _, b := range pebblecore.RegisteredBudgets() {
		if n1, n2 := pebblev1.NewV4Policy(b).Name(), tablefilter.NewV4Policy(b).Name(); n1 != n2 || !strings.HasPrefix(n1, "lsmcuckoo.v4.bpk=") {
			t.Errorf("budget %v: v1 names %q, v2 %q", b, n1, n2)
		}
	}
	options := func() (*pebble.Options, *pebblev2.Options) {
		o1 := &pebble.Options{MemTableSize: 64 << 20, L0CompactionThreshold: 2, LBaseMaxBytes: 256 << 20}
		o1.Experimental.LevelMultiplier = 8
		o2 := &pebblev2.Options{MemTableSize: 64 << 20, L0CompactionThreshold: 2, LBaseMaxBytes: 256 << 20}
		o2.Experimental.LevelMultiplier = 8
		return o1, o2
	}
	for _, c := range []struct {
		name string
		v1   func(*pebble.Options, float64)
		v2   func(*pebblev2.Options, float64)
	}{
		{"SetLevelPoliciesV4", pebblev1.SetLevelPoliciesV4, tablefilter.SetLevelPoliciesV4},
		{"SetAdaptiveBudgetsV4",
			func(o *pebble.Options, avg float64) { pebblev1.SetAdaptiveBudgetsV4(o, avg) },
			func(o *pebblev2.Options, avg float64) { tablefilter.SetAdaptiveBudgetsV4(o, avg) }},
	} {
		for _, avg := range []float64{6, 10.3} {
			o1, o2 := options()
			c.v1(o1, avg)
			c.v2(o2, avg)
			for l := range pebblev1.NumLevels {
				if n1, n2 := o1.Levels[l].FilterPolicy.Name(), o2.Levels[l].FilterPolicy.Name(); n1 != n2 || !strings.HasPrefix(n1, "lsmcuckoo.v4.bpk=") {
					t.Errorf("%s(%v): L%d named %q by v1, %q by v2", c.name, avg, l, n1, n2)
				}
			}
			r1, r2 := slices.Sorted(maps.Keys(o1.Filters)), slices.Sorted(maps.Keys(o2.Filters))
			if !slices.Equal(r1, r2) || len(r1) == 0 {
				t.Errorf("%s(%v): v1 registers %d names, v2 %d, not the same", c.name, avg, len(r1), len(r2))
			}
		}
	}
	o1, o2 := options()
	s := pebblev1.ModelLevelShape(o1)
	if b1, b2 := pebblev1.LevelBudgetsV4(s, 10), tablefilter.LevelBudgetsV4(tablefilter.ModelLevelShape(o2), 10); b1 != b2 {
		t.Errorf("LevelBudgetsV4: v1 %v, v2 %v", b1, b2)
	}
}
