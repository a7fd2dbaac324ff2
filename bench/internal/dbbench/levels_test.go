package dbbench

import (
	"slices"
	"testing"

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
}

// TestPebbleLevelLineup builds the per-level line-up's fitted policies on
// a tiny tree: the fitted fuse carries only fuse filters and spends at
// most the fitted lsmcuckoo's bits per key over the shape it was fitted
// to, lsmcuckoo fitted at the fuse's bytes spends about them, the
// self-tuning setup keeps every table filtered with an lsmcuckoo filter,
// and every probe answers right (RunAllPebble checks each).
func TestPebbleLevelLineup(t *testing.T) {
	race.SkipLong(t) // whole Pebble trees: see TestPebbleTiny
	cfg := tinyPebble
	cfg.Probes, cfg.LatencyProbes = 500, 50
	// The fitted policies and what they are fitted to; the presets are
	// PerLevel policies, which TestPebbleTiny covers.
	var lineup []Policy
	for _, p := range LevelLineup() {
		if slices.Contains([]string{"none", LevelsFitted, LevelsAdaptive, FuseFitted, LevelsAtFuse}, p.Name) {
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
	if at := trees[LevelsAtFuse]; at.BitsPerKey() > fuse.BitsPerKey()*1.1 {
		t.Errorf("%s spends %.2f bits/key, %s %.2f", LevelsAtFuse, at.BitsPerKey(), FuseFitted, fuse.BitsPerKey())
	}
	for l, li := range tuned.Levels {
		for name := range li.Filters {
			if _, err := tablefilter.ParseFilterPolicy(name); err != nil || name == "none" {
				t.Errorf("%s: L%d carries %q", LevelsAdaptive, l, name)
			}
		}
	}
	t.Logf("%s: %.2f bits/key below L0, %.2f overall; %s %.2f; %s %.2f",
		LevelsAdaptive, tuned.BitsPerKeyBelowL0(), tuned.BitsPerKey(), LevelsFitted, ours.BitsPerKey(), FuseFitted, fuse.BitsPerKey())
}
