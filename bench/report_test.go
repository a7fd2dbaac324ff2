package main

import (
	"image/color"
	"strings"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/svgplot"
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

// TestFilterRatiosUseTheSameSizesBaseline checks that every × column is
// taken against pebble-bloom/10 of the same key count, and that the
// baseline row reads 1.00 against itself.
func TestFilterRatiosUseTheSameSizesBaseline(t *testing.T) {
	row := func(fam string, n int, ns float64) filterbench.Result {
		return filterbench.Result{Family: fam, Keys: n, Bytes: n, BitsPerKey: 8, FPR: 0.01, Probes: 100_000,
			BuildNsKey: ns, HotNs: ns, ColdNs: ns, ColdLatNs: ns}
	}
	rep := &report{Sizes: []int{100, 1000}, Probes: 100_000, ColdMiB: 1, Filters: []filterbench.Result{
		row("lsmcuckoo/10", 100, 30), row(baseline, 100, 20),
		row("lsmcuckoo/10", 1000, 30), row(baseline, 1000, 60),
	}}
	var b strings.Builder
	writeReport(&b, rep, nil)
	out := b.String()
	for _, want := range []string{
		"| lsmcuckoo/10 | 8.00 | 1.000% | 30.0 | 0 | 30.0 | 30.0 | 30.0 | 1.50 | 1.50 | 1.50 | 1.50 |",
		"| lsmcuckoo/10 | 8.00 | 1.000% | 30.0 | 0 | 30.0 | 30.0 | 30.0 | 0.50 | 0.50 | 0.50 | 0.50 |",
		"| pebble-bloom/10 | 8.00 | 1.000% | 20.0 | 0 | 20.0 | 20.0 | 20.0 | 1.00 | 1.00 | 1.00 | 1.00 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestPolicyColorByFamily: a database-level policy takes its family's
// colour from the name before its "/", so lsmcuckoo-v2/10 is drawn in
// lsmcuckoo-v2's colour and never in lsmcuckoo's, whatever the order of
// the colour map.
func TestPolicyColorByFamily(t *testing.T) {
	for name, want := range map[string]color.Color{
		"lsmcuckoo/10":             kindColor("lsmcuckoo"),
		"lsmcuckoo-v2/10":          kindColor("lsmcuckoo-v2"),
		"lsmcuckoo-v1/10":          kindColor("lsmcuckoo-v1"),
		"pebble-bloom/10":          kindColor("pebble-bloom"),
		"lsmcuckoo/levels-10-fit":  pebbleColors["lsmcuckoo/levels-10-fit"],
		"pebble-bloom/progressive": pebbleColors["pebble-bloom/progressive"],
		"none":                     color.Gray{Y: 0x90},
	} {
		for range 20 { // map order varies between iterations
			if got := policyColor(name); got != want {
				t.Fatalf("policyColor(%q) = %v, want %v", name, got, want)
			}
		}
	}
	if kindColor("lsmcuckoo-v2") == kindColor("lsmcuckoo") || kindColor("lsmcuckoo-v2") == kindColor("lsmcuckoo-v1") {
		t.Error("lsmcuckoo-v2 shares a colour with another version")
	}
}

func kindColor(kind string) color.RGBA {
	c, _ := svgplot.KindColor(kind)
	return c
}
