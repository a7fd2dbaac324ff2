package main

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
)

// TestFPRCellShowsFewEvents checks that a rate resting on fewer than 100
// false positives carries its count, and a well-sampled one does not.
func TestFPRCellShowsFewEvents(t *testing.T) {
	for _, c := range []struct {
		fpr    float64
		probes int
		want   string
	}{
		{15e-6, 1_000_000, "0.0015% (15 of 1000000)"},
		{0, 1_000_000, "0 (0 of 1000000)"},
		{99e-6, 1_000_000, "0.0099% (99 of 1000000)"},
		{200e-6, 1_000_000, "0.020%"},
		{0.0118, 1_000_000, "1.180%"},
	} {
		if got := fprCell(filterbench.Result{FPR: c.fpr, Probes: c.probes}); got != c.want {
			t.Errorf("FPR %v over %d: %q, want %q", c.fpr, c.probes, got, c.want)
		}
	}
}
