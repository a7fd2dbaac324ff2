package dbbench

import (
	"math"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// TestBloomRatesAreMeasured checks the bloom's rate curve against what a
// real Pebble bloom filter is known to let through (1.18% at 10 bits/key
// on 1M keys), and that it falls with the budget.
func TestBloomRatesAreMeasured(t *testing.T) {
	r := bloomRates()
	if r[10] < 0.009 || r[10] > 0.015 {
		t.Errorf("bloom at 10 bits/key: %.3f%%, want about 1.18%%", 100*r[10])
	}
	for b := 2; b <= maxBloomBits; b++ {
		if r[b] > r[b-1]*1.2 {
			t.Errorf("bloom rate rises from %d to %d bits/key: %v -> %v", b-1, b, r[b-1], r[b])
		}
	}
}

// TestBloomLevelBitsFair checks that the fitted bloom spends no more than
// the average it is given (so it is compared at equal or fewer filter
// bytes), never does worse than the uniform bloom it replaces on its own
// rate curve, and gives upper levels of a Pebble-shaped tree at least the
// bits of the levels below.
func TestBloomLevelBitsFair(t *testing.T) {
	shapes := map[string]tablefilter.LevelShape{
		"pebble":  {Keys: [7]float64{7e3, 0, 0, 2e3, 4e4, 2.4e5, 1.7e6}, L0Runs: 4},
		"quick":   {Keys: [7]float64{1e4, 0, 0, 1e3, 1.2e4, 7e4, 3.2e5}, L0Runs: 3},
		"flat":    {Keys: [7]float64{1, 1, 1, 1, 1, 1, 1}, L0Runs: 1},
		"L6 only": {Keys: [7]float64{6: 100}},
		"empty":   {},
	}
	rates := bloomRates()
	for name, s := range shapes {
		for _, avg := range []float64{6, 10, 10.5, 16} {
			bits := BloomLevelBits(s, avg)
			var total, spent, cost, uniformCost float64
			runs := func(l int) float64 {
				if l == 0 {
					return math.Max(1, s.L0Runs)
				}
				return 1
			}
			for l, k := range s.Keys {
				if bits[l] < 1 || bits[l] > maxBloomBits {
					t.Fatalf("%s avg %v: L%d gets %d bits/key", name, avg, l, bits[l])
				}
				if k > 0 {
					total += k
					spent += k * float64(bits[l])
					cost += runs(l) * rates[bits[l]]
					uniformCost += runs(l) * rates[int(avg)]
				}
			}
			if total == 0 {
				continue
			}
			if spent/total > avg+1e-9 {
				t.Errorf("%s avg %v: spends %.3f bits/key (%v)", name, avg, spent/total, bits)
			}
			if cost > uniformCost*(1+1e-9) {
				t.Errorf("%s avg %v: %v reads %.4g tables in vain, uniform %d reads %.4g", name, avg, bits, cost, int(avg), uniformCost)
			}
			// A run holding clearly fewer keys gets at least the bits of
			// one holding more: a bit per key costs less there. (Runs of
			// nearly equal size may swap a few bits: the measured curve
			// is not exactly convex.)
			for l := range s.Keys {
				for m := range s.Keys {
					if s.Keys[l] > 0 && s.Keys[m] > 0 && s.Keys[l]/runs(l) < 0.8*s.Keys[m]/runs(m) && bits[l] < bits[m] {
						t.Errorf("%s avg %v: L%d (%.0f keys per run) gets fewer bits than L%d (%.0f): %v",
							name, avg, l, s.Keys[l]/runs(l), m, s.Keys[m]/runs(m), bits)
					}
				}
			}
			if avg == 10 {
				t.Logf("%s avg 10: %v, %.3f bits/key", name, bits, spent/total)
			}
		}
	}
}
