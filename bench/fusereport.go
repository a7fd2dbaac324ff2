package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
)

// fuseKinds are the lsmcuckoo layouts the fuse line-up holds against each
// fuse filter, first the one to compare against it: version 4
// (tablefilter.NewV4Policy), then version 3's default and densest layouts.
var fuseKinds = []struct{ kind, label string }{
	{"lsmcuckoo-v4", "v4"}, {"lsmcuckoo", "default"}, {"lsmcuckoo-densest", "densest"},
}

// writeFuse prints, for the results of n keys, each binary fuse filter
// beside the lsmcuckoo layouts measured within that fuse filter's bytes
// (the -fuse line-up): the ratio of their false-positive rates at equal bytes,
// and of their timings. A layout the run did not measure at a fuse
// filter's bytes shows "–"; nothing when the run measured version 4 beside
// no fuse filter.
func writeFuse(w io.Writer, results []filterbench.Result, n int) {
	// The result of a kind whose filter is the largest within the fuse
	// filter's bytes, and no more than 5% smaller.
	within := func(kind string, fuse filterbench.Result) (filterbench.Result, bool) {
		var best filterbench.Result
		for _, r := range results {
			if r.Keys == n && r.Kind == kind && r.Bytes <= fuse.Bytes && r.Bytes > best.Bytes {
				best = r
			}
		}
		return best, float64(best.Bytes) >= 0.95*float64(fuse.Bytes)
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	var rows []string
	for _, f := range results {
		if f.Keys != n || f.Kind != "binary-fuse" {
			continue
		}
		layouts := make([]*filterbench.Result, len(fuseKinds))
		for i, k := range fuseKinds {
			if r, ok := within(k.kind, f); ok {
				layouts[i] = &r
			}
		}
		if layouts[0] == nil {
			continue
		}
		// each is the layouts' cells of one measure, joined by " / ".
		each := func(cell func(r filterbench.Result) string) string {
			cells := make([]string, len(layouts))
			for i, r := range layouts {
				cells[i] = "–"
				if r != nil {
					cells[i] = cell(*r)
				}
			}
			return strings.Join(cells, " / ")
		}
		bloomCell := "–"
		for _, b := range results {
			if b.Keys == n && b.Kind == "pebble-bloom" && b.Param == math.Round(f.BitsPerKey) {
				bloomCell = fmt.Sprintf("%s (%s)", ratio(b.FPR, f.FPR), b.Family)
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %.2f | %s | %s | %s | %s | %.1f | %s | %s | %s | %s |",
			f.Family, f.BitsPerKey, fprCell(f),
			each(func(r filterbench.Result) string { return fmt.Sprintf("%.2f", r.BitsPerKey) }),
			each(func(r filterbench.Result) string { return ratio(r.FPR, f.FPR) }),
			bloomCell, f.BuildNsKey,
			each(func(r filterbench.Result) string { return ratio(r.BuildNsKey, f.BuildNsKey) }),
			each(func(r filterbench.Result) string { return ratio(r.HotNs, f.HotNs) }),
			each(func(r filterbench.Result) string { return ratio(r.ColdNs, f.ColdNs) }),
			each(func(r filterbench.Result) string { return ratio(r.ColdLatNs, f.ColdLatNs) })))
	}
	if len(rows) == 0 {
		return
	}
	labels := make([]string, len(fuseKinds))
	for i, k := range fuseKinds {
		labels[i] = k.label
	}
	order := strings.Join(labels, " / ")
	fmt.Fprintf(w, "Against binary fuse at equal bytes: lsmcuckoo's format version 4 (`lsmcuckoo-v4`, `tablefilter.NewV4Policy`) and version 3's default and densest layouts (`lsmcuckoo`, `lsmcuckoo-densest`) at the largest budget (in hundredths of a bit per key) whose filter fits in each fuse filter's bytes on these %d keys, as ratios to the fuse filter (below 1: lsmcuckoo lets through fewer absent keys, or is faster). Pebble's bloom at the nearest whole budget for scale.\n\n", n)
	fmt.Fprintf(w, "| fuse | bits/key | FPR | lsmcuckoo bits/key (%[1]s) | FPR ÷ fuse (%[1]s) | bloom FPR ÷ fuse | fuse build ns/key | build ×fuse (%[1]s) | hot ×fuse | cold ×fuse | latency ×fuse |\n|---|---|---|---|---|---|---|---|---|---|---|\n", order)
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	fmt.Fprintln(w)
}
