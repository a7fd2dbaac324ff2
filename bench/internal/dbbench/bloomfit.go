package dbbench

import (
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/lsmcuckoo/lsmcuckoo/internal/levelfit"
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
// key, found by the same exact search as tablefilter.LevelBudgets
// (internal/levelfit), over whole budgets 1..maxBloomBits and the bloom
// filter's measured rates, with the key-weighted average at most avg.
// Levels without keys take the budget of the nearest populated level below
// them (above, under the lowest).
func BloomLevelBits(shape tablefilter.LevelShape, avg float64) [7]int {
	var out [7]int
	uniform := max(1, min(maxBloomBits, int(avg)))
	for l := range out {
		out[l] = uniform
	}
	if !(avg >= 1) {
		return out
	}
	rates := bloomRates()
	grid := make([]float64, maxBloomBits)
	for i := range grid {
		grid[i] = float64(i + 1)
	}
	choice, ok := levelfit.Fit(levelfit.Tree{Keys: shape.Keys[:], L0Runs: shape.L0Runs}, grid, rates[1:],
		avg, bloomFitUnits, rates[uniform])
	if !ok {
		return out
	}
	for l, i := range choice {
		if i >= 0 {
			out[l] = int(grid[i])
		}
	}
	levelfit.FillEmpty(out[:], choice)
	return out
}

// bloomFitUnits is the resolution of BloomLevelBits' search.
const bloomFitUnits = 4096
