package svgplot

import "testing"

func TestLabel(t *testing.T) {
	for v, want := range map[float64]string{
		250: "250", 0.5: "0.5", 0.1 * 3: "0.3", 0.001: "0.001", 1e-4: "1e-4", 1e-5: "1e-5",
		2.5e-5: "2.5e-5", 1e6: "1e6", 0: "0", -0.25: "-0.25", 17.5: "17.5",
	} {
		if got := Label(v); got != want {
			t.Errorf("Label(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestStepTicks(t *testing.T) {
	var labels []string
	for _, tk := range (StepTicks{Step: 2}).Ticks(3.2, 9) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := len(labels); got != 3 || labels[0] != "4" || labels[2] != "8" {
		t.Errorf("labels %v, want 4 6 8", labels)
	}
}
