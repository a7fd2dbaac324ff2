package pebblecore

import (
	"math"

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

// LevelShape describes where a tree's keys sit (see the adapters'
// LevelShape, which convert to it).
type LevelShape struct {
	Keys   [NumLevels]float64
	L0Runs float64
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
func VersionBudgets(pkg string, shape LevelShape, avgBitsPerKey float64, version int) [NumLevels]float64 {
	CheckBitsPerKey(pkg, avgBitsPerKey)
	uniform := BudgetFloor(avgBitsPerKey)
	var out [NumLevels]float64
	for l := range out {
		out[l] = uniform
	}
	if avgBitsPerKey >= BudgetMax {
		return out
	}
	grid := BudgetGrid()
	fpr := make([]float64, len(grid))
	for i, b := range grid {
		fpr[i] = ModelVersionFPR(b, version)
	}
	choice, ok := levelfit.Fit(levelfit.Tree{Keys: shape.Keys[:], L0Runs: shape.L0Runs}, grid, fpr,
		avgBitsPerKey, budgetUnits, ModelVersionFPR(uniform, version))
	if !ok {
		return out
	}
	for l, i := range choice {
		if i >= 0 {
			out[l] = grid[i]
		}
	}
	levelfit.FillEmpty(out[:], choice)
	return out
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

// VersionPolicies returns, for each level's budget, the policy writing
// format version at that budget, checking every budget, and panicking
// naming pkg, before an adapter writes anything into its options.
func VersionPolicies(pkg string, budgets [NumLevels]float64, version int) [NumLevels]Policy {
	var policies [NumLevels]Policy
	for l, b := range budgets {
		CheckBitsPerKey(pkg, b)
		policies[l] = New(b, version, false)
	}
	return policies
}
