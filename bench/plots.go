package main

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/lsmcuckoo/lsmcuckoo/bench/dbbench"
	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
)

var familyColors = map[string]color.RGBA{
	"lsmcuckoo":    {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"lsmcuckoo-v1": {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"pebble-bloom": {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"badger-bloom": {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"binary-fuse":  {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
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

var shapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}}

// plotPebble draws Gets/s and block reads per Get for each policy and
// workload of the Pebble database benchmark.
func plotPebble(dir string, results []dbbench.PebbleResult) (string, error) {
	var policies, workloads []string
	for _, r := range results {
		if !slices.Contains(policies, r.Policy) {
			policies = append(policies, r.Policy)
		}
		if !slices.Contains(workloads, r.Workload) {
			workloads = append(workloads, r.Workload)
		}
	}
	value := func(policy, workload string, get func(dbbench.PebbleResult) float64) float64 {
		for _, r := range results {
			if r.Policy == policy && r.Workload == workload {
				return get(r)
			}
		}
		return 0
	}
	panel := func(title, ylabel string, get func(dbbench.PebbleResult) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.Y.Label.Text = ylabel
		w := vg.Points(18)
		top := 0.0
		for i, pol := range policies {
			vals := make(plotter.Values, len(workloads))
			for j, wl := range workloads {
				vals[j] = value(pol, wl, get)
				top = max(top, vals[j])
			}
			bars, err := plotter.NewBarChart(vals, w)
			if err != nil {
				return nil, err
			}
			bars.Offset = w * vg.Length(i-len(policies)/2)
			bars.Color = policyColor(pol)
			bars.LineStyle.Width = 0
			p.Add(bars)
			p.Legend.Add(pol, bars)
		}
		p.Legend.Top = true
		p.Y.Min, p.Y.Max = 0, top*1.35 // headroom for the legend
		p.NominalX(workloads...)
		return p, nil
	}
	gets, err := panel("Pebble Get throughput", "Gets/s", func(r dbbench.PebbleResult) float64 { return r.GetsPerSec })
	if err != nil {
		return "", err
	}
	reads, err := panel("Blocks read per Get", "block-cache misses / Get", func(r dbbench.PebbleResult) float64 { return r.BlockReadsPer })
	if err != nil {
		return "", err
	}
	img := vgSVG(10*vg.Inch, 4*vg.Inch)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Points(20)}
	canvases := plot.Align([][]*plot.Plot{{gets, reads}}, tiles, draw.New(img))
	gets.Draw(canvases[0][0])
	reads.Draw(canvases[0][1])
	name := "pebble-gets.svg"
	return name, saveSVG(img, filepath.Join(dir, name))
}

func policyColor(name string) color.Color {
	for kind, c := range familyColors {
		if len(name) >= len(kind) && name[:len(kind)] == kind {
			return c
		}
	}
	return color.Gray{Y: 0x90}
}
