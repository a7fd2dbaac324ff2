package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/dbbench"
)

// baseline is the filter every ratio is taken against.
const baseline = "pebble-bloom/10"

func writeReport(w io.Writer, rep *report, plots map[string]string) {
	fmt.Fprintf(w, "# lsmcuckoo benchmark report (%s run)\n\n", rep.Mode)
	fmt.Fprintf(w, "Machine: %s; %s. Every comparison ran in one process on the same keys, the compared filters interleaved. Filter-level and memtable timings are medians of %d repetition(s) (a filter-level ratio is the median of the repetitions' own ratios); the database and kvdemo levels are one run per setting (each over %s operations). Ratios are against `%s` in the same run.\n\n", rep.Machine, rep.Go, max(1, rep.Reps), "10⁴–10⁶", baseline)

	if len(rep.Filters) > 0 { // not with -pebble-only
		fmt.Fprintf(w, "## Filter level\n\n")
		fmt.Fprintf(w, "Random 16-byte keys; FPR over %d absent keys (a rate resting on fewer than 100 false positives shows their count: it is accurate to tens of percent). *hot*: one filter probed in a loop. *cold*: copies of the filter spread over ≥ %d MiB, a random copy per lookup, timed as a loop of independent lookups, which the processor overlaps (throughput), and one at a time, each finished before the next starts (latency: what a Get that waits for a table's answer pays; a clock read after each lookup orders it, and the clock's own cost is subtracted). *allocs*: heap allocations to build one filter.\n\n", rep.Probes, rep.ColdMiB)
	}
	for _, n := range rep.Sizes {
		var base *filterbench.Result
		for i := range rep.Filters {
			if r := &rep.Filters[i]; r.Keys == n && r.Family == baseline {
				base = r
			}
		}
		fmt.Fprintf(w, "### %d keys\n\n", n)
		if name, ok := plots[fmt.Sprintf("fpr-%d", n)]; ok {
			fmt.Fprintf(w, "![FPR vs bits/key, %d keys](%s)\n\n", n, name)
		}
		if name, ok := plots[fmt.Sprintf("frontier-%d", n)]; ok {
			fmt.Fprintf(w, "![Cold lookup time vs FPR, %d keys](%s)\n\n", n, name)
		}
		fmt.Fprintf(w, "| filter | bits/key | FPR | build ns/key | allocs | hot ns | cold ns | cold latency ns | build ×bloom | hot ×bloom | cold ×bloom | latency ×bloom |\n")
		fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rep.Filters {
			if r.Keys != n {
				continue
			}
			// The median of the repetitions' own ratios where the run
			// took them, else the ratio of the medians.
			ratio := func(perRep float64, get func(filterbench.Result) float64) string {
				if perRep > 0 {
					return fmt.Sprintf("%.2f", perRep)
				}
				if base == nil || get(*base) == 0 {
					return "–"
				}
				return fmt.Sprintf("%.2f", get(r)/get(*base))
			}
			fmt.Fprintf(w, "| %s | %.2f | %s | %.1f | %.0f | %.1f | %.1f | %.1f | %s | %s | %s | %s |\n",
				r.Family, r.BitsPerKey, fprCell(r), r.BuildNsKey, r.BuildAllocs, r.HotNs, r.ColdNs, r.ColdLatNs,
				ratio(r.Ratios.Build, func(x filterbench.Result) float64 { return x.BuildNsKey }),
				ratio(r.Ratios.Hot, func(x filterbench.Result) float64 { return x.HotNs }),
				ratio(r.Ratios.Cold, func(x filterbench.Result) float64 { return x.ColdNs }),
				ratio(r.Ratios.ColdLat, func(x filterbench.Result) float64 { return x.ColdLatNs }))
		}
		fmt.Fprintln(w)
		writeFuse(w, rep.Filters, n)
		unaligned := false
		for _, r := range rep.Filters {
			unaligned = unaligned || r.Keys == n && r.HotUnalignedNs > 0
		}
		if unaligned {
			fmt.Fprintf(w, "Unaligned filters (Pebble hands a filter block at any alignment): the same lookups on copies that start 1..63 bytes past a 64-byte boundary (hot: averaged over all 63 offsets; cold: a random offset per copy).\n\n")
			fmt.Fprintf(w, "| filter | hot ns | hot unaligned ns | ×aligned | cold ns | cold unaligned ns | ×aligned |\n|---|---|---|---|---|---|---|\n")
			for _, r := range rep.Filters {
				if r.Keys != n || r.HotUnalignedNs == 0 {
					continue
				}
				coldRatio := "–"
				if r.ColdNs > 0 && r.ColdUnalignedNs > 0 {
					coldRatio = fmt.Sprintf("%.2f", r.ColdUnalignedNs/r.ColdNs)
				}
				fmt.Fprintf(w, "| %s | %.1f | %.1f | %.2f | %.1f | %.1f | %s |\n", r.Family, r.HotNs, r.HotUnalignedNs, r.HotUnalignedNs/r.HotNs, r.ColdNs, r.ColdUnalignedNs, coldRatio)
			}
			fmt.Fprintln(w)
		}
	}

	if rep.Pebble != nil {
		writePebble(w, rep.Pebble, plots)
	}
	if len(rep.KV) > 0 {
		fmt.Fprintf(w, "## kvdemo level\n\n")
		fmt.Fprintf(w, "The project's demo store (package kvdemo: WAL, memtable behind a MemFilter, Badger-format SSTs) loaded with %d keys into about 20 tables per store, once per filter kind, everything else equal: *cuckoo* = lsmcuckoo at 10 bits/key beside each table, *global* = one store-wide `dynamic.Index` naming the tables that may hold each key (10 bits/key budget, table codes included; one probe per Get), *bloom* = Badger's own `y.Filter` inside the table at Badger's default `BloomFalsePositive` 0.01, *none*. Each store is measured once it has settled after its load (`DB.Settle`: a global index grown by segments during the load is rebuilt in one). *FPR*: the share of tables without the key that the filter did not skip. Filter bytes include the memtable's filter (for *global*, they are the index's). *bloom* runs at Badger's default budget, below the others' 10 bits/key: the ×bloom column is not a same-budget ratio (compare the filter bytes).\n\n", rep.KVKeys)
		fmt.Fprintf(w, "| filter | absent share | Gets/s | tables probed/Get | FPR | filter bytes | tables | Gets/s ×bloom |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range rep.KV {
			ratio := "–"
			for _, b := range rep.KV {
				if b.Filter == "bloom" && b.Miss == r.Miss && b.GetsPerSec > 0 {
					ratio = fmt.Sprintf("%.2f", r.GetsPerSec/b.GetsPerSec)
				}
			}
			fmt.Fprintf(w, "| %s | %.0f%% | %.0f | %.3f | %s | %d | %d | %s |\n", r.Filter, 100*r.Miss, r.GetsPerSec, r.ProbedPerGet, pct(r.FPR), r.FilterBytes, r.Tables, ratio)
		}
		fmt.Fprintln(w)
	}
	if len(rep.Mem) > 0 {
		writeMem(w, rep)
	}
	fmt.Fprintf(w, "Run took %.0f s.\n", rep.Seconds)
}

// fprCell is a filter's FPR, with the count of false positives behind it
// when that count is under 100: a rate resting on a handful of events is
// accurate to tens of percent, and the reader should see that.
func fprCell(r filterbench.Result) string {
	fp := int(math.Round(r.FPR * float64(r.Probes)))
	if r.Probes > 0 && fp < 100 {
		return fmt.Sprintf("%s (%d of %d)", pct(r.FPR), fp, r.Probes)
	}
	return pct(r.FPR)
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

// writeMem prints the memtable-filter concurrency tables: Mops/s per
// implementation and goroutine count, with the ratios the issue targets.
func writeMem(w io.Writer, rep *report) {
	fmt.Fprintf(w, "## Memtable filter\n\n")
	fmt.Fprintf(w, "`dynamic.MemFilter` (lock-free) beside the same filter behind `sync.Mutex` and behind `sync.RWMutex`. %d random 16-byte keys; %d lookups per measurement, split evenly over exactly N goroutines. *mixed*: one writer adds nonstop while N readers look up keys already added. Millions of operations per second.\n\n", rep.MemKeys, rep.MemOps)
	get := func(impl, workload string, g int) (float64, float64, bool) {
		for _, r := range rep.Mem {
			if r.Impl == impl && r.Workload == workload && r.Goroutines == g {
				return r.Mops, r.WriteMops, true
			}
		}
		return 0, 0, false
	}
	for _, wl := range []struct{ name, title string }{{"lookup", "Lookups"}, {"add", "Adds"}, {"mixed", "1 writer + N readers: reads (writes)"}} {
		fmt.Fprintf(w, "| %s, Mops/s | N=1 | N=2 | N=4 |\n|---|---|---|---|\n", wl.title)
		for _, impl := range []string{"memfilter", "mutex", "rwmutex"} {
			row := "| " + impl
			any := false
			for _, g := range []int{1, 2, 4} {
				m, wm, ok := get(impl, wl.name, g)
				switch {
				case !ok:
					row += " | –"
				case wl.name == "mixed":
					row += fmt.Sprintf(" | %.1f (%.1f)", m, wm)
					any = true
				default:
					row += fmt.Sprintf(" | %.1f", m)
					any = true
				}
			}
			if any {
				fmt.Fprintln(w, row+" |")
			}
		}
		fmt.Fprintln(w)
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	l2, _, _ := get("memfilter", "lookup", 2)
	rw2, _, _ := get("rwmutex", "lookup", 2)
	m1, _, _ := get("memfilter", "mixed", 1)
	mu1, _, _ := get("mutex", "mixed", 1)
	fmt.Fprintf(w, "Ratios: 2-goroutine lookups vs RWMutex %s; 1 writer + 1 reader reads vs Mutex %s.\n\n",
		ratio(l2, rw2), ratio(m1, mu1))
}

// The policies the targets name.
const (
	perLevelFit     = "lsmcuckoo/levels-10-fit"
	perLevelModel   = "lsmcuckoo/levels-10"
	uniformCuckoo   = "lsmcuckoo/10"
	uniformDensest  = "lsmcuckoo-densest/10"
	uniformCuckooV4 = "lsmcuckoo-v4/10"
	uniformCuckooV2 = "lsmcuckoo-v2/10"
	progressiveName = "pebble-bloom/progressive"
	fittedBloom     = "pebble-bloom/levels-10-fit"
	fuse8           = "binary-fuse/8"
	fuse10          = "binary-fuse/10"
)

// writePebble writes the Pebble database level: how the trees were grown
// and probed, their shapes, the probe tables with and without modelled
// latency, the memory saving at equal false-positive reads, and the
// targets the per-level and uniform policies are held to.
func writePebble(w io.Writer, pr *dbbench.Report, plots map[string]string) {
	writePebbleMethod(w, pr)
	writePebbleTrees(w, pr.Trees)
	if name, ok := plots["pebble"]; ok {
		fmt.Fprintf(w, "![Pebble probes](%s)\n\n", name)
	}
	res := pebbleResults(pr.Results)
	writePebbleProbes(w, res, pr.Config.Latency)
	writePebbleSavings(w, pr.Savings)
	if _, ok := res.find(uniformCuckoo, dbbench.AbsentPrefix, 0); ok {
		writePebbleTargets(w, res, pr.Savings, pr.Config.Latency)
	}
	writeLevelTargets(w, pr)
}

// writePebbleMethod says how the trees were grown and probed, so a reader
// can judge what the tables that follow measure.
func writePebbleMethod(w io.Writer, pr *dbbench.Report) {
	c := pr.Config
	fmt.Fprintf(w, "## Pebble database level\n\n")
	var total uint64
	for _, t := range pr.Trees {
		total = max(total, t.TotalBytes())
	}
	fmt.Fprintf(w, "One real Pebble store on disk per policy, grown the same way: %d keys written in random order, a memtable (%d KiB) at a time, with automatic compactions (one at a time, the store left to go quiet after each flush); LBaseMaxBytes %d KiB and %d KiB target files scale the tree down so L0 and Lbase..L6 all hold tables; then %d more memtables of fresh keys flushed with compactions off, as the L0 sublevels a store holds between L0 compactions. Keys are MVCC-shaped: a 16-byte user key and an 8-byte version, under a comparer whose Split returns the user key, so filters hold user keys (as in CockroachDB). Values are %d incompressible bytes. Block cache %d MiB, against %.1f MiB of data, index and filter blocks. Compactions are off while measuring.\n\n",
		c.Keys, c.MemTableBytes>>10, c.LBaseMaxBytes>>10, c.TargetFileBytes>>10, c.L0Flushes, c.ValueSize, c.CacheBytes>>20, float64(total)/(1<<20))
	fmt.Fprintf(w, "Workloads, over user keys spread across the whole key space (absent ones interleave with present ones inside every table's range, so only a filter can skip a table): *absent Get*, *present Get*, *50/50 Get* (`DB.Get`, which never consults L6 filters), and *absent prefix*: `SeekPrefixGE` on a user key with `IterOptions{UseL6Filters: true}` on one reused iterator (an MVCC point read; every level filtered). %d probes per workload in memory, %d with the modelled latency: a `vfs.FS` wrapper (`dbbench.LatencyFS`) makes every sstable `ReadAt` (Pebble reads only blocks that miss its cache) wait %v more, a busy wait on the reading thread's clock. *probes/s* counts the probing thread's own time (Linux: its CPU time, which includes the modelled waits), because the machine's cores are shared with other jobs whose time a wall clock would also count; policies take turns in %d slices of each workload, and the figure is the median slice's. *block reads*: Pebble's block-cache misses per probe; *FP reads*: Pebble's `Filter.Misses` per absent probe, the tables whose filter said \"maybe\" for a key they do not hold. Ratios (×) are against `%s` in the same run.\n\n",
		c.Probes, c.LatencyProbes, c.Latency, dbbench.Rounds, dbbench.SavingBaseline)
}

// writePebbleTrees writes each policy's tree: tables per level, filter
// bits per key by level and overall, and the CPU its build took against
// the baseline's, the write path's cost of a filter.
func writePebbleTrees(w io.Writer, trees []dbbench.Tree) {
	fmt.Fprintf(w, "### Trees\n\n")
	fmt.Fprintf(w, "*build CPU*: the process's CPU time (the writer, Pebble's flushes and compactions) to grow the tree, the write path's cost, against `%s`'s; one build per policy, so a few percent is noise.\n\n", dbbench.SavingBaseline)
	var baseCPU time.Duration
	for _, t := range trees {
		if t.Policy == dbbench.SavingBaseline {
			baseCPU = t.BuildCPU
		}
	}
	fmt.Fprintf(w, "| policy | tables per level (L0: sublevels) | filter bits/key by level, L0..L6 | filter bytes | bits/key overall | build CPU s | ×%s |\n|---|---|---|---|---|---|---|\n", dbbench.SavingBaseline)
	for _, t := range trees {
		var shape, bpk []string
		for l, li := range t.Levels {
			if li.Tables == 0 {
				bpk = append(bpk, "–")
				continue
			}
			if l == 0 {
				shape = append(shape, fmt.Sprintf("L0 %d (%d)", li.Tables, t.Sublevels))
			} else {
				shape = append(shape, fmt.Sprintf("L%d %d", l, li.Tables))
			}
			if li.Keys > 0 && li.FilterBytes > 0 {
				bpk = append(bpk, fmt.Sprintf("%.1f", float64(8*li.FilterBytes)/float64(li.Keys)))
			} else {
				bpk = append(bpk, "0")
			}
		}
		overall := float64(8*t.TotalFilterBytes()) / float64(max(t.TotalKeys(), 1))
		cpuRatio := "–"
		if baseCPU > 0 {
			cpuRatio = fmt.Sprintf("%.2f", float64(t.BuildCPU)/float64(baseCPU))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %d | %.2f | %.2f | %s |\n", t.Policy, strings.Join(shape, " · "), strings.Join(bpk, " · "), t.TotalFilterBytes(), overall, t.BuildCPU.Seconds(), cpuRatio)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "`%s` is `tablefilter.SetLevelPolicies(opts, 10)`: budgets from its model of a full seven-level tree. This tree is scaled down, so its L0 holds a far larger share of the keys than a production L0 and the model overspends here. `%s` is what the documentation tells a user whose tree differs from the model: `tablefilter.LevelBudgets(tablefilter.MeasuredLevelShape(...), 10)`, fitted to the shape of the `none` tree; it is the per-level policy at equal filter bytes. `%s` is master's 16/16/16/16/14/10/8, copied by hand: not fitted to this tree, and not at the others' filter bytes (compare the filter bytes column before reading a ratio against it). `%s` is the bloom given the fitted lsmcuckoo's treatment: whole bits per key per level (all `bloom.FilterPolicy` takes) allocated on the same `none` tree's shape to minimise tables read in vain, on the bloom's own rate curve (measured on real Pebble bloom filters), at an average of at most 10: the per-level bloom at equal filter bytes.\n\n", perLevelModel, perLevelFit, progressiveName, fittedBloom)
}

// pebbleResults are one run's Pebble measurements, looked up by policy,
// workload and modelled latency.
type pebbleResults []dbbench.PebbleResult

// find returns the measurement of policy on workload at latency, if any.
func (res pebbleResults) find(policy, workload string, latency time.Duration) (dbbench.PebbleResult, bool) {
	for _, r := range res {
		if r.Policy == policy && r.Workload == workload && r.Latency == latency {
			return r, true
		}
	}
	return dbbench.PebbleResult{}, false
}

// ratio returns get of policy over get of base, on the same workload at
// the same latency; 0 (shown as "–") when either was not measured or the
// base's figure is 0.
func (res pebbleResults) ratio(policy, base, workload string, latency time.Duration, get func(dbbench.PebbleResult) float64) float64 {
	r, ok1 := res.find(policy, workload, latency)
	b, ok2 := res.find(base, workload, latency)
	if !ok1 || !ok2 || get(b) == 0 {
		return 0
	}
	return get(r) / get(b)
}

// probesPerS and fpReads are the figures ratio compares: throughput, and
// tables read in vain per probe.
func probesPerS(r dbbench.PebbleResult) float64 { return r.ProbesPerS }
func fpReads(r dbbench.PebbleResult) float64    { return r.FilterMisses }

// writePebbleProbes writes one table of every policy's probes per
// workload, in memory and then with latency per block read, in the order
// the policies were measured.
func writePebbleProbes(w io.Writer, res pebbleResults, latency time.Duration) {
	var policies []string
	for _, r := range res {
		if !slices.Contains(policies, r.Policy) {
			policies = append(policies, r.Policy)
		}
	}
	for _, lat := range []time.Duration{0, latency} {
		if lat == 0 {
			fmt.Fprintf(w, "### In memory (no modelled latency)\n\n")
		} else {
			fmt.Fprintf(w, "### With %v per block read\n\n", lat)
		}
		fmt.Fprintf(w, "| policy |")
		for _, wl := range dbbench.Workloads {
			fmt.Fprintf(w, " %s probes/s (×) |", wl)
		}
		fmt.Fprintf(w, " block reads/probe: absent Get · present · 50/50 · prefix | FP reads/absent Get (×) | FP reads/absent prefix (×) |\n|---|")
		for range dbbench.Workloads {
			fmt.Fprintf(w, "---|")
		}
		fmt.Fprintf(w, "---|---|---|\n")
		for _, pol := range policies {
			fmt.Fprintf(w, "| %s |", pol)
			var reads []string
			for _, wl := range dbbench.Workloads {
				r, _ := res.find(pol, wl, lat)
				fmt.Fprintf(w, " %.0f (%.2f) |", r.ProbesPerS, res.ratio(pol, dbbench.SavingBaseline, wl, lat, probesPerS))
				reads = append(reads, fmt.Sprintf("%.3f", r.BlockReads))
			}
			g, _ := res.find(pol, dbbench.AbsentGet, lat)
			s, _ := res.find(pol, dbbench.AbsentPrefix, lat)
			fmt.Fprintf(w, " %s | %.4f (%.2f) | %.4f (%.2f) |\n", strings.Join(reads, " · "),
				g.FilterMisses, res.ratio(pol, dbbench.SavingBaseline, dbbench.AbsentGet, lat, fpReads),
				s.FilterMisses, res.ratio(pol, dbbench.SavingBaseline, dbbench.AbsentPrefix, lat, fpReads))
		}
		fmt.Fprintln(w)
	}
}

// writePebbleSavings writes, for each lsmcuckoo family, the filter bytes
// it needs to read as few tables in vain as the baseline; nothing when
// the run measured no savings.
func writePebbleSavings(w io.Writer, savings []dbbench.Saving) {
	if len(savings) > 0 {
		fmt.Fprintf(w, "### Memory saving at equal false-positive reads\n\n")
		fmt.Fprintf(w, "The budget at which each lsmcuckoo family reads as many tables in vain per absent prefix seek as `%s`, interpolated between measured budgets (log of the reads linear in bits/key; each budget a tree of its own), and the filter bytes it then needs.\n\n", dbbench.SavingBaseline)
		fmt.Fprintf(w, "| family | measured bits/key: FP reads per probe | bits/key at %s's FP reads | filter bytes | %s's filter bytes | saving |\n|---|---|---|---|---|---|\n", dbbench.SavingBaseline, dbbench.SavingBaseline)
		for _, sv := range savings {
			var budgets []string
			for _, p := range sv.Points {
				budgets = append(budgets, fmt.Sprintf("%g: %.4f", p.BitsPerKey, p.FPPerProbe))
			}
			note := ""
			if !sv.Bracketed {
				note = " (not bracketed: nearest measured budget)"
			}
			fmt.Fprintf(w, "| %s | %s | %.2f%s | %.0f | %d | %.0f%% |\n", sv.Family, strings.Join(budgets, "; "), sv.BitsPerKey, note,
				sv.FilterBytes, sv.BaselineBytes, 100*(1-sv.FilterBytes/float64(sv.BaselineBytes)))
		}
		fmt.Fprintln(w)
	}
}

// writePebbleTargets writes each goal the policies are held to beside the
// ratio this run measured for it.
func writePebbleTargets(w io.Writer, res pebbleResults, savings []dbbench.Saving, latency time.Duration) {
	fmt.Fprintf(w, "### Targets (issue #11)\n\n")
	x := func(v float64) string {
		if v == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", v)
	}
	L := latency
	fmt.Fprintf(w, "- FP reads per absent prefix seek vs `%s`: per-level `%s` %s (goal ≤ 0.3×; `%s` %s); uniform `%s` %s (goal ≤ 0.65×).\n",
		dbbench.SavingBaseline, perLevelFit, x(res.ratio(perLevelFit, dbbench.SavingBaseline, dbbench.AbsentPrefix, 0, fpReads)),
		perLevelModel, x(res.ratio(perLevelModel, dbbench.SavingBaseline, dbbench.AbsentPrefix, 0, fpReads)),
		uniformCuckoo, x(res.ratio(uniformCuckoo, dbbench.SavingBaseline, dbbench.AbsentPrefix, 0, fpReads)))
	fmt.Fprintf(w, "- Absent prefix seeks/s with %v per read: `%s` %s `%s` (goal ≥ 1.3×), %s `%s` (goal ≥ 1.1×), %s `%s` (the per-level bloom at equal bytes); FP reads per absent prefix seek %s `%s`'s.\n",
		L, perLevelFit, x(res.ratio(perLevelFit, dbbench.SavingBaseline, dbbench.AbsentPrefix, L, probesPerS)), dbbench.SavingBaseline,
		x(res.ratio(perLevelFit, progressiveName, dbbench.AbsentPrefix, L, probesPerS)), progressiveName,
		x(res.ratio(perLevelFit, fittedBloom, dbbench.AbsentPrefix, L, probesPerS)), fittedBloom,
		x(res.ratio(perLevelFit, fittedBloom, dbbench.AbsentPrefix, 0, fpReads)), fittedBloom)
	fmt.Fprintf(w, "- Format version 3 vs 2: `%s` vs `%s`: FP reads per absent prefix seek %s, per absent Get %s; absent prefix seeks/s in memory %s, absent Gets/s in memory %s, with latency %s.\n",
		uniformCuckoo, uniformCuckooV2,
		x(res.ratio(uniformCuckoo, uniformCuckooV2, dbbench.AbsentPrefix, 0, fpReads)), x(res.ratio(uniformCuckoo, uniformCuckooV2, dbbench.AbsentGet, 0, fpReads)),
		x(res.ratio(uniformCuckoo, uniformCuckooV2, dbbench.AbsentPrefix, 0, probesPerS)),
		x(res.ratio(uniformCuckoo, uniformCuckooV2, dbbench.AbsentGet, 0, probesPerS)), x(res.ratio(uniformCuckoo, uniformCuckooV2, dbbench.AbsentGet, L, probesPerS)))
	fmt.Fprintf(w, "- Version 3's layouts, default vs densest: `%s` vs `%s`: FP reads per absent prefix seek %s, per absent Get %s; absent Gets/s in memory %s, with latency %s; absent prefix seeks/s with latency %s.\n",
		uniformCuckoo, uniformDensest,
		x(res.ratio(uniformCuckoo, uniformDensest, dbbench.AbsentPrefix, 0, fpReads)), x(res.ratio(uniformCuckoo, uniformDensest, dbbench.AbsentGet, 0, fpReads)),
		x(res.ratio(uniformCuckoo, uniformDensest, dbbench.AbsentGet, 0, probesPerS)), x(res.ratio(uniformCuckoo, uniformDensest, dbbench.AbsentGet, L, probesPerS)),
		x(res.ratio(uniformCuckoo, uniformDensest, dbbench.AbsentPrefix, L, probesPerS)))
	fmt.Fprintf(w, "- Format version 4 vs version 3's densest layout: `%s` vs `%s`: FP reads per absent prefix seek %s, per absent Get %s; absent Gets/s in memory %s, with latency %s; absent prefix seeks/s with latency %s.\n",
		uniformCuckooV4, uniformDensest,
		x(res.ratio(uniformCuckooV4, uniformDensest, dbbench.AbsentPrefix, 0, fpReads)), x(res.ratio(uniformCuckooV4, uniformDensest, dbbench.AbsentGet, 0, fpReads)),
		x(res.ratio(uniformCuckooV4, uniformDensest, dbbench.AbsentGet, 0, probesPerS)), x(res.ratio(uniformCuckooV4, uniformDensest, dbbench.AbsentGet, L, probesPerS)),
		x(res.ratio(uniformCuckooV4, uniformDensest, dbbench.AbsentPrefix, L, probesPerS)))
	for _, pol := range []string{uniformCuckoo, uniformDensest, uniformCuckooV4, uniformCuckooV2, perLevelFit} {
		fmt.Fprintf(w, "- `%s` vs `%s`: absent Get %s in memory, %s with latency (goal ≥ 1.0×); present Get %s, %s (goal ≥ 0.98×); absent prefix seeks in memory %s (goal ≥ 1.0×).\n",
			pol, dbbench.SavingBaseline,
			x(res.ratio(pol, dbbench.SavingBaseline, dbbench.AbsentGet, 0, probesPerS)), x(res.ratio(pol, dbbench.SavingBaseline, dbbench.AbsentGet, L, probesPerS)),
			x(res.ratio(pol, dbbench.SavingBaseline, dbbench.PresentGet, 0, probesPerS)), x(res.ratio(pol, dbbench.SavingBaseline, dbbench.PresentGet, L, probesPerS)),
			x(res.ratio(pol, dbbench.SavingBaseline, dbbench.AbsentPrefix, 0, probesPerS)))
	}
	for _, fuse := range []string{fuse8, fuse10} {
		line := fmt.Sprintf("- Against `%s` (compare the filter bytes above):", fuse)
		for i, pol := range []string{uniformCuckooV4, uniformCuckoo, uniformDensest} {
			sep := ";"
			if i == 0 {
				sep = ""
			}
			line += fmt.Sprintf("%s `%s`: FP reads per absent prefix seek %s, per absent Get %s; absent prefix seeks/s with %v per read %s; absent Gets/s in memory %s",
				sep, pol, x(res.ratio(pol, fuse, dbbench.AbsentPrefix, 0, fpReads)), x(res.ratio(pol, fuse, dbbench.AbsentGet, 0, fpReads)),
				L, x(res.ratio(pol, fuse, dbbench.AbsentPrefix, L, probesPerS)), x(res.ratio(pol, fuse, dbbench.AbsentGet, 0, probesPerS)))
		}
		fmt.Fprintln(w, line+".")
	}
	for _, sv := range savings {
		fmt.Fprintf(w, "- At `%s`'s FP reads, %s uses %.0f%% fewer filter bytes (goal ≥ 25%%).\n", dbbench.SavingBaseline, sv.Family, 100*(1-sv.FilterBytes/float64(sv.BaselineBytes)))
	}
	fmt.Fprintln(w)
}
