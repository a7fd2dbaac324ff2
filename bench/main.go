// Command bench compares lsmcuckoo's filters with Pebble's and Badger's bloom
// filters and FastFilter's binary fuse filters, side by side in one process,
// and prints (or writes to -out) a Markdown report with the raw results as
// JSON.
//
//	go run ./bench -quick            # about a minute
//	go run ./bench -out report/      # the full run
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "small run (about a minute) for CI and a first look")
	out := fs.String("out", "", "directory for report.md and results.json (default: print the report)")
	sizes := fs.String("sizes", "", "comma-separated key counts (default 1000,10000,100000,1000000; quick: 10000,1000000)")
	reps := fs.Int("reps", 0, "repetitions per measurement; medians are reported (default 3, quick 1)")
	tiny := fs.Bool("tiny", false, "tiny sizes, for tests of the report itself")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := filterbench.Config{
		Sizes:    []int{1_000, 10_000, 100_000, 1_000_000},
		Families: filterbench.Families(),
		Probes:   1_000_000,
		Lookups:  2_000_000,
		ColdMiB:  64,
		Reps:     3,
	}
	switch {
	case *tiny:
		cfg.Sizes, cfg.Probes, cfg.Lookups, cfg.ColdMiB, cfg.Reps = []int{100, 1000}, 10_000, 10_000, 1, 1
	case *quick:
		cfg.Sizes, cfg.Lookups, cfg.Reps = []int{10_000, 1_000_000}, 1_000_000, 1
	}
	if *sizes != "" {
		cfg.Sizes = nil
		for _, s := range strings.Split(*sizes, ",") {
			var n int
			if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
				return fmt.Errorf("bad size %q in -sizes", s)
			}
			cfg.Sizes = append(cfg.Sizes, n)
		}
	}
	if *reps > 0 {
		cfg.Reps = *reps
	}
	start := time.Now()
	results := filterbench.Run(cfg, func(name string) { fmt.Fprintf(stderr, "\r%-30s", name) })
	fmt.Fprintf(stderr, "\rdone in %s%30s\n", time.Since(start).Round(time.Second), "")

	var md strings.Builder
	writeReport(&md, cfg, results)
	if *out == "" {
		_, err := io.WriteString(stdout, md.String())
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(struct {
		Machine string               `json:"machine"`
		Go      string               `json:"go"`
		Config  filterbench.Config   `json:"-"`
		Results []filterbench.Result `json:"results"`
	}{machineLine(), runtime.Version(), cfg, results}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "results.json"), js, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(*out, "report.md"), []byte(md.String()), 0o644)
}

func machineLine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				cpu = strings.TrimSpace(line[strings.Index(line, ":")+1:])
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores, %s/%s", cpu, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
}

func writeReport(w io.Writer, cfg filterbench.Config, results []filterbench.Result) {
	fmt.Fprintf(w, "# lsmcuckoo filter comparison\n\n")
	fmt.Fprintf(w, "Machine: %s; %s. Medians of %d repetition(s), families interleaved in one process.\n", machineLine(), runtime.Version(), max(1, cfg.Reps))
	fmt.Fprintf(w, "FPR over %d absent keys; hot = one filter probed repeatedly; cold = copies spread over ≥ %d MiB, a random copy per lookup, timed as a loop of independent lookups (throughput) and as a chain where each lookup waits for the previous answer (latency, what one Get pays per table). Ratios are against pebble-bloom/10 on the same keys.\n\n", cfg.Probes, cfg.ColdMiB)
	for _, n := range cfg.Sizes {
		var base *filterbench.Result
		for i := range results {
			if results[i].Keys == n && results[i].Family == "pebble-bloom/10" {
				base = &results[i]
			}
		}
		fmt.Fprintf(w, "## %d keys\n\n", n)
		fmt.Fprintf(w, "| filter | bits/key | FPR | build ns/key | hot ns | cold ns | cold latency ns | build ×bloom | hot ×bloom | cold ×bloom | latency ×bloom |\n")
		fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range results {
			if r.Keys != n {
				continue
			}
			ratio := func(a, b float64) string {
				if base == nil || b == 0 {
					return "–"
				}
				return fmt.Sprintf("%.2f", a/b)
			}
			var bb, bh, bc, bl float64
			if base != nil {
				bb, bh, bc, bl = base.BuildNsKey, base.HotNs, base.ColdNs, base.ColdLatNs
			}
			fmt.Fprintf(w, "| %s | %.2f | %s | %.1f | %.1f | %.1f | %.1f | %s | %s | %s | %s |\n",
				r.Family, r.BitsPerKey, pct(r.FPR), r.BuildNsKey, r.HotNs, r.ColdNs, r.ColdLatNs,
				ratio(r.BuildNsKey, bb), ratio(r.HotNs, bh), ratio(r.ColdNs, bc), ratio(r.ColdLatNs, bl))
		}
		fmt.Fprintln(w)
	}
}

func pct(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 0.0001:
		return fmt.Sprintf("%.4f%%", 100*v)
	default:
		return fmt.Sprintf("%.3f%%", 100*v)
	}
}
