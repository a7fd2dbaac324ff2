// Command bench compares lsmcuckoo's filters with Pebble's and Badger's bloom
// filters and binary fuse filters (bench/binaryfuse, the structure of
// Pebble master's), side by side in one process, and writes a Markdown
// report with SVG plots and the raw results as JSON.
//
//	go run ./bench -quick -out report/   # about a minute
//	go run ./bench -out report/          # the full run (about 15 minutes)
//	go run ./bench -quick -fuse -filters-only -sizes 10000,30000,100000 -out fuse/
//	                                     # against binary fuse at equal bytes
//	go run ./bench -quick -levels        # per-level allocations at equal bytes:
//	                                     # lsmcuckoo fitted and self-tuning, binary
//	                                     # fuse fitted per level, Pebble master's presets
//
// Every measurement lives in a library package (bench/filterbench,
// bench/internal/dbbench, bench/internal/membench) shared with the
// testing.B benchmarks, so benchstat and this report measure the same code.
package main

import (
	"context"
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
	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/dbbench"
	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/membench"
	"github.com/lsmcuckoo/lsmcuckoo/internal/terminal"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/workload"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
}

// report is everything one run measured; results.json is this, verbatim.
type report struct {
	Machine string                  `json:"machine"`
	Go      string                  `json:"go"`
	Mode    string                  `json:"mode"`
	Reps    int                     `json:"reps"`
	Started time.Time               `json:"started"`
	Seconds float64                 `json:"seconds"`
	Filters []filterbench.Result    `json:"filters"`
	Sizes   []int                   `json:"sizes"`
	Probes  int                     `json:"probes"`
	ColdMiB int                     `json:"cold_mib"`
	Pebble  *dbbench.Report         `json:"pebble,omitempty"`
	KV      []workload.LookupResult `json:"kvdemo,omitempty"`
	KVKeys  int                     `json:"kvdemo_keys,omitempty"`
	Mem     []membench.Result       `json:"memtable,omitempty"`
	MemKeys int                     `json:"memtable_keys,omitempty"`
	MemOps  int                     `json:"memtable_ops,omitempty"`
}

func run(args []string, stdout, stderr io.Writer) error {
	fl, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	rep := report{Machine: machineLine(), Go: runtime.Version(), Mode: "full", Started: time.Now()}
	pl, err := planRun(fl, &rep)
	if err != nil {
		return err
	}
	rep.Reps, rep.Sizes, rep.Probes, rep.ColdMiB = pl.cfg.Reps, pl.cfg.Sizes, pl.cfg.Probes, pl.cfg.ColdMiB
	// The step in progress, redrawn in place on a terminal and wiped
	// before the closing line; in a pipe or a log only the closing line.
	progress, wipe := func(string) {}, ""
	if terminal.Is(stderr) {
		progress = func(s string) { fmt.Fprintf(stderr, "\r%-50s", s) }
		wipe = "\r" + strings.Repeat(" ", 50) + "\r"
	}
	if err := measure(fl, pl, &rep, progress); err != nil {
		return err
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	fmt.Fprintf(stderr, "%sdone in %.0fs\n", wipe, rep.Seconds)
	return writeOutputs(&rep, pl.cfg.Sizes, fl.out, stdout)
}

// benchFlags are the command line's choices, as parsed; withDB is
// already false under -filters-only.
type benchFlags struct {
	quick, tiny                     bool
	out, sizes, core                string
	reps, coldMiB                   int
	withDB, filtersOnly, pebbleOnly bool
	unaligned, fuse, levels         bool
}

// parseFlags parses the command line and refuses combinations that
// contradict each other, before anything is measured.
func parseFlags(args []string, stderr io.Writer) (benchFlags, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: bench [-quick | -tiny] [-out DIR] [-sizes N,N] [-reps N] [-core B,B | -fuse] [-db=false | -filters-only | -pebble-only | -levels]\n")
		fs.PrintDefaults()
	}
	quick := fs.Bool("quick", false, "small run (about a minute) for CI and a first look")
	tiny := fs.Bool("tiny", false, "tiny sizes, for tests of the report itself")
	out := fs.String("out", "", "directory for report.md, results.json and SVG plots (default: print the report)")
	sizes := fs.String("sizes", "", "comma-separated key counts for the filter level")
	reps := fs.Int("reps", 0, "repetitions per measurement; medians are reported")
	withDB := fs.Bool("db", true, "run the Pebble database level")
	filtersOnly := fs.Bool("filters-only", false, "run only the filter level")
	pebbleOnly := fs.Bool("pebble-only", false, "run only the Pebble database level")
	levels := fs.Bool("levels", false, "run only the Pebble database level's per-level line-up at equal filter bytes: lsmcuckoo fitted to the tree and self-tuning, binary fuse with widths fitted per level by the same allocator, Pebble master's presets, bloom/10")
	coldMiB := fs.Int("cold-mib", 0, "memory the cold-lookup copies of each filter spread over (default: the mode's)")
	unaligned := fs.Bool("unaligned", false, "also time lookups on filters starting 1..63 bytes past a 64-byte boundary")
	fuse := fs.Bool("fuse", false, "filter level: binary fuse at widths 8, 10, 12 and 16 beside lsmcuckoo's version 4 and version 3's default and densest layouts at each fuse's bits/key, Pebble's bloom and Badger's y.Filter")
	core := fs.String("core", "", "filter level: only lsmcuckoo v3 (the default and densest), v4, v2 and v1 beside Pebble's bloom, at these comma-separated bits/key (\"all\": 8..16)")
	if err := fs.Parse(args); err != nil {
		return benchFlags{}, err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return benchFlags{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *pebbleOnly && (*filtersOnly || !*withDB) {
		return benchFlags{}, fmt.Errorf("-pebble-only runs only the database level: it excludes -filters-only and -db=false")
	}
	if *levels && (*filtersOnly || !*withDB) {
		return benchFlags{}, fmt.Errorf("-levels runs only the database level: it excludes -filters-only and -db=false")
	}
	if *levels {
		*pebbleOnly = true
	}
	if *filtersOnly {
		*withDB = false
	}
	return benchFlags{quick: *quick, tiny: *tiny, out: *out, sizes: *sizes, core: *core, reps: *reps, coldMiB: *coldMiB,
		withDB: *withDB, filtersOnly: *filtersOnly, pebbleOnly: *pebbleOnly, unaligned: *unaligned, fuse: *fuse, levels: *levels}, nil
}

// runPlan is what one run measures at each level: the mode's sizes,
// adjusted by the flags that override them.
type runPlan struct {
	cfg  filterConfig         // the filter level
	pcfg dbbench.PebbleConfig // the Pebble database level
	// savingUniform and savingLevels are the budgets the memory-saving
	// view builds trees at, for the uniform and per-level families.
	savingUniform, savingLevels []float64
	memKeys, memOps             int // the memtable level
	kvKeys, kvGets              int // the kvdemo level
}

// planRun sets the sizes of every level from the mode (-tiny, -quick or
// the full run, recorded in rep.Mode), then applies the flags that
// override them.
func planRun(fl benchFlags, rep *report) (runPlan, error) {
	cfg := filterConfig{
		Sizes:    []int{1_000, 10_000, 100_000, 1_000_000, 10_000_000},
		Families: plotFamilies(),
		Probes:   1_000_000,
		Options:  filterbench.Options{Lookups: 2_000_000, ColdMiB: 64, Reps: 3, Baseline: baseline},
	}
	pcfg := dbbench.FullPebble
	// Budgets of the memory-saving view: each family needs two that
	// bracket bloom/10's false-positive reads (10 is in the main set).
	savingUniform, savingLevels := []float64{8, 9, 9.5}, []float64{5, 6, 7, 8}
	memKeys, memOps := 1<<20, 4_000_000
	kvKeys, kvGets := 1_000_000, 100_000
	switch {
	case fl.tiny:
		rep.Mode = "tiny"
		cfg.Sizes, cfg.Families, cfg.Probes, cfg.Lookups, cfg.ColdMiB, cfg.Reps = []int{1000}, families(), 10_000, 10_000, 1, 1
		pcfg = dbbench.PebbleConfig{Keys: 40_000, L0Flushes: 2, ValueSize: 32,
			MemTableBytes: 256 << 10, LBaseMaxBytes: 16 << 10, TargetFileBytes: 64 << 10,
			CacheBytes: 1 << 20, Probes: 2_000, LatencyProbes: 200, Latency: 50 * time.Microsecond,
			GetFPProbes: 20_000}
		savingUniform, savingLevels = []float64{9}, []float64{7}
		memKeys, memOps = 1<<12, 20_000
		kvKeys, kvGets = 5_000, 2_000
	case fl.quick:
		rep.Mode = "quick"
		cfg.Sizes, cfg.Families, cfg.Lookups, cfg.Reps = []int{10_000, 1_000_000}, families(), 1_000_000, 1
		pcfg = dbbench.QuickPebble
		savingUniform, savingLevels = []float64{9}, []float64{7}
		memKeys, memOps = 1<<18, 1_000_000
		kvKeys, kvGets = 200_000, 100_000
	}
	if fl.sizes != "" {
		cfg.Sizes = nil
		for _, s := range strings.Split(fl.sizes, ",") {
			var n int
			if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
				return runPlan{}, fmt.Errorf("bad size %q in -sizes", s)
			}
			cfg.Sizes = append(cfg.Sizes, n)
		}
	}
	if fl.reps > 0 {
		cfg.Reps = fl.reps
	}
	if fl.coldMiB > 0 {
		cfg.ColdMiB = fl.coldMiB
	}
	if fl.core != "" {
		var budgets []int
		if fl.core != "all" {
			for _, f := range strings.Split(fl.core, ",") {
				var b int
				if _, err := fmt.Sscan(f, &b); err != nil || b < 4 || b > 64 {
					return runPlan{}, fmt.Errorf("bad budget %q in -core", f)
				}
				budgets = append(budgets, b)
			}
		}
		cfg.Families = coreFamilies(budgets...)
	}
	if fl.fuse {
		if fl.core != "" {
			return runPlan{}, fmt.Errorf("-fuse and -core choose different line-ups")
		}
		cfg.lineup = fuseFamilies
	}
	cfg.Unaligned = fl.unaligned
	if fl.pebbleOnly {
		cfg.Sizes = nil
	}
	return runPlan{cfg: cfg, pcfg: pcfg, savingUniform: savingUniform, savingLevels: savingLevels,
		memKeys: memKeys, memOps: memOps, kvKeys: kvKeys, kvGets: kvGets}, nil
}

// measure runs the levels the flags ask for, into rep, in an order that
// keeps the memtable level's heap small. Each database level's stores
// are removed once it has been measured.
func measure(fl benchFlags, pl runPlan, rep *report, progress func(string)) error {
	// The memtable level runs first, on a small heap: it measures goroutines
	// competing for two cores, and a garbage collection of the big key sets
	// the other levels leave behind would take one of them.
	if !fl.filtersOnly && !fl.pebbleOnly {
		progress("memtable filters")
		mem, err := membench.Run(testkeys.Random(pl.memKeys, 16, 51), pl.memOps, pl.cfg.Reps)
		if err != nil {
			return err
		}
		rep.Mem, rep.MemKeys, rep.MemOps = mem, pl.memKeys, pl.memOps
	}

	if !fl.pebbleOnly {
		res, err := runFilters(pl.cfg, func(name string) { progress("filters: " + name) })
		if err != nil {
			return err
		}
		rep.Filters = res
	}
	if fl.withDB {
		root, cleanup, err := dbbench.TempRoot()
		if err != nil {
			return err
		}
		defer cleanup()
		policies, fpOnly := dbbench.Policies(), dbbench.SavingPolicies(pl.savingUniform, pl.savingLevels)
		if fl.levels {
			policies, fpOnly = dbbench.LevelLineup(), nil
		}
		pr, err := dbbench.RunAllPebble(root, policies, fpOnly, pl.pcfg, progress)
		if err != nil {
			return err
		}
		rep.Pebble = &pr
	}
	if fl.withDB && !fl.pebbleOnly {
		root, cleanup, err := dbbench.TempRoot()
		if err != nil {
			return err
		}
		// One kvdemo store per filter kind, the same keys in about 20
		// tables each, the absent and 50/50 lookup mixes run over the
		// stores interleaved: kvdemo's own demo harness, with the report's
		// settings.
		res, err := workload.RunDemo(context.Background(), io.Discard, workload.DemoConfig{
			Dir:           root,
			Keys:          pl.kvKeys,
			Gets:          pl.kvGets,
			Misses:        []float64{1, 0.5},
			MemtableBytes: int64(pl.kvKeys) * 100 / 16,
			Seed:          9,
			Progress:      progress,
		})
		cleanup()
		if err != nil {
			return err
		}
		for _, r := range res {
			rep.KV = append(rep.KV, r.LookupResult)
		}
		rep.KVKeys = pl.kvKeys
	}
	return nil
}

// writeOutputs prints the report, or, with -out, writes report.md, its
// SVG plots and results.json to that directory.
func writeOutputs(rep *report, sizes []int, out string, stdout io.Writer) error {
	var md strings.Builder
	if out == "" {
		writeReport(&md, rep, nil)
		_, err := io.WriteString(stdout, md.String())
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	plots := map[string]string{}
	for _, n := range sizes {
		name, err := filterbench.PlotFPR(out, rep.Filters, n)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		plots[fmt.Sprintf("fpr-%d", n)] = name
		if name, ok, err := filterbench.PlotFrontier(out, rep.Filters, n); err != nil {
			return fmt.Errorf("plot: %w", err)
		} else if ok {
			plots[fmt.Sprintf("frontier-%d", n)] = name
		}
	}
	if rep.Pebble != nil {
		name, err := plotPebble(out, rep.Pebble)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		plots["pebble"] = name
	}
	writeReport(&md, rep, plots)
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "results.json"), js, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "report.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(out, "report.md"))
	return nil
}

// filterConfig is the filter level of a run: the families measured on
// random 16-byte keys at each size, probed with the same absent keys.
type filterConfig struct {
	Sizes    []int                // key counts
	Families []filterbench.Family // filters to compare
	Probes   int                  // absent keys for the FPR
	filterbench.Options
	// lineup, if set, replaces Families with a line-up drawn for each
	// size's keys.
	lineup func(keys [][]byte) []filterbench.Family
}

// runFilters measures every family at every size, on random keys drawn per
// size and one set of absent keys for all.
func runFilters(cfg filterConfig, progress func(string)) ([]filterbench.Result, error) {
	absent := testkeys.Absent(cfg.Probes, 200)
	var out []filterbench.Result
	for _, n := range cfg.Sizes {
		keys := testkeys.Random(n, 16, 100)
		fams := cfg.Families
		if cfg.lineup != nil {
			fams = cfg.lineup(keys)
		}
		res := filterbench.Measure(fams, keys, absent, cfg.Options, progress)
		for _, r := range res {
			if r.FalseNegatives > 0 {
				return nil, fmt.Errorf("%s, %d keys: %d false negatives (key %x): the comparison would be meaningless", r.Family, n, r.FalseNegatives, r.FalseNegative)
			}
		}
		out = append(out, res...)
	}
	return out, nil
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
