package tablefilter

import (
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/internal/levelfit"
)

// NumLevels is Pebble's level count, L0 to L6: the length of
// pebble.Options.Levels and of the budgets LevelBudgets returns.
const NumLevels = len(pebble.Options{}.Levels)

// The grid of budgets LevelBudgets chooses from. The search spends budgets
// up to levelBudgetMax, where the filter has reached its widest (16-bit)
// fingerprint and a further bit per key only lowers the load: from there a
// bit buys under 1e-5 fewer table reads per lookup, less than it costs in
// block cache anywhere in the tree. A uniform allocation (an empty tree, a
// tree on one level, an average of levelBudgetMax or more) takes the
// average rounded down to the step, up to MaxBitsPerKey. So every budget
// LevelBudgets returns is a point of the grid from MinBitsPerKey to
// MaxBitsPerKey, and SetLevelBudgets registers every point: a table
// written under any allocation it ever made keeps its filter whatever the
// average and shape a later process configures. An average off the grid
// would be a name no later process registers, and Pebble reads a table
// whose filter name is not registered without its filter, silently.
//
// The search starts at levelBudgetMin, not MinBitsPerKey: the codec's
// smallest filter (5-bit fingerprints at its planned load) takes more than
// 4 bits per key, so a budget of 4 would spend more than the search
// counted and the tree more than the average it was given
// (TestLevelBudgetsSpendWhatTheyPromise builds the filters and checks).
const (
	levelBudgetStep = 0.5
	levelBudgetMin  = 4.5
	levelBudgetMax  = 32
)

// levelBudgetFloor is the largest grid point at or under avg (avg must be a
// valid budget, so the result is too).
func levelBudgetFloor(avg float64) float64 {
	return math.Floor(avg/levelBudgetStep) * levelBudgetStep
}

// LevelShape describes where a tree's keys sit, for LevelBudgets.
type LevelShape struct {
	// Keys is the number of keys on each level, L0..L6, in any unit shared
	// by all levels (bytes serve when entries are alike in size).
	Keys [NumLevels]float64
	// L0Runs is how many L0 tables a lookup may consult: L0 sublevels each
	// hold a sorted run, and a point lookup checks one table per sublevel
	// that covers its key. Values below 1 count as 1.
	L0Runs float64
}

// ModelLevelShape is the shape a Pebble store settles into under opts: L6
// holds the bulk, each level above it 1/LevelMultiplier of the one below
// (L1..L5), and L0 holds L0CompactionThreshold memtables of MemTableSize
// bytes as that many sublevels, relative to L1's LBaseMaxBytes. Unset
// fields take Pebble's defaults; opts is not modified.
//
// It describes a tree that fills all seven levels. A smaller store has the
// same ratios between its populated levels (Pebble sizes levels from the
// bottom up, and starts its Lbase lower), so only L0 weighs more in it than
// modelled.
func ModelLevelShape(opts *pebble.Options) LevelShape {
	o := opts.Clone()
	// Clone is shallow and EnsureDefaults registers the levels' policies
	// in Filters: without a map of its own the clone would write into
	// opts' (which an open store may be reading).
	o.Filters = nil
	o.EnsureDefaults()
	mult := float64(max(o.Experimental.LevelMultiplier, 2))
	var s LevelShape
	s.Keys[NumLevels-1] = 1
	for l := NumLevels - 2; l >= 1; l-- {
		s.Keys[l] = s.Keys[l+1] / mult
	}
	runs := float64(max(o.L0CompactionThreshold, 1))
	s.Keys[0] = s.Keys[1] * runs * float64(o.MemTableSize) / float64(max(o.LBaseMaxBytes, 1))
	s.L0Runs = runs
	return s
}

// MeasuredLevelShape is the shape of a live store, from DB.Metrics: the
// bytes of each level's tables and L0's sublevel count.
func MeasuredLevelShape(m *pebble.Metrics) LevelShape {
	var s LevelShape
	for l := range s.Keys {
		s.Keys[l] = float64(m.Levels[l].TablesSize) + float64(m.Levels[l].VirtualTablesSize)
	}
	s.L0Runs = float64(m.Levels[0].Sublevels)
	return s
}

// modelFPR is the false-positive rate of an lsmcuckoo filter at
// bitsPerKey: the codec's own plan (codec.PlannedFPR) for a table of
// modelKeys keys, large enough that the trailer's few bytes do not count.
func modelFPR(bitsPerKey float64) float64 {
	if bitsPerKey <= 0 {
		return 1 // no filter: every table is read
	}
	return codec.PlannedFPR(codec.Options{BitsPerKey: bitsPerKey}, modelKeys)
}

// modelKeys is the table size the rate model assumes.
const modelKeys = 100_000

// LevelBudgets returns the bits per key for L0..L6 that minimise the
// expected number of tables a lookup for an absent key reads in vain,
// the sum over levels of (tables consulted) × (false-positive rate), while
// the key-weighted average stays at or just under avgBitsPerKey (measured
// in the bytes the filters take: an average under about 4.5 cannot be met,
// since the codec's smallest filter takes that much). This is
// the allocation of Monkey (Dayan, Athanassoulis & Idreos, "Monkey:
// Optimal Navigable Key-Value Store", SIGMOD 2017), worked out for a
// cuckoo filter's rate curve instead of a bloom filter's.
//
// Why it pays: a bit per key on a level that holds a thousandth of the
// keys costs a thousandth of what it costs on the bottom level, and lowers
// that level's false-positive rate just as much. So the optimum gives the
// small upper levels (and L0, which a lookup meets once per sublevel) wide
// fingerprints and the bottom level slightly fewer bits than the average.
//
// How: each level's budget is a point of a grid of 0.5 bits in [4.5, 32]
// (the codec cannot honour a budget of 4), with FPR(b) the codec's own plan
// for a filter of b bits per key (codec.PlannedFPR), and the grid is
// searched by dynamic programming over the key-weighted bits spent
// (internal/levelfit, exact on the grid up to the rounding it describes).
// A search of the grid, not a formula, matters: the rate curve halves at each step of
// fingerprint width and falls slowly between steps, so it is not convex,
// and the textbook Lagrangian solution only sees the curve's convex hull.
// In a Pebble-shaped tree (keys per run growing with depth) the budgets
// come out non-increasing from L0 to L6.
//
// Levels with no keys take the budget of the nearest populated level below
// them (above, for levels under the lowest populated one), so an Lbase that
// later opens higher starts at the current Lbase's budget. If no level has
// keys, or avgBitsPerKey is at least 32, or no allocation of the grid beats
// a uniform one (a tree whose keys sit on one level), every level gets
// avgBitsPerKey rounded down to a half bit: every budget returned is a
// half-bit step from MinBitsPerKey to MaxBitsPerKey, a name SetLevelBudgets
// registers whatever the average, so a store reopened under another
// average or shape still reads every table with its filter.
// It panics unless MinBitsPerKey <= avgBitsPerKey <= MaxBitsPerKey.
func LevelBudgets(shape LevelShape, avgBitsPerKey float64) [NumLevels]float64 {
	if !pebbleValidBitsPerKey(avgBitsPerKey) {
		panic(fmt.Sprintf("tablefilter: bits per key %v outside [%d, %d]", avgBitsPerKey, MinBitsPerKey, MaxBitsPerKey))
	}
	uniform := levelBudgetFloor(avgBitsPerKey)
	var out [NumLevels]float64
	for l := range out {
		out[l] = uniform
	}
	if avgBitsPerKey >= levelBudgetMax {
		return out
	}
	grid := levelBudgetGrid()
	fpr := make([]float64, len(grid))
	for i, b := range grid {
		fpr[i] = modelFPR(b)
	}
	choice, ok := levelfit.Fit(levelfit.Tree{Keys: shape.Keys[:], L0Runs: shape.L0Runs}, grid, fpr,
		avgBitsPerKey, levelBudgetUnits, modelFPR(uniform))
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

// levelBudgetUnits is the resolution of LevelBudgets' search: each level's
// spend is rounded up to avg/levelBudgetUnits bits per key, so the
// allocation undershoots the optimum's spend by at most seven units.
const levelBudgetUnits = 8192

// SetLevelPolicies gives each level of opts its own lsmcuckoo policy so that
// the tree as a whole spends about avgBitsPerKey bits per key on filters,
// more on the small upper levels and fewer on the large bottom level, to
// minimise the tables read in vain per lookup. The budgets are
// LevelBudgets(ModelLevelShape(opts), avgBitsPerKey): set LevelMultiplier,
// LBaseMaxBytes, MemTableSize and L0CompactionThreshold before calling it.
// Only Levels[i].FilterPolicy and Filters are written; the levels' other
// options stay as they are. It panics, writing nothing, unless
// MinBitsPerKey <= avgBitsPerKey <= MaxBitsPerKey, as NewPolicy does.
//
// It registers in opts.Filters the policy of every budget it can ever
// choose (a grid of half bits from MinBitsPerKey to MaxBitsPerKey; an
// average off the grid is rounded down to it) besides avgBitsPerKey
// itself, so a store reopened under another average, or after the tree
// changed shape, still reads every table with its filter. Budgets set by
// other means must be registered with RegisterPolicies.
//
// When the tree changes shape (a store far smaller than seven full levels,
// a different multiplier, a bulk load into L6), derive the budgets from the
// live shape instead and reopen with them:
//
//	b := tablefilter.LevelBudgets(tablefilter.MeasuredLevelShape(db.Metrics()), 10)
//	tablefilter.SetLevelBudgets(opts, b)
//
// Existing tables keep the filters they were written with until a
// compaction rewrites them (a move to a lower level keeps the old filter):
// the change takes hold as the tree turns over, and costs no rewrite.
//
// The OPTIONS file: Pebble issue #3164 ("filter_policy seems doesn't
// work", 2023) reported per-level filter policies that the OPTIONS file
// showed as "none". Pebble v2.1.7 writes each level's policy name there
// (a test here checks it), but the file remains a record for people and
// tools, not a configuration Pebble loads: reopening a store never
// restores filter policies from it. A user must run SetLevelPolicies (or
// SetLevelBudgets) on every Open; a tool that parses OPTIONS should map
// names back with ParseFilterPolicy as pebble.ParseHooks.NewFilterPolicy; and
// the truth about which filter a table carries is in its properties
// (DB.SSTables with pebble.WithProperties: FilterPolicyName), not in
// OPTIONS.
//
// Remember where Pebble consults filters at all: DB.Get skips L6's, so the
// bottom level's budget only pays for iterators' SeekPrefixGE with
// IterOptions.UseL6Filters.
func SetLevelPolicies(opts *pebble.Options, avgBitsPerKey float64) {
	SetLevelBudgets(opts, LevelBudgets(ModelLevelShape(opts), avgBitsPerKey))
	RegisterPolicies(opts, avgBitsPerKey)
}

// SetLevelBudgets sets Levels[i].FilterPolicy to NewPolicy(budgets[i]) and
// registers those policies and every budget LevelBudgets can return (half
// bits from MinBitsPerKey to MaxBitsPerKey). It panics on an invalid
// budget, as NewPolicy does, before writing anything into opts.
func SetLevelBudgets(opts *pebble.Options, budgets [NumLevels]float64) {
	var policies [NumLevels]Policy
	for l, b := range budgets {
		policies[l] = NewPolicy(b) // all checked before opts changes
	}
	for l, p := range policies {
		opts.Levels[l].FilterPolicy = p
	}
	RegisterPolicies(opts, budgets[:]...)
	RegisterPolicies(opts, levelBudgetNames()...)
}

// levelBudgetGrid is the budgets the search chooses from.
func levelBudgetGrid() []float64 { return budgetSteps(levelBudgetMin, levelBudgetMax) }

// levelBudgetNames is every budget LevelBudgets can return (the search's
// grid and the uniform fallback's half bits around it), and every budget
// earlier versions of it could.
func levelBudgetNames() []float64 { return budgetSteps(MinBitsPerKey, MaxBitsPerKey) }

func budgetSteps(bottom, top float64) []float64 {
	var g []float64
	for i := 0; bottom+float64(i)*levelBudgetStep <= top; i++ {
		g = append(g, bottom+float64(i)*levelBudgetStep)
	}
	return g
}
