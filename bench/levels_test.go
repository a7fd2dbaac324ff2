package main

import (
	"strings"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/dbbench"
)

// TestLevelTargetsRatios: the per-level section takes each ratio over the
// right pair of policies, and is left out of a run without the line-up.
func TestLevelTargetsRatios(t *testing.T) {
	lat := 100 * time.Microsecond
	pr := &dbbench.Report{Config: dbbench.PebbleConfig{Latency: lat}}
	fp := map[string]float64{dbbench.LevelsAtFuse: 0.03, dbbench.FuseFitted: 0.06, dbbench.LevelsFitted: 0.01,
		dbbench.FuseMaster: 0.05, dbbench.LevelsAtMaster: 0.1, dbbench.SavingBaseline: 0.04, dbbench.LevelsAdaptive: 0.01,
		dbbench.V4AtFuse: 0.015, dbbench.V4AtMaster: 0.0125}
	for name, v := range fp {
		var tr dbbench.Tree
		tr.Policy = name
		tr.Levels[1] = dbbench.LevelInfo{Tables: 1, Keys: 1000, FilterBytes: 1250}
		pr.Trees = append(pr.Trees, tr)
		for _, l := range []time.Duration{0, lat} {
			for _, wl := range []string{dbbench.AbsentGet, dbbench.AbsentPrefix} {
				pr.Results = append(pr.Results, dbbench.PebbleResult{Policy: name, Workload: wl, Latency: l, FilterMisses: v, ProbesPerS: 1 / v})
			}
		}
	}
	var b strings.Builder
	writeLevelTargets(&b, pr)
	out := b.String()
	for _, want := range []string{
		"`" + dbbench.LevelsAtFuse + "` ÷ `" + dbbench.FuseFitted + "`: filter bytes 1.00×; FP reads per absent prefix seek 0.50×, per absent Get 0.50×",
		"per read 2.00×",
		"10.00 bits/key over the whole tree, 0.0% off",
		"`" + dbbench.V4AtFuse + "` ÷ `" + dbbench.FuseFitted + "`: filter bytes 1.00×; FP reads per absent prefix seek 0.25×, per absent Get 0.25×",
		"`" + dbbench.V4AtMaster + "` ÷ `" + dbbench.FuseMaster + "`: filter bytes 1.00×; FP reads per absent prefix seek 0.25×, per absent Get 0.25×",
		"| " + dbbench.V4AtMaster + " | 1250 | 10.00 | 0.0125 | 0.0125 | 80 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	writeLevelTargets(&b, &dbbench.Report{})
	if b.Len() != 0 {
		t.Errorf("a run without the line-up wrote %q", b.String())
	}
}

// TestGetFitSection: the Get-fitted section shows each tree's false
// positives per absent Get with the count they rest on, takes each ratio
// over the right pair, and reports the one-allocation question; a run
// without the Get-fitted trees writes nothing of it.
func TestGetFitSection(t *testing.T) {
	pr := &dbbench.Report{Config: dbbench.PebbleConfig{GetFPProbes: 1_000_000}}
	none := dbbench.Tree{Policy: "none"}
	for l, k := range []uint64{20000, 0, 0, 3400, 10200, 66300, 326400} {
		none.Levels[l] = dbbench.LevelInfo{Tables: int(k / 3400), Keys: k}
	}
	none.Sublevels = 3
	pr.Trees = append(pr.Trees, none)
	trees := map[string]dbbench.Tree{}
	bpk := map[string]float64{dbbench.LevelsFitted: 10.2, dbbench.FuseFitted: 8.1, dbbench.V4AtFuse: 8.1,
		dbbench.FuseGets: 5, dbbench.LevelsGets: 5, dbbench.V4Gets: 5, dbbench.V4Mixed: 8.1}
	fp := map[string]float64{dbbench.FuseFitted: 4e-5, dbbench.V4AtFuse: 8e-4, dbbench.FuseGets: 1e-4,
		dbbench.LevelsGets: 1.5e-4, dbbench.V4Gets: 0, dbbench.V4Mixed: 2e-5}
	for name, b := range bpk {
		tr := none
		tr.Policy = name
		for l := range tr.Levels {
			tr.Levels[l].FilterBytes = uint64(b * float64(tr.Levels[l].Keys) / 8)
		}
		pr.Trees = append(pr.Trees, tr)
		trees[name] = tr
		if v, ok := fp[name]; ok {
			pr.GetFP = append(pr.GetFP, dbbench.PebbleResult{Policy: name, Workload: dbbench.AbsentGet, Probes: 1_000_000, FilterMisses: v})
		}
		pr.Results = append(pr.Results, dbbench.PebbleResult{Policy: name, Workload: dbbench.AbsentPrefix, FilterMisses: 0.01 * b})
	}
	var b strings.Builder
	writeGetFit(&b, pr, trees)
	out := b.String()
	for _, want := range []string{
		"| " + dbbench.V4Gets + " | 5.0 · · 5.0 5.0 5.0 5.0 | 5.00 | 0 | 0 / 1000000 | 0.0500 |",
		"`" + dbbench.LevelsGets + "` ÷ `" + dbbench.FuseGets + "`: filter bytes 1.00×; FP reads per absent Get 1.50× (150 against 100 false positives)",
		"`" + dbbench.V4Gets + "` ÷ `" + dbbench.FuseGets + "`: filter bytes 1.00×; FP reads per absent Get under 0.030× (no false positive in 1000000 absent Gets, under 3 in 1000000 at 95%, against 100)",
		"`" + dbbench.V4AtFuse + "` ÷ `" + dbbench.FuseFitted + "`: filter bytes 1.00×; FP reads per absent Get 20.00× (800 against 40 false positives)",
		"as `" + dbbench.V4Mixed + "`: measured, filter bytes 1.00× `" + dbbench.FuseFitted + "`'s; FP reads per absent prefix seek 1.00×; per absent Get 0.50× (20 against 40 false positives)",
		"(built)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("section lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	delete(trees, dbbench.FuseGets)
	writeGetFit(&b, pr, trees)
	if b.Len() != 0 {
		t.Errorf("a run without the Get-fitted trees wrote %q", b.String())
	}
}
