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
