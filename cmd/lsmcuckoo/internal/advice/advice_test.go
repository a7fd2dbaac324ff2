package advice

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
)

// tree is a Pebble-shaped tree of bloom tables at about 10 bits per key and
// a 1% rate: 3 L0 sublevels, L4..L6 growing tenfold.
func tree(skipLast bool) *Report {
	r := &Report{Path: PathGet, getSkipsLast: skipLast}
	keys := [pebblestore.NumLevels]uint64{30000, 0, 0, 0, 10000, 100000, 1000000}
	for l, k := range keys {
		lv := Level{Level: l, Keys: k}
		if k > 0 {
			lv.Tables = int(k/10000) + 1
			lv.FPR = 0.01
			lv.FilterBytes = k * 10 / 8
		}
		if l == 0 {
			lv.Sublevels = 3
		}
		r.Levels = append(r.Levels, lv)
		r.Keys += lv.Keys
		r.FilterBytes += lv.FilterBytes
	}
	r.ReadsGet, r.ReadsSeek = readsOf(r.Levels, skipLast, func(l int) float64 { return r.Levels[l].FPR })
	return r
}

func TestReadsModel(t *testing.T) {
	r := tree(true)
	// Get: 3 sublevels + L4 + L5 at 1%; seek adds L6.
	if !near(r.ReadsGet, 0.05) || !near(r.ReadsSeek, 0.06) {
		t.Fatalf("get %v seek %v", r.ReadsGet, r.ReadsSeek)
	}
	if b := tree(false); !near(b.ReadsGet, 0.06) {
		t.Fatalf("a lookup that consults the last level: get %v", b.ReadsGet)
	}
}

func near(a, b float64) bool { return a > b-1e-9 && a < b+1e-9 }

func TestRecommendations(t *testing.T) {
	for _, path := range []string{PathGet, PathSeek} {
		r := tree(true)
		r.Path = path
		r.recommend(10)
		rec, sav := r.Recommendation, r.Saving
		// Same memory: within the half-bit rounding of the budgets.
		if rec.FilterBytes > r.FilterBytes*21/20 || rec.Uniform.FilterBytes > r.FilterBytes*21/20 {
			t.Errorf("%s: same-memory options take %d and %d bytes, the store %d", path, rec.FilterBytes, rec.Uniform.FilterBytes, r.FilterBytes)
		}
		target := r.ReadsGet
		if path == PathSeek {
			target = r.ReadsSeek
		}
		if sav.Note == "" && (r.pathReads(Figures{ReadsGet: sav.ReadsGet, ReadsSeek: sav.ReadsSeek}) > target ||
			r.pathReads(sav.Uniform) > target) {
			t.Errorf("%s: same-reads options read more than the store: %+v, target %v", path, sav, target)
		}
		if sav.FilterBytes > rec.FilterBytes {
			t.Errorf("%s: matching the reads takes more memory (%d) than the same-memory option (%d)", path, sav.FilterBytes, rec.FilterBytes)
		}
		l6 := rec.LevelBits[pebblestore.NumLevels-1]
		if path == PathGet && l6 != 0 || path == PathSeek && l6 == 0 {
			t.Errorf("%s: L6 budget %v", path, l6)
		}
		for l, b := range rec.LevelBits {
			if b != 0 && (b < 4 || b > 64 || b*2 != float64(int(b*2))) {
				t.Errorf("%s: L%d budget %v off the half-bit grid", path, l, b)
			}
		}
	}
}

// TestGoLines checks the exact Go lines for a Pebble store of either
// module: fitted to DB.Get, the budgets name L6's NoFilter inside
// SetLevelBudgets and the comment says how they were fitted (SkipL6) and
// how to tune them live; fitted to SeekPrefixGE, every level has a
// budget and SkipL6 is not mentioned.
func TestGoLines(t *testing.T) {
	for _, tc := range []struct {
		module, path string
		want         []string
	}{
		{"", PathGet, []string{
			"// Per level, fitted to DB.Get (or uniform: opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)):",
			"// the budgets of tablefilter.LevelBudgets(shape, 10) with shape.SkipL6 = 1: DB.Get never reads L6's filters,",
			"// so L6 gets tablefilter.NoFilter and its bytes go to L0-L5, at most 32 bits/key each; or self-tuning:",
			"// tuned := tablefilter.SetAdaptiveBudgets(opts, 10, tablefilter.SkipL6(1)), then tuned.Attach(db) after Open",
			"tablefilter.SetLevelBudgets(opts, [7]float64{32, 10, 10, 10, 32, 32, tablefilter.NoFilter})",
		}},
		{pebblestore.ModuleV1, PathGet, []string{
			"// Per level, fitted to DB.Get (or uniform: opts.Levels = []pebble.LevelOptions{{FilterPolicy: pebblev1.NewPolicy(10)}}, every level copying it; or set FilterPolicy on each entry you list):",
			"// the budgets of pebblev1.LevelBudgets(shape, 10) with shape.SkipL6 = 1: DB.Get never reads L6's filters,",
			"// so L6 gets pebblev1.NoFilter and its bytes go to L0-L5, at most 32 bits/key each; or self-tuning:",
			"// tuned := pebblev1.SetAdaptiveBudgets(opts, 10, pebblev1.SkipL6(1)), then tuned.Attach(db) after Open",
			"pebblev1.SetLevelBudgets(opts, [7]float64{32, 10, 10, 10, 32, 32, pebblev1.NoFilter})",
		}},
		{"", PathSeek, []string{
			"// Per level, fitted to SeekPrefixGE with UseL6Filters (or uniform: opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)):",
			"tablefilter.SetLevelBudgets(opts, [7]float64{16, 10, 10, 10, 17, 12.5, 9.5})",
		}},
	} {
		r := tree(true)
		r.Format, r.PebbleModule, r.Path = "pebble", tc.module, tc.path
		r.Names = []string{pebblestore.BloomName, "lsmcuckoo.v3.bpk=12", "lsmcuckoo.v2.bpk=12", "acme"}
		r.recommend(10)
		pkg := "tablefilter"
		if tc.module == pebblestore.ModuleV1 {
			pkg = "pebblev1"
		}
		want := append(tc.want,
			"// The filters the store's tables carry now, until compactions rewrite them:",
			pkg+".RegisterPolicies(opts, 12)",
			`opts.Filters["rocksdb.BuiltinBloomFilter"] = bloom.FilterPolicy(10) // any bits per key reads every bloom block`,
			`// opts.Filters["acme"] = ... // a filter this tool does not know: register your own policy of this name`)
		if got := goLines(r); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("module %q, path %s: Go lines\n%s\nwant\n%s", tc.module, tc.path, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// A level whose tables hold no point key (range keys only, such as a
// range-key unset left by an interrupted migration) is never read by a
// lookup: its rate is 0, not the 1 of a level whose tables are all damaged.
func TestLevelWithoutPointKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	rangeKeysOnly := []pebblestore.Table{{Level: 0, FileNum: 7, Size: 900, FilterName: "lsmcuckoo.v3.bpk=32"}}
	if lv := measureLevel(0, rangeKeysOnly, 100, rng, map[string]bool{}); lv.FPR != 0 {
		t.Errorf("tables without point keys: FPR %v, want 0", lv.FPR)
	}
	damaged := []pebblestore.Table{{Level: 0, FileNum: 7, Damaged: "missing: 000007.sst"}}
	if lv := measureLevel(0, damaged, 100, rng, map[string]bool{}); lv.FPR != 1 {
		t.Errorf("damaged tables only: FPR %v, want 1", lv.FPR)
	}
}

// TestEmptyLevelsGetTheUniformBudget: with the keys only on L0 and L6 the
// Get path's per-level fit has a few keys to spend a large average on; the
// empty levels L1..L5 must not take that average's leftover (up to 64
// bits/key), which they would pay per key once they fill.
func TestEmptyLevelsGetTheUniformBudget(t *testing.T) {
	r := &Report{Path: PathGet, getSkipsLast: true}
	keys := [pebblestore.NumLevels]uint64{87000, 0, 0, 0, 0, 0, 5400000}
	for l, k := range keys {
		lv := Level{Level: l, Keys: k}
		if k > 0 {
			lv.Tables = int(k/10000) + 1
			lv.FPR = 0.01
			lv.FilterBytes = k * 10 / 8
		}
		if l == 0 {
			lv.Sublevels = 2
		}
		r.Levels = append(r.Levels, lv)
		r.Keys += lv.Keys
		r.FilterBytes += lv.FilterBytes
	}
	r.ReadsGet, r.ReadsSeek = readsOf(r.Levels, true, func(l int) float64 { return r.Levels[l].FPR })
	r.recommend(10)
	u := r.Recommendation.UniformBits
	for l := 1; l < pebblestore.NumLevels-1; l++ {
		if b := r.Recommendation.LevelBits[l]; b != u {
			t.Errorf("empty L%d gets %v bits/key in the same-memory fit, want the uniform %v", l, b, u)
		}
		if b := r.Saving.LevelBits[l]; b > 32 {
			t.Errorf("empty L%d gets %v bits/key in the same-reads fit", l, b)
		}
	}
}
