package main

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/lsmcuckoo/lsmcuckoo/bench/dbbench"
	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
)

var familyColors = map[string]color.RGBA{
	"lsmcuckoo":         {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"lsmcuckoo-v2":      {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	"lsmcuckoo-densest": {R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
	"lsmcuckoo-v1":      {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"pebble-bloom":      {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"badger-bloom":      {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"binary-fuse":       {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// plotFPR draws false-positive rate (log scale) against bits/key for every
// family at one key count, with the information-theoretic bound
// bits = log2(1/ε) that no filter can beat.
func plotFPR(dir string, results []filterbench.Result, n int) (string, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("False-positive rate vs space, %d keys", n)
	p.X.Label.Text = "bits per key"
	p.Y.Label.Text = "false-positive rate"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	// Curves fall from top left to bottom right: the bottom left is free.
	p.Legend.Left = true

	byKind := map[string]plotter.XYs{}
	minFPR := 1.0
	maxBits := 0.0
	for _, r := range results {
		if r.Keys != n || r.FPR <= 0 {
			continue
		}
		byKind[r.Kind] = append(byKind[r.Kind], plotter.XY{X: r.BitsPerKey, Y: r.FPR})
		minFPR = math.Min(minFPR, r.FPR)
		maxBits = math.Max(maxBits, r.BitsPerKey)
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for i, kind := range kinds {
		pts := byKind[kind]
		slices.SortFunc(pts, func(a, b plotter.XY) int { return int(math.Copysign(1, a.X-b.X)) })
		line, scatter, err := plotter.NewLinePoints(pts)
		if err != nil {
			return "", err
		}
		c := familyColors[kind]
		line.Color, scatter.Color = c, c
		scatter.Shape = draw.GlyphDrawer(shapes[i%len(shapes)])
		p.Add(line, scatter)
		p.Legend.Add(kind, line, scatter)
	}
	// Lower bound: a filter with FPR ε needs at least log2(1/ε) bits/key.
	var bound plotter.XYs
	for b := 2.0; b <= math.Max(maxBits, 20); b += 0.5 {
		if eps := math.Pow(2, -b); eps >= minFPR/4 {
			bound = append(bound, plotter.XY{X: b, Y: eps})
		}
	}
	if len(bound) > 1 {
		l, err := plotter.NewLine(bound)
		if err != nil {
			return "", err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.Color = color.Gray{Y: 0x60}
		p.Add(l)
		p.Legend.Add("bound log2(1/ε)", l)
	}
	p.Add(plotter.NewGrid())
	name := fmt.Sprintf("fpr-vs-bits-%d.svg", n)
	return name, p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, name))
}

// plotFrontier draws, for every family at one key count, the cold lookup
// time (throughput, and latency one lookup at a time) against the
// false-positive rate, each point labelled with its bits/key: the frontier
// of speed, space and accuracy that each layout reaches. ok is false when
// the run timed no cold lookups.
func plotFrontier(dir string, results []filterbench.Result, n int) (name string, ok bool, err error) {
	type point struct {
		fpr, ns, lat, bits float64
	}
	byKind := map[string][]point{}
	for _, r := range results {
		if r.Keys != n || r.FPR <= 0 || r.ColdNs <= 0 {
			continue
		}
		byKind[r.Kind] = append(byKind[r.Kind], point{r.FPR, r.ColdNs, r.ColdLatNs, r.BitsPerKey})
	}
	if len(byKind) == 0 {
		return "", false, nil
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	panel := func(title string, y func(point) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "false-positive rate"
		p.Y.Label.Text = "ns per lookup"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		for i, kind := range kinds {
			pts := slices.Clone(byKind[kind])
			slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.fpr, b.fpr) })
			xys := make(plotter.XYs, len(pts))
			labels := make([]string, len(pts))
			for j, q := range pts {
				xys[j] = plotter.XY{X: q.fpr, Y: y(q)}
				labels[j] = strconv.FormatFloat(math.Round(q.bits*10)/10, 'f', -1, 64)
			}
			line, scatter, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			c := familyColors[kind]
			line.Color, scatter.Color = c, c
			scatter.Shape = draw.GlyphDrawer(shapes[i%len(shapes)])
			lb, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
			if err != nil {
				return nil, err
			}
			for j := range lb.TextStyle {
				lb.TextStyle[j].Color = c
				lb.TextStyle[j].Font.Size = vg.Points(7)
			}
			lb.Offset = vg.Point{X: vg.Points(3), Y: vg.Points(2)}
			p.Add(line, scatter, lb)
			p.Legend.Add(kind, line, scatter)
		}
		// Time from zero, so the legend has the bottom of the panel.
		p.Y.Min = 0
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
		return p, nil
	}
	thr, err := panel(fmt.Sprintf("Cold lookups, %d keys: throughput (labels: bits/key)", n), func(q point) float64 { return q.ns })
	if err != nil {
		return "", false, err
	}
	lat, err := panel(fmt.Sprintf("Cold lookups, %d keys: latency, one at a time", n), func(q point) float64 { return q.lat })
	if err != nil {
		return "", false, err
	}
	const w, h = 7 * vg.Inch, 8 * vg.Inch
	c := vgSVG(w, h)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(12)}
	canvases := plot.Align([][]*plot.Plot{{thr}, {lat}}, tiles, dc)
	thr.Draw(canvases[0][0])
	lat.Draw(canvases[1][0])
	name = fmt.Sprintf("frontier-%d.svg", n)
	return name, true, saveSVG(c, filepath.Join(dir, name))
}

var shapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}}

// plotPebble draws the Pebble database level: probes per second relative
// to the baseline policy in memory and under the modelled latency, and the
// tables read in vain per absent probe. The legend gets a column of its
// own beside the panels: inside a panel it covered the bars.
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
	panel := func(title, ylabel string, addLegend bool, workloads []string, value func(policy, workload string) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		p.Add(plotter.NewGrid()) // first, so it lies under the bars
		w := vg.Points(9)
		top := 0.0
		for i, pol := range policies {
			vals := make(plotter.Values, len(workloads))
			for j, wl := range workloads {
				vals[j] = value(pol, wl)
				top = max(top, vals[j])
			}
			bars, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, err
			}
			bars.Offset = w * vg.Length(float64(i)-float64(len(policies)-1)/2)
			bars.Color = policyColor(pol)
			bars.LineStyle.Width = 0
			p.Add(bars)
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
	img := vgSVG(15*vg.Inch, 4.5*vg.Inch)
	c := draw.New(img)
	legendWidth := 2.6 * vg.Inch
	plots := draw.Crop(c, 0, -legendWidth, 0, 0)
	tiles := draw.Tiles{Rows: 1, Cols: 3, PadX: vg.Points(24), PadTop: vg.Points(6), PadBottom: vg.Points(6)}
	canvases := plot.Align([][]*plot.Plot{{mem, lat, fp}}, tiles, plots)
	mem.Draw(canvases[0][0])
	lat.Draw(canvases[0][1])
	fp.Draw(canvases[0][2])
	legend.Left = true
	legend.Top = true
	legend.Draw(draw.Crop(c, c.Max.X-legendWidth+vg.Points(12), 0, 0, -vg.Points(30)))
	name := "pebble-gets.svg"
	return name, saveSVG(img, filepath.Join(dir, name))
}

// pebbleColors tell the database level's policies apart: blues for bloom,
// reds for lsmcuckoo, darker for per-level budgets.
var pebbleColors = map[string]color.RGBA{
	"pebble-bloom/progressive":   {R: 0x0b, G: 0x3c, B: 0x6e, A: 0xff},
	"pebble-bloom/levels-10-fit": {R: 0x5a, G: 0x9b, B: 0xd5, A: 0xff},
	"lsmcuckoo/levels-10":        {R: 0xf2, G: 0x8e, B: 0x2b, A: 0xff},
	"lsmcuckoo/levels-10-fit":    {R: 0x8c, G: 0x10, B: 0x10, A: 0xff},
}

func policyColor(name string) color.Color {
	if c, ok := pebbleColors[name]; ok {
		return c
	}
	// The family is the name up to its "/": "lsmcuckoo-v2/10" is
	// lsmcuckoo-v2's, not lsmcuckoo's.
	kind, _, _ := strings.Cut(name, "/")
	if c, ok := familyColors[kind]; ok {
		return c
	}
	return color.Gray{Y: 0x90}
}
