package pebblev1

import (
	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// NumLevels is Pebble's level count, L0 to L6: the length of
// pebble.Metrics.Levels and of the budgets LevelBudgets returns.
const NumLevels = len(pebble.Metrics{}.Levels)

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
func ModelLevelShape(opts *pebble.Options) LevelShape {
	// Pebble v1's EnsureDefaults writes into the levels' shared slice and
	// the event listener, and wraps a nil FS in a disk-health checker that
	// runs a goroutine: take the defaults from options of our own.
	d := (&pebble.Options{FS: vfs.Default}).EnsureDefaults()
	mult, lbase := opts.Experimental.LevelMultiplier, opts.LBaseMaxBytes
	runs, mem := l0Model(opts, d)
	if mult <= 0 {
		mult = d.Experimental.LevelMultiplier
	}
	if lbase <= 0 {
		lbase = d.LBaseMaxBytes
	}
	return LevelShape(pebblecore.ModelShape(mult, runs, float64(mem), float64(lbase)))
}

// l0Model returns how full opts let L0 get: L0CompactionThreshold
// sublevels of about MemTableSize bytes each, d's (Pebble's defaults) for
// unset fields.
func l0Model(opts, d *pebble.Options) (runs int, mem uint64) {
	runs, mem = opts.L0CompactionThreshold, opts.MemTableSize
	if runs <= 0 {
		runs = d.L0CompactionThreshold
	}
	if mem <= 0 {
		mem = d.MemTableSize
	}
	return runs, mem
}

// MeasuredLevelShape is the shape of a live store, from DB.Metrics: the
// bytes of each level's tables (Size and VirtualSize) and L0's sublevel
// count.
func MeasuredLevelShape(m *pebble.Metrics) LevelShape {
	var s LevelShape
	for l := range s.Keys {
		s.Keys[l] = float64(m.Levels[l].Size) + float64(m.Levels[l].VirtualSize)
	}
	s.L0Runs = float64(m.Levels[0].Sublevels)
	return s
}

// LevelBudgets returns the bits per key for L0..L6 that minimise the
// expected number of tables a lookup for an absent key reads in vain,
// while the key-weighted average stays at or just under avgBitsPerKey: the
// allocation of Monkey (Dayan, Athanassoulis & Idreos, "Monkey: Optimal
// Navigable Key-Value Store", SIGMOD 2017) for a cuckoo filter's rate
// curve. It is package tablefilter's LevelBudgets, the same allocation on
// the same shape: the small upper levels get wide fingerprints, the bottom
// level slightly fewer bits than the average, and every budget is a
// half-bit step from MinBitsPerKey to MaxBitsPerKey, a name
// SetLevelBudgets registers. With shape.SkipL6 over 0 it counts L6's
// tables only for the lookups that read L6's filters, and may give a
// level NoFilter (L6 at SkipL6 1), as package tablefilter's does. It
// panics unless MinBitsPerKey <= avgBitsPerKey <= MaxBitsPerKey and 0 <=
// shape.SkipL6 <= 1.
func LevelBudgets(shape LevelShape, avgBitsPerKey float64) [NumLevels]float64 {
	return pebblecore.LevelBudgets("pebblev1", pebblecore.LevelShape(shape), avgBitsPerKey)
}

// SetLevelPolicies gives each level of opts its own lsmcuckoo policy so
// that the tree as a whole spends about avgBitsPerKey bits per key on
// filters, more on the small upper levels: the budgets are
// LevelBudgets(ModelLevelShape(opts), avgBitsPerKey), so set
// LevelMultiplier, LBaseMaxBytes, MemTableSize and L0CompactionThreshold
// first. See SetLevelBudgets for what it writes. It registers the policy
// of every budget it can ever choose besides avgBitsPerKey itself, so a
// store reopened under another average, or after the tree changed shape,
// still reads every table with its filter.
//
// Pebble never restores filter policies from the OPTIONS file: run this
// (or SetLevelBudgets) on every Open. DB.Get skips L6's filters, so the
// bottom level's budget only pays for SeekPrefixGE with
// IterOptions.UseL6Filters: a store whose absent lookups are mostly Gets
// should fit its budgets with LevelShape.SkipL6 and set them with
// SetLevelBudgets.
func SetLevelPolicies(opts *pebble.Options, avgBitsPerKey float64) {
	SetLevelBudgets(opts, LevelBudgets(ModelLevelShape(opts), avgBitsPerKey))
	RegisterPolicies(opts, avgBitsPerKey)
}

// SetLevelBudgets sets the FilterPolicy of levels L0..L6 to
// NewPolicy(budgets[i]) and registers those policies and every budget
// LevelBudgets can return. A level whose budget is NoFilter gets a nil
// FilterPolicy, Pebble v1's "no filter": its new tables carry none, and
// every lookup reads them. It panics on an invalid budget, as NewPolicy
// does, before writing anything into opts.
//
// Pebble v1's Options.Levels is a slice whose missing entries copy the
// last one (with the target file size doubled per level), so a shorter
// slice is first extended with exactly those entries: every other level
// option stays what Pebble would have used. The slice is a new one, never
// the one opts held, which a store opened with opts keeps reading.
//
// To fit the budgets to a live tree and reopen with them:
//
//	b := pebblev1.LevelBudgets(pebblev1.MeasuredLevelShape(db.Metrics()), 10)
//	pebblev1.SetLevelBudgets(opts, b)
func SetLevelBudgets(opts *pebble.Options, budgets [NumLevels]float64) {
	setLevelBudgets(opts, budgets, codec.FormatVersion)
}

// LevelBudgetsV4 is LevelBudgets for filters written by NewV4Policy: the
// same search over the same grid, under format version 4's planned rate
// (codec.PlannedFPR with Options.Version 4), package tablefilter's
// LevelBudgetsV4. Set the result with SetLevelBudgetsV4: budgets fitted to
// one version's rate are no optimum for another's.
func LevelBudgetsV4(shape LevelShape, avgBitsPerKey float64) [NumLevels]float64 {
	return pebblecore.VersionBudgets("pebblev1", pebblecore.LevelShape(shape), avgBitsPerKey, codec.NewestVersion)
}

// SetLevelPoliciesV4 is SetLevelPolicies writing format version 4 on
// every level: the budgets are LevelBudgetsV4(ModelLevelShape(opts),
// avgBitsPerKey), set with SetLevelBudgetsV4, and avgBitsPerKey's names
// are registered besides. It panics, writing nothing, unless
// MinBitsPerKey <= avgBitsPerKey <= MaxBitsPerKey.
func SetLevelPoliciesV4(opts *pebble.Options, avgBitsPerKey float64) {
	SetLevelBudgetsV4(opts, LevelBudgetsV4(ModelLevelShape(opts), avgBitsPerKey))
	RegisterPolicies(opts, avgBitsPerKey)
}

// SetLevelBudgetsV4 is SetLevelBudgets writing format version 4 on every
// level: the FilterPolicy of L0..L6 becomes NewV4Policy(budgets[i]), the
// slice extended as SetLevelBudgets extends it. It registers what
// SetLevelBudgets does, every writer's name for every budget LevelBudgets
// and LevelBudgetsV4 can return, so a store reopened under either setter
// still reads every table with its filter. It panics on an invalid budget
// before writing anything into opts.
func SetLevelBudgetsV4(opts *pebble.Options, budgets [NumLevels]float64) {
	setLevelBudgets(opts, budgets, codec.NewestVersion)
}

// setLevelBudgets sets the policy of L0..L6 to the one writing format
// version at its budget, and registers what SetLevelBudgets registers.
func setLevelBudgets(opts *pebble.Options, budgets [NumLevels]float64, version int) {
	policies, filtered := pebblecore.FilteredPolicies("pebblev1", budgets, version) // all checked before opts changes
	levels := levelsThroughL6(opts.Levels)
	for l, p := range policies {
		levels[l].FilterPolicy = nil
		if filtered[l] {
			levels[l].FilterPolicy = Policy{p}
		}
	}
	opts.Levels = levels
	RegisterPolicies(opts, budgets[:]...)
	RegisterPolicies(opts, pebblecore.RegisteredBudgets()...)
}

// levelsThroughL6 returns a new slice of at least NumLevels level options:
// old's entries, then for each missing level what Pebble v1's
// Options.Level derives from the last entry (the last entry, its defaults
// applied, with the target file size doubled once per level past it). An
// empty slice stands for the one default entry Pebble v1 creates.
func levelsThroughL6(old []pebble.LevelOptions) []pebble.LevelOptions {
	if len(old) == 0 {
		old = []pebble.LevelOptions{{}}
	}
	levels := make([]pebble.LevelOptions, max(len(old), NumLevels))
	copy(levels, old)
	last := old[len(old)-1]
	last.EnsureDefaults()
	for l := len(old); l < NumLevels; l++ {
		last.TargetFileSize *= 2
		levels[l] = last
	}
	return levels
}
