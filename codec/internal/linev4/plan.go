package linev4

import (
	"math"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
)

// Slack is how many of a column's rows the planner leaves unclaimed by
// keys (a line's capacity is M−Slack): m random equations in m unknowns
// are independent with probability about 0.29, and a key whose
// equation follows from the others' (and contradicts them) has to
// leave its line. A few spare rows make that rare.
const Slack = 1

// extraSlack is the rows of the extra column left over the keys it is
// planned to check in a full line.
const extraSlack = 2

// MaxSecondShare is the largest modelled share of negative lookups
// reading a second line that a plan of several lines may have. Lines
// fuller than that give a slightly lower modelled rate, but so many of
// their keys go to secondary lines that a line's secondary keys' own
// equations come to contradict each other (an attempt then fails), and a
// lookup that reads a second line waits for a second cache miss.
const MaxSecondShare = 0.2

// oneLineSpare is the rows past its keys a one-line filter's columns
// keep, where the line has them.
const oneLineSpare = 5

// Capacity is the most keys the builder plans a line of shape s to hold.
func Capacity(s Shape) uint32 { return max(1, s.M-min(s.M-1, Slack)) }

// Plan is a version-4 filter's shape and line count.
type Plan struct {
	Shape Shape
	Lines uint32
	K     uint32 // line capacity
}

// ExpectedFPR models a version-4 filter's false-positive rate for lam
// keys per line: an absent key solves a line's full columns with
// probability 2^-r and the extra column, for the share U/256 of keys it
// checks, with probability 1/2; lookups that read a second line get a
// second chance (the modelled share, version 3's model of lines that
// overflow as a whole with a threshold, at capacity k, Capacity(s) when 0).
func ExpectedFPR(s Shape, lam float64, k uint32) float64 {
	if s.R == 0 || lam <= 0 {
		return 0
	}
	if k == 0 {
		k = Capacity(s)
	}
	base := math.Ldexp(1-float64(s.U)/512, -int(s.R))
	return min(1, base*(1+secondShare(k, lam)))
}

// secondShare is the modelled share of negative lookups that read a
// second line, for capacity k and lam keys per line.
func secondShare(k uint32, lam float64) float64 {
	if lam >= 0.99*float64(k) {
		return 1
	}
	return linev3.SecondLineShare(linev3.Shape{R: 1, K: k, Q: NoThreshold}, lam)
}

// shapeFor is the shape of lowest modelled rate for lam keys per line,
// and its capacity; one is the one-line filter, whose line holds every
// key (capacity n ≥ lam). ok is false when no shape holds them.
func shapeFor(lam float64, one bool, rFixed uint32) (best Shape, bestK uint32, ok bool) {
	bestFPR := math.Inf(1)
	var share [MaxHeight + 1]float64
	for m := uint32(1); m <= MaxHeight; m++ {
		k := Capacity(Shape{M: m})
		if one {
			// A one-line filter's keys have no other line: spare rows
			// keep their equations independent (n equations in n+6
			// unknowns are, but for about 1.5%).
			if float64(k) < lam || float64(k) < lam+oneLineSpare && m < MaxHeight {
				continue
			}
			share[m] = 0
		} else {
			if lam >= 0.99*float64(k) {
				share[m] = math.Inf(1)
				continue
			}
			share[m] = secondShare(k, lam)
			if share[m] > MaxSecondShare {
				continue
			}
		}
		for r := uint32(1); r <= MaxColumns && r*m <= ColumnBits; r++ {
			if rFixed != 0 && r != rFixed {
				continue
			}
			s := Shape{R: r, M: m}
			if e := ColumnBits - r*m; e > extraSlack {
				e = min(e, MaxExtra)
				s.U = uint32(min(255, math.Floor(256*float64(e-extraSlack)/float64(k))))
				if one {
					s.U = uint32(min(255, math.Floor(256*float64(e-extraSlack)/lam)))
				}
			}
			f := math.Ldexp(1-float64(s.U)/512, -int(r)) * (1 + share[m])
			if f < bestFPR {
				best, bestK, bestFPR = s, k, f
			}
		}
	}
	return best, bestK, bestFPR < math.Inf(1)
}

// largeMemo is the last large-filter shape shapeFor found: writers build
// table after table at one budget.
type largeMemo struct {
	perLine float64
	r       uint32
	shape   Shape
	k       uint32
	ok      bool
}

var largeLast atomic.Pointer[largeMemo]

func largeShape(perLine float64, r uint32) (Shape, uint32, bool) {
	if m := largeLast.Load(); m != nil && m.perLine == perLine && m.r == r {
		return m.shape, m.k, m.ok
	}
	s, k, ok := shapeFor(perLine, false, r)
	largeLast.Store(&largeMemo{perLine, r, s, k, ok})
	return s, k, ok
}

// maxBudget is the sparsest plan worth having, in bits per key: past it
// fifteen columns at a low load buy almost nothing more, so none exceeds
// it (a mistyped 1e6 does not become a block of that size).
const maxBudget = 48

// PlanFor sizes a version-4 filter for d keys. With a budget it spends
// it: the lines the budget buys, and the shape of lowest modelled rate for
// their keys per line. With a target rate it takes the smallest budget
// whose plan meets it. ok is false when the budget is too small for any
// line to hold its keys (below about 4.2 bits per key); the plan is then
// the fewest lines that hold them.
func PlanFor(o *frame.Sizing, d int) (Plan, bool) {
	n := float64(max(d, 1))
	r := uint32(0)
	if o.FingerprintBits > 0 { // negative: the planner chooses, as for 0
		r = uint32(min(o.FingerprintBits, MaxColumns))
	}
	if o.FalsePositiveRate > 0 && !math.IsNaN(o.FalsePositiveRate) {
		meets := func(bpk float64) (Plan, bool) {
			p, ok := forBudget(bpk, n, r)
			return p, ok && ExpectedFPR(p.Shape, n/float64(p.Lines), p.K) <= o.FalsePositiveRate
		}
		if p, ok := meets(maxBudget); !ok {
			if _, fits := forBudget(maxBudget, n, r); fits {
				return p, true
			}
			return fewestLines(n, r), false
		}
		lo, hi := 1.0, float64(maxBudget)
		for range 40 {
			mid := (lo + hi) / 2
			if _, ok := meets(mid); ok {
				hi = mid
			} else {
				lo = mid
			}
		}
		p, _ := forBudget(hi, n, r)
		return p, true
	}
	budget := o.BitsPerKey
	if !(budget > 0) { // NaN too
		budget = frame.DefaultBitsPerKey
	}
	if p, ok := forBudget(min(budget, maxBudget), n, r); ok {
		return p, true
	}
	return fewestLines(n, r), false
}

// forBudget spends bpk bits per key on n keys: the shape planned for a
// large filter's keys per line, 512/bpk, in as many lines as the keys
// need at that rate, if that costs at most 5% over the budget, so that a
// small filter keeps a large one's shape and rate; otherwise the lines
// the budget buys, shaped for their keys per line. A tiny filter, whose
// 40-byte trailer is over 5% of its budget, may exceed the budget by the
// trailer. ok is false when no shape holds the keys per line.
func forBudget(bpk, n float64, r uint32) (Plan, bool) {
	perLine, need, large, lines := frame.BudgetLines(bpk, n)
	if large {
		if s, k, ok := largeShape(perLine, r); ok {
			return Plan{s, need, k}, true
		}
	}
	s, k, ok := shapeFor(n/float64(lines), lines == 1, r)
	if lines == 1 {
		k = uint32(n)
	}
	return Plan{s, lines, k}, ok
}

// fewestLines is the plan of the fewest lines whose shape holds n keys.
// Whether a line count holds them is monotone in it (fewer keys per line
// only lower the modelled share of lookups reading a second line), so
// the fewest is found by doubling and then bisection: a number of shape
// searches logarithmic in n, where trying one line count after another
// took one per line (seconds for a million keys with a fixed r, which
// v4Serves plans for).
func fewestLines(n float64, r uint32) Plan {
	if s, _, ok := shapeFor(n, true, r); ok {
		return Plan{s, 1, uint32(n)}
	}
	holds := func(lines uint64) (Plan, bool) {
		s, k, ok := shapeFor(n/float64(lines), false, r)
		return Plan{s, uint32(lines), k}, ok
	}
	lo := uint64(max(2, math.Ceil(n/(0.9*MaxHeight))))
	if p, ok := holds(lo); ok {
		return p
	}
	// lo does not hold the keys; find hi that does, then bisect.
	hi := 2 * lo
	for {
		if _, ok := holds(hi); ok {
			break
		}
		lo, hi = hi, 2*hi
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if _, ok := holds(mid); ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	p, _ := holds(hi)
	return p
}
