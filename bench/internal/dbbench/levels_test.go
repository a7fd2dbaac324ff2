package dbbench

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/bench/binaryfuse"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// TestFuseLevelWidths: the fitted widths are Pebble master's, spend at
// most the average given at the fuse filter's own bits per key, give the
// small upper levels at least the bottom level's width, and fall back to
// the widest uniform width that fits when no allocation does.
func TestFuseLevelWidths(t *testing.T) {
	shape := tablefilter.LevelShape{Keys: [7]float64{2000, 0, 0, 300, 3000, 30000, 300000}, L0Runs: 3}
	const perTable = 2500
	for _, avg := range []float64{6, 10, 12, 14, 18} {
		widths := FuseLevelWidths(shape, avg, perTable)
		var spent, keys float64
		for l, w := range widths {
			if !slices.Contains(binaryfuse.Widths, w) {
				t.Fatalf("avg %v: L%d width %d", avg, l, w)
			}
			spent += shape.Keys[l] * FuseBitsPerKey(w, perTable)
			keys += shape.Keys[l]
		}
		if spent/keys > avg {
			t.Errorf("avg %v: widths %v spend %.2f bits/key", avg, widths, spent/keys)
		}
		for l := range 6 {
			if shape.Keys[l] > 0 && widths[l] < widths[6] {
				t.Errorf("avg %v: widths %v: L%d narrower than L6", avg, widths, l)
			}
		}
		t.Logf("avg %v: widths %v, %.2f bits/key", avg, widths, spent/keys)
	}
	if w := FuseLevelWidths(shape, 4, perTable); w != [7]int{4, 4, 4, 4, 4, 4, 4} {
		t.Errorf("under width 4's bits/key: %v", w)
	}
	// Fitted for absent Gets, which skip L6's filters: L6 gets no filter
	// and the levels above (a tenth of the keys) the widest width, even at
	// an average under width 4's bits/key; an empty level never takes
	// L6's no filter.
	gets := shape
	gets.SkipL6 = 1
	for _, avg := range []float64{4, 10} {
		w := FuseLevelWidths(gets, avg, perTable)
		want := [7]int{16, 16, 16, 16, 16, 16, NoFuse}
		if w != want {
			t.Errorf("fitted for Gets at %v: %v, want %v", avg, w, want)
		}
	}
	if w := FuseLevelWidths(tablefilter.LevelShape{Keys: [7]float64{0: 1, 6: 100}, L0Runs: 2, SkipL6: 1}, 10, perTable); w != [7]int{16, 16, 16, 16, 16, 16, NoFuse} {
		t.Errorf("L0 and an unconsulted L6: %v", w)
	}
}

// TestMixedFit: every row's ratios are the rate model's over the fuse's,
// a fit for SkipL6 0 is the seek fit (LevelBudgetsV4 of the shape), the
// pinned rows hold L6 at their budget and spend at most the average, and
// the row chosen is the first under 0.8× on both or the least bad.
func TestMixedFit(t *testing.T) {
	race.SkipLong(t) // a dozen fits
	shape := tablefilter.LevelShape{Keys: [7]float64{20000, 0, 0, 3400, 10200, 66300, 326400}, L0Runs: 3}
	tree := func(bpk float64) Tree {
		var tr Tree
		tr.Levels[6] = LevelInfo{Tables: 100, Keys: 340000, FilterBytes: uint64(bpk * 340000 / 8)}
		return tr
	}
	fitted, fuse := tree(10.2), tree(8.1)
	m := MixedFit(shape, fitted, fuse)
	if len(m.Rows) < len(MixedShares) || m.Chosen < 0 || m.Chosen >= len(m.Rows) {
		t.Fatalf("rows %d, chosen %d", len(m.Rows), m.Chosen)
	}
	avg := 8.1 * 10 / 10.2
	if m.Rows[0].SkipL6 != 0 || m.Rows[0].Budgets != tablefilter.LevelBudgetsV4(shape, avg) {
		t.Errorf("SkipL6 0 row %+v is not the seek fit %v", m.Rows[0], tablefilter.LevelBudgetsV4(shape, avg))
	}
	var total float64
	for _, k := range shape.Keys {
		total += k
	}
	worst := math.Inf(1)
	for i, r := range m.Rows {
		var spent float64
		for l, b := range r.Budgets {
			spent += shape.Keys[l] / total * b
		}
		if spent > avg*(1+1e-9) {
			t.Errorf("row %+v spends %.3f bits/key, over %.3f", r, spent, avg)
		}
		if r.L6 > 0 && r.Budgets[6] != r.L6 {
			t.Errorf("row %+v: L6 not at its pinned budget", r)
		}
		if r.SeekRatio <= 0 || r.GetRatio <= 0 {
			t.Errorf("row %+v: ratios not positive", r)
		}
		both := r.SeekRatio <= 0.8 && r.GetRatio <= 0.8
		if both && !m.Found {
			t.Errorf("row %d %+v is under 0.8× on both, but none was found", i, r)
		}
		if both && i < m.Chosen && m.Found {
			t.Errorf("row %d %+v is under 0.8× on both, before the chosen %d", i, r, m.Chosen)
		}
		worst = min(worst, max(r.SeekRatio, r.GetRatio))
	}
	if c := m.Rows[m.Chosen]; !m.Found && max(c.SeekRatio, c.GetRatio) != worst {
		t.Errorf("chosen %+v is not the least bad (%v)", c, worst)
	}
	t.Logf("fuse %v, chosen %+v, found %v", m.FuseWidths, m.Rows[m.Chosen], m.Found)
}

// TestPebbleLevelLineup builds the per-level line-up's fitted policies on
// a tiny tree: the fitted fuse carries only fuse filters and spends at
// most the fitted lsmcuckoo's bits per key over the shape it was fitted
// to, lsmcuckoo fitted at the fuse's bytes (versions 3 and 4) spends
// about them, version 4's fit carries only version-4 filters, the
// self-tuning setup keeps every table filtered with an lsmcuckoo filter,
// and every probe answers right (RunAllPebble checks each).
func TestPebbleLevelLineup(t *testing.T) {
	race.SkipLong(t) // whole Pebble trees: see TestPebbleTiny
	cfg := tinyPebble
	cfg.Probes, cfg.LatencyProbes, cfg.GetFPProbes = 500, 50, 3000
	// The fitted policies and what they are fitted to; the presets are
	// PerLevel policies, which TestPebbleTiny covers.
	var lineup []Policy
	for _, p := range LevelLineup() {
		if slices.Contains([]string{"none", LevelsFitted, LevelsAdaptive, FuseFitted, LevelsAtFuse, V4AtFuse, FuseGets, LevelsGets, V4Gets, V4Mixed}, p.Name) {
			lineup = append(lineup, p)
		}
	}
	rep, err := RunAllPebble(t.TempDir(), lineup, nil, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	trees := map[string]Tree{}
	for _, tr := range rep.Trees {
		trees[tr.Policy] = tr
	}
	shape := rep.Trees[0].LevelShape()
	fuse, ours, tuned := trees[FuseFitted], trees[LevelsFitted], trees[LevelsAdaptive]
	var spent, keys float64
	for l, li := range fuse.Levels {
		for name := range li.Filters {
			if _, ok := binaryfuse.PolicyFromName(name); !ok {
				t.Errorf("%s: L%d carries %s", FuseFitted, l, name)
			}
		}
		if li.Keys > 0 && shape.Keys[l] > 0 {
			spent += shape.Keys[l] * 8 * float64(li.FilterBytes) / float64(li.Keys)
			keys += shape.Keys[l]
		}
	}
	if keys == 0 || spent/keys > ours.BitsPerKey()*1.05 {
		t.Errorf("%s: %.2f bits/key over the fitted shape, %s spends %.2f", FuseFitted, spent/max(keys, 1), LevelsFitted, ours.BitsPerKey())
	}
	for _, name := range []string{LevelsAtFuse, V4AtFuse} {
		if at := trees[name]; at.BitsPerKey() > fuse.BitsPerKey()*1.1 {
			t.Errorf("%s spends %.2f bits/key, %s %.2f", name, at.BitsPerKey(), FuseFitted, fuse.BitsPerKey())
		}
	}
	for l, li := range trees[V4AtFuse].Levels {
		for name := range li.Filters {
			if !strings.HasPrefix(name, "lsmcuckoo.v4.bpk=") {
				t.Errorf("%s: L%d carries %q", V4AtFuse, l, name)
			}
		}
	}
	for l, li := range tuned.Levels {
		for name := range li.Filters {
			if _, err := tablefilter.ParseFilterPolicy(name); err != nil || name == "none" {
				t.Errorf("%s: L%d carries %q", LevelsAdaptive, l, name)
			}
		}
	}
	// The Get fits leave L6 without filters (a table moved down whole
	// keeps the filter it was written with), and their false positives
	// per absent Get were counted over GetFPProbes each.
	for _, name := range []string{FuseGets, LevelsGets, V4Gets} {
		l6 := trees[name].Levels[6]
		if l6.Tables == 0 || l6.Filters["none"] == 0 {
			t.Errorf("%s: L6 tables by filter %v, want some without", name, l6.Filters)
		}
	}
	counted := map[string]bool{}
	for _, r := range rep.GetFP {
		counted[r.Policy] = r.Probes == cfg.GetFPProbes && r.Workload == AbsentGet
	}
	for _, name := range GetProbed {
		if !counted[name] {
			t.Errorf("%s: absent Gets not counted over %d probes: %+v", name, cfg.GetFPProbes, rep.GetFP)
		}
	}
	t.Logf("%s: %.2f bits/key below L0, %.2f overall; %s %.2f; %s %.2f",
		LevelsAdaptive, tuned.BitsPerKeyBelowL0(), tuned.BitsPerKey(), LevelsFitted, ours.BitsPerKey(), FuseFitted, fuse.BitsPerKey())
}

// TestV4LevelsAtFuseBytes: the version-4 fits of the line-up write a
// version-4 policy on every level, plan at most the bits per key asked
// (the reference tree's, scaled as FittedLevelsAt documents) over the
// shape they were fitted to, and register every name they write.
func TestV4LevelsAtFuseBytes(t *testing.T) {
	shape := tablefilter.LevelShape{Keys: [7]float64{2000, 0, 0, 300, 3000, 30000, 300000}, L0Runs: 3}
	tree := func(name string, bitsPerKey float64) Tree {
		tr := Tree{Policy: name}
		tr.Levels[6] = LevelInfo{Tables: 100, Keys: 1_000_000, FilterBytes: uint64(bitsPerKey * 1_000_000 / 8)}
		return tr
	}
	built := map[string]Tree{LevelsFitted: tree(LevelsFitted, 10.4)}
	for _, ref := range []float64{6.9, 8.1, 12} {
		built[FuseFitted], built[FuseMaster] = tree(FuseFitted, ref), tree(FuseMaster, ref)
		asked := ref * 10 / 10.4
		for _, name := range []string{V4AtFuse, V4AtMaster} {
			var p Policy
			for _, q := range LevelLineup() {
				if q.Name == name {
					p = q
				}
			}
			if p.Match == nil || len(p.MatchTo) == 0 || built[p.MatchTo[0]].Policy == "" {
				t.Fatalf("%s: not a fit to a fuse tree's bytes: %+v", name, p)
			}
			var o pebble.Options
			p.Match(&o, shape, built)
			var spent, keys float64
			for l, lo := range o.Levels {
				pol, ok := lo.FilterPolicy.(tablefilter.Policy)
				if !ok || pol.Version() != 4 || !strings.HasPrefix(pol.Name(), "lsmcuckoo.v4.bpk=") {
					t.Fatalf("%s at %v: L%d writes %v", name, ref, l, lo.FilterPolicy)
				}
				if o.Filters[pol.Name()] == nil {
					t.Errorf("%s: %s not registered", name, pol.Name())
				}
				spent += shape.Keys[l] * pol.BitsPerKey()
				keys += shape.Keys[l]
			}
			if spent/keys > asked {
				t.Errorf("%s at %v bits/key: plans %.3f bits/key, asked %.3f", name, ref, spent/keys, asked)
			}
		}
	}
}

// TestGetFitsAtFuseBytes: the Get fits of the line-up leave L6 without a
// filter and plan at most the bits per key asked (the reference tree's,
// scaled as FittedLevelsAt documents) over the whole shape, even when that
// is under MinBitsPerKey, as a Get-fitted fuse tree spends; the fuse
// fitted for Gets writes no L6 filter either.
func TestGetFitsAtFuseBytes(t *testing.T) {
	shape := tablefilter.LevelShape{Keys: [7]float64{2000, 0, 0, 300, 3000, 30000, 300000}, L0Runs: 3}
	tree := func(name string, bitsPerKey float64) Tree {
		tr := Tree{Policy: name}
		tr.Levels[6] = LevelInfo{Tables: 100, Keys: 1_000_000, FilterBytes: uint64(bitsPerKey * 1_000_000 / 8)}
		return tr
	}
	lineup := map[string]Policy{}
	for _, p := range GetLineup() {
		lineup[p.Name] = p
	}
	built := map[string]Tree{LevelsFitted: tree(LevelsFitted, 10.4), FuseFitted: tree(FuseFitted, 8.1)}
	var o pebble.Options
	lineup[FuseGets].Match(&o, shape, built)
	if o.Levels[6].FilterPolicy != pebble.NoFilterPolicy {
		t.Errorf("%s: L6 writes %v", FuseGets, o.Levels[6].FilterPolicy)
	}
	for _, ref := range []float64{2.5, 3.7, 6} {
		built[FuseGets] = tree(FuseGets, ref)
		asked := ref * 10 / 10.4
		for _, name := range []string{LevelsGets, V4Gets} {
			var o pebble.Options
			lineup[name].Match(&o, shape, built)
			if o.Levels[6].FilterPolicy != pebble.NoFilterPolicy {
				t.Fatalf("%s at %v: L6 writes %v", name, ref, o.Levels[6].FilterPolicy)
			}
			var spent, keys float64
			for l, lo := range o.Levels {
				keys += shape.Keys[l]
				if pol, ok := lo.FilterPolicy.(tablefilter.Policy); ok {
					spent += shape.Keys[l] * pol.BitsPerKey()
				}
			}
			if spent/keys > asked*(1+1e-9) || spent/keys < asked*0.9 {
				t.Errorf("%s at %v bits/key: plans %.3f bits/key, asked %.3f", name, ref, spent/keys, asked)
			}
		}
	}
}
