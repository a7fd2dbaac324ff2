package codec

import (
	"fmt"
	"math"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestV4DensitySweep prints, at table sizes of 30k and 100k keys and
// budgets from 8.5 to 20 bits per key, the false-positive rate of version
// 3's densest layout and of version 4 (2M absent probes each), and how
// many bits per key each spends over log2(1/FPR), the least a filter of
// that rate could: the measured frontier FORMAT.md's version-4 section
// and docs/performance.md quote. Run with -sweep -v.
func TestV4DensitySweep(t *testing.T) {
	if !*sweep {
		t.Skip("run with -sweep")
	}
	probes := testkeys.Absent(2_000_000, 13)
	over := func(block []byte, n int) (bpk, fpr, excess float64) {
		bpk = float64(8*len(block)) / float64(n)
		fpr = measureFPR(block, probes)
		return bpk, fpr, bpk - math.Log2(1/fpr)
	}
	fmt.Printf("%-7s %-6s | %-8s %-9s %-6s | %-8s %-9s %-6s %-13s %-6s | %s\n", "keys", "budget",
		"v3 bpk", "v3 FPR%", "over", "v4 bpk", "v4 FPR%", "over", "r/M/U", "2nd", "v4÷v3")
	for _, n := range []int{30_000, 100_000} {
		keys := testkeys.Random(n, 16, uint64(n))
		for bpk := 8.5; bpk <= 20.01; bpk += 0.5 {
			b3 := Build(keys, Options{BitsPerKey: bpk, Version: 3, Densest: true, Seed: 1})
			b4, st := buildExactV4(keys, Options{BitsPerKey: bpk, Seed: 1})
			k3, f3, o3 := over(b3, n)
			k4, f4, o4 := over(b4, n)
			fmt.Printf("%-7d %-6.1f | %-8.3f %-9.5f %-6.2f | %-8.3f %-9.5f %-6.2f %-13s %-6.3f | %.2f\n", n, bpk,
				k3, 100*f3, o3, k4, 100*f4, o4, fmt.Sprintf("%d/%d/%d", st.V4.Columns, st.V4.Height, st.V4.ExtraShare),
				st.V4.SecondLineShare, f4/f3)
		}
	}
}
