package main

import (
	"fmt"
	"io"
	"math"

	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
)

// writeFuse prints, for the results of n keys, each binary fuse filter
// beside the lsmcuckoo layouts measured within that fuse filter's bytes
// (the -fuse line-up): the ratio of their false-positive rates at equal bytes,
// and of their timings. Nothing when the run measured no such pair.
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
	var rows []string
	for _, f := range results {
		if f.Keys != n || f.Kind != "binary-fuse" {
			continue
		}
		def, ok1 := within("lsmcuckoo", f)
		dense, ok2 := within("lsmcuckoo-densest", f)
		if !ok1 || !ok2 {
			continue
		}
		ratio := func(a, b float64) string {
			if b == 0 {
				return "–"
			}
			return fmt.Sprintf("%.2f", a/b)
		}
		bloomCell := "–"
		for _, b := range results {
			if b.Keys == n && b.Kind == "pebble-bloom" && b.Param == math.Round(f.BitsPerKey) {
				bloomCell = fmt.Sprintf("%s (%s)", ratio(b.FPR, f.FPR), b.Family)
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %.2f | %s | %.2f / %.2f | %s | %s | %s | %.1f | %s / %s | %s / %s | %s / %s | %s / %s |",
			f.Family, f.BitsPerKey, fprCell(f), def.BitsPerKey, dense.BitsPerKey, ratio(def.FPR, f.FPR), ratio(dense.FPR, f.FPR), bloomCell, f.BuildNsKey,
			ratio(def.BuildNsKey, f.BuildNsKey), ratio(dense.BuildNsKey, f.BuildNsKey),
			ratio(def.HotNs, f.HotNs), ratio(dense.HotNs, f.HotNs),
			ratio(def.ColdNs, f.ColdNs), ratio(dense.ColdNs, f.ColdNs),
			ratio(def.ColdLatNs, f.ColdLatNs), ratio(dense.ColdLatNs, f.ColdLatNs)))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "Against binary fuse at equal bytes: lsmcuckoo's default and densest layouts at the largest budget (in hundredths of a bit per key) whose filter fits in each fuse filter's bytes on these %d keys, as ratios to the fuse filter (below 1: lsmcuckoo lets through fewer absent keys, or is faster). Pebble's bloom at the nearest whole budget for scale.\n\n", n)
	fmt.Fprintf(w, "| fuse | bits/key | FPR | lsmcuckoo bits/key (default / densest) | default FPR ÷ fuse | densest FPR ÷ fuse | bloom FPR ÷ fuse | fuse build ns/key | build ×fuse (default / densest) | hot ×fuse | cold ×fuse | latency ×fuse |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintln(w, r)
	}
	fmt.Fprintln(w)
}
