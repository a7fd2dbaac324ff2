package pebblecore

import (
	"fmt"
	"math"
	"slices"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/internal/levelfit"
)

// NumLevels is Pebble's level count, L0 to L6, in both Pebble modules.
const NumLevels = 7

// The grid of budgets LevelBudgets chooses from. The search spends budgets
// up to BudgetMax, where the filter has reached its widest (16-bit)
// fingerprint and a further bit per key only lowers the load: from there a
// bit buys under 1e-5 fewer table reads per lookup, less than it costs in
// block cache anywhere in the tree. A uniform allocation (an empty tree, a
// tree on one level, an average of BudgetMax or more) takes the average
// rounded down to the step, up to MaxBitsPerKey. So every budget
// LevelBudgets returns is a point of the grid from MinBitsPerKey to
// MaxBitsPerKey, and the adapters' SetLevelBudgets register every point: a
// table written under any allocation it ever made keeps its filter
// whatever the average and shape a later process configures. An average
// off the grid would be a name no later process registers, and Pebble
// reads a table whose filter name is not registered without its filter,
// silently.
//
// The search starts at BudgetMin, not MinBitsPerKey: the codec's smallest
// filter (5-bit fingerprints at its planned load) takes more than 4 bits
// per key, so a budget of 4 would spend more than the search counted and
// the tree more than the average it was given.
const (
	BudgetStep = 0.5
	BudgetMin  = 4.5
	BudgetMax  = 32
)

// BudgetFloor is the largest grid point at or under avg (avg must be a
// valid budget, so the result is too).
func BudgetFloor(avg float64) float64 {
	return math.Floor(avg/BudgetStep) * BudgetStep
}

// LevelShape describes where a tree's keys sit, and how often absent
// lookups read L6's filters (see the adapters' LevelShape, which convert
// to it).
type LevelShape struct {
	Keys   [NumLevels]float64
	L0Runs float64
	SkipL6 float64
}

// NoFilter is the budget of a level that gets no filter: the fit gives it
// to a level whose filters no lookup reads (L6 when SkipL6 is 1), and the
// adapters' setters leave such a level without a filter. It is no policy
// and has no name to register.
const NoFilter = 0

// CheckSkipL6 panics, naming pkg, unless 0 <= skip <= 1: a share outside
// it is a configuration error, as an invalid budget is.
func CheckSkipL6(pkg string, skip float64) {
	if !(skip >= 0 && skip <= 1) {
		panic(fmt.Sprintf("%s: SkipL6 %v outside [0, 1]", pkg, skip))
	}
}

// consulted is, per level, the share of absent lookups that read its
// filters.
func (s LevelShape) consulted() [NumLevels]float64 {
	var c [NumLevels]float64
	for l := range c {
		c[l] = 1
	}
	c[NumLevels-1] = 1 - s.SkipL6
	return c
}

// ModelShape is the shape a Pebble store settles into: L6 holds the bulk,
// each level above it 1/multiplier of the one below (L1..L5), and L0 holds
// l0Threshold memtables of memTableSize bytes as that many sublevels,
// relative to L1's lbaseMaxBytes. The adapters pass their host's options
// with Pebble's defaults applied.
func ModelShape(multiplier, l0Threshold int, memTableSize, lbaseMaxBytes float64) LevelShape {
	mult := float64(max(multiplier, 2))
	var s LevelShape
	s.Keys[NumLevels-1] = 1
	for l := NumLevels - 2; l >= 1; l-- {
		s.Keys[l] = s.Keys[l+1] / mult
	}
	runs := float64(max(l0Threshold, 1))
	s.Keys[0] = s.Keys[1] * runs * memTableSize / max(lbaseMaxBytes, 1)
	s.L0Runs = runs
	return s
}

// ModelFPR is the false-positive rate of the default writer's filter at
// bitsPerKey (ModelVersionFPR of codec.FormatVersion).
func ModelFPR(bitsPerKey float64) float64 {
	return ModelVersionFPR(bitsPerKey, codec.FormatVersion)
}

// ModelVersionFPR is the false-positive rate of a filter of format version
// at bitsPerKey: the codec's own plan (codec.PlannedFPR) for a table of
// modelKeys keys, large enough that the trailer's few bytes do not count.
func ModelVersionFPR(bitsPerKey float64, version int) float64 {
	if bitsPerKey <= 0 {
		return 1 // no filter: every table is read
	}
	return codec.PlannedFPR(codec.Options{BitsPerKey: bitsPerKey, Version: version}, modelKeys)
}

// modelKeys is the table size the rate model assumes.
const modelKeys = 100_000

// LevelBudgets returns the bits per key for L0..L6 that minimise the
// expected number of tables a lookup for an absent key reads in vain,
// keeping the key-weighted average at or just under avgBitsPerKey; the
// adapters' LevelBudgets document the model. It panics, naming pkg, unless
// avgBitsPerKey is a valid budget.
func LevelBudgets(pkg string, shape LevelShape, avgBitsPerKey float64) [NumLevels]float64 {
	return VersionBudgets(pkg, shape, avgBitsPerKey, codec.FormatVersion)
}

// VersionBudgets is LevelBudgets for filters of format version: the same
// search and grid, under that version's rate (ModelVersionFPR). The grid
// holds for every version that writes lines, since they spend a budget on
// lines alike (codec/internal/frame.BudgetLines).
//
// When shape.SkipL6 is over 0 the grid also holds NoFilter (rate 1, every
// table read), which the fit gives a level only where no filter the
// budget affords reads fewer tables in vain per lookup; a level no lookup
// consults (L6 at SkipL6 1) gets NoFilter whatever the tree and average,
// and a level without keys never takes NoFilter from the level below it.
// It panics, naming pkg, unless 0 <= shape.SkipL6 <= 1.
func VersionBudgets(pkg string, shape LevelShape, avgBitsPerKey float64, version int) [NumLevels]float64 {
	return versionBudgets(pkg, shape, avgBitsPerKey, version, shape.SkipL6 > 0)
}

// versionBudgets is VersionBudgets whose grid holds NoFilter only if
// noFilter: without it, only a level no lookup consults gets NoFilter.
func versionBudgets(pkg string, shape LevelShape, avgBitsPerKey float64, version int, noFilter bool) [NumLevels]float64 {
	CheckBitsPerKey(pkg, avgBitsPerKey)
	CheckSkipL6(pkg, shape.SkipL6)
	uniform := BudgetFloor(avgBitsPerKey)
	var out [NumLevels]float64
	for l := range out {
		out[l] = uniform
	}
	consulted := shape.consulted()
	if avgBitsPerKey < BudgetMax {
		fitBudgets(&out, shape, consulted, avgBitsPerKey, version, noFilter)
	}
	for l, c := range consulted {
		if c == 0 {
			out[l] = NoFilter
		}
	}
	return out
}

// fitBudgets writes into out (every level at the uniform budget) the fit
// of shape at avgBitsPerKey under version's rate, if one beats uniform;
// its grid holds NoFilter if noFilter.
func fitBudgets(out *[NumLevels]float64, shape LevelShape, consulted [NumLevels]float64, avgBitsPerKey float64, version int, noFilter bool) {
	grid := BudgetGrid()
	if noFilter {
		grid = append([]float64{NoFilter}, grid...)
	}
	fpr := make([]float64, len(grid))
	for i, b := range grid {
		fpr[i] = ModelVersionFPR(b, version) // 1 for NoFilter
	}
	tree := levelfit.Tree{Keys: shape.Keys[:], L0Runs: shape.L0Runs, Consulted: consulted[:]}
	choice, ok := levelfit.Fit(tree, grid, fpr, avgBitsPerKey, budgetUnits, ModelVersionFPR(out[0], version))
	if !ok {
		return
	}
	for l, i := range choice {
		if i >= 0 {
			out[l] = grid[i]
		}
	}
	// A level without keys takes the budget of a populated level near it
	// that has a filter: one that opens later (a new Lbase) is consulted
	// by every lookup, whatever the level below it is given. With no such
	// level it keeps the uniform budget.
	fill, sources := *out, slices.Clone(choice)
	for l, i := range choice {
		if i >= 0 && grid[i] == NoFilter {
			sources[l] = -1
		}
	}
	levelfit.FillEmpty(fill[:], sources)
	for l, i := range choice {
		if i < 0 {
			out[l] = fill[l]
		}
	}
}

// budgetUnits is the resolution of LevelBudgets' search: each level's
// spend is rounded up to avg/budgetUnits bits per key, so the allocation
// undershoots the optimum's spend by at most seven units.
const budgetUnits = 8192

// BudgetGrid is the budgets the search chooses from.
func BudgetGrid() []float64 { return budgetSteps(BudgetMin, BudgetMax) }

// RegisteredBudgets is every budget LevelBudgets can return (the search's
// grid and the uniform fallback's half bits around it), and every budget
// earlier versions of it could: the budgets SetLevelBudgets registers.
func RegisteredBudgets() []float64 { return budgetSteps(MinBitsPerKey, MaxBitsPerKey) }

func budgetSteps(bottom, top float64) []float64 {
	var g []float64
	for i := 0; bottom+float64(i)*BudgetStep <= top; i++ {
		g = append(g, bottom+float64(i)*BudgetStep)
	}
	return g
}

// FilteredPolicies returns, for each level's budget, the policy writing
// format version at that budget, checking every budget and panicking
// naming pkg before an adapter writes anything into its options. A level
// of budget NoFilter gets filtered false and the zero policy, which the
// adapters never install.
func FilteredPolicies(pkg string, budgets [NumLevels]float64, version int) (policies [NumLevels]Policy, filtered [NumLevels]bool) {
	for l, b := range budgets {
		if b == NoFilter {
			continue
		}
		CheckBitsPerKey(pkg, b)
		policies[l], filtered[l] = New(b, version, false), true
	}
	return policies, filtered
}
