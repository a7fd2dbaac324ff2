package pebblev1_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// ---- MVCC-like keys: "<prefix>@<version>" under a comparer with Split ----

func atKey(i, version int) []byte { return fmt.Appendf(nil, "user%08d@%06d", i, version) }
func atPrefix(i int) []byte       { return fmt.Appendf(nil, "user%08d", i) }
func atValue(i, version int) []byte {
	return fmt.Appendf(nil, "value-%d-%d", i, version)
}

// atVersions is how many versions prefix i has: 1 to 3. Only even i are
// written; odd i are the absent keys, between present ones, so that every
// probe falls inside some table's key range.
func atVersions(i int) int { return 1 + (i/2)%3 }

func atSplit(k []byte) int {
	if i := bytes.LastIndexByte(k, '@'); i >= 0 {
		return i
	}
	return len(k)
}

// atCompare orders keys by prefix, then a bare prefix first, then versions
// newest first (fixed-width decimals: descending bytes, descending
// versions).
func atCompare(a, b []byte) int {
	sa, sb := atSplit(a), atSplit(b)
	if c := bytes.Compare(a[:sa], b[:sb]); c != 0 {
		return c
	}
	a, b = a[sa:], b[sb:]
	if len(a) == 0 || len(b) == 0 {
		return min(len(a), 1) - min(len(b), 1)
	}
	return bytes.Compare(b, a)
}

// atComparer is a Pebble v1 comparer with Split, so the filters see
// prefixes: the versions of a key are one key to them.
var atComparer = func() *pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Name = "lsmcuckoo.test.at-versions"
	c.Split = atSplit
	c.Compare = atCompare
	c.Equal = func(a, b []byte) bool { return atCompare(a, b) == 0 }
	c.AbbreviatedKey = func(k []byte) uint64 { return pebble.DefaultComparer.AbbreviatedKey(k[:atSplit(k)]) }
	// a itself is always a valid separator and successor; the default ones
	// shorten keys by bytes and know nothing of versions.
	c.Separator = func(dst, a, b []byte) []byte { return append(dst, a...) }
	c.Successor = func(dst, a []byte) []byte { return append(dst, a...) }
	return &c
}()

type quietLogger struct{}

func (quietLogger) Infof(string, ...any)         {}
func (quietLogger) Errorf(f string, a ...any)    { fmt.Fprintf(os.Stderr, "pebble: "+f+"\n", a...) }
func (quietLogger) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }

// storeN is the prefix space of a test store: storeN/2 present prefixes
// with 1-3 versions each. probeStride is the step between probed
// prefixes. Under the race detector Pebble v1 turns on its invariant
// checks, which slow writes and lookups many times over, so there the
// store is smaller and every 8th prefix is probed: still thousands of
// lookups over every level, with the detector watching.
var (
	storeN      = map[bool]int{false: 40000, true: 12000}[race.Enabled]
	probeStride = map[bool]int{false: 1, true: 8}[race.Enabled]
)

// writeStore writes a store into dir under the options opts returns, in
// sessions that leave tables on every kind of level Get treats
// differently: version 1 of every present prefix with automatic
// compactions and tiny level targets, which push it down to L6, and last
// a narrow range of its own in two flushes, the first moved whole to the
// base level above L6, the second merged into it by a compaction that
// writes that level's filter; then versions 2 and 3 flushed in four
// interleaved rounds with compactions off, L0 tables spanning the whole
// key range. Each flush in the first session waits for the compactions
// it starts, so the shape does not depend on timing.
func writeStore(t *testing.T, dir string, opts func() *pebble.Options) {
	t.Helper()
	write := func(o *pebble.Options, version, rounds, lo, hi int) {
		db, err := pebble.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		for r := range rounds {
			b := db.NewBatch()
			for i := lo + 2*r; i < hi; i += 2 * rounds {
				if atVersions(i) >= version {
					if err := b.Set(atKey(i, version), atValue(i, version), nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := b.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
			for deadline := time.Now().Add(2 * time.Minute); !o.DisableAutomaticCompactions; time.Sleep(2 * time.Millisecond) {
				if m := db.Metrics(); m.Compact.NumInProgress == 0 && m.Levels[0].NumFiles == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("compactions still running after two minutes")
				}
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	tail := storeN - storeN/20
	o := opts()
	o.DisableAutomaticCompactions = false
	o.MemTableSize = 64 << 10
	o.L0CompactionThreshold = 1
	o.LBaseMaxBytes = 16 << 10
	o.Experimental.LevelMultiplier = 2 // more levels above L6
	write(o, 1, 8, 0, tail)
	write(o, 1, 2, tail, storeN) // moved to the base level, then merged into it
	for v := 2; v <= 3; v++ {
		write(opts(), v, 4, 0, storeN)
	}
}

// storeOptions are the options every session of a test store opens with,
// before its filter policies are set.
func storeOptions(c *pebble.Comparer) *pebble.Options {
	return &pebble.Options{
		Comparer:           c,
		Logger:             quietLogger{},
		FormatMajorVersion: pebble.FormatNewest,
		// The tree stays as written while it is read.
		DisableAutomaticCompactions: true,
		// Small tables at every level: the small store still spans many.
		Levels: []pebble.LevelOptions{{TargetFileSize: 32 << 10}},
	}
}

// tableFilters returns, per level, the filter policy name each table
// records (its rocksdb.filter.policy property).
func tableFilters(t *testing.T, db *pebble.DB) [][]string {
	t.Helper()
	levels, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	names := make([][]string, len(levels))
	for l, tables := range levels {
		for _, tab := range tables {
			names[l] = append(names[l], tab.Properties.FilterPolicyName)
		}
	}
	return names
}

// checkStore reads back every present key with Get, and with SeekPrefixGE
// (all versions, newest first) when the comparer has Split, and checks
// that absent keys are absent. It returns the number of absent Gets and
// the filter checks they caused, from Pebble's metrics.
func checkStore(t *testing.T, db *pebble.DB, split bool) (probes int, hits, misses int64) {
	t.Helper()
	get := func(k []byte) ([]byte, error) {
		v, c, err := db.Get(k)
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
				t.Fatalf("Get(%s) = %q, %v; want %q", atKey(i, v), got, err, atValue(i, v))
			}
		}
	}
	if split {
		// UseL6Filters: SeekPrefixGE consults L6's filters too, which Get
		// never does, so every table's filter sees the present prefixes.
		it, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < storeN; i += step {
			versions := 0
			for ok := it.SeekPrefixGE(atPrefix(i)); ok; ok = it.Next() {
				versions++
				if want := atKey(i, atVersions(i)-versions+1); !bytes.Equal(it.Key(), want) {
					t.Fatalf("SeekPrefixGE(%s): version %d is %s, want %s", atPrefix(i), versions, it.Key(), want)
				}
			}
			if versions != atVersions(i) {
				t.Fatalf("SeekPrefixGE(%s) found %d versions, want %d (err %v)", atPrefix(i), versions, atVersions(i), it.Error())
			}
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	m0 := db.Metrics()
	for i := 1; i < storeN; i += step {
		if _, err := get(atKey(i, 1)); !errors.Is(err, pebble.ErrNotFound) {
			t.Fatalf("Get(absent %s) err = %v, want ErrNotFound", atKey(i, 1), err)
		}
		probes++
	}
	m := db.Metrics()
	return probes, m.Filter.Hits - m0.Filter.Hits, m.Filter.Misses - m0.Filter.Misses
}

// checkFiltered asserts that absent Gets were answered by the filters: at
// least as many filter checks as probes, nearly all of them rejections.
func checkFiltered(t *testing.T, probes int, hits, misses int64) {
	t.Helper()
	t.Logf("%d absent Gets: %d filter checks, %d passed", probes, hits+misses, misses)
	if hits+misses < int64(probes) {
		t.Errorf("only %d filter checks for %d absent Gets: the filters are not on the read path", hits+misses, probes)
	}
	// 10 bits per key plans well under 1% false positives; 5% leaves room
	// for noise on a few thousand probes and nothing else.
	if misses*20 > hits+misses {
		t.Errorf("filters passed %d of %d checks of absent keys", misses, hits+misses)
	}
}

// levelsSummary says how many tables each level holds and fails unless
// there are tables on L0, on some of L1-L5 and on L6.
func levelsSummary(t *testing.T, names [][]string) string {
	t.Helper()
	var parts []string
	middle := 0
	for l, tables := range names {
		if len(tables) > 0 {
			parts = append(parts, fmt.Sprintf("L%d:%d", l, len(tables)))
			if l > 0 && l < len(names)-1 {
				middle += len(tables)
			}
		}
	}
	s := strings.Join(parts, " ")
	if len(names[0]) < 4 || middle == 0 || len(names[len(names)-1]) == 0 {
		t.Fatalf("want tables on L0, on some of L1-L5 and on L6; have %s", s)
	}
	return s
}

// TestStoreUniform: a Pebble v1 store under Pebble's default comparer
// (no Split: the filter sees whole keys) with one policy set the v1 way,
// as the only entry of Options.Levels, which every level copies. Every
// table carries the policy's filter, no key is lost, and Pebble's filter
// metrics show absent Gets answered by the filters.
func TestStoreUniform(t *testing.T) {
	dir := t.TempDir()
	p := pebblev1.NewPolicy(10)
	opts := func() *pebble.Options {
		o := storeOptions(pebble.DefaultComparer)
		o.Levels[0].FilterPolicy = p
		return o
	}
	writeStore(t, dir, opts)
	db, err := pebble.Open(dir, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	names := tableFilters(t, db)
	t.Logf("tables %s", levelsSummary(t, names))
	for l, tables := range names {
		for _, name := range tables {
			if name != p.Name() {
				t.Errorf("an L%d table's filter is %q, want %q", l, name, p.Name())
			}
		}
	}
	probes, hits, misses := checkStore(t, db, false)
	checkFiltered(t, probes, hits, misses)
}

// TestStorePerLevel: MVCC-like keys under a comparer with Split, budgets
// set per level with SetLevelBudgets. Each table carries the filter of the
// level it was written to (or of a level above, for a table moved down
// whole), Get and SeekPrefixGE find every version of every present key,
// and absent Gets are answered by the filters.
func TestStorePerLevel(t *testing.T) {
	dir := t.TempDir()
	budgets := [pebblev1.NumLevels]float64{16, 15, 14, 13, 12, 11, 10}
	opts := func() *pebble.Options {
		o := storeOptions(atComparer)
		pebblev1.SetLevelBudgets(o, budgets)
		return o
	}
	writeStore(t, dir, opts)
	db, err := pebble.Open(dir, opts())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	names := tableFilters(t, db)
	t.Logf("tables %s", levelsSummary(t, names))
	seen := map[string]bool{}
	for l, tables := range names {
		for _, name := range tables {
			seen[name] = true
			ok := false
			for above := 0; above <= l; above++ {
				ok = ok || name == pebblev1.NewPolicy(budgets[above]).Name()
			}
			if !ok {
				t.Errorf("an L%d table's filter is %q, not the budget of L%d or a level above", l, name, l)
			}
		}
	}
	if len(seen) < 3 {
		t.Errorf("tables carry only the filters %v", seen)
	}
	probes, hits, misses := checkStore(t, db, true)
	checkFiltered(t, probes, hits, misses)
}

// TestOptionsFile: Pebble v1 records each level's policy in the OPTIONS
// file, "none" for a level without one, and Options.Parse with
// ParseFilterPolicy as its hook gives back the same policies (nil for
// none).
func TestOptionsFile(t *testing.T) {
	dir := t.TempDir()
	o := storeOptions(atComparer)
	pebblev1.SetLevelBudgets(o, [pebblev1.NumLevels]float64{16, 14, 12, 11, 10, 9.5, 9})
	o.Levels = append(o.Levels, pebble.LevelOptions{}) // an eighth entry, with no policy
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no OPTIONS file (%v)", err)
	}
	data, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("filter_policy=none\n")) {
		t.Errorf("OPTIONS does not write the level without a policy as none:\n%s", data)
	}
	var parsed pebble.Options
	hooks := &pebble.ParseHooks{
		NewFilterPolicy: pebblev1.ParseFilterPolicy,
		NewComparer: func(name string) (*pebble.Comparer, error) {
			if name != atComparer.Name {
				return nil, fmt.Errorf("unknown comparer %q", name)
			}
			return atComparer, nil
		},
	}
	if err := parsed.Parse(string(data), hooks); err != nil {
		t.Fatal(err)
	}
	if len(parsed.Levels) != len(o.Levels) {
		t.Fatalf("parsed %d levels, wrote %d", len(parsed.Levels), len(o.Levels))
	}
	for l := range o.Levels {
		if got, want := parsed.Levels[l].FilterPolicy, o.Levels[l].FilterPolicy; got != want {
			t.Errorf("L%d: parsed policy %v, want %v", l, got, want)
		}
	}
}

// TestStoreWithoutL6Filters: budgets fitted for absent Gets (SkipL6 1)
// leave L6 with a nil policy, Pebble v1's "no filter": the tables
// compactions write there carry none, the levels above carry their own
// policies, Get and SeekPrefixGE with L6 filters find every version of
// every present key, absent Gets are answered by the upper levels'
// filters, and the store reopens and reads the same under the same setter
// and under SetLevelPolicies, whose L6 has a filter.
func TestStoreWithoutL6Filters(t *testing.T) {
	race.SkipLong(t)
	dir := t.TempDir()
	shape := pebblev1.ModelLevelShape(storeOptions(atComparer))
	shape.SkipL6 = 1
	budgets := pebblev1.LevelBudgets(shape, 10)
	if budgets[pebblev1.NumLevels-1] != pebblev1.NoFilter {
		t.Fatalf("fitted for Gets, L6 gets %v", budgets[pebblev1.NumLevels-1])
	}
	opts := func() *pebble.Options {
		o := storeOptions(atComparer)
		pebblev1.SetLevelBudgets(o, budgets)
		return o
	}
	if p := opts().Levels[pebblev1.NumLevels-1].FilterPolicy; p != nil {
		t.Fatalf("L6 policy %v, want nil", p)
	}
	if o := (&pebble.Options{}); func() bool { pebblev1.RegisterPolicies(o, pebblev1.NoFilter); return len(o.Filters) > 0 }() {
		t.Errorf("RegisterPolicies(NoFilter) registered %v", o.Filters)
	}
	writeStore(t, dir, opts)
	for _, reopen := range []struct {
		what string
		opts func() *pebble.Options
	}{{"same setter", opts}, {"SetLevelPolicies", func() *pebble.Options {
		o := storeOptions(atComparer)
		pebblev1.SetLevelPolicies(o, 10)
		return o
	}}} {
		db, err := pebble.Open(dir, reopen.opts())
		if err != nil {
			t.Fatal(err)
		}
		names := tableFilters(t, db)
		t.Logf("%s: tables %s, budgets %v", reopen.what, levelsSummary(t, names), budgets)
		for _, name := range names[pebblev1.NumLevels-1] {
			if name != "" {
				t.Errorf("%s: an L6 table carries filter %q", reopen.what, name)
			}
		}
		for _, name := range names[0] {
			if want := pebblev1.NewPolicy(budgets[0]).Name(); name != want {
				t.Errorf("%s: an L0 table carries filter %q, want %q", reopen.what, name, want)
			}
		}
		probes, hits, misses := checkStore(t, db, true)
		checkFiltered(t, probes, hits, misses)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
