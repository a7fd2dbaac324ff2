package codec

import (
	"flag"
	"fmt"
	"testing"
	"time"

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
			b := NewBuilder(Options{FingerprintBits: 10})
			b.blockKeys, b.maxLoad = bk, load
			start := time.Now()
			for _, k := range keys {
				b.Add(k)
			}
			block := b.Finish(nil)
			el := time.Since(start)
			st := b.Stats()
			fmt.Printf("%-6d %-6.3f %-7.4f %-7.4f %-8.3f %-8.4f %-8.1f\n", bk, load, st.Load,
				float64(st.BumpedBlocks)/float64(st.Blocks), float64(len(block))*8/float64(n),
				100*measureFPR(block, absent), float64(el.Nanoseconds())/float64(n))
		}
	}
}
