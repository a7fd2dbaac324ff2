package tablefilter

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// NumLevels is Pebble's level count, L0 to L6: the length of
// pebble.Options.Levels and of the budgets LevelBudgets returns.
const NumLevels = len(pebble.Options{}.Levels)

// The shared core fits budgets for the same seven levels.
var (
	_ [NumLevels - pebblecore.NumLevels]struct{}
	_ [pebblecore.NumLevels - NumLevels]struct{}
)

// LevelShape describes where a tree's keys sit, for LevelBudgets.
type LevelShape struct {
	// Keys is the number of keys on each level, L0..L6, in any unit shared
	// by all levels (bytes serve when entries are alike in size).
	Keys [NumLevels]float64
	// L0Runs is how many L0 tables a lookup may consult: L0 sublevels each
	// hold a sorted run, and a point lookup checks one table per sublevel
	// that covers its key. Values below 1 count as 1.
	L0Runs float64
	// SkipL6 is the share, from 0 to 1, of absent lookups that do not
	// read L6's filters: DB.Get, and SeekPrefixGE without
	// IterOptions.UseL6Filters (Pebble reads L6's filters only when an
	// iterator asks). The fit counts L6's tables read in vain only for
	// the others, and at 1 gives L6 NoFilter, so a store whose absent
	// lookups are Gets spends its budget only where Gets read filters. The
	// zero value counts every lookup on every level, as for prefix seeks
	// with L6 filters; ModelLevelShape and MeasuredLevelShape leave it 0.
	SkipL6 float64
}

// NoFilter is the budget LevelBudgets gives a level whose filters no
// lookup reads (L6 when LevelShape.SkipL6 is 1): the setters leave a level
// of budget NoFilter without a filter, and RegisterPolicies registers
// nothing for it. It is no policy's budget: NewPolicy panics on it.
const NoFilter = pebblecore.NoFilter

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
	return LevelShape(pebblecore.ModelShape(o.Experimental.LevelMultiplier, o.L0CompactionThreshold,
		float64(o.MemTableSize), float64(max(o.LBaseMaxBytes, 1))))
}

// l0Model returns how full opts let L0 get: L0CompactionThreshold
// sublevels of about MemTableSize bytes each, Pebble's defaults for unset
// fields; opts is not modified.
func l0Model(opts *pebble.Options) (runs, runBytes float64) {
	o := opts.Clone()
	o.Filters = nil // as in ModelLevelShape
	o.EnsureDefaults()
	return float64(o.L0CompactionThreshold), float64(o.MemTableSize)
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
//
// With shape.SkipL6 over 0, L6's tables count only for the lookups that
// read its filters, and a level may get NoFilter where no filter the
// budget affords reads fewer tables in vain (in practice L6, when most
// absent lookups are Gets); at SkipL6 1, L6 gets NoFilter and the levels
// above it all the average pays for, up to 32 bits per key each (so the
// tree may spend well under the average), or, for an average of 32 or
// more, that average rounded down to a half bit, as every level gets
// without SkipL6. A level without keys never takes NoFilter from the
// level below it.
// It panics unless MinBitsPerKey <= avgBitsPerKey <= MaxBitsPerKey and
// 0 <= shape.SkipL6 <= 1.
func LevelBudgets(shape LevelShape, avgBitsPerKey float64) [NumLevels]float64 {
	return pebblecore.LevelBudgets("tablefilter", pebblecore.LevelShape(shape), avgBitsPerKey)
}

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
// IterOptions.UseL6Filters. A store whose absent lookups are mostly Gets
// should say so, and fit its budgets with LevelShape.SkipL6:
//
//	shape := tablefilter.ModelLevelShape(opts)
//	shape.SkipL6 = 1 // every absent lookup is a Get: no L6 filters
//	tablefilter.SetLevelBudgets(opts, tablefilter.LevelBudgets(shape, 10))
func SetLevelPolicies(opts *pebble.Options, avgBitsPerKey float64) {
	SetLevelBudgets(opts, LevelBudgets(ModelLevelShape(opts), avgBitsPerKey))
	RegisterPolicies(opts, avgBitsPerKey)
}

// SetLevelBudgets sets Levels[i].FilterPolicy to NewPolicy(budgets[i]) and
// registers those policies and every budget LevelBudgets can return (half
// bits from MinBitsPerKey to MaxBitsPerKey). A level whose budget is
// NoFilter gets pebble.NoFilterPolicy: its new tables carry no filter,
// and every lookup reads them (a nil policy would inherit the level
// above's). It panics on an invalid budget, as NewPolicy does, before
// writing anything into opts.
func SetLevelBudgets(opts *pebble.Options, budgets [NumLevels]float64) {
	setLevelBudgets(opts, budgets, codec.FormatVersion)
}

// LevelBudgetsV4 is LevelBudgets for filters written by NewV4Policy: the
// same search over the same grid, under format version 4's planned rate
// (codec.PlannedFPR with Options.Version 4). Version 4 plans a lower rate
// than version 3 at every budget of the grid, so the small budget the
// optimum leaves the bottom level (which holds the bulk of the keys)
// costs fewer tables read in vain. Set the result with SetLevelBudgetsV4:
// budgets fitted to one version's rate are no optimum for another's, and
// the fit counts on every level writing version 4.
func LevelBudgetsV4(shape LevelShape, avgBitsPerKey float64) [NumLevels]float64 {
	return pebblecore.VersionBudgets("tablefilter", pebblecore.LevelShape(shape), avgBitsPerKey, codec.NewestVersion)
}

// SetLevelPoliciesV4 is SetLevelPolicies writing format version 4 on
// every level: the budgets are LevelBudgetsV4(ModelLevelShape(opts),
// avgBitsPerKey), set with SetLevelBudgetsV4, which registers every
// writer's name of every budget either version's fit can choose, and
// avgBitsPerKey's names besides, so a store reopened under the version-3
// setters, or under another average, reads every table with its filter.
// It panics, writing nothing, unless MinBitsPerKey <= avgBitsPerKey <=
// MaxBitsPerKey.
func SetLevelPoliciesV4(opts *pebble.Options, avgBitsPerKey float64) {
	SetLevelBudgetsV4(opts, LevelBudgetsV4(ModelLevelShape(opts), avgBitsPerKey))
	RegisterPolicies(opts, avgBitsPerKey)
}

// SetLevelBudgetsV4 is SetLevelBudgets writing format version 4 on every
// level: Levels[i].FilterPolicy becomes NewV4Policy(budgets[i]). It
// registers what SetLevelBudgets does, every writer's name for every
// budget LevelBudgets and LevelBudgetsV4 can return, so a store reopened
// under either setter still reads every table with its filter. Only a
// reader of this release reads version-4 blocks (NewV4Policy). A level
// whose budget is NoFilter gets pebble.NoFilterPolicy, as in
// SetLevelBudgets. It panics on an invalid budget before writing anything
// into opts.
func SetLevelBudgetsV4(opts *pebble.Options, budgets [NumLevels]float64) {
	setLevelBudgets(opts, budgets, codec.NewestVersion)
}

// setLevelBudgets sets every level's policy to the one writing format
// version at its budget, and registers what SetLevelBudgets registers.
func setLevelBudgets(opts *pebble.Options, budgets [NumLevels]float64, version int) {
	policies, filtered := pebblecore.FilteredPolicies("tablefilter", budgets, version) // all checked before opts changes
	for l, p := range policies {
		opts.Levels[l].FilterPolicy = levelPolicy(p, filtered[l])
	}
	RegisterPolicies(opts, budgets[:]...)
	RegisterPolicies(opts, pebblecore.RegisteredBudgets()...)
}

// levelPolicy is what a setter writes into a level's options: the policy,
// or pebble.NoFilterPolicy for a level of budget NoFilter.
func levelPolicy(p pebblecore.Policy, filtered bool) pebble.FilterPolicy {
	if !filtered {
		return pebble.NoFilterPolicy
	}
	return Policy{p}
}
