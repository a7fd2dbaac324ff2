package main

import (
	"fmt"
	"io"

	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
)

// baseline is the filter every ratio is taken against.
const baseline = "pebble-bloom/10"

func writeReport(w io.Writer, rep *report, plots map[string]string) {
	fmt.Fprintf(w, "# lsmcuckoo benchmark report (%s run)\n\n", rep.Mode)
	fmt.Fprintf(w, "Machine: %s; %s. Every comparison ran in one process on the same keys, the compared filters interleaved. Filter-level and memtable timings are medians of %d repetition(s); the database and kvdemo levels are one run per setting (each over %s operations). Ratios are against `%s` in the same run.\n\n", rep.Machine, rep.Go, max(1, rep.Reps), "10⁴–10⁶", baseline)

	fmt.Fprintf(w, "## Filter level\n\n")
	fmt.Fprintf(w, "Random 16-byte keys; FPR over %d absent keys. *hot*: one filter probed in a loop. *cold*: copies of the filter spread over ≥ %d MiB, a random copy per lookup, timed as a loop of independent lookups (throughput) and as a chain where each lookup waits for the previous answer (latency: what one Get pays per table). *allocs*: heap allocations to build one filter.\n\n", rep.Probes, rep.ColdMiB)
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
		fmt.Fprintf(w, "| filter | bits/key | FPR | build ns/key | allocs | hot ns | cold ns | cold latency ns | build ×bloom | hot ×bloom | cold ×bloom | latency ×bloom |\n")
		fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rep.Filters {
			if r.Keys != n {
				continue
			}
			ratio := func(get func(filterbench.Result) float64) string {
				if base == nil || get(*base) == 0 {
					return "–"
				}
				return fmt.Sprintf("%.2f", get(r)/get(*base))
			}
			fmt.Fprintf(w, "| %s | %.2f | %s | %.1f | %.0f | %.1f | %.1f | %.1f | %s | %s | %s | %s |\n",
				r.Family, r.BitsPerKey, pct(r.FPR), r.BuildNsKey, r.BuildAllocs, r.HotNs, r.ColdNs, r.ColdLatNs,
				ratio(func(x filterbench.Result) float64 { return x.BuildNsKey }),
				ratio(func(x filterbench.Result) float64 { return x.HotNs }),
				ratio(func(x filterbench.Result) float64 { return x.ColdNs }),
				ratio(func(x filterbench.Result) float64 { return x.ColdLatNs }))
		}
		fmt.Fprintln(w)
	}

	if len(rep.Pebble) > 0 {
		c := rep.PebbleC
		fmt.Fprintf(w, "## Pebble database level\n\n")
		fmt.Fprintf(w, "A real Pebble DB on disk per policy, same keys: %d keys written with compactions on (a tall tree, not all in L6), then %d keys flushed as %d overlapping L0 tables; values of %d bytes; block cache %d MiB, smaller than the data. Compactions are off while measuring. %d Gets per workload after a warm-up; *absent* probes keys that interleave with the present ones inside every table's range. *block reads/Get* is Pebble's block-cache misses per Get; *filter rejects* is Pebble's own filter-hit counter (tables skipped).\n\n",
			c.BaseKeys, c.L0Keys, c.L0Tables, c.ValueSize, c.CacheBytes>>20, c.Gets)
		if name, ok := plots["pebble"]; ok {
			fmt.Fprintf(w, "![Pebble Gets](%s)\n\n", name)
		}
		fmt.Fprintf(w, "| policy | workload | Gets/s | block reads/Get | filter rejects/Get | filter passes/Get | filter bytes | tables L0..L6 | Gets/s ×bloom |\n")
		fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rep.Pebble {
			ratio := "–"
			for _, b := range rep.Pebble {
				if b.Policy == baseline && b.Workload == r.Workload && b.GetsPerSec > 0 {
					ratio = fmt.Sprintf("%.2f", r.GetsPerSec/b.GetsPerSec)
				}
			}
			fmt.Fprintf(w, "| %s | %s | %.0f | %.3f | %.2f | %.3f | %d | %v | %s |\n",
				r.Policy, r.Workload, r.GetsPerSec, r.BlockReadsPer,
				float64(r.FilterHits)/float64(r.Gets), float64(r.FilterMisses)/float64(r.Gets),
				r.FilterBytes, r.TablesPerLevel, ratio)
		}
		fmt.Fprintln(w)
	}
	if len(rep.KV) > 0 {
		fmt.Fprintf(w, "## kvdemo level\n\n")
		fmt.Fprintf(w, "The project's demo store (package kvdemo: WAL, memtable behind a MemFilter, Badger-format SSTs) loaded with %d keys into about 20 tables per store, once per filter kind, everything else equal: *cuckoo* = lsmcuckoo at 10 bits/key beside each table, *global* = one store-wide `dynamic.Index` naming the tables that may hold each key (10 bits/key budget, table codes included; one probe per Get), *bloom* = Badger's own `y.Filter` inside the table at Badger's default `BloomFalsePositive` 0.01, *none*. *FPR*: the share of tables without the key that the filter did not skip. Filter bytes include the memtable's filter (for *global*, they are the index's).\n\n", rep.KVKeys)
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
