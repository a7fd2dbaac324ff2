package filterbench

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/lsmcuckoo/lsmcuckoo/bench/internal/svgplot"
)

// PlotFPR draws false-positive rate (log scale) against bits/key for every
// kind of filter among the results of n keys, with the
// information-theoretic bound bits = log2(1/ε) that no filter can beat. It
// writes fpr-vs-bits-n.svg into dir and returns that name.
func PlotFPR(dir string, results []Result, n int) (string, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("False-positive rate vs space, %d keys", n)
	p.X.Label.Text = "bits per key"
	p.Y.Label.Text = "false-positive rate"
	p.X.Tick.Marker = svgplot.StepTicks{Step: 2}
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = svgplot.PlainTicks{Marker: plot.LogTicks{Prec: -1}}
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
		c, _ := svgplot.KindColor(kind)
		line.Color, scatter.Color = c, c
		scatter.Shape = draw.GlyphDrawer(svgplot.Glyphs[i%len(svgplot.Glyphs)])
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
	// A whole step past the last point, so its tick label is not cut.
	p.X.Max = 2 * math.Ceil(maxBits/2+0.5)
	name := fmt.Sprintf("fpr-vs-bits-%d.svg", n)
	return name, p.Save(7*vg.Inch, 4.5*vg.Inch, filepath.Join(dir, name))
}

// PlotFrontier draws, for every family at one key count, the cold lookup
// time (throughput, and latency one lookup at a time) against the
// false-positive rate, each point labelled with its bits/key: the frontier
// of speed, space and accuracy that each layout reaches. It writes
// frontier-n.svg into dir and returns that name; ok is false, and nothing
// is written, when the results of n keys hold no cold timings.
func PlotFrontier(dir string, results []Result, n int) (name string, ok bool, err error) {
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
	legend := plot.NewLegend()
	panel := func(title string, withLegend bool, y func(point) float64) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "false-positive rate"
		p.Y.Label.Text = "ns per lookup"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = svgplot.PlainTicks{Marker: plot.LogTicks{Prec: -1}}
		p.Y.Tick.Marker = svgplot.PlainTicks{}
		p.Add(plotter.NewGrid())
		labels := &svgplot.PointLabels{}
		for i, kind := range kinds {
			pts := slices.Clone(byKind[kind])
			slices.SortFunc(pts, func(a, b point) int { return cmp.Compare(a.fpr, b.fpr) })
			xys := make(plotter.XYs, len(pts))
			c, _ := svgplot.KindColor(kind)
			for j, q := range pts {
				xys[j] = plotter.XY{X: q.fpr, Y: y(q)}
				labels.Add(q.fpr, y(q), strconv.FormatFloat(math.Round(q.bits*10)/10, 'f', -1, 64), c, vg.Points(7))
			}
			line, scatter, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			line.Color, scatter.Color = c, c
			scatter.Shape = draw.GlyphDrawer(svgplot.Glyphs[i%len(svgplot.Glyphs)])
			p.Add(line, scatter)
			if withLegend {
				legend.Add(kind, line, scatter)
			}
		}
		p.Add(labels)
		p.Y.Min = 0
		return p, nil
	}
	thr, err := panel(fmt.Sprintf("Cold lookups, %d keys: throughput (labels: bits/key)", n), true, func(q point) float64 { return q.ns })
	if err != nil {
		return "", false, err
	}
	lat, err := panel(fmt.Sprintf("Cold lookups, %d keys: latency, one at a time", n), false, func(q point) float64 { return q.lat })
	if err != nil {
		return "", false, err
	}
	// One legend for both panels, in a column of its own: inside a panel
	// it covered points.
	legend.Top, legend.Left = true, true
	// A viewer may render the text in a wider face than gonum measured.
	legendWidth := 1.3*legend.Rectangle(draw.Canvas{}).Size().X + vg.Points(24)
	const w, h = 8 * vg.Inch, 8 * vg.Inch
	c := svgplot.NewCanvas(w+legendWidth, h)
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(12), PadTop: vg.Points(6)}
	canvases := plot.Align([][]*plot.Plot{{thr}, {lat}}, tiles, draw.Crop(dc, 0, -legendWidth, 0, 0))
	thr.Draw(canvases[0][0])
	lat.Draw(canvases[1][0])
	legend.Draw(draw.Crop(dc, w+vg.Points(12), 0, 0, -vg.Points(30)))
	name = fmt.Sprintf("frontier-%d.svg", n)
	return name, true, svgplot.Save(c, filepath.Join(dir, name))
}
