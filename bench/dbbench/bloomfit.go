package dbbench

import (
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// maxBloomBits is the largest per-level bloom budget FittedBloom considers,
// the same ceiling as lsmcuckoo's per-level budgets.
const maxBloomBits = 32

// FittedBloom is Pebble's bloom filter per level, its whole bits per key
// (all bloom.FilterPolicy takes) allocated across levels the way
// tablefilter.LevelBudgets allocates lsmcuckoo's: fitted to the measured
// tree, minimising the tables read in vain per lookup at an average of at
// most avg bits per key. It is the per-level bloom at the fitted
// lsmcuckoo's filter bytes, so per-level lsmcuckoo is compared with a bloom
// given the same treatment, not only with a hand-copied setting.
func FittedBloom(avg float64) Policy {
	return Policy{Name: fmt.Sprintf("pebble-bloom/levels-%g-fit", avg), Fit: func(o *pebble.Options, s tablefilter.LevelShape) {
		bits := BloomLevelBits(s, avg)
		if o.Filters == nil {
			o.Filters = map[string]pebble.FilterPolicy{}
		}
		for l, b := range bits {
			fp := bloom.FilterPolicy(b)
			o.Levels[l].FilterPolicy = fp
			o.Filters[fp.Name()] = fp
		}
	}}
}

// bloomRates is the false-positive rate of Pebble's bloom filter at each
// whole budget 1..maxBloomBits (index b), measured on real filters rather
// than modelled: Pebble's probes within a cache line are double-hashed from
// one 32-bit hash, which a textbook formula does not capture.
var bloomRates = sync.OnceValue(func() []float64 {
	keys := testkeys.Random(50_000, 16, 11)
	absent := testkeys.Random(400_000, 16, 12)
	rates := make([]float64, maxBloomBits+1)
	rates[0] = 1
	for b := 1; b <= maxBloomBits; b++ {
		p := bloom.FilterPolicy(b)
		w := p.NewWriter(pebble.TableFilter)
		for _, k := range keys {
			w.AddKey(k)
		}
		f := w.Finish(nil)
		hits := 0
		for _, k := range absent {
			if p.MayContain(pebble.TableFilter, f, k) {
				hits++
			}
		}
		// Half an event when none is seen, so the curve stays positive
		// and still falls.
		rates[b] = math.Max(float64(hits), 0.5) / float64(len(absent))
	}
	return rates
})

// BloomLevelBits is FittedBloom's allocation: each level's whole bits per
// key, found by an exact search (dynamic programming over the key-weighted
// bits spent) that minimises Σ runs·FPR(bits) over the populated levels
// subject to Σ keys·bits <= avg·Σ keys. Levels without keys take the budget
// of the nearest populated level below them (above, under the lowest).
func BloomLevelBits(shape tablefilter.LevelShape, avg float64) [7]int {
	var out [7]int
	uniform := max(1, min(maxBloomBits, int(avg)))
	for l := range out {
		out[l] = uniform
	}
	var weight, runs [7]float64
	total := 0.0
	for l, k := range shape.Keys {
		if k > 0 && !math.IsInf(k, 0) && !math.IsNaN(k) {
			weight[l], runs[l] = k, 1
			total += k
		}
	}
	if total == 0 || avg < 1 {
		return out
	}
	if shape.L0Runs > 1 {
		runs[0] = shape.L0Runs
	}
	rates := bloomRates()
	const units = 4096
	unit := avg / units
	inf := math.Inf(1)
	cost := make([]float64, units+1)
	next := make([]float64, units+1)
	var choice [7][]int8
	for l := range weight {
		choice[l] = make([]int8, units+1)
		if weight[l] == 0 {
			continue
		}
		w := weight[l] / total
		for u := range next {
			next[u] = inf
		}
		for b := 1; b <= maxBloomBits; b++ {
			spend := int(math.Ceil(w * float64(b) / unit))
			c := runs[l] * rates[b]
			for u := spend; u <= units; u++ {
				if v := cost[u-spend] + c; v < next[u] {
					next[u], choice[l][u] = v, int8(b)
				}
			}
		}
		cost, next = next, cost
	}
	best := 0
	for u := range cost {
		if cost[u] < cost[best] {
			best = u
		}
	}
	// Rounding each level's spend up can make the uniform allocation look
	// unaffordable; it is always feasible, so keep it unless the search
	// found better.
	uniformCost := 0.0
	for l := range weight {
		uniformCost += runs[l] * rates[uniform]
	}
	if !(cost[best] < uniformCost) || float64(uniform) > avg {
		return out
	}
	for u, l := best, 6; l >= 0; l-- {
		if weight[l] == 0 {
			continue
		}
		b := int(choice[l][u])
		out[l] = b
		u -= int(math.Ceil(weight[l] / total * float64(b) / unit))
	}
	lowest := -1
	for l := 6; l >= 0 && lowest < 0; l-- {
		if weight[l] > 0 {
			lowest = l
		}
	}
	below := out[lowest]
	for l := 6; l >= 0; l-- {
		if weight[l] > 0 {
			below = out[l]
		} else {
			out[l] = below
		}
	}
	return out
}
