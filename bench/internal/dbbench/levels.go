package dbbench

import (
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/lsmcuckoo/lsmcuckoo/bench/binaryfuse"
	"github.com/lsmcuckoo/lsmcuckoo/internal/levelfit"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// The per-level line-up's policy names.
const (
	LevelsFitted   = "lsmcuckoo/levels-10-fit"
	LevelsAdaptive = "lsmcuckoo/adaptive-10"
	FuseFitted     = "binary-fuse/levels-fit"
	FuseMaster     = "binary-fuse/progressive"
	// LevelsAtFuse and LevelsAtMaster are lsmcuckoo per level fitted to
	// the tree at the filter bytes of FuseFitted and FuseMaster.
	LevelsAtFuse   = "lsmcuckoo/levels-fit@fuse-bytes"
	LevelsAtMaster = "lsmcuckoo/levels-fit@progressive-bytes"
	// V4AtFuse and V4AtMaster are the same fits for format version 4
	// (tablefilter.LevelBudgetsV4, SetLevelBudgetsV4).
	V4AtFuse   = "lsmcuckoo-v4/levels-fit@fuse-bytes"
	V4AtMaster = "lsmcuckoo-v4/levels-fit@progressive-bytes"
)

// A LevelFit is how a per-level lsmcuckoo setup fits budgets to a shape
// and writes them into options: one format version's rate model and
// policy.
type LevelFit struct {
	Budgets func(tablefilter.LevelShape, float64) [7]float64
	Set     func(*pebble.Options, [7]float64)
}

// The per-level fits of format versions 3 (the default) and 4.
var (
	FitV3 = LevelFit{tablefilter.LevelBudgets, tablefilter.SetLevelBudgets}
	FitV4 = LevelFit{tablefilter.LevelBudgetsV4, tablefilter.SetLevelBudgetsV4}
)

// FuseProgressive is the per-level binary fuse setting of Pebble's
// unreleased master (its options' binary fuse progressive table filter
// policy): fingerprints of 16/16/16/12/10/8/4 bits on L0..L6, fixed,
// widening up the tree because each level's rate should be the level
// multiplier times lower than the one below (a fuse filter's rate is
// 2^-width: about 3 bits per level for the multiplier of about 8 that
// master's comment reports for trees below their full size). It is not
// fitted to the measured tree and does not spend the fitted policies'
// filter bytes.
var FuseProgressive = [7]int{16, 16, 16, 12, 10, 8, 4}

// LevelLineup is the per-level comparison at equal filter bytes: no filter
// (its tree gives the shape the fitted policies fit to), uniform bloom/10
// (the baseline), lsmcuckoo per level fitted to the measured tree
// (LevelsFitted), the one-call self-tuning setup (LevelsAdaptive), binary
// fuse per level with its widths fitted by the same allocator to at most
// LevelsFitted's filter bytes (FuseFitted), Pebble master's binary fuse
// preset (FuseMaster) beside its bloom preset, and lsmcuckoo per level
// fitted again at the filter bytes the two fuse trees spent (LevelsAtFuse,
// LevelsAtMaster): a fuse filter's widths are discrete, so it seldom
// spends a given average, and these are the comparisons at its bytes;
// then the same two fits for format version 4 (V4AtFuse, V4AtMaster);
// last the fits for absent Gets, which skip L6's filters (GetLineup).
func LevelLineup() []Policy {
	var fuse, bloomProg [7]pebble.FilterPolicy
	for l, w := range FuseProgressive {
		fuse[l] = binaryfuse.NewPolicy(w)
	}
	for l, b := range Progressive {
		bloomProg[l] = bloom.FilterPolicy(b)
	}
	return append([]Policy{
		{Name: "none"},
		Uniform(SavingBaseline, bloom.FilterPolicy(10)),
		FittedLevels(10),
		AdaptiveLevels(10),
		FittedFuse(LevelsFitted),
		PerLevel(FuseMaster, fuse),
		PerLevel("pebble-bloom/progressive", bloomProg),
		FittedLevelsAt(LevelsAtFuse, FuseFitted, FitV3),
		FittedLevelsAt(LevelsAtMaster, FuseMaster, FitV3),
		FittedLevelsAt(V4AtFuse, FuseFitted, FitV4),
		FittedLevelsAt(V4AtMaster, FuseMaster, FitV4),
	}, GetLineup()...)
}

// FittedLevelsAt is lsmcuckoo per level fitted to the measured tree by fit
// at the filter bits per key of the tree of the policy named ref. The
// fit's average counts what its budgets plan, and small tables' filters
// spend more (whole lines, a trailer), so the average asked is ref's
// scaled by what LevelsFitted's tree planned over what it spent (versions
// 3 and 4 spend a budget on lines alike).
func FittedLevelsAt(name, ref string, fit LevelFit) Policy { return fittedLevelsAt(name, ref, fit, 0) }

// fittedLevelsAt is FittedLevelsAt fitted for lookups of which a share
// skipL6 never reads L6's filters (tablefilter.LevelShape.SkipL6).
//
// At skipL6 1, L6 spends nothing (NoFilter), so the fit is the fit of the
// levels above at their own average, avg over their share of the keys:
// it is fitted that way, on the shape without L6's keys, because a
// Get-fitted fuse tree spends an average under MinBitsPerKey, which
// LevelBudgets does not take, while the levels above spend well over it.
func fittedLevelsAt(name, ref string, fit LevelFit, skipL6 float64) Policy {
	return Policy{Name: name, MatchTo: []string{ref, LevelsFitted}, Match: func(o *pebble.Options, s tablefilter.LevelShape, built map[string]Tree) {
		avg := built[ref].BitsPerKey() * 10 / built[LevelsFitted].BitsPerKey()
		s.SkipL6 = skipL6
		if skipL6 == 1 {
			var total float64
			for _, k := range s.Keys {
				total += max(k, 0)
			}
			if upper := total - max(s.Keys[6], 0); upper > 0 {
				avg *= total / upper
				s.Keys[6] = 0
			}
		}
		avg = max(tablefilter.MinBitsPerKey, min(tablefilter.MaxBitsPerKey, avg))
		fit.Set(o, fit.Budgets(s, avg))
	}}
}

// AdaptiveLevels is the one-call self-tuning setup
// (tablefilter.SetAdaptiveBudgets) at avg bits per key, attached to every
// store it writes.
func AdaptiveLevels(avg float64) Policy {
	var tuned *tablefilter.AdaptiveBudgets
	return Policy{Name: fmt.Sprintf("lsmcuckoo/adaptive-%g", avg),
		Apply: func(o *pebble.Options) { tuned = tablefilter.SetAdaptiveBudgets(o, avg) },
		Attach: func(db *pebble.DB) func() {
			tuned.Attach(db)
			return tuned.Detach
		}}
}

// FittedFuse is binary fuse per level, each level's width one of Pebble
// master's (binaryfuse.Widths), allocated by FuseLevelWidths to spend at
// most the filter bytes of the tree of the policy named ref.
func FittedFuse(ref string) Policy { return fittedFuse(FuseFitted, ref, 0) }

// fittedFuse is FittedFuse fitted for lookups of which a share skipL6
// never reads L6's filters (tablefilter.LevelShape.SkipL6): a level whose
// width comes out NoFuse gets no filter.
func fittedFuse(name, ref string, skipL6 float64) Policy {
	return Policy{Name: name, MatchTo: []string{ref}, Match: func(o *pebble.Options, s tablefilter.LevelShape, built map[string]Tree) {
		t := built[ref]
		s.SkipL6 = skipL6
		widths := FuseLevelWidths(s, t.BitsPerKey(), t.KeysPerTable())
		if o.Filters == nil {
			o.Filters = map[string]pebble.FilterPolicy{}
		}
		for l, w := range widths {
			if w == NoFuse {
				o.Levels[l].FilterPolicy = pebble.NoFilterPolicy
				continue
			}
			fp := binaryfuse.NewPolicy(w)
			o.Levels[l].FilterPolicy = fp
			o.Filters[fp.Name()] = fp
		}
	}}
}

// NoFuse is the width FuseLevelWidths gives a level left without a filter.
const NoFuse = 0

// FuseLevelWidths is FittedFuse's allocation: each level's fingerprint
// width, found by the search tablefilter.LevelBudgets uses
// (internal/levelfit) over Pebble master's widths, each at the bits per
// key a fuse filter of keysPerTable keys really takes (FuseBitsPerKey),
// with its rate 2^-width, so that the key-weighted bits per key stay at or
// under avg. Levels without keys take the width of the nearest populated
// level below them (above, under the lowest); when no allocation fits,
// every level takes the widest width that does on its own.
//
// With shape.SkipL6 over 0, as tablefilter.LevelBudgets does: L6's tables
// count only for the lookups that read its filters, the grid also holds
// no filter (NoFuse: 0 bits, rate 1), L6 gets NoFuse at SkipL6 1 whatever
// else, and a level without keys takes the width of the nearest populated
// level that has a filter.
func FuseLevelWidths(shape tablefilter.LevelShape, avg float64, keysPerTable int) [7]int {
	widths := slices.Clone(binaryfuse.Widths)
	if shape.SkipL6 > 0 {
		widths = append([]int{NoFuse}, widths...)
	}
	grid := make([]float64, len(widths))
	rates := make([]float64, len(widths))
	uniform := -1 // the widest width that fits on its own, else the narrowest
	for i, w := range widths {
		grid[i], rates[i] = 0, 1
		if w == NoFuse {
			continue
		}
		grid[i], rates[i] = FuseBitsPerKey(w, keysPerTable), math.Ldexp(1, -w)
		if uniform < 0 || grid[i] <= avg {
			uniform = i
		}
	}
	var out [7]int
	for l := range out {
		out[l] = widths[uniform]
	}
	consulted := []float64{1, 1, 1, 1, 1, 1, 1 - shape.SkipL6}
	tree := levelfit.Tree{Keys: shape.Keys[:], L0Runs: shape.L0Runs, Consulted: consulted}
	if choice, ok := levelfit.Fit(tree, grid, rates, avg, bloomFitUnits, rates[uniform]); ok {
		sources := slices.Clone(choice)
		for l, i := range choice {
			if i >= 0 {
				out[l] = widths[i]
				if widths[i] == NoFuse {
					sources[l] = -1
				}
			}
		}
		fill := out
		levelfit.FillEmpty(fill[:], sources)
		for l, i := range choice {
			if i < 0 {
				out[l] = fill[l]
			}
		}
	}
	if consulted[6] == 0 {
		out[6] = NoFuse
	}
	return out
}

// FuseBitsPerKey is the bits per key a binary fuse filter of width w
// takes on a table of n keys, measured on a built filter: the segment
// layout's overhead grows as tables shrink, so the width alone does not
// give it.
func FuseBitsPerKey(w, n int) float64 {
	n = max(n, 1)
	keys := testkeys.Random(n, 16, uint64(97+w))
	wr := binaryfuse.NewPolicy(w).NewWriter(pebble.TableFilter)
	for _, k := range keys {
		wr.AddKey(k)
	}
	return float64(8*len(wr.Finish(nil))) / float64(n)
}

// BitsPerKey is the tree's filter bits per key, over every level.
func (t Tree) BitsPerKey() float64 {
	return float64(8*t.TotalFilterBytes()) / float64(max(t.TotalKeys(), 1))
}

// BitsPerKeyBelowL0 is the tree's filter bits per key over the levels
// below L0, whose keys stay in the tree when L0 drains (the self-tuning
// setup holds the average over the whole tree as L0 fills and drains:
// tablefilter.AdaptiveBudgets).
func (t Tree) BitsPerKeyBelowL0() float64 {
	var bytes, keys uint64
	for _, li := range t.Levels[1:] {
		bytes, keys = bytes+li.FilterBytes, keys+li.Keys
	}
	return float64(8*bytes) / float64(max(keys, 1))
}

// KeysPerTable is the tree's mean entries per table.
func (t Tree) KeysPerTable() int {
	var tables int
	for _, li := range t.Levels {
		tables += li.Tables
	}
	return int(t.TotalKeys() / uint64(max(tables, 1)))
}
