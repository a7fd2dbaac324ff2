package codec

import (
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

var sweep = flag.Bool("sweep", false, "run the block-size/load sweep that chose the defaults (slow)")

// TestPlacementSweep prints, for several block sizes and planned loads, the
// load placement actually reached, the share of blocks that needed an extra
// bucket, the resulting bits/key and FPR, and build time. It backs the
// defaults in sizing.go; run with -sweep -v.
func TestPlacementSweep(t *testing.T) {
	if !*sweep {
		t.Skip("run with -sweep")
	}
	n := 1_000_000
	keys := testkeys.Random(n, 16, 11)
	absent := testkeys.Absent(1_000_000, 12)
	fmt.Printf("%-6s %-6s %-7s %-7s %-8s %-8s %-8s\n", "blkKey", "plan", "load", "bumped", "bits/key", "FPR%", "ns/key")
	for _, bk := range []int{64, 128, 256, 512, 1024} {
		for _, load := range []float64{0.94, 0.95, 0.955, 0.96, 0.97} {
			b := NewBuilder(Options{FingerprintBits: 10, Version: 1})
			b.blockKeys, b.maxLoad = bk, load
			start := time.Now()
			for _, k := range keys {
				b.Add(k)
			}
			block := b.Finish(nil)
			el := time.Since(start)
			st := b.Stats()
			fmt.Printf("%-6d %-6.3f %-7.4f %-7.4f %-8.3f %-8.4f %-8.1f\n", bk, load, st.V1.Load,
				float64(st.V1.BumpedBlocks)/float64(st.V1.Blocks), float64(len(block))*8/float64(n),
				100*measureFPR(block, absent), float64(el.Nanoseconds())/float64(n))
		}
	}
}

// TestV2LoadSweep prints, for several planned loads of version 2, the
// fingerprint width, share of wide lines, false-positive rate and share of
// negative lookups that read a second line, at several budgets. It backs
// linev2.MaxLoad; run with -sweep -v.
func TestV2LoadSweep(t *testing.T) {
	if !*sweep {
		t.Skip("run with -sweep")
	}
	keys := testkeys.Random(300_000, 16, 1)
	absent := testkeys.Absent(1_000_000, 2)
	defer func(l float64) { linev2.MaxLoad = l }(linev2.MaxLoad)
	fmt.Printf("%-5s %-4s %-3s %-5s %-8s %-6s %-7s\n", "load", "bpk", "f", "wide", "FPR%", "P2", "ns/key")
	for _, load := range []float64{0.91, 0.93, 0.95, 0.97} {
		linev2.MaxLoad = load
		for _, bpk := range []float64{8, 10, 12, 16} {
			b := NewBuilder(Options{BitsPerKey: bpk, Seed: 1, Version: 2})
			for _, k := range keys {
				b.Add(k)
			}
			start := time.Now()
			blk := b.Finish(nil)
			ns := float64(time.Since(start).Nanoseconds()) / float64(len(keys))
			st := b.Stats()
			fmt.Printf("%-5.2f %-4v %-3d %-5.2f %-8.4f %-6.3f %-7.1f\n", load, bpk, st.V2.FingerprintBits,
				float64(st.V2.WideLines)/float64(st.V2.Lines), 100*measureFPR(blk, absent), st.V2.SecondLineShare, ns)
		}
	}
}

// TestV3LoadSweep prints, for several planned loads of version 3's
// densest plan (linev3.MaxLoad), the shape the planner picks (remainder bits r, capacity K,
// quotients Q), the false-positive rate measured on absent keys and
// modelled, the share of negative lookups that read a second line, and
// build time, at several budgets. It backs linev3.MaxLoad; run with -sweep -v.
func TestV3LoadSweep(t *testing.T) {
	if !*sweep {
		t.Skip("run with -sweep")
	}
	keys := testkeys.Random(300_000, 16, 1)
	absent := testkeys.Absent(1_000_000, 2)
	defer func(l float64) { linev3.MaxLoad = l }(linev3.MaxLoad)
	fmt.Printf("%-5s %-4s %-3s %-4s %-4s %-8s %-8s %-6s %-7s\n", "load", "bpk", "r", "K", "Q", "FPR%", "model%", "P2", "ns/key")
	for _, load := range []float64{0.85, 0.9, 0.93, 0.95, 0.97} {
		linev3.MaxLoad = load
		for _, bpk := range []float64{8, 10, 12, 16} {
			b := NewBuilder(Options{BitsPerKey: bpk, Seed: 1, Version: 3, Densest: true})
			for _, k := range keys {
				b.Add(k)
			}
			start := time.Now()
			blk := b.Finish(nil)
			ns := float64(time.Since(start).Nanoseconds()) / float64(len(keys))
			st := b.Stats()
			info := mustInfo(t, blk)
			fmt.Printf("%-5.2f %-4v %-3d %-4d %-4d %-8.4f %-8.4f %-6.3f %-7.1f\n", load, bpk, st.V3.RemainderBits, st.V3.LineCapacity, st.V3.Quotients,
				100*measureFPR(blk, absent), 100*info.ExpectedFPR, st.V3.SecondLineShare, ns)
		}
	}
}
