package filterbench

import (
	"bytes"
	"math"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestMeasureReportsFalseNegatives checks that a family losing a key is
// caught: its result counts the lost keys and names the first, so a
// caller can print it and fail.
func TestMeasureReportsFalseNegatives(t *testing.T) {
	keys := testkeys.Random(300, 16, 5)
	var log probeLog
	lossy := loggingFamily("lossy", 64, &log)
	build := lossy.build
	lossy.build = func(keys [][]byte) filter {
		f := build(keys).(exactFilter)
		delete(f.set, string(keys[7]))
		delete(f.set, string(keys[200]))
		return f
	}
	res := Measure([]Family{lossy, PebbleBloom(10)}, keys, testkeys.Absent(500, 6), Options{Lookups: 100}, nil)
	if res[0].FalseNegatives != 2 || !bytes.Equal(res[0].FalseNegative, keys[7]) {
		t.Errorf("lossy filter: %d false negatives, first %x; want 2, first %x", res[0].FalseNegatives, res[0].FalseNegative, keys[7])
	}
	if res[1].FalseNegatives != 0 || res[1].FalseNegative != nil {
		t.Errorf("bloom: %d false negatives (%x)", res[1].FalseNegatives, res[1].FalseNegative)
	}
}

// TestFPRInterval checks the Wilson interval against values of the
// textbook examples, and that it always holds the measured rate within [0, 1].
func TestFPRInterval(t *testing.T) {
	for _, c := range []struct {
		fp, probes int
		lo, hi     float64
	}{
		{0, 1000, 0, 0.003827},         // none seen: the upper bound is z²/(n+z²)
		{10, 1000, 0.005441, 0.018309}, // 1%
		{500, 1000, 0.4691, 0.5309},
		{1000, 1000, 0.9962, 1},
	} {
		r := Result{FPR: float64(c.fp) / float64(c.probes), Probes: c.probes}
		lo, hi := r.FPRInterval()
		if math.Abs(lo-c.lo) > 1e-4 || math.Abs(hi-c.hi) > 1e-4 {
			t.Errorf("%d of %d: [%.6f, %.6f], want [%.6f, %.6f]", c.fp, c.probes, lo, hi, c.lo, c.hi)
		}
		if lo > r.FPR || hi < r.FPR || lo < 0 || hi > 1 {
			t.Errorf("%d of %d: [%v, %v] does not hold %v within [0, 1]", c.fp, c.probes, lo, hi, r.FPR)
		}
	}
	if lo, hi := (Result{}).FPRInterval(); lo != 0 || hi != 1 {
		t.Errorf("no probes: [%v, %v], want [0, 1]", lo, hi)
	}
}
