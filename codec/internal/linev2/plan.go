package linev2

import (
	"math"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
)

// MaxLoad is the highest planned fraction of occupied slots. Lines
// receive a Poisson number of keys, so the fullest lines overflow; the
// overflow goes to secondary lines, which must still have room. A higher
// load buys wider fingerprints for the same bits (a larger share of wide
// lines), for more lookups reading a second line and slower builds
// (go test ./codec -run TestV2LoadSweep -v measures the trade).
var MaxLoad = 0.93

// hardLoad is the load a small filter may be planned at to keep the
// fingerprint width of a large one: placement reaches it, at the price of
// more second-line reads in that filter.
const hardLoad = 0.97

// Plan is the fingerprint width, line count and share of wide lines
// (in 128ths) for d keys.
type Plan struct {
	F     uint
	Lines uint32
	Wide  uint8
}

// LineSlots is the number of slots in a line for fingerprints of f bits.
func LineSlots(f uint) float64 { return float64(bucket.Slots) * float64(LineShapes[f].Buckets) }

// PlanFor sizes a version-2 filter. With a budget it spends all of it: the
// line count the budget buys, and the widest fingerprint whose lines still
// hold the keys at MaxLoad. With a target rate it takes the cheapest
// width and load that meet it.
func PlanFor(o *frame.Sizing, d int) Plan {
	n := float64(max(d, 1))
	linesFor := func(f uint, load float64) uint32 {
		return uint32(max(1, math.Ceil(n/(LineSlots(f)*load))))
	}
	if o.FingerprintBits != 0 {
		f := uint(min(max(o.FingerprintBits, bucket.MinFPBits), bucket.MaxFPBits))
		load := MaxLoad
		if o.FalsePositiveRate > 0 {
			load = min(MaxLoad, bucket.LoadForFPR(f, o.FalsePositiveRate))
		} else if o.BitsPerKey > 0 {
			l := BudgetLines(o.BitsPerKey, n, frame.TrailerSize*8)
			load = min(MaxLoad, n/(float64(l)*LineSlots(f)))
		}
		return Plan{f, linesFor(f, max(load, bucket.MinLoad)), 0}
	}
	if o.FalsePositiveRate > 0 {
		// A target no width meets at bucket.MinLoad or above gets the lowest rate
		// there is, 16-bit fingerprints at bucket.MinLoad, as version 1 does (not
		// the densest 16-bit filter, whose rate is several times higher
		// than a looser target's).
		best, bestBits := Plan{bucket.MaxFPBits, linesFor(bucket.MaxFPBits, bucket.MinLoad), 0}, math.Inf(1)
		for f := uint(bucket.MinFPBits); f <= bucket.MaxFPBits; f++ {
			load := min(MaxLoad, bucket.LoadForFPR(f, o.FalsePositiveRate))
			if load < bucket.MinLoad {
				continue
			}
			if bits := frame.LineBits / (LineSlots(f) * load); bits < bestBits {
				best, bestBits = Plan{f, linesFor(f, load), 0}, bits
			}
		}
		return best
	}
	budget := o.BitsPerKey
	if !(budget > 0) { // NaN too
		budget = frame.DefaultBitsPerKey
	}
	// The widths are chosen for the budget's keys per line, so that small
	// filters get the fingerprints of large ones: the narrow width f is the
	// widest whose lines hold them at MaxLoad, and a share of the lines
	// (as large as that load allows) gets the wide width. A small filter
	// whose whole lines (and trailer) the budget cannot quite buy takes
	// fewer wide lines, or the few lines more it needs (up to 5% over the
	// budget), or else the next narrower width. A tiny filter, whose
	// 40-byte trailer alone is more than 5% of its budget, may exceed the
	// budget by the trailer, rather than fall to uselessly narrow
	// fingerprints.
	trailer := float64(frame.TrailerSize * 8)
	if trailer > 0.05*budget*n {
		trailer = 0
	}
	perLine := frame.LineBits / budget / MaxLoad // bucket.Slots a line needs on average
	have := BudgetLines(budget, n, trailer)
	for f := uint(bucket.MaxFPBits); f >= bucket.MinFPBits; f-- {
		if perLine > LineSlots(f) && f > bucket.MinFPBits {
			continue
		}
		w := 0.0
		if f < bucket.MaxFPBits {
			w = min(1, (LineSlots(f)-perLine)/(LineSlots(f)-LineSlots(uint(WideWidth[f]))))
		}
		need := func(w128 int, load float64) uint32 {
			avg := LineSlots(f)
			if w128 > 0 {
				avg -= float64(w128) / 128 * (LineSlots(f) - LineSlots(uint(WideWidth[f])))
			}
			return uint32(max(1, math.Ceil(n/(avg*load))))
		}
		// As many wide lines as the lines the budget buys can hold...
		for w128 := int(w * 127); w128 >= 0; w128-- {
			if need(w128, MaxLoad) <= have {
				return Plan{f, have, uint8(w128)}
			}
		}
		// ...or, for a small filter, a few lines more than it buys, or
		// a higher load (placement reaches hardLoad).
		for _, load := range []float64{MaxLoad, hardLoad} {
			if l := need(0, load); float64(l)*frame.LineBits+trailer <= 1.05*budget*n || f == bucket.MinFPBits {
				return Plan{f, l, 0}
			}
		}
	}
	return Plan{bucket.MinFPBits, max(have, linesFor(bucket.MinFPBits, MaxLoad)), 0}
}

// BudgetLines is how many whole lines a budget of bpk bits for n keys buys
// after trailer bits, at least one, and at most what 16-bit fingerprints at
// bucket.MinLoad fill: a filter emptier than that buys a negligibly lower rate
// with every further bit (the same floor a target rate or a forced width
// is planned with), so a budget far past it (a mistyped 1e6, an int meant
// as bytes) does not become a block of that size, nor a line count that
// overflows uint32.
func BudgetLines(bpk, n, trailer float64) uint32 {
	most := math.Ceil(n / (LineSlots(bucket.MaxFPBits) * bucket.MinLoad))
	return uint32(max(1, min(most, math.Floor((bpk*n-trailer)/frame.LineBits))))
}

// PlannedFPR is the false-positive rate a version-2 filter of keys
// distinct keys is planned to have: from the shape and load the builder
// will choose, before the few second-line reads.
func PlannedFPR(o *frame.Sizing, keys int) float64 {
	if keys <= 0 {
		return 0
	}
	p := PlanFor(o, keys)
	g := Geom{F: p.F, Lines: p.Lines, Wide: WideLines(p.Lines, p.Wide)}
	buckets := float64(g.FirstBucket(p.Lines))
	load := min(1, float64(keys)/(bucket.Slots*buckets))
	wide := float64(g.Wide) / float64(p.Lines)
	fpr := (1 - wide) * bucket.ExpectedFPR(p.F, load)
	if g.Wide > 0 {
		fpr += wide * bucket.ExpectedFPR(uint(WideWidth[p.F]), load)
	}
	return fpr
}
