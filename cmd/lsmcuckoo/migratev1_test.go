package main

import (
	"fmt"
	"strings"
	"testing"

	pebble1 "github.com/cockroachdb/pebble"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebble1store"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// checkMigratedV1 checks, with Pebble v1, that every table carries
// want(level) and no range-key unset (the migration's marker) is left.
func checkMigratedV1(t *testing.T, dir string, want func(level int) string) {
	t.Helper()
	o := readV1Options()
	o.ReadOnly = true
	db, err := pebble1.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	levels, err := db.SSTables(pebble1.WithProperties())
	if err != nil {
		t.Fatal(err)
	}
	var tables []migratedTable
	for l, infos := range levels {
		for _, info := range infos {
			tables = append(tables, migratedTable{l, info.FileNum.String(), info.Properties.FilterPolicyName, info.Properties.NumRangeKeyUnsets})
		}
	}
	checkMigratedTables(t, tables, want)
}

// checkV1Lookups opens the migrated store as the application would, with
// the policy of bits and pebblev1.RegisterPolicies, and looks up every key
// of present (all found: no false negative) and absent keys (none found).
// Lookups through SeekPrefixGE with UseL6Filters consult the filters of
// every level, L6's included, where the migration leaves the tables, and
// Pebble v1's filter metrics must show those filters excluding the absent
// keys.
func checkV1Lookups(t *testing.T, dir string, bits float64, present [][]byte, absent int) {
	t.Helper()
	o := &pebble1.Options{Logger: quietLogger{}, Comparer: wholeKeySplit()}
	o.Levels = []pebble1.LevelOptions{{FilterPolicy: pebblev1.NewPolicy(bits)}}
	pebblev1.RegisterPolicies(o, bits)
	db, err := pebble1.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, k := range present {
		v, closer, err := db.Get(k)
		if err != nil {
			t.Fatalf("Get %q: %v (a false negative)", k, err)
		}
		_ = v
		closer.Close()
	}
	it, err := db.NewIter(&pebble1.IterOptions{UseL6Filters: true})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for _, k := range present {
		if !it.SeekPrefixGE(k) || string(it.Key()) != string(k) {
			t.Fatalf("SeekPrefixGE %q: not found (a false negative)", k)
		}
	}
	before := db.Metrics().Filter
	for i := 0; i < absent; i++ {
		k := append(key(i*9), '#') // between two keys of the store
		if it.SeekPrefixGE(k) && string(it.Key()) == string(k) {
			t.Fatalf("absent key %q found", k)
		}
	}
	m := db.Metrics().Filter
	hits, misses := m.Hits-before.Hits, m.Misses-before.Misses
	// Each absent key falls in the range of one table on each level it
	// reaches: nearly every probe is a filter hit.
	t.Logf("filter metrics over %d absent keys: %d hits, %d misses", absent, hits, misses)
	if hits < int64(absent)/2 || misses > hits/20 {
		t.Fatalf("filter metrics over %d absent keys: %d hits, %d misses", absent, hits, misses)
	}
}

// v1Keys is the present keys of the store.
func v1Keys(t *testing.T, dir string) [][]byte {
	t.Helper()
	db, err := pebble1.Open(dir, readV1Options())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	for valid := it.First(); valid; valid = it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// A go-ethereum-style Pebble v1 store (bloom on L0..L5, none on L6) at the
// newest v1 format is rewritten with Pebble v1 to lsmcuckoo: every table
// carries the new name, every key and value is kept, and the store reopens
// with pebblev1's policy, every key found through its filters.
func TestMigratePebbleV1(t *testing.T) {
	dir := t.TempDir()
	buildV1Store(t, dir, 20000, pebble1.FormatNewest, gethBloom, gethBloom)
	before := v1Contents(t, dir)
	code, out, stderr := runCLI("migrate", "-bits", "12", "-quiet", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	for _, want := range []string{"Pebble v1 store", "Before:", "After:", "opts.Levels = []pebble.LevelOptions{{FilterPolicy: pebblev1.NewPolicy(12)}}"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	name := pebblev1.NewPolicy(12).Name()
	checkMigratedV1(t, dir, func(int) string { return name })
	if after := v1Contents(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("contents changed: %d entries before, %d after", len(before), len(after))
	}
	if v, err := pebblestore.FormatMajorVersion(dir); err != nil || v != uint64(pebble1.FormatNewest) {
		t.Fatalf("format major version %d (%v), want it unchanged", v, err)
	}
	checkV1Lookups(t, dir, 12, v1Keys(t, dir), 2000)
	if r := inspectJSON(t, dir); r.PebbleModule != pebblestore.ModuleV1 {
		t.Fatalf("after the migration the store reads as %q: %s", r.PebbleModule, r.PebbleModuleWhy)
	}
}

// A Pebble v1 store at its default format, FormatMostCompatible, is
// refused with one line and nothing changed, then migrated per level with
// -ratchet, which raises it to FormatRangeKeys.
func TestMigratePebbleV1OldFormat(t *testing.T) {
	dir := t.TempDir()
	buildV1Store(t, dir, 20000, pebble1.FormatMostCompatible, gethBloom, gethBloom)
	before := v1Contents(t, dir)
	h := hashDir(t, dir)
	code, _, stderr := runCLI("migrate", "-bits", "10", "-quiet", dir)
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "FormatRangeKeys") || !strings.Contains(stderr, "-ratchet") {
		t.Fatalf("exit %d: %q", code, stderr)
	}
	if fmt.Sprint(hashDir(t, dir)) != fmt.Sprint(h) {
		t.Fatal("a refused migration changed the store")
	}
	s, err := pebble1store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	budgets := pebblev1.LevelBudgets(pebblev1.LevelShape(shapeOf(s)), 10)
	code, out, stderr := runCLI("migrate", "-bits", "10", "-levels", "-ratchet", "-quiet", dir)
	if code != 0 || !strings.Contains(out, "pebblev1.SetLevelBudgets(opts, [7]float64{") {
		t.Fatalf("exit %d: %s\n%s", code, stderr, out)
	}
	checkMigratedV1(t, dir, func(l int) string { return pebblev1.NewPolicy(budgets[l]).Name() })
	if after := v1Contents(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("contents changed")
	}
	if v, err := pebblestore.FormatMajorVersion(dir); err != nil || v != uint64(pebble1.FormatRangeKeys) {
		t.Fatalf("format major version %d (%v), want FormatRangeKeys", v, err)
	}
}

// A Pebble v1 migration killed mid-compaction leaves a store that opens
// with all its data, and a second run finishes the job.
func TestMigratePebbleV1Killed(t *testing.T) {
	dir := t.TempDir()
	buildV1Store(t, dir, 40000, pebble1.FormatNewest, gethBloom, gethBloom)
	before := v1Contents(t, dir)
	killMidMigration(t, dir)
	if after := v1Contents(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("after SIGKILL: %d entries, before %d", len(after), len(before))
	}
	code, out, errs := runCLI("migrate", "-bits", "11", "-quiet", dir)
	if code != 0 {
		t.Fatalf("second run: exit %d: %s\n%s", code, errs, out)
	}
	name := pebblev1.NewPolicy(11).Name()
	checkMigratedV1(t, dir, func(int) string { return name })
	if after := v1Contents(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("contents changed after the second run")
	}
}
