package linev3

import (
	"math"
)

// overflowShare is the expected share of a line's keys that do not fit its
// capacity k when it receives a Poisson number of keys of mean lam.
func overflowShare(lam float64, k uint32) float64 {
	if lam <= 0 {
		return 0
	}
	// E[(X-k)+] = sum over x > k of (x-k)·P(X=x), summed until negligible.
	p := math.Exp(-lam)
	for x := 1; x <= int(k); x++ {
		p *= lam / float64(x)
	}
	sum := 0.0
	for x := int(k) + 1; x < int(k)+int(10*math.Sqrt(lam))+20; x++ {
		p *= lam / float64(x)
		sum += float64(x-int(k)) * p
	}
	return sum / lam
}

// secondLineWithin reports whether the modelled share of negative
// lookups that read a second line (SecondLineShare) is at most limit,
// stopping as soon as it is not: the model's iteration only raises it.
func secondLineWithin(s Shape, lam, limit float64) bool {
	return secondLineModel(s, lam, limit) <= limit
}

// SecondLineShare models the share of negative lookups that read a
// second line in a filter of lam keys per line and shape s: a key reads
// one when its quotient is at or past its primary line's threshold, and
// the threshold of a line is lowered, a whole quotient at a time, until
// the keys at or past it are as many as the line's keys beyond its
// capacity. Those keys include the ones sent on from other lines, which
// in turn may send keys on: the share m of keys moved satisfies
// m = (1+m)·overflowShare(lam·(1+m), k), whose solution the iteration from
// m = 0 approaches from below. A line that receives y
// keys (about Poisson with mean lam·(1+m)) and holds k then sends on
// y−k of its y/(1+m) own keys, plus half a quotient's share for the
// whole quotients. TestV3SecondLineModel holds it to the share builds
// measure (BuildStats.SecondLineShare) at loads from full lines down.
func SecondLineShare(s Shape, lam float64) float64 {
	return secondLineModel(s, lam, math.Inf(1))
}

// secondLineModel is SecondLineShare, or a value past stop once one
// step of the iteration exceeds stop.
func secondLineModel(s Shape, lam, stop float64) float64 {
	if s.Q == 0 || lam <= 0 {
		return 0
	}
	if lam >= 0.99*float64(s.K) {
		return 1 // lines fuller than this send keys on without end: no answer short of all
	}
	// step returns, for a share m of keys moved, the next m and the share
	// of lookups reading a second line, from one pass over the tail of
	// y, the keys a line receives: P(y) starts from its logarithm, since
	// the lines below capacity contribute nothing.
	k := float64(s.K)
	lg, _ := math.Lgamma(k + 2) // log((k+1)!)
	step := func(m float64) (next, share float64) {
		mu := lam * (1 + m)
		p := math.Exp(-mu + (k+1)*math.Log(mu) - lg)
		moved := 0.0
		for y := k + 1; y < max(k, mu)+10*math.Sqrt(mu)+20; y++ {
			moved += (y - k) * p
			share += p * min(1, (y-k)*(1+m)/y+0.5/float64(s.Q))
			p *= mu / (y + 1)
		}
		return moved / lam, share
	}
	// The plain iteration from m = 0 (whose first step gives
	// overflowShare(lam, k)) rises towards the solution, so each share it
	// gives is a lower bound on the answer (a share past stop already
	// decides); secant steps then finish the solve, which plain steps
	// approach only slowly near a full line.
	m0, sh := step(0)
	if sh > stop {
		return sh
	}
	m1, sh := step(m0)
	if sh > stop {
		return sh
	}
	g0 := m1 - m0
	m2, sh := step(m1)
	if sh > stop {
		return sh
	}
	g1 := m2 - m1
	for range 32 {
		if math.Abs(g1) <= 1e-6*m1 {
			break
		}
		m := m1 + g1 // a plain step, should the secant's be no use
		if d := g1 - g0; d != 0 {
			if c := m1 - g1*(m1-m0)/d; c > 0 && c < 2*m1+1 {
				m = c
			}
		}
		var next float64
		next, sh = step(m)
		m0, g0, m1, g1 = m1, g1, m, next-m
	}
	return sh
}

// ExpectedFPR models a version-3 filter's false-positive rate for lam
// keys per line: a line's remainders that match an absent key's quotient
// and remainder, lam/(Q·2^r), counted again for the lookups that read a
// second line, about twice the share of keys that overflow their primary
// line (each overflow pushes about one more key out of a full secondary
// line, and each lowers a threshold).
func ExpectedFPR(s Shape, lam float64) float64 {
	return expectedFPRWith(s, lam, overflowShare(lam, s.K))
}

// expectedFPRWith is ExpectedFPR given overflow, overflowShare(lam, s.K):
// shapes of one capacity share it.
func expectedFPRWith(s Shape, lam, overflow float64) float64 {
	if s.Q == 0 || lam <= 0 {
		return 0
	}
	// A quotient's run is about Poisson with mean lam/Q, and each of its
	// remainders matches with probability 2^-r: no match has probability
	// exp(-lam/(Q·2^r)), which the plain sum overstates at small r.
	matches := lam / (float64(s.Q) * float64(uint64(1)<<s.R)) * (1 + 2*overflow)
	return -math.Expm1(-matches)
}
