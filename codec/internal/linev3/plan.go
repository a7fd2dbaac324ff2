package linev3

import (
	"math"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
)

// MaxLoad is the lowest load a line's capacity K is planned at for a
// densest filter (Options.Densest): the capacity for the keys per line at
// this load is where the planner starts, and denserShape then takes a
// smaller capacity, down to hardLoad, when the rate model (second-line
// reads included) prefers it, which at most budgets it does (go test
// ./codec -run TestV3LoadSweep -sweep -v).
var MaxLoad = 0.95

// SecondLineCap is the most of a filter's negative lookups that the
// default plan lets read a second line (SecondLineShare): a lookup that
// reads one waits for a second, dependent cache miss, which a blocked
// bloom filter never pays. Densest filters fill their lines further, for
// a lower rate.
const SecondLineCap = 0.03

// balancedMinBudget is the smallest budget, in bits per key, planned
// under SecondLineCap. Below it a line's remainders are four bits or
// fewer, and the cap would cost a large part of the rate and make the
// planned rate rise with the budget where version 2 takes over
// (TestSmallBudgetsWriteVersion2): smaller budgets keep the densest plan.
const balancedMinBudget = 7

// CrowdedShare is the share of keys overflowing their primary lines
// past which an attempt under the fixed line hash is abandoned for seeded
// lines: several times what keys spread at random send at MaxLoad, so
// only keys chosen against that hash reach it.
const CrowdedShare = 0.15

// hardLoad is the highest load a small filter's lines may be planned at,
// to keep the rate of a large filter within a budget whose whole lines
// and trailer it cannot quite buy.
const hardLoad = 0.97

// Plan is a version-3 filter's shape and line count.
type Plan struct {
	Shape Shape
	Lines uint32
}

// BestShape is the shape of lowest modelled false-positive rate for lam
// keys per line and capacity k, over every remainder width (or only r
// when it is not 0): for each width, the most quotients that fit.
func BestShape(lam float64, k, r uint32) Shape {
	best, bestFPR := Shape{}, math.Inf(1)
	overflow := overflowShare(lam, k)
	for w := uint32(1); w <= 16; w++ {
		if r != 0 && w != r {
			continue
		}
		s := Shape{R: w, K: k}
		free := int(frame.LineBits) - int(k) - int(k*w)
		q := min(free, HeaderMax-int(k))
		for q > 0 && q+int(Shape{Q: uint32(q)}.TBits()) > free {
			q--
		}
		if q < 1 || q > 255 || uint32(q)*maxPerQuotient < k {
			continue
		}
		s.Q = uint32(q)
		if f := expectedFPRWith(s, lam, overflow); f < bestFPR {
			best, bestFPR = s, f
		}
	}
	return best
}

// denserShape is s, or a shape of smaller capacity, down to lam keys
// at hardLoad, whose modelled rate is lower: a fuller line leaves more
// bits to quotients and remainders, and the model counts the second-line
// reads it adds.
func denserShape(s Shape, lam float64, r uint32) Shape {
	best := ExpectedFPR(s, lam)
	for k := uint32(math.Ceil(lam / hardLoad)); k < s.K; k++ {
		if c := BestShape(lam, k, r); c.Q > 0 {
			if f := ExpectedFPR(c, lam); f < best {
				s, best = c, f
			}
		}
	}
	return s
}

// maxPerQuotient bounds the keys per quotient a shape may be planned
// for (K/Q): a quotient's run is about Poisson with mean lam/Q, and must
// stay far below MaxRun for keys at random (P(run > 56) is about 1e-13
// at mean 16), or placement would fail under every seed.
const maxPerQuotient = 16

// ShapeFor is the shape for lam keys per line: capacity for them at
// MaxLoad (one line holds every key of a one-line filter), and the
// best widths for that capacity. ok is false when no shape holds that
// many keys (a budget too small for any line).
func ShapeFor(lam float64, lines uint32, r uint32) (Shape, bool) {
	k := uint32(math.Ceil(lam / MaxLoad))
	if lines == 1 {
		k = uint32(math.Ceil(lam))
	}
	k = max(k, 1)
	if k > HeaderMax-1 {
		return Shape{}, false
	}
	s := BestShape(lam, k, r)
	return s, s.Q > 0
}

// balancedShape is the shape of lowest modelled rate for lam keys per
// line among those whose modelled share of negative lookups reading a
// second line is at most SecondLineCap, or the densest plan's
// (denserShape from s) when none is.
func balancedShape(s Shape, lam float64, r uint32) Shape {
	best, bestFPR, first := s, math.Inf(1), uint32(0)
	for k := uint32(math.Ceil(lam / hardLoad)); k < HeaderMax; k++ {
		if first != 0 && k > first+2 {
			break // a wider line only leaves fewer bits to the keys
		}
		c := BestShape(lam, k, r)
		if c.Q == 0 || !secondLineWithin(c, lam, SecondLineCap) {
			continue
		}
		if first == 0 {
			first = k
		}
		if f := ExpectedFPR(c, lam); f < bestFPR {
			best, bestFPR = c, f
		}
	}
	if first == 0 {
		return denserShape(s, lam, r)
	}
	return best
}

// lineShape is the shape for lam keys per line in a filter of several
// lines, starting from s (ShapeFor's): the densest or the balanced one.
func lineShape(s Shape, lam float64, r uint32, densest bool) Shape {
	if densest {
		return denserShape(s, lam, r)
	}
	return balancedShape(s, lam, r)
}

// LargeMemo is the last large-filter shape largeShape searched for:
// writers build table after table at one budget, and the search costs
// about as much as placing a thousand keys.
type LargeMemo struct {
	PerLine float64
	R       uint32
	Shape   Shape
}

// LargeLast holds the last search of each layout (index 1: densest),
// so that writers of both, and the version choice (which plans the
// densest), do not search again for each other.
var LargeLast [2]atomic.Pointer[LargeMemo]

// recentLarge remembers, beside LargeLast, the searches of a few more
// budgets of each layout, each in the slot its keys per line hash to:
// writers of several budgets take turns (a tree's levels, each with its
// own budget, written by compactions in any order), and would otherwise
// search again at every turn.
var recentLarge [2][RecentSlots]atomic.Pointer[LargeMemo]

// RecentSlots is the size of the small tables of recent plans: a power
// of two.
const RecentSlots = 16

// RecentSlot is the slot of a table of RecentSlots entries that a
// setting, given as the bits of its values, is remembered in.
func RecentSlot(a, b uint64) int {
	return int((a ^ b*0xff51afd7ed558ccd) * 0x9e3779b97f4a7c15 >> 60)
}

// largeShape is lineShape(s, perLine, r, densest) for the shape s that
// ShapeFor gives a large filter, remembered for the last budget asked and
// in recentLarge.
func largeShape(s Shape, perLine float64, r uint32, densest bool) Shape {
	layout := 0
	if densest {
		layout = 1
	}
	last := &LargeLast[layout]
	if m := last.Load(); m != nil && m.PerLine == perLine && m.R == r {
		return m.Shape
	}
	recent := &recentLarge[layout][RecentSlot(math.Float64bits(perLine), uint64(r))]
	if m := recent.Load(); m != nil && m.PerLine == perLine && m.R == r {
		last.Store(m)
		return m.Shape
	}
	m := &LargeMemo{perLine, r, lineShape(s, perLine, r, densest)}
	last.Store(m)
	recent.Store(m)
	return m.Shape
}

// PlanFor sizes a version-3 filter for d keys. With a budget it spends all
// of it: the lines the budget buys, and the shape of lowest modelled rate
// for their keys per line. With a target rate it takes the smallest
// budget whose plan meets it.
func PlanFor(o *frame.Sizing, d int) Plan {
	n := float64(max(d, 1))
	// A forced width outside the shapes' 1..16 bits would leave no shape
	// for any line count, and the search for the fewest lines would not
	// end: it is clamped here too, not only by codec.NewBuilder.
	r := uint32(0)
	if o.FingerprintBits > 0 { // negative: the planner chooses, as for 0
		r = uint32(min(o.FingerprintBits, 16))
	}
	// forBudget spends a budget: the shape planned for the keys per line
	// of a large filter, 512/bpk, in as many lines as the keys need at
	// that rate, if that costs at most 5% over the budget, so that a small
	// filter keeps a large one's shape and rate; otherwise the lines the
	// budget buys, shaped for their keys per line. A tiny filter, whose
	// 40-byte trailer is over 5% of its budget, may exceed the budget by
	// the trailer. ok is false when no shape holds the keys per line.
	forBudget := func(bpk float64) (Plan, bool) {
		densest := o.Densest || bpk < balancedMinBudget
		perLine, need, large, lines := frame.BudgetLines(bpk, n)
		if large {
			if s, ok := ShapeFor(perLine, 2, r); ok {
				return Plan{largeShape(s, perLine, r, densest), need}, true
			}
		}
		// Fewer lines than a large filter's rate needs: as many as 5%
		// over the budget buys, filled up to hardLoad if that keeps the
		// rate lower (the model counts the second-line reads it adds).
		lam := n / float64(lines)
		s, ok := ShapeFor(lam, lines, r)
		if ok && lines > 1 {
			s = lineShape(s, lam, r, densest)
		}
		return Plan{s, lines}, ok
	}
	// The fewest lines a shape holds the keys in.
	fewestLines := func() Plan {
		if s, ok := ShapeFor(n, 1, r); ok {
			return Plan{s, 1}
		}
		perLine := float64(HeaderMax)
		for ; perLine > 1; perLine-- {
			if _, ok := ShapeFor(perLine, 2, r); ok {
				break
			}
		}
		lines := uint32(max(2, math.Ceil(n/perLine)))
		for {
			if s, ok := ShapeFor(n/float64(lines), lines, r); ok {
				return Plan{s, lines}
			}
			lines++
		}
	}
	// The sparsest plan worth having: a budget past what 16-bit remainders
	// at a low load fill buys almost nothing more, so none exceeds it (a
	// mistyped 1e6 does not become a block of that size).
	const maxBudget = 48
	if o.FalsePositiveRate > 0 && !math.IsNaN(o.FalsePositiveRate) {
		lo, hi := 1.0, float64(maxBudget)
		if p, ok := forBudget(hi); !ok || ExpectedFPR(p.Shape, n/float64(p.Lines)) > o.FalsePositiveRate {
			if ok {
				return p
			}
			return fewestLines()
		}
		for range 40 {
			mid := (lo + hi) / 2
			if p, ok := forBudget(mid); ok && ExpectedFPR(p.Shape, n/float64(p.Lines)) <= o.FalsePositiveRate {
				hi = mid
			} else {
				lo = mid
			}
		}
		p, _ := forBudget(hi)
		return p
	}
	budget := o.BitsPerKey
	if !(budget > 0) { // NaN too
		budget = frame.DefaultBitsPerKey
	}
	if p, ok := forBudget(min(budget, maxBudget)); ok {
		return p
	}
	return fewestLines()
}
