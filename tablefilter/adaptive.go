package tablefilter

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// AdaptiveBudgets is the handle of a self-tuning setup (SetAdaptiveBudgets):
// per-level budgets that follow the live tree, for a store that should not
// be measured, closed and reopened to get them.
//
// Pebble asks a level's filter policy for a writer for every table it
// writes, so the policy SetAdaptiveBudgets installs on each level hands out
// writers at that level's current budget, and a refit changes the budgets
// of the tables written from then on. A refit fits LevelBudgets to the
// live tree, and each level's filters spend what the fit plans, so that
// the live tables' filters spend the average asked:
//   - the shape is the distinct keys of each level's filters (from
//     DB.SSTables with properties; L0's sublevels from DB.Metrics);
//   - the fit's budgets, points of the half-bit grid, name the tables;
//     each level's target, what its filters are to spend, is its budget
//     scaled so that the whole tree spends the average over its live
//     keys, with L0 counted at half its share of the keys at its fullest
//     (L0CompactionThreshold sublevels of the size L0's sublevels were
//     last measured at, of MemTableSize until then): L0 fills and drains,
//     so the tree is over the average while L0 is fuller than that and
//     under it while L0 is emptier; and L0's target, to which the fit
//     gives a wide budget (a lookup meets every sublevel), is held close
//     enough to the levels below that this swing stays within 1% of the
//     average, as long as L0 holds no more than that many sublevels;
//   - each level owes what its live tables spend under its target
//     (tables written under an earlier allocation, tables a compaction
//     moved down without rewriting them, small tables' filters rounded
//     to whole lines), measured at each refit and updated by each filter
//     written, and its next writers ask the codec for the target plus
//     that debt spread over a table's keys, within a bounded swing.
//
// Keys are counted as the distinct keys a filter holds (the versions of an
// MVCC key count once): this process's writers record them, matched to
// the table by its FilterSize and point-entry count; for a table written
// before the store was opened, its point entries, but no more than its
// filter's bits over its budget.
//
// Refits follow the store's flushes and compactions: the event listener
// SetAdaptiveBudgets installs marks a refit as due on each FlushEnd,
// CompactionEnd and TableIngested, and a goroutine started by Attach
// measures the store and refits, at most once per second. The listener
// never calls the store (Pebble raises those events holding its mutex) and
// never waits, so a compaction is never held up by a refit. The handle
// needs the *pebble.DB to measure it, which exists only after Open: hand
// it over with Attach, and Detach before closing the store. Until Attach
// the levels write the budgets of the model shape (SetLevelPolicies', or
// SetLevelPoliciesV4' under SetAdaptiveBudgetsV4).
//
// It is safe for concurrent use.
type AdaptiveBudgets struct {
	core *pebblecore.Adaptive
}

// SetAdaptiveBudgets installs a self-tuning setup in opts, for a tree that
// spends about avgBitsPerKey bits per key on filters: each level of
// opts.Levels gets a policy whose budget follows the live tree (see
// AdaptiveBudgets), Filters registers every name those policies can write
// (the half-bit grid from MinBitsPerKey to MaxBitsPerKey, in every layout,
// as SetLevelBudgets does), and opts.EventListener gets the listener that
// triggers refits, teed with any listener opts already had. It is the one
// call a store needs on every Open; the same call on a reopen reads every
// table with its filter, and so do SetLevelPolicies, SetAdaptiveBudgetsV4
// and SetLevelPoliciesV4, since each table's filter name is a registered
// budget.
//
//	tuned := tablefilter.SetAdaptiveBudgets(opts, 10)
//	db, err := pebble.Open(dir, opts)
//	...
//	tuned.Attach(db)
//	defer db.Close()
//	defer tuned.Detach()
//
// A table's filter name (Properties.FilterPolicyName) records the level's
// budget when the table was closed: a table under way when a refit changed
// its level's budget carries the new budget's name over a block built to
// the old one. Pebble asks for the name twice as it closes a table, for
// the metaindex key and for the properties, so a refit between the two
// calls leaves them naming two budgets; Pebble finds the block by the
// metaindex key. All are registered names, and every lsmcuckoo policy
// reads every lsmcuckoo block from the block's own header, so no table
// loses its filter.
//
// Only Levels[i].FilterPolicy, Filters and EventListener are written. It
// panics, writing nothing, unless MinBitsPerKey <= avgBitsPerKey <=
// MaxBitsPerKey and every option is valid.
//
// options adjust the setup: SkipL6 for a store whose absent lookups are
// Gets, which never read L6's filters.
func SetAdaptiveBudgets(opts *pebble.Options, avgBitsPerKey float64, options ...AdaptiveOption) *AdaptiveBudgets {
	return setAdaptive(opts, avgBitsPerKey, codec.FormatVersion, options)
}

// SetAdaptiveBudgetsV4 is SetAdaptiveBudgets writing format version 4 on
// every level (NewV4Policy's filters and names, "lsmcuckoo.v4.bpk=<bits>"),
// with every fit, the first from ModelLevelShape(opts) and each refit's,
// made under version 4's planned rate as LevelBudgetsV4 makes it: budgets
// fitted to one version's rate curve are no optimum for another's. It
// registers what SetAdaptiveBudgets does, every writer's name of every
// budget a fit can choose, so a store moved between SetAdaptiveBudgets,
// SetAdaptiveBudgetsV4 and the SetLevelPolicies setters of either version
// reads every table with its filter. Only a reader of this release reads
// version-4 blocks.
func SetAdaptiveBudgetsV4(opts *pebble.Options, avgBitsPerKey float64, options ...AdaptiveOption) *AdaptiveBudgets {
	return setAdaptive(opts, avgBitsPerKey, codec.NewestVersion, options)
}

// setAdaptive installs the self-tuning setup writing format version.
func setAdaptive(opts *pebble.Options, avgBitsPerKey float64, version int, options []AdaptiveOption) *AdaptiveBudgets {
	var cfg adaptiveConfig
	for _, o := range options {
		o(&cfg)
	}
	model := ModelLevelShape(opts)
	model.SkipL6 = cfg.skipL6
	runs, runBytes := l0Model(opts)
	a := &AdaptiveBudgets{pebblecore.NewAdaptive("tablefilter", avgBitsPerKey,
		pebblecore.LevelShape(model), version, runs, runBytes)} // panics before opts changes
	for l := range opts.Levels {
		opts.Levels[l].FilterPolicy = adaptivePolicy{a.core.Tuner, l}
		if a.core.Unfiltered(l) {
			opts.Levels[l].FilterPolicy = pebble.NoFilterPolicy
		}
	}
	RegisterPolicies(opts, a.core.Registered()...)
	due := func() { a.core.Notify() }
	listener := pebble.EventListener{
		FlushEnd:      func(pebble.FlushInfo) { due() },
		CompactionEnd: func(pebble.CompactionInfo) { due() },
		TableIngested: func(pebble.TableIngestInfo) { due() },
	}
	if opts.EventListener != nil {
		listener = pebble.TeeEventListener(*opts.EventListener, listener)
	}
	opts.EventListener = &listener
	return a
}

// An AdaptiveOption adjusts the self-tuning setup of SetAdaptiveBudgets
// and SetAdaptiveBudgetsV4.
type AdaptiveOption func(*adaptiveConfig)

type adaptiveConfig struct {
	skipL6 float64
}

// SkipL6 tells the self-tuning setup that share (0 to 1) of the store's
// absent lookups skip L6's filters, as LevelShape.SkipL6 tells
// LevelBudgets: DB.Get never reads them, nor does SeekPrefixGE without
// IterOptions.UseL6Filters. Every fit, the model's and each refit's, then
// counts L6's tables read in vain only for the other lookups. Without it
// (share 0) every lookup is counted on L6, as for prefix seeks with L6
// filters.
//
// Between 0 and 1 every level keeps a filter (a level's policy cannot drop
// its filter while the store runs). At 1, L6 gets pebble.NoFilterPolicy,
// so tables compacted into L6 carry no filter, and the average asked is
// still over every live key, L6's counted at its tables' point entries:
// its bytes go to L0-L5, the levels Gets read, as LevelBudgets(shape with
// SkipL6 1, avg) gives them, each level's filters spending at most 32 bits
// per key (the grid's top, where a further bit saves next to nothing). A
// tree whose L6 holds most keys then spends well under the average asked
// (LiveBitsPerKey counts L6's keys and says by how much), and the tuner
// aims at what the levels with filters can spend rather than piling up a
// debt it could never pay. Pass the same share on every open: L6's tables
// written at 1 keep no filter until compactions rewrite them under a
// smaller share. It panics, in the setup, unless 0 <= share <= 1.
func SkipL6(share float64) AdaptiveOption {
	return func(c *adaptiveConfig) { c.skipL6 = share }
}

// Attach starts refitting from db, the store opened with the options
// SetAdaptiveBudgets set: it refits once at once (so a reopened store
// writes budgets fitted to its own tree from its first flush), then after
// flushes and compactions. Attaching another store replaces the first.
func (a *AdaptiveBudgets) Attach(db *pebble.DB) { a.core.Attach(measureV2(db)) }

// Detach stops the refits and waits for one under way; call it before
// closing the store. The levels keep their last budgets.
func (a *AdaptiveBudgets) Detach() { a.core.Detach() }

// Refit measures db and refits now, on the caller's goroutine, whether or
// not a store is attached; on an error (db's properties could not be
// read) the budgets stay as they were.
func (a *AdaptiveBudgets) Refit(db *pebble.DB) error { return a.core.Refit(measureV2(db)) }

// Err returns the error of the last refit, nil if it succeeded.
func (a *AdaptiveBudgets) Err() error { return a.core.Err() }

// Budgets returns every level's current budget.
func (a *AdaptiveBudgets) Budgets() [NumLevels]float64 { return a.core.Budgets() }

// LiveBitsPerKey returns the bits per key the lsmcuckoo filters of db's
// live tables spend together, counted as a refit counts them, and the
// keys counted (0 for a store without such tables). Under SkipL6(1) the
// keys of L6's tables, which carry no filter, count too, at their point
// entries: the average is over the whole tree.
func (a *AdaptiveBudgets) LiveBitsPerKey(db *pebble.DB) (float64, uint64, error) {
	return a.core.LiveBitsPerKey(measureV2(db))
}

// measureV2 measures db: its live tables with their properties, and its
// shape from DB.Metrics.
func measureV2(db *pebble.DB) pebblecore.Measure {
	return pebblecore.MeasureStore(
		func() ([][]pebble.SSTableInfo, error) { return db.SSTables(pebble.WithProperties()) },
		tableProps,
		func() pebblecore.LevelShape { return pebblecore.LevelShape(MeasuredLevelShape(db.Metrics())) })
}

// tableProps reads what a refit needs of one of measureV2's tables.
func tableProps(t pebble.SSTableInfo) pebblecore.TableProps {
	tp := pebblecore.TableProps{Virtual: t.Virtual, HasProperties: t.Properties != nil}
	if p := t.Properties; p != nil {
		tp.FilterPolicyName, tp.FilterSize = p.FilterPolicyName, p.FilterSize
		tp.NumEntries, tp.NumRangeDeletions = p.NumEntries, p.NumRangeDeletions
	}
	return tp
}

// adaptivePolicy is one level's policy of a self-tuning setup: a writer at
// the level's current budget, under that budget's name.
type adaptivePolicy struct {
	tuner *pebblecore.Tuner
	level int
}

func (p adaptivePolicy) Name() string { return p.tuner.Policy(p.level).Name() }

func (p adaptivePolicy) MayContain(ftype pebble.FilterType, filter, key []byte) bool {
	return Policy{p.tuner.Policy(p.level)}.MayContain(ftype, filter, key)
}

func (p adaptivePolicy) NewWriter(ftype pebble.FilterType) pebble.FilterWriter {
	return p.tuner.NewWriter(p.level)
}
