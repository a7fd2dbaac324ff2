package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/dbbench"
)

// writeGetFit writes the per-level line-up's fits for absent Gets, which
// never read L6's filters: each tree's budgets per level, its
// false-positive reads per absent Get over the run's many untimed probes
// (with the count of false positives each figure rests on) and per absent
// prefix seek with L6 filters, the ratios to the fuse fitted for Gets and
// to the fuse fitted for seeks, and whether one version-4 allocation at
// the seek-fitted fuse's bytes beats it on both workloads, modelled
// (dbbench.MixedFit) and then measured. Nothing when the run did not
// build the Get-fitted trees.
func writeGetFit(w io.Writer, pr *dbbench.Report, trees map[string]dbbench.Tree) {
	if _, ok := trees[dbbench.FuseGets]; !ok || len(pr.Trees) == 0 {
		return
	}
	res := pebbleResults(pr.Results)
	gets := pebbleResults(pr.GetFP)
	events := func(name string) (float64, int, int) {
		r, ok := gets.find(name, dbbench.AbsentGet, 0)
		if !ok {
			return 0, 0, 0
		}
		return r.FilterMisses, int(math.Round(r.FilterMisses * float64(r.Probes))), r.Probes
	}
	perLevel := func(t dbbench.Tree) string {
		var b []string
		for _, li := range t.Levels {
			if li.Keys == 0 {
				b = append(b, "·")
				continue
			}
			b = append(b, fmt.Sprintf("%.1f", 8*float64(li.FilterBytes)/float64(li.Keys)))
		}
		return strings.Join(b, " ")
	}
	fmt.Fprintf(w, "### Fitted for absent Gets\n\n")
	fmt.Fprintf(w, "Pebble reads L6's filters only for an iterator with `IterOptions.UseL6Filters`: `DB.Get` never does. `%s`: binary fuse per level fitted by the same allocator for absent Gets (L6 counted for no lookup, widths 4, 8, 10, 12, 16 or no filter), at most `%s`'s bits/key. `%s` and `%s`: `tablefilter.LevelBudgets` and `LevelBudgetsV4` with `LevelShape.SkipL6 = 1` (L6 gets `NoFilter`) at `%s`'s filter bytes. FP reads per absent Get below are counted over %d absent Gets per tree, untimed.\n\n",
		dbbench.FuseGets, dbbench.LevelsFitted, dbbench.LevelsGets, dbbench.V4Gets, dbbench.FuseGets, pr.Config.GetFPProbes)
	fmt.Fprintf(w, "| policy | filter bits/key by level, L0..L6 | bits/key | FP reads / absent Get | false positives / absent Gets | FP reads / absent prefix seek |\n|---|---|---|---|---|---|\n")
	for _, name := range dbbench.GetProbed {
		t := trees[name]
		g, n, probes := events(name)
		s, _ := res.find(name, dbbench.AbsentPrefix, 0)
		fmt.Fprintf(w, "| %s | %s | %.2f | %.3g | %d / %d | %.4f |\n", name, perLevel(t), t.BitsPerKey(), g, n, probes, s.FilterMisses)
	}
	fmt.Fprintln(w)
	ratio := func(a, b string) string {
		ga, na, pa := events(a)
		gb, nb, _ := events(b)
		switch {
		case gb == 0:
			return fmt.Sprintf("– (%d against %d false positives)", na, nb)
		case na == 0 && pa > 0:
			// No event in pa probes: under 3/pa per probe at 95%
			// (Poisson), so the ratio is a bound.
			return fmt.Sprintf("under %.3f× (no false positive in %d absent Gets, under 3 in %d at 95%%, against %d)", 3/float64(pa)/gb, pa, pa, nb)
		}
		return fmt.Sprintf("%.2f× (%d against %d false positives)", ga/gb, na, nb)
	}
	bytes := func(a, b string) string {
		return fmt.Sprintf("%.2f×", float64(trees[a].TotalFilterBytes())/float64(max(trees[b].TotalFilterBytes(), 1)))
	}
	for _, pair := range [][2]string{{dbbench.LevelsGets, dbbench.FuseGets}, {dbbench.V4Gets, dbbench.FuseGets}, {dbbench.V4AtFuse, dbbench.FuseFitted}, {dbbench.FuseGets, dbbench.FuseFitted}} {
		fmt.Fprintf(w, "- `%s` ÷ `%s`: filter bytes %s; FP reads per absent Get %s.\n", pair[0], pair[1], bytes(pair[0], pair[1]), ratio(pair[0], pair[1]))
	}
	fmt.Fprintln(w)

	m := dbbench.MixedFit(pr.Trees[0].LevelShape(), trees[dbbench.LevelsFitted], trees[dbbench.FuseFitted])
	fmt.Fprintf(w, "One allocation for both workloads: version 4 at `%s`'s filter bytes (widths %v), fitted for a share of absent lookups that are Gets, or with L6 pinned at a budget and the levels above fitted for Gets; tables read in vain on the rate model (codec.PlannedFPR, 2^-width), as ratios to the fuse's:\n\n", dbbench.FuseFitted, m.FuseWidths)
	fmt.Fprintf(w, "| fit | budgets L0..L6 | per absent prefix seek | per absent Get |\n|---|---|---|---|\n")
	for i, r := range m.Rows {
		fit := fmt.Sprintf("SkipL6 %g", r.SkipL6)
		if r.L6 > 0 {
			fit = fmt.Sprintf("L6 pinned at %g", r.L6)
		}
		if i == m.Chosen {
			fit += " (built)"
		}
		fmt.Fprintf(w, "| %s | %v | %.2f× | %.2f× |\n", fit, r.Budgets, r.SeekRatio, r.GetRatio)
	}
	fmt.Fprintln(w)
	found := "No fit reaches ≤ 0.8× on both in the model; built is the fit whose worse ratio is smallest"
	if m.Found {
		found = "Built is the first fit that reaches ≤ 0.8× on both in the model"
	}
	fmt.Fprintf(w, "%s (%v), as `%s`: measured, filter bytes %s `%s`'s; FP reads per absent prefix seek %s; per absent Get %s.\n\n",
		found, m.Rows[m.Chosen].Budgets, dbbench.V4Mixed, bytes(dbbench.V4Mixed, dbbench.FuseFitted), dbbench.FuseFitted,
		fmtRatio(res.ratio(dbbench.V4Mixed, dbbench.FuseFitted, dbbench.AbsentPrefix, 0, fpReads)), ratio(dbbench.V4Mixed, dbbench.FuseFitted))
}

// fmtRatio shows a ratio, "–" when it was not measured.
func fmtRatio(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}
