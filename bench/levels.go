package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/dbbench"
)

// writeLevelTargets writes the per-level line-up's goals (dbbench.LevelLineup)
// beside this run's ratios: the fitted per-level lsmcuckoo against binary
// fuse per level at its filter bytes, against Pebble master's binary fuse
// preset and against uniform bloom/10, and what the self-tuning setup
// spent against the average asked. Nothing when the run did not build
// the line-up.
func writeLevelTargets(w io.Writer, pr *dbbench.Report) {
	res := pebbleResults(pr.Results)
	if _, ok := res.find(dbbench.FuseFitted, dbbench.AbsentPrefix, 0); !ok {
		return
	}
	trees := map[string]dbbench.Tree{}
	for _, t := range pr.Trees {
		trees[t.Policy] = t
	}
	x := func(v float64) string {
		if v == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", v)
	}
	widths := func(t dbbench.Tree) string {
		var ws []string
		for l, li := range t.Levels {
			for name := range li.Filters {
				ws = append(ws, fmt.Sprintf("L%d %s", l, strings.TrimPrefix(name, "lsmcuckoo.bench.")))
			}
		}
		slices.Sort(ws)
		return strings.Join(ws, ", ")
	}
	ours, fuse, master := dbbench.LevelsFitted, dbbench.FuseFitted, dbbench.FuseMaster
	L := pr.Config.Latency
	fmt.Fprintf(w, "### Per-level allocations at equal filter bytes (issue #29)\n\n")
	fmt.Fprintf(w, "`%s`: binary fuse per level, each level's width one of Pebble master's (4, 8, 10, 12, 16) chosen by the allocator `%s` uses (`internal/levelfit`) on the `none` tree's shape, each width at the bits/key a fuse filter of this tree's mean table size takes, its rate 2^-width, at most `%s`'s bits/key (%s). `%s`: Pebble master's fixed binary fuse preset, 16/16/16/12/10/8/4 on L0..L6, not at equal bytes.\n\n",
		fuse, ours, ours, widths(trees[fuse]), master)
	fmt.Fprintf(w, "| policy | filter bytes | bits/key | FP reads/absent prefix seek | FP reads/absent Get | absent prefix seeks/s, %v |\n|---|---|---|---|---|---|\n", L)
	for _, name := range []string{ours, dbbench.LevelsAdaptive, fuse, dbbench.LevelsAtFuse, dbbench.V4AtFuse, master, dbbench.LevelsAtMaster, dbbench.V4AtMaster, dbbench.SavingBaseline} {
		t := trees[name]
		s, _ := res.find(name, dbbench.AbsentPrefix, 0)
		g, _ := res.find(name, dbbench.AbsentGet, 0)
		sl, _ := res.find(name, dbbench.AbsentPrefix, L)
		fmt.Fprintf(w, "| %s | %d | %.2f | %.4f | %.4f | %.0f |\n", name, t.TotalFilterBytes(), t.BitsPerKey(), s.FilterMisses, g.FilterMisses, sl.ProbesPerS)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "`%s` and `%s` are `%s`'s fit at the filter bytes of `%s` and `%s`: the comparisons at equal bytes; `%s` and `%s` are the same fits under format version 4's rate, writing version 4 (`tablefilter.LevelBudgetsV4`, `SetLevelBudgetsV4`).\n\n",
		dbbench.LevelsAtFuse, dbbench.LevelsAtMaster, ours, fuse, master, dbbench.V4AtFuse, dbbench.V4AtMaster)
	for _, pair := range [][2]string{{dbbench.LevelsAtFuse, fuse}, {dbbench.V4AtFuse, fuse}, {ours, fuse}, {dbbench.LevelsAtMaster, master}, {dbbench.V4AtMaster, master}, {ours, master}} {
		a, b := pair[0], pair[1]
		fmt.Fprintf(w, "- `%s` ÷ `%s`: filter bytes %s; FP reads per absent prefix seek %s, per absent Get %s (goal ≤ 0.8× against the fitted fuse at equal bytes); absent prefix seeks/s with %v per read %s (goal ≥ 1.2×).\n",
			a, b, x(float64(trees[a].TotalFilterBytes())/float64(max(trees[b].TotalFilterBytes(), 1))),
			x(res.ratio(a, b, dbbench.AbsentPrefix, 0, fpReads)), x(res.ratio(a, b, dbbench.AbsentGet, 0, fpReads)),
			L, x(res.ratio(a, b, dbbench.AbsentPrefix, L, probesPerS)))
	}
	fmt.Fprintf(w, "- `%s` ÷ `%s`: FP reads per absent prefix seek %s, per absent Get %s (goal ≤ 0.3×).\n",
		ours, dbbench.SavingBaseline, x(res.ratio(ours, dbbench.SavingBaseline, dbbench.AbsentPrefix, 0, fpReads)), x(res.ratio(ours, dbbench.SavingBaseline, dbbench.AbsentGet, 0, fpReads)))
	a := trees[dbbench.LevelsAdaptive]
	fmt.Fprintf(w, "- `%s` (`tablefilter.SetAdaptiveBudgets(opts, 10)`, attached while the tree grew): %.2f bits/key over the whole tree, %.1f%% off the 10 asked (goal within 2%%), its L0 holding the last flushes, never compacted; %.2f below L0; FP reads per absent prefix seek %s `%s`'s, per absent Get %s.\n\n",
		dbbench.LevelsAdaptive, a.BitsPerKey(), 100*(a.BitsPerKey()/10-1), a.BitsPerKeyBelowL0(),
		x(res.ratio(dbbench.LevelsAdaptive, ours, dbbench.AbsentPrefix, 0, fpReads)), ours, x(res.ratio(dbbench.LevelsAdaptive, ours, dbbench.AbsentGet, 0, fpReads)))
	writeGetFit(w, pr, trees)
}
