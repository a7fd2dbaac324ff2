package main

import (
	"fmt"
	"image/color"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/dbbench"
	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/svgplot"
)

// plotPebble draws the Pebble database level: probes per second relative
// to the baseline policy in memory and under the modelled latency, and the
// tables read in vain per absent probe, on a two-by-two grid whose fourth
// cell holds the legend: inside a panel it covered the bars. Bar widths
// follow the panels' width, so groups of bars never run into each other
// however many policies there are.
func plotPebble(dir string, rep *dbbench.Report) (string, error) {
	var policies []string
	for _, r := range rep.Results {
		if !slices.Contains(policies, r.Policy) {
			policies = append(policies, r.Policy)
		}
	}
	find := func(policy, workload string, latency time.Duration) (dbbench.PebbleResult, bool) {
		for _, r := range rep.Results {
			if r.Policy == policy && r.Workload == workload && r.Latency == latency {
				return r, true
			}
		}
		return dbbench.PebbleResult{}, false
	}
	short := map[string]string{
		dbbench.AbsentGet: "absent Get", dbbench.PresentGet: "present Get",
		dbbench.MixedGet: "50/50 Get", dbbench.AbsentPrefix: "absent prefix",
	}
	legend := plot.NewLegend()
	var allBars [][]*plotter.BarChart // per panel
	panel := func(title, ylabel string, addLegend bool, workloads []string, value func(policy, workload string) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		p.Y.Tick.Marker = svgplot.PlainTicks{}
		p.Add(plotter.NewGrid()) // first, so it lies under the bars
		w := vg.Points(9)        // until the panel's width is known
		top := 0.0
		var panelBars []*plotter.BarChart
		for _, pol := range policies {
			vals := make(plotter.Values, len(workloads))
			for j, wl := range workloads {
				vals[j] = value(pol, wl)
				top = max(top, vals[j])
			}
			bars, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, err
			}
			bars.Color = policyColor(pol)
			bars.LineStyle.Width = 0
			p.Add(bars)
			panelBars = append(panelBars, bars)
			if addLegend {
				legend.Add(pol, bars)
			}
		}
		p.Y.Min, p.Y.Max = 0, top*1.05
		names := make([]string, len(workloads))
		for j, wl := range workloads {
			names[j] = short[wl]
		}
		p.NominalX(names...)
		// Half a group's share of margin at either end, so the outer
		// groups keep clear of the axis and the panel's edge.
		p.X.Min, p.X.Max = -0.5, float64(len(workloads))-0.5
		allBars = append(allBars, panelBars)
		return p, nil
	}
	ratio := func(latency time.Duration) func(string, string) float64 {
		return func(pol, wl string) float64 {
			r, ok1 := find(pol, wl, latency)
			b, ok2 := find(dbbench.SavingBaseline, wl, latency)
			if !ok1 || !ok2 || b.ProbesPerS == 0 {
				return 0
			}
			return r.ProbesPerS / b.ProbesPerS
		}
	}
	mem, err := panel("In memory", "probes/s ÷ "+dbbench.SavingBaseline+"'s", true, dbbench.Workloads, ratio(0))
	if err != nil {
		return "", err
	}
	lat, err := panel(fmt.Sprintf("With %v per block read", rep.Config.Latency), "probes/s ÷ "+dbbench.SavingBaseline+"'s", false, dbbench.Workloads, ratio(rep.Config.Latency))
	if err != nil {
		return "", err
	}
	fp, err := panel("Tables read in vain", "false-positive reads / absent probe", false, []string{dbbench.AbsentGet, dbbench.AbsentPrefix}, func(pol, wl string) float64 {
		r, _ := find(pol, wl, 0)
		return r.FilterMisses
	})
	if err != nil {
		return "", err
	}
	img := svgplot.NewCanvas(14*vg.Inch, 9*vg.Inch)
	c := draw.New(img)
	tiles := draw.Tiles{Rows: 2, Cols: 2, PadX: vg.Points(24), PadY: vg.Points(18), PadTop: vg.Points(6), PadBottom: vg.Points(6)}
	canvases := plot.Align([][]*plot.Plot{{mem, lat}, {fp, nil}}, tiles, c)
	for i, p := range []*plot.Plot{mem, lat, fp} {
		cv := canvases[i/2][i%2]
		// A group of bars takes at most 80% of its share of the panel's
		// data area (the panel less about an inch of axis).
		bars := allBars[i]
		share := (cv.Size().X - vg.Inch) / vg.Length(len(bars[0].Values))
		w := min(vg.Points(9), 0.8*share/vg.Length(len(bars)))
		for j, b := range bars {
			b.Width = w
			b.Offset = w * vg.Length(float64(j)-float64(len(bars)-1)/2)
		}
		p.Draw(cv)
	}
	legend.Left = true
	legend.Top = true
	legend.Draw(draw.Crop(canvases[1][1], vg.Points(24), 0, 0, -vg.Points(24)))
	name := "pebble-gets.svg"
	return name, svgplot.Save(img, filepath.Join(dir, name))
}

// pebbleColors tell the database level's policies apart: blues for bloom,
// reds for lsmcuckoo, darker for per-level budgets, purples for binary
// fuse, darker for wider fingerprints.
var pebbleColors = map[string]color.RGBA{
	"pebble-bloom/progressive":   {R: 0x0b, G: 0x3c, B: 0x6e, A: 0xff},
	"pebble-bloom/levels-10-fit": {R: 0x5a, G: 0x9b, B: 0xd5, A: 0xff},
	"lsmcuckoo/levels-10":        {R: 0xf2, G: 0x8e, B: 0x2b, A: 0xff},
	"lsmcuckoo/levels-10-fit":    {R: 0x8c, G: 0x10, B: 0x10, A: 0xff},
	"binary-fuse/8":              {R: 0xc5, G: 0xb0, B: 0xd5, A: 0xff},
	"binary-fuse/10":             {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

func policyColor(name string) color.Color {
	if c, ok := pebbleColors[name]; ok {
		return c
	}
	// The family is the name up to its "/": "lsmcuckoo-v2/10" is
	// lsmcuckoo-v2's, not lsmcuckoo's.
	kind, _, _ := strings.Cut(name, "/")
	if c, ok := svgplot.KindColor(kind); ok {
		return c
	}
	return color.Gray{Y: 0x90}
}
