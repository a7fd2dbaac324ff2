// Package svgplot holds what the bench report's plots share: one colour
// and glyph per filter kind, so a kind looks the same in every plot, tick
// labels in plain numbers, and the SVG canvas they are drawn on.
package svgplot

import (
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

var kindColors = map[string]color.RGBA{
	"lsmcuckoo":         {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"lsmcuckoo-v2":      {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	"lsmcuckoo-densest": {R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
	"lsmcuckoo-v4":      {R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	"lsmcuckoo-v1":      {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"pebble-bloom":      {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"badger-bloom":      {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"binary-fuse":       {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// KindColor is a filter kind's colour (the Kind of a filterbench.Family);
// false for a kind without one of its own.
func KindColor(kind string) (color.RGBA, bool) {
	c, ok := kindColors[kind]
	return c, ok
}

// Glyphs mark the points of successive curves.
var Glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}}

// NewCanvas is an SVG canvas of the given size.
func NewCanvas(w, h vg.Length) *vgsvg.Canvas { return vgsvg.New(w, h) }

// Save writes the canvas to path.
func Save(c *vgsvg.Canvas, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Label is a tick label in the shortest form that reads back as its value:
// 250, 0.5, 0.001, and in powers of ten below a thousandth or from a
// million up (1e-4, 2.5e6), never 250.00 or 1e-05.
func Label(v float64) string {
	v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64) // a step's rounding noise
	if a := math.Abs(v); a != 0 && (a < 1e-3 || a >= 1e6) {
		mant, exp, _ := strings.Cut(strconv.FormatFloat(v, 'e', -1, 64), "e")
		e, _ := strconv.Atoi(exp)
		return mant + "e" + strconv.Itoa(e)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// PlainTicks are the ticks of another marker (gonum's default when nil),
// relabelled with Label.
type PlainTicks struct{ Marker plot.Ticker }

// Ticks implements plot.Ticker.
func (t PlainTicks) Ticks(min, max float64) []plot.Tick {
	m := t.Marker
	if m == nil {
		m = plot.DefaultTicks{}
	}
	ticks := m.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = Label(ticks[i].Value)
		}
	}
	return ticks
}

// StepTicks labels every multiple of Step in the range, with a minor tick
// halfway between.
type StepTicks struct{ Step float64 }

// Ticks implements plot.Ticker.
func (t StepTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	half := t.Step / 2
	for i := math.Ceil(min / half); i*half <= max; i++ {
		v := i * half
		if math.Mod(i, 2) == 0 {
			ticks = append(ticks, plot.Tick{Value: v, Label: Label(v)})
		} else {
			ticks = append(ticks, plot.Tick{Value: v})
		}
	}
	return ticks
}

// PointLabels labels a plot's points, each beside its point where it
// covers no point and no label placed before it, or not at all when no
// such place is free: a crowded cluster shows its first labels, not a
// smudge. Add it to the plot after the points.
type PointLabels struct {
	labels []pointLabel
}

type pointLabel struct {
	x, y  float64
	text  string
	style text.Style
}

// Add labels the point (x, y) in data coordinates.
func (l *PointLabels) Add(x, y float64, label string, c color.Color, size vg.Length) {
	sty := text.Style{Color: c, Font: font.From(plot.DefaultFont, size), Handler: plot.DefaultTextHandler}
	l.labels = append(l.labels, pointLabel{x, y, label, sty})
}

// Plot implements plot.Plotter.
func (l *PointLabels) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	mark := vg.Points(3) // a glyph's radius, and the gap to its label
	var taken []vg.Rectangle
	at := make([]vg.Point, len(l.labels))
	for i, lb := range l.labels {
		at[i] = vg.Point{X: trX(lb.x), Y: trY(lb.y)}
		taken = append(taken, vg.Rectangle{Min: at[i].Sub(vg.Point{X: mark, Y: mark}), Max: at[i].Add(vg.Point{X: mark, Y: mark})})
	}
	for i, lb := range l.labels {
		ext := lb.style.Rectangle(lb.text)
		size := ext.Size()
		for _, off := range []vg.Point{
			{X: mark, Y: mark / 2}, {X: mark, Y: -mark/2 - size.Y}, {X: -mark - size.X, Y: mark / 2},
			{X: -mark - size.X, Y: -mark/2 - size.Y}, {X: -size.X / 2, Y: mark}, {X: -size.X / 2, Y: -mark - size.Y},
		} {
			r := vg.Rectangle{Min: at[i].Add(off), Max: at[i].Add(off).Add(size)}
			if !c.Contains(r.Min) || !c.Contains(r.Max) || slices.ContainsFunc(taken, func(t vg.Rectangle) bool { return overlap(r, t) }) {
				continue
			}
			c.FillText(lb.style, r.Min.Sub(ext.Min), lb.text)
			taken = append(taken, r)
			break
		}
	}
}

func overlap(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}
