package dbbench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// tinyPebble grows a tree of four or more populated levels in seconds.
var tinyPebble = PebbleConfig{Keys: 60_000, L0Flushes: 2, ValueSize: 32,
	MemTableBytes: 256 << 10, LBaseMaxBytes: 16 << 10, TargetFileBytes: 64 << 10, LevelMultiplier: 4,
	CacheBytes: 1 << 20, Probes: 3_000, LatencyProbes: 300, Latency: 50 * time.Microsecond}

// TestComparer checks what Pebble relies on for prefix filtering: Split
// finds the 16-byte prefix of every full key, and ordering by the whole key
// agrees with ordering by prefix first, then by version, also for the
// shorter keys Pebble derives as separators. (pebble.CheckComparer assumes
// prefixes of any length and does not apply to a fixed-length split.)
func TestComparer(t *testing.T) {
	var keys [][]byte
	for _, i := range []int{0, 1, 5, 77, 1 << 20} {
		for _, p := range [][]byte{presentPrefix(i), absentPrefix(i)} {
			for _, v := range []uint64{0, 1, version, 1 << 60} {
				k := binary.BigEndian.AppendUint64(slices.Clone(p), v)
				if n := Comparer.Split(k); n != prefixLen || !bytes.Equal(k[:n], p) {
					t.Fatalf("Split(%x) = %d", k, n)
				}
				keys = append(keys, k)
			}
			keys = append(keys, p, p[:7]) // a bare prefix; a separator
		}
	}
	for _, a := range keys {
		for _, b := range keys {
			pa, pb := a[:Comparer.Split(a)], b[:Comparer.Split(b)]
			c := Comparer.Compare(a, b)
			if pc := bytes.Compare(pa, pb); pc != 0 && c != pc {
				t.Fatalf("Compare(%x, %x) = %d, prefixes compare %d", a, b, c, pc)
			}
			if bytes.Equal(pa, pb) && c != bytes.Compare(a[len(pa):], b[len(pb):]) {
				t.Fatalf("Compare(%x, %x) = %d disagrees with the versions' order", a, b, c)
			}
		}
	}
}

func TestLatencyFS(t *testing.T) {
	mem := vfs.NewMem()
	for _, name := range []string{"000001.sst", "MANIFEST-000001"} {
		f, err := mem.Create(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(make([]byte, 4096))
		f.Close()
	}
	fs := NewLatencyFS(mem)
	const d = 200 * time.Microsecond
	fs.SetDelay(d)
	read := func(name string) time.Duration {
		f, err := fs.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		start := time.Now()
		if _, err := f.ReadAt(make([]byte, 512), 1024); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	if el := read("000001.sst"); el < d {
		t.Errorf("sstable read took %v, under the modelled %v", el, d)
	}
	read("MANIFEST-000001")
	if n, waited := fs.Reads(); n != 1 || waited < d {
		t.Errorf("counted %d reads waiting %v; want 1 sstable read of at least %v", n, waited, d)
	}
	fs.SetDelay(0)
	read("000001.sst")
	if n, waited := fs.Reads(); n != 2 || waited > 10*d {
		t.Errorf("with the delay off: %d reads, %v waited", n, waited)
	}
}

// TestPebbleTiny runs the whole database benchmark on a tiny tree: every
// policy's tree must have L0 sublevels over at least three levels, tables
// must carry the filters their level was configured with, filters must
// skip tables (more of them with L6 filters), and no lookup may answer
// wrong (Probe fails on a present key not found, an absent key found, or a
// wrong value).
func TestPebbleTiny(t *testing.T) {
	// Whole Pebble trees: Pebble built with invariants, as under -race,
	// takes ten times as long. What runs concurrently here is covered
	// under -race where it lives: the builders Pebble's flushes and
	// compactions run side by side (codec's TestConcurrentBuilders),
	// lookups from many goroutines (tablefilter's Pebble stores), and
	// membench's goroutines (its TestRunTiny).
	race.SkipLong(t)
	cfg := tinyPebble
	policies := Policies()
	saving := SavingPolicies([]float64{9}, []float64{7})
	rep, err := RunAllPebble(t.TempDir(), policies, saving, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Trees) != len(policies)+len(saving) {
		t.Fatalf("%d trees for %d policies", len(rep.Trees), len(policies)+len(saving))
	}
	for _, tr := range rep.Trees {
		populated := 0
		for _, l := range tr.Levels {
			if l.Tables > 0 {
				populated++
			}
		}
		if tr.Levels[0].Tables == 0 || tr.Sublevels < 2 || populated < 4 {
			t.Errorf("%s: shape %+v, %d sublevels: want L0 sublevels over at least 3 more levels", tr.Policy, tr.Levels, tr.Sublevels)
		}
		for l, li := range tr.Levels {
			for name := range li.Filters {
				switch {
				case tr.Policy == "none" && name != "none":
					t.Errorf("none: L%d has a %s filter", l, name)
				case tr.Policy != "none" && name == "none":
					t.Errorf("%s: L%d has a table without a filter", tr.Policy, l)
				case strings.HasPrefix(tr.Policy, "lsmcuckoo/levels") && !strings.HasPrefix(name, "lsmcuckoo"):
					t.Errorf("%s: L%d carries %s", tr.Policy, l, name)
				}
			}
		}
	}
	// The fitted bloom is really per level: its upper levels carry wider
	// filters than L6, within the average it was given.
	fitted := false
	for _, tr := range rep.Trees {
		if tr.Policy != "pebble-bloom/levels-10-fit" {
			continue
		}
		fitted = true
		bpk := func(l int) float64 { return 8 * float64(tr.Levels[l].FilterBytes) / float64(max(1, tr.Levels[l].Keys)) }
		if bpk(0) <= bpk(6)+1 {
			t.Errorf("%s: L0 %.1f bits/key, L6 %.1f: not fitted per level", tr.Policy, bpk(0), bpk(6))
		}
		// Its budgets were fitted to the first tree's shape and spend at
		// most 10 bits per key there (exactly: the allocation, not a
		// measurement). Its own tree, grown afterwards, may end with more
		// keys on the wide upper levels (compactions run when they run),
		// so its own overall figure is not bounded by 10. A level's
		// tables carry the budget of the level they were written for:
		// theirs, or one above it for a table a move compaction brought
		// down unrewritten. Pebble's bloom rounds each table's filter up
		// to an odd number of 64-byte lines and 5 bytes more: at most
		// 1,064 bits a table over its budget.
		shape := rep.Trees[0].LevelShape()
		budgets := BloomLevelBits(shape, 10)
		var nominal, keys float64
		for l, k := range shape.Keys {
			nominal += k * float64(budgets[l])
			keys += k
		}
		if keys == 0 || nominal/keys > 10 {
			t.Errorf("%s: budgets %v spend %.3f bits/key over the shape they were fitted to, over the average of 10", tr.Policy, budgets, nominal/max(keys, 1))
		}
		widest := 0 // the widest budget at or above the level
		for l, li := range tr.Levels {
			widest = max(widest, budgets[l])
			if li.Keys == 0 {
				continue
			}
			if most := float64(widest) + 1064*float64(li.Tables)/float64(li.Keys); bpk(l) > most {
				t.Errorf("%s: L%d spends %.2f bits/key, over the widest budget at or above it (%d; budgets %v) and its %d tables' rounding (%.2f)",
					tr.Policy, l, bpk(l), widest, budgets, li.Tables, most)
			}
		}
	}
	if !fitted {
		t.Error("no fitted per-level bloom among the policies")
	}
	want := len(Workloads) * 2 * len(policies)
	if len(rep.Results) != want || len(rep.FPOnly) != len(saving) {
		t.Fatalf("%d results and %d false-positive runs, want %d and %d", len(rep.Results), len(rep.FPOnly), want, len(saving))
	}
	get := func(policy, workload string, latency time.Duration) PebbleResult {
		for _, r := range rep.Results {
			if r.Policy == policy && r.Workload == workload && r.Latency == latency {
				return r
			}
		}
		t.Fatalf("no result for %s %s %v", policy, workload, latency)
		return PebbleResult{}
	}
	for _, p := range policies {
		g, s := get(p.Name, AbsentGet, 0), get(p.Name, AbsentPrefix, 0)
		if p.Name == "none" {
			if g.FilterHits != 0 || s.FilterHits != 0 {
				t.Errorf("none: filter hits %v, %v", g.FilterHits, s.FilterHits)
			}
			continue
		}
		// An absent Get meets a filter on every L0 sublevel at least.
		if g.FilterHits < 0.9*2 {
			t.Errorf("%s: %.2f filter skips per absent Get", p.Name, g.FilterHits)
		}
		// SeekPrefixGE with UseL6Filters also skips the L6 table.
		if s.FilterHits < g.FilterHits+0.9 {
			t.Errorf("%s: SeekPrefixGE skips %.2f tables, Get %.2f: L6 filters unused?", p.Name, s.FilterHits, g.FilterHits)
		}
		if s.BlockReads >= get("none", AbsentPrefix, 0).BlockReads {
			t.Errorf("%s: %.3f block reads per absent seek, no fewer than without filters", p.Name, s.BlockReads)
		}
		if l := get(p.Name, AbsentGet, cfg.Latency); l.DeviceReads > 0 && l.MeanWait < cfg.Latency {
			t.Errorf("%s: mean modelled wait %v under %v", p.Name, l.MeanWait, cfg.Latency)
		}
	}
	if len(rep.Savings) != 2 {
		t.Errorf("savings %+v: want one per lsmcuckoo family", rep.Savings)
	}
	for _, sv := range rep.Savings {
		if sv.BitsPerKey <= 0 || sv.FilterBytes <= 0 || sv.BaselineBytes == 0 {
			t.Errorf("saving %+v", sv)
		}
	}
}

// BenchmarkPebble times each workload on each policy's tree (the report's
// trees, on QuickPebble) through the same Store.measure the report uses,
// in memory and under the modelled latency, with Pebble's block reads and
// filter counts per probe as metrics, for benchstat.
func BenchmarkPebble(b *testing.B) {
	cfg := QuickPebble
	root := b.TempDir()
	policies := Policies()
	var shape = Tree{}
	for i, p := range policies {
		if p.Fit != nil {
			fit, s := p.Fit, shape.LevelShape()
			p.Apply = func(o *pebble.Options) { fit(o, s) }
			policies[i] = p
		}
		t, err := BuildPebble(filepath.Join(root, sanitize(p.Name)), p, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			shape = t
		}
	}
	for _, lat := range []time.Duration{0, cfg.Latency} {
		for _, w := range Workloads {
			for _, p := range policies {
				slug := strings.NewReplacer(" ", "-", "+", "-", "/", "-").Replace(w)
				b.Run(fmt.Sprintf("latency=%v/%s/%s", lat, slug, p.Name), func(b *testing.B) {
					s, err := OpenStore(filepath.Join(root, sanitize(p.Name)), p, cfg)
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					s.FS.SetDelay(lat)
					if err := s.warm(w, 2_000); err != nil {
						b.Fatal(err)
					}
					keys, present := probeKeys(cfg, w, 42, b.N)
					b.ResetTimer()
					sp, err := s.measure(w, keys, present)
					if err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					r := sp.result(p.Name, w, lat)
					b.ReportMetric(r.BlockReads, "blockreads/op")
					b.ReportMetric(r.FilterMisses, "filterpasses/op")
					// The report's clock: the probing thread's own time.
					b.ReportMetric(float64(sp.elapsed.Nanoseconds())/float64(b.N), "thread-ns/op")
				})
			}
		}
	}
}
