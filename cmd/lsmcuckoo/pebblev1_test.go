package main

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	pebble1 "github.com/cockroachdb/pebble"
	bloom1 "github.com/cockroachdb/pebble/bloom"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/advice"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebble1store"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// v1Options are small Pebble v1 options that build a tree of several levels
// from a few tens of thousands of keys, at format major version fmv, with
// filters on L0..L5 as levels sets them.
func v1Options(fmv pebble1.FormatMajorVersion, levels func(o *pebble1.Options)) *pebble1.Options {
	o := &pebble1.Options{
		FormatMajorVersion:    fmv,
		MemTableSize:          256 << 10,
		L0CompactionThreshold: 3,
		LBaseMaxBytes:         512 << 10,
		Logger:                quietLogger{},
		Levels:                make([]pebble1.LevelOptions, 7),
	}
	for l := range o.Levels {
		o.Levels[l].TargetFileSize = 64 << 10 << l
	}
	levels(o)
	return o
}

// gethBloom is go-ethereum's Pebble v1 setting: bloom(10) on L0..L5, no
// filter on L6.
func gethBloom(o *pebble1.Options) {
	for l := 0; l < 6; l++ {
		o.Levels[l].FilterPolicy = bloom1.FilterPolicy(10)
	}
}

// v1Lsmcuckoo is lsmcuckoo at 12 bits per key on every level.
func v1Lsmcuckoo(o *pebble1.Options) {
	for l := range o.Levels {
		o.Levels[l].FilterPolicy = pebblev1.NewPolicy(12)
	}
	pebblev1.RegisterPolicies(o, 12)
}

// buildV1Store writes n keys with Pebble v1 in a shuffled order, with some
// deletes and a range deletion: eight tenths under first, then a tenth
// under first and a tenth under last with automatic compactions off, so
// that L0 keeps tables of both.
func buildV1Store(t testing.TB, dir string, n int, fmv pebble1.FormatMajorVersion, first, last func(*pebble1.Options)) {
	t.Helper()
	for i, r := range [][2]int{{0, n * 8 / 10}, {n * 8 / 10, n * 9 / 10}, {n * 9 / 10, n}} {
		policy := first
		if i == 2 {
			policy = last
		}
		o := v1Options(fmv, policy)
		o.DisableAutomaticCompactions = i > 0
		db, err := pebble1.Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		b := db.NewBatch()
		for c, p := range rng.Perm(r[1] - r[0]) {
			k := r[0] + p
			_ = b.Set(key(k), value(k, 48), nil)
			if k%97 == 0 {
				_ = b.Delete(key(k), nil)
			}
			if c%1000 == 999 {
				if err := b.Commit(pebble1.NoSync); err != nil {
					t.Fatal(err)
				}
				b = db.NewBatch()
			}
		}
		_ = b.DeleteRange(key(r[0]+10), key(r[0]+20), nil)
		if err := b.Commit(pebble1.Sync); err != nil {
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

// readV1Options opens a store with every filter this command knows.
func readV1Options() *pebble1.Options {
	o := &pebble1.Options{Logger: quietLogger{}}
	pebble1store.ReadFilters(o)
	return o
}

// v1View is what Pebble v1 itself says about the store's levels.
func v1View(t *testing.T, dir string) pebbleView {
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
	m := db.Metrics()
	var v pebbleView
	for l, infos := range levels {
		for _, info := range infos {
			v.add(l, info.Properties.NumEntries, info.Properties.FilterSize, info.Properties.FilterPolicyName)
		}
		if uint64(m.Levels[l].NumFiles) != v.tables[l] {
			t.Fatalf("L%d: Metrics has %d tables, SSTables %d", l, m.Levels[l].NumFiles, v.tables[l])
		}
		v.tableBytes[l] = uint64(m.Levels[l].Size)
	}
	v.sublevels = v1Sublevels(t, dir)
	return v
}

// v1Sublevels is Pebble v1's own L0 sublevel count, which its Metrics give
// only after a version change: read from a read-write open of a copy.
func v1Sublevels(t *testing.T, dir string) int {
	t.Helper()
	cp := t.TempDir()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "LOCK" {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(cp, d.Name()), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	o := readV1Options()
	o.DisableAutomaticCompactions = true
	db, err := pebble1.Open(cp, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	return int(db.Metrics().Levels[0].Sublevels)
}

// v1Contents reads every visible point key and value of the store.
func v1Contents(t *testing.T, dir string) []string {
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
	var out []string
	for valid := it.First(); valid; valid = it.Next() {
		out = append(out, fmt.Sprintf("%q=%x", it.Key(), sha256.Sum256(it.Value())))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// A Pebble v1 store, at the oldest format and at the newest v1 writes, is
// read with Pebble v1 without a byte written; its figures match Pebble
// v1's own, bloom, lsmcuckoo and unfiltered tables told apart, and the Go
// lines are tablefilter/pebblev1's.
func TestInspectPebbleV1(t *testing.T) {
	for _, fmv := range []pebble1.FormatMajorVersion{pebble1.FormatMostCompatible, pebble1.FormatNewest} {
		t.Run(fmt.Sprint(fmv), func(t *testing.T) {
			dir := t.TempDir()
			buildV1Store(t, dir, 40000, fmv, gethBloom, v1Lsmcuckoo)
			before := hashDir(t, dir)
			r := inspectJSON(t, dir)
			if after := hashDir(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatal("inspect changed the store's files")
			}
			if r.PebbleModule != pebblestore.ModuleV1 || r.FormatVersion != uint64(fmv) {
				t.Fatalf("module %q (%s), format %d", r.PebbleModule, r.PebbleModuleWhy, r.FormatVersion)
			}
			checkAgainstPebble(t, r, v1View(t, dir))
			checkReads(t, r)
			checkV1Families(t, r)
			lines := strings.Join(r.GoLines, "\n")
			for _, want := range []string{"pebblev1.SetLevelBudgets(opts, [7]float64{", "pebblev1.RegisterPolicies(opts, 12)",
				`opts.Filters["rocksdb.BuiltinBloomFilter"] = bloom.FilterPolicy(10)`} {
				if !strings.Contains(lines, want) {
					t.Errorf("Go lines lack %q:\n%s", want, lines)
				}
			}
			if strings.Contains(lines, "tablefilter.") || strings.Contains(lines, "NoFilterPolicy") {
				t.Errorf("Go lines for Pebble v2 on a v1 store:\n%s", lines)
			}
			// Pebble v1's own read-only open above rewrote LOCK.
			before = hashDir(t, dir)
			code, out, stderr := runCLI("inspect", "-probes", "100", dir)
			if code != 0 || !strings.Contains(out, "Pebble v1 store") {
				t.Fatalf("text report: exit %d, %s\n%s", code, stderr, out)
			}
			// Pebble v2 opens neither format: forced, it is one line and
			// exit 2 at the oldest; at FormatNewest of v1 it reads.
			code, _, stderr = runCLI("inspect", "-format", "pebble2", "-probes", "100", dir)
			if fmv < pebblestore.V2OldestFormat && (code != 2 || strings.Count(stderr, "\n") != 1) {
				t.Fatalf("-format pebble2 on a v1 store at format %d: exit %d, %q", fmv, code, stderr)
			}
			if after := hashDir(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Fatal("inspect changed the store's files")
			}
		})
	}
}

// checkV1Families checks the families buildV1Store writes: bloom above L6,
// none on L6, lsmcuckoo at 12 bits and bloom on L0, each probed at its own
// rate.
func checkV1Families(t *testing.T, r *advice.Report) {
	t.Helper()
	bloomName, ours := pebblestore.BloomName, pebblev1.NewPolicy(12).Name()
	if r.Levels[0].Families[ours] == 0 || r.Levels[0].Families[bloomName] == 0 || r.Levels[6].Families[pebblestore.NoneName] != r.Levels[6].Tables || r.Levels[6].Tables == 0 {
		t.Fatalf("families L0 %v, L6 %v", r.Levels[0].Families, r.Levels[6].Families)
	}
	seen := map[string]bool{}
	for _, lv := range r.Levels {
		for name := range lv.Families {
			seen[name] = true
		}
		if lv.Tables > 0 && lv.Level < 6 && lv.Families[pebblestore.NoneName] > 0 {
			t.Errorf("L%d: tables without a filter above L6: %v", lv.Level, lv.Families)
		}
		// Only tables of one family are on the level: its rate is the
		// family's.
		switch {
		case lv.Families[pebblestore.NoneName] == lv.Tables && lv.Tables > 0:
			if lv.FPR != 1 || lv.Unprobed != lv.Tables {
				t.Errorf("L%d unfiltered: FPR %v, %d unprobed", lv.Level, lv.FPR, lv.Unprobed)
			}
		case lv.Families[bloomName] == lv.Tables && lv.Tables > 0:
			if lv.FPR < 0.002 || lv.FPR > 0.03 {
				t.Errorf("L%d bloom: FPR %.4f", lv.Level, lv.FPR)
			}
		case lv.Families[ours] == lv.Tables && lv.Tables > 0:
			if lv.FPR > 0.01 || lv.BitsPerKey < 11 || lv.BitsPerKey > 13 {
				t.Errorf("L%d lsmcuckoo: FPR %.4f at %.2f bits per key", lv.Level, lv.FPR, lv.BitsPerKey)
			}
		}
	}
	if !seen[bloomName] || !seen[ours] || !seen[pebblestore.NoneName] {
		t.Fatalf("families seen %v, want bloom, lsmcuckoo and none", seen)
	}
}

// writerLoopV1 is the child process that owns a Pebble v1 store
// (ownerLoop).
func writerLoopV1(dir string) {
	o := v1Options(pebble1.FormatMostCompatible, gethBloom)
	o.DisableAutomaticCompactions = true
	db, err := pebble1.Open(dir, o)
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	ownerLoop(dir, ownedV1{db})
}

type ownedV1 struct{ *pebble1.DB }

func (db ownedV1) set(k, v []byte)           { _ = db.Set(k, v, pebble1.NoSync) }
func (db ownedV1) flush()                    { _ = db.Flush() }
func (db ownedV1) compact(start, end []byte) { _ = db.Compact(start, end, true) }

// Inspect and compare -from write nothing into a Pebble v1 store another
// process holds open, idle or writing, and migrate refuses it.
func TestPebbleV1HeldOpen(t *testing.T) {
	dir := t.TempDir()
	buildV1Store(t, dir, 12000, pebble1.FormatMostCompatible, gethBloom, gethBloom)
	own := startOwnerAs(t, dir, "writer1")
	own.send(t, "write") // a table flushed and a memtable in the owner
	before := hashDir(t, dir)
	if r := inspectJSON(t, dir); r.Keys == 0 || r.PebbleModule != pebblestore.ModuleV1 {
		t.Fatalf("inspect: %d keys, module %q", r.Keys, r.PebbleModule)
	}
	if code, out, stderr := runCLI(append([]string{"compare", "-from", dir, "-bits", "10", "-table-keys", "2000"}, quick...)...); code != 0 {
		t.Fatalf("compare -from: exit %d, %s\n%s", code, stderr, out)
	}
	if code, _, stderr := runCLI("migrate", "-bits", "10", "-quiet", dir); code != 2 || !strings.Contains(stderr, "held by another process") {
		t.Fatalf("migrate of a held store: exit %d, %q", code, stderr)
	}
	if after := hashDir(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the store changed under an idle owner:\nbefore %v\nafter  %v", before, after)
	}
	own.send(t, "burst")
	for i := 0; i < 3; i++ {
		if code, _, stderr := runCLI("inspect", "-probes", "200", dir); code != 0 {
			t.Fatalf("inspect during writes: exit %d: %s", code, stderr)
		}
	}
}

// compare -from samples a Pebble v1 store's whole keys, the filter keys of
// its default comparer, which has no Split.
func TestCompareFromPebbleV1(t *testing.T) {
	dir := t.TempDir()
	buildV1Store(t, dir, 12000, pebble1.FormatNewest, gethBloom, v1Lsmcuckoo)
	before := hashDir(t, dir)
	r, stdout, _ := compareJSON(t, "-from", dir, "-bits", "10")
	if after := hashDir(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("compare -from changed the store's files")
	}
	visible := len(v1Contents(t, dir))
	if r.Keys.Format != "Pebble v1" || r.Keys.Prefixes || r.Keys.Sampled < visible || r.Keys.Sampled > 12000 {
		t.Fatalf("keys %+v, %d visible keys", r.Keys, visible)
	}
	if len(r.TableKeys) == 0 || !strings.Contains(stdout, "pebble-bloom/10") {
		t.Fatalf("table sizes %v, output:\n%s", r.TableKeys, stdout)
	}
	checkRows(t, r)
}

// A damaged table of a Pebble v1 store is reported as damaged and the rest
// still is, although Pebble v1's own open refuses a store whose tables are
// missing or truncated.
func TestInspectPebbleV1Damage(t *testing.T) {
	checkDamage(t, func(t *testing.T, dir string) []damageable {
		buildV1Store(t, dir, 30000, pebble1.FormatMostCompatible, gethBloom, gethBloom)
		return tableFilesOf(t, dir, pebble1store.Open)
	})
}
