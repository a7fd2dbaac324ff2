package pebblecore

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// Tuner holds the budgets of a self-tuning setup, refitted to the live
// tree (Refit) so that the tree as it stands spends the average the user
// asked for. Each level has two figures:
//   - its budget, a point of the registered grid: the allocation
//     LevelBudgets fits to the live shape, and the name its tables carry
//     (Pebble reads a table whose filter name is not registered without
//     its filter, so a name must be a grid point);
//   - its target, the real-valued bits per key its filters are to spend:
//     the budgets scaled so that, over the live keys, they spend the
//     average asked exactly (targetsFor).
//
// A filter's size is a step function of its budget (whole 64-byte lines
// and a trailer: on a table of a few hundred keys a line is two bits per
// key), so a level does not spend its target by asking the codec for it.
// Each level's live tables are made to spend it by a debt: what the
// level's live tables spend under their target (over it, a negative
// debt). Every refit sets it from the tables themselves, so it covers
// tables written under an earlier allocation and tables a compaction
// moved in without rewriting them (which keep the filter of the level
// they were written for); each filter written adds what it spent under
// its target, until the next refit measures again. The next writer of the
// level asks for its target plus the debt over a table's keys: error
// diffusion, so what a level spends tracks its target within about one
// table's step, whatever the table sizes and the codec's rounding. Each
// level pays its own debt, so that the debt of a level whose tables a
// compaction will soon carry down is not paid on the bottom level, whose
// tables stay.
//
// A share of the absent lookups may skip L6's filters (SkipL6: Gets,
// which Pebble never lets read them). The fit then counts L6's tables
// read in vain only for the others (LevelShape.SkipL6), and every level
// keeps a filter, since a level's policy cannot drop its filter while the
// store runs; at share 1 L6 gets NoFilter, its tables carry no filter,
// and the average asked is still over every live key, L6's included (see
// targetsFor): the levels Gets read get the asked average's bytes, up to
// the grid's top each, so the tree may spend less than asked.
//
// Budgets and targets are read without locks on every table a level
// writes; refits are serialised by a mutex that no writer takes.
type Tuner struct {
	asked   float64
	skipL6  float64                  // the share of absent lookups that skip L6's filters; set before use
	version int                      // the codec format version every level writes, and whose rate the fit plans for
	budgets [NumLevels]atomic.Uint64 // math.Float64bits of each level's budget: its tables' name
	targets [NumLevels]atomic.Uint64 // math.Float64bits of each level's target bits per key
	debts   debts

	ledgerMu sync.Mutex
	ledger   map[ledgerKey]uint64 // filters written, by (block bytes, keys added)
	ring     []ledgerKey          // the ledger's keys, oldest overwritten first
	next     int

	mu         sync.Mutex // serialises refits
	l0Runs     float64    // L0's sublevels at its fullest (ModelL0); under mu
	l0RunBytes float64    // the bytes of one L0 sublevel; under mu
}

// debts is what each level's live filters owe (see Tuner): their
// target's bits less what they spent, and each level's distinct keys per
// table, over which a writer spreads the debt.
type debts struct {
	mu        sync.Mutex
	owed      [NumLevels]float64
	bound     [NumLevels]float64 // the level's measured target bits times maxDebtShare
	tableKeys [NumLevels]float64
}

// maxDebtShare bounds a level's debt to that share of its live filters'
// target bits, so that a measurement gone wrong (tables Pebble never
// reported) cannot hold the budgets at their bound for long, and a level
// whose tables cannot meet their targets (tables of a handful of keys,
// whose trailer alone is over them) does not pile up a debt that would
// hold every later table at the bound.
const maxDebtShare = 0.25

// debtSwing bounds the budget a writer asks for to within this factor of
// its level's target either way: a debt is paid over several tables
// rather than by one filter far off the level's rate.
const debtSwing = 1.25

// writeBudget returns the budget a writer of level asks the codec for:
// the target plus the level's debt over a table's keys, within debtSwing
// of the target and within the valid range.
func (t *Tuner) writeBudget(level int, target float64) float64 {
	d := &t.debts
	d.mu.Lock()
	owed, keys := d.owed[level], d.tableKeys[level]
	d.mu.Unlock()
	b := target
	if keys > 0 {
		b += owed / keys
	}
	lo := max(MinBitsPerKey, target/debtSwing)
	hi := min(MaxBitsPerKey, target*debtSwing)
	return max(lo, min(hi, b))
}

// spent records that a filter of level, written for target, spent bits
// on distinct keys.
func (t *Tuner) spent(level int, target float64, distinct, bits uint64) {
	if distinct == 0 {
		return
	}
	d := &t.debts
	d.mu.Lock()
	defer d.mu.Unlock()
	k := float64(distinct)
	if d.tableKeys[level] == 0 {
		d.tableKeys[level] = k
	} else {
		d.tableKeys[level] += (k - d.tableKeys[level]) / 4
	}
	// A level the last refit found empty still diffuses its own
	// filters' rounding, over a few tables.
	bound := max(d.bound[level], 4*target*d.tableKeys[level])
	d.owed[level] = max(-bound, min(bound, d.owed[level]+target*k-float64(bits)))
}

// measured sets the levels' debts from the live tables whose filters
// this tuner wrote: want[l] is what level l's would spend at its target,
// spent what they spend.
func (t *Tuner) measured(want, spent [NumLevels]float64) {
	d := &t.debts
	d.mu.Lock()
	defer d.mu.Unlock()
	for l := range want {
		d.bound[l] = maxDebtShare * want[l]
		d.owed[l] = max(-d.bound[l], min(d.bound[l], want[l]-spent[l]))
	}
}

// ledgerKey identifies a written filter by what the table's properties
// also record: the block's length (FilterSize) and the keys Pebble handed
// the filter (the table's point entries, NumEntries minus
// NumRangeDeletions).
type ledgerKey struct{ bytes, added uint64 }

// ledgerSize bounds the ledger: a filter whose table is live is looked up
// at every refit, and one whose table was abandoned (a failed compaction)
// or compacted away is forgotten as newer ones arrive.
const ledgerSize = 1 << 14

// NewTuner returns a tuner for the average asked, starting at budgets
// (points of the registered grid), writing the default format version.
// It panics, naming pkg, unless asked is a valid budget.
func NewTuner(pkg string, asked float64, budgets [NumLevels]float64) *Tuner {
	return NewVersionTuner(pkg, asked, budgets, codec.FormatVersion)
}

// NewVersionTuner is NewTuner for filters of format version: its writers
// write that version, under that version's names, and its refits fit
// budgets under that version's rate (VersionBudgets), since budgets fitted
// to one version's rate curve are no optimum for another's.
func NewVersionTuner(pkg string, asked float64, budgets [NumLevels]float64, version int) *Tuner {
	CheckBitsPerKey(pkg, asked)
	t := &Tuner{asked: asked, version: version, ledger: make(map[ledgerKey]uint64), ring: make([]ledgerKey, ledgerSize)}
	for l, b := range budgets {
		if b != NoFilter {
			CheckBitsPerKey(pkg, b)
		}
		t.budgets[l].Store(math.Float64bits(b))
		t.targets[l].Store(math.Float64bits(b))
	}
	return t
}

// Asked returns the average the tuner keeps to.
func (t *Tuner) Asked() float64 { return t.asked }

// SkipL6 returns the share of absent lookups the tuner counts as skipping
// L6's filters (LevelShape.SkipL6).
func (t *Tuner) SkipL6() float64 { return t.skipL6 }

// Unfiltered reports whether level gets no filter: L6, when every absent
// lookup skips its filters. No writer is asked for on such a level.
func (t *Tuner) Unfiltered(level int) bool { return t.skipL6 == 1 && level == NumLevels-1 }

// tunedBudgets is the fit of a tuner whose levels all write filters but
// the unconsulted one (L6 at SkipL6 1): VersionBudgets of shape, whose
// grid holds NoFilter only at SkipL6 1, where it frees L6's bytes for the
// levels above. A level's tuned policy writes a filter whatever its
// budget, so a consulted level the fit leaves without one (an average too
// small to give every level a filter) takes the grid's smallest budget.
// It panics, naming pkg, unless avg is a valid budget and 0 <= SkipL6 <= 1.
func tunedBudgets(pkg string, shape LevelShape, avg float64, version int) [NumLevels]float64 {
	if shape.SkipL6 < 1 {
		return versionBudgets(pkg, shape, avg, version, false)
	}
	b := VersionBudgets(pkg, shape, avg, version)
	for l := range NumLevels - 1 {
		if b[l] == NoFilter {
			b[l] = BudgetMin
		}
	}
	return b
}

// Version returns the codec format version the tuner's writers write.
func (t *Tuner) Version() int { return t.version }

// Budget returns level's current budget.
func (t *Tuner) Budget(level int) float64 {
	return math.Float64frombits(t.budgets[level].Load())
}

// Target returns the bits per key level's filters are to spend now.
func (t *Tuner) Target(level int) float64 {
	return math.Float64frombits(t.targets[level].Load())
}

// Budgets returns every level's current budget.
func (t *Tuner) Budgets() [NumLevels]float64 {
	var b [NumLevels]float64
	for l := range b {
		b[l] = t.Budget(l)
	}
	return b
}

// Policy returns the policy of level's current budget, in the tuner's
// format version: the name a table of that level written now carries.
func (t *Tuner) Policy(level int) Policy { return New(t.Budget(level), t.version, false) }

// NewWriter returns a writer for one table of level, at the level's
// target plus what the level owes (see Tuner), that records the filter it
// writes in the tuner's ledger and what it spent in the level's debt.
func (t *Tuner) NewWriter(level int) *TunedWriter {
	target := t.Target(level)
	return &TunedWriter{w: New(t.writeBudget(level, target), t.version, false).NewWriter(), t: t, level: level, target: target}
}

// TunedWriter is a Writer that reports each filter it finishes to its
// tuner.
type TunedWriter struct {
	w      *Writer
	t      *Tuner
	added  uint64
	level  int
	target float64
}

// AddKey records key; the slice is not retained.
func (w *TunedWriter) AddKey(key []byte) {
	w.added++
	w.w.AddKey(key)
}

// Finish appends the filter block to dst, records it, and resets the
// writer.
func (w *TunedWriter) Finish(dst []byte) []byte {
	n := len(dst)
	dst = w.w.Finish(dst)
	bytes, distinct := uint64(len(dst)-n), uint64(w.w.b.Stats().Keys)
	w.t.record(ledgerKey{bytes, w.added}, distinct)
	w.t.spent(w.level, w.target, distinct, 8*bytes)
	w.added = 0
	return dst
}

func (t *Tuner) record(k ledgerKey, distinct uint64) {
	t.ledgerMu.Lock()
	defer t.ledgerMu.Unlock()
	if old := t.ring[t.next]; old != (ledgerKey{}) {
		delete(t.ledger, old)
	}
	t.ring[t.next] = k
	t.next = (t.next + 1) % len(t.ring)
	t.ledger[k] = distinct
}

// targetsFor scales budgets, a grid allocation, so that they spend avg
// bits per key over the whole tree of shape, L0 counted at half l0Full
// (its share of the keys at its fullest) rather than at the keys it holds
// now; over L0 alone while nothing lies below it, and unscaled for
// an empty shape. The grid seldom spends an average exactly, and a
// level's target need not be a grid point.
//
// A populated level of budget NoFilter (L6 when every absent lookup skips
// its filters) keeps target NoFilter; its keys still count in the
// average, so the bytes avg pays for over the whole tree go to the levels
// with filters (as the fit gave them). Those levels can take at most
// their grid's top (BudgetMax, or their budget if higher) each, so the
// aim is the lesser of the two: the tree then spends under avg, and no
// level's target, nor its debt, chases bytes the grid would not spend.
// The sums below then run over the levels with filters alone.
//
// L0's keys come and go: flushes fill it and a compaction carries them
// into Lbase, and the fit gives its tables wide budgets (a lookup meets
// every L0 sublevel). Counting L0 at the keys it holds now would lower
// every level's target while L0 is full, for tables that outlive L0's,
// and leave the tree under the average once L0 drains; leaving it out
// would put the tree over the average by L0's whole surplus while L0 is
// full. Counted at half its fullest share, L0's surplus at its fullest
// and its absence once drained put the tree over and under the average
// by the same amount: half of L0's surplus at its fullest. So L0's target
// is held at most l0Swing × avg / (half its fullest share) above the
// average target of the levels below, and L0's filling and draining move
// the tree's live average by at most l0Swing of the average asked,
// whatever the fit chose, as long as L0 is no fuller than l0Full.
func targetsFor(shape LevelShape, budgets [NumLevels]float64, avg, l0Full float64) [NumLevels]float64 {
	var below, spend, filtered, reach float64
	unfiltered := false
	for l, w := range shape.Keys {
		if l > 0 && w > 0 && !math.IsInf(w, 0) {
			below, spend = below+w, spend+w*budgets[l]
			if budgets[l] == NoFilter {
				unfiltered = true
			} else {
				filtered, reach = filtered+w, reach+w*topTarget(budgets[l])
			}
		}
	}
	scale, t0 := 1.0, budgets[0]
	switch {
	case below > 0 && spend > 0:
		share := max(0, min(maxL0Share, l0Full/2))
		w0 := below * share / (1 - share)
		if unfiltered {
			// The whole tree's bytes over the filtered keys, within reach.
			avg = min(avg*(below+w0), reach+w0*topTarget(budgets[0])) / (filtered + w0)
			below, share = filtered, w0/(filtered+w0)
		}
		scale = avg * (below + w0) / (spend + w0*budgets[0])
		t0 = budgets[0] * scale
		if share > 0 {
			// L0 at most surplus over the levels below: solve
			// w0*(spend*scale/below+surplus) + spend*scale = avg*(below+w0).
			surplus := l0Swing * avg / share
			if t0 > spend*scale/below+surplus {
				scale = (avg*(below+w0) - w0*surplus) * below / (spend * (below + w0))
				t0 = spend*scale/below + surplus
			}
		}
	case shape.Keys[0] > 0 && !math.IsInf(shape.Keys[0], 0):
		scale = avg / budgets[0] // nothing below L0: L0 alone spends the average
		t0 = avg
	}
	var out [NumLevels]float64
	for l, b := range budgets {
		if b == NoFilter {
			continue // out[l] = NoFilter
		}
		top := float64(MaxBitsPerKey)
		if unfiltered {
			top = topTarget(b)
		}
		if l == 0 {
			b = t0 / scale
		}
		out[l] = max(MinBitsPerKey, min(top, b*scale))
	}
	return out
}

// topTarget is the most a level of budget b is made to spend when the
// average asked is out of reach: the grid's top, or b if it is higher (a
// uniform allocation at an average over BudgetMax).
func topTarget(b float64) float64 { return max(BudgetMax, b) }

// l0Swing bounds what L0's coming and going moves the tree's live average
// by, as a share of the average asked (see targetsFor).
const l0Swing = 0.01

// maxL0Share bounds the share of the keys targetsFor counts L0 at.
const maxL0Share = 0.5

// ModelL0 tells the tuner how full L0 gets: runs sublevels (the store's
// L0CompactionThreshold) of about runBytes each (its memtable size, until
// a refit measures L0's sublevels). It is called before the store opens;
// a tuner never told takes L0's fullest to be L0 as each refit finds it.
func (t *Tuner) ModelL0(runs, runBytes float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.l0Runs, t.l0RunBytes = max(runs, 1), runBytes
}

// l0FullShare returns L0's share of the tree at its fullest, from shape in
// the bytes of each level's tables (as the adapters measure it): the
// modelled sublevels at the bytes of a sublevel L0 last held, or its
// share now if that is more. It is called with t.mu held.
func (t *Tuner) l0FullShare(shape LevelShape) float64 {
	var below float64
	for l, w := range shape.Keys {
		if l > 0 && w > 0 && !math.IsInf(w, 0) {
			below += w
		}
	}
	w0 := shape.Keys[0]
	if w0 <= 0 || math.IsInf(w0, 0) {
		w0 = 0
	}
	if w0 > 0 && shape.L0Runs >= 1 {
		t.l0RunBytes = w0 / shape.L0Runs
	}
	if below == 0 {
		return 0
	}
	full := max(w0, t.l0Runs*t.l0RunBytes)
	return full / (below + full)
}

// LiveTable is one live table's filter, as its properties record it.
type LiveTable struct {
	FilterBytes uint64  // Properties.FilterSize
	PointKeys   uint64  // Properties.NumEntries - NumRangeDeletions: the keys handed to the filter
	Ours        bool    // the filter's name is one FromName parses
	Budget      float64 // the budget in that name
	Level       int     // the table's level, 0 to NumLevels-1
}

// distinct returns the distinct keys in a live table's filter: the count
// its writer recorded or, for a table this process did not write (before
// a reopen), its point entries, but no more than its filter's bits over
// its budget: point entries count each MVCC version of a prefix, which
// the filter stores once.
func (t *Tuner) distinct(tb LiveTable) uint64 {
	d, _ := t.lookup(tb)
	return d
}

// lookup is distinct, and whether the tuner wrote the table's filter (its
// count is then exact).
func (t *Tuner) lookup(tb LiveTable) (distinct uint64, known bool) {
	t.ledgerMu.Lock()
	d, ok := t.ledger[ledgerKey{tb.FilterBytes, tb.PointKeys}]
	t.ledgerMu.Unlock()
	if ok {
		return d, true
	}
	if tb.Budget > 0 {
		return min(tb.PointKeys, uint64(math.Ceil(8*float64(tb.FilterBytes)/tb.Budget))), false
	}
	return tb.PointKeys, false
}

// unfilteredTable reports whether tb is a table without a filter on a
// level the tuner leaves unfiltered: its keys count in the tree the
// average is over (as its point entries: a table without a filter
// records no distinct keys), and it spends nothing.
func (t *Tuner) unfilteredTable(tb LiveTable) bool {
	return tb.FilterBytes == 0 && !tb.Ours && tb.Level >= 0 && tb.Level < NumLevels && t.Unfiltered(tb.Level)
}

// LiveAverage returns the bits per distinct key the lsmcuckoo filters of
// tables spend together, and the keys counted (0 when there are none),
// the keys of an unfiltered level's tables included (unfilteredTable).
func (t *Tuner) LiveAverage(tables []LiveTable) (bitsPerKey float64, keys uint64) {
	var bits uint64
	for _, tb := range tables {
		if t.unfilteredTable(tb) {
			keys += tb.PointKeys
		} else if tb.Ours && tb.FilterBytes > 0 {
			bits += 8 * tb.FilterBytes
			keys += t.distinct(tb)
		}
	}
	if keys == 0 {
		return 0, 0
	}
	return float64(bits) / float64(keys), keys
}

// Refit sets every level's budget, target and debt from the live tree:
// shape (whose L0Runs it keeps, and whose Keys serve only while no table
// has an lsmcuckoo filter) and its tables' filters. It returns the live
// average it measured (0 for a tree without lsmcuckoo filters) and
// whether a budget changed.
//
// The shape the fit sees is the distinct keys of each level's filters, not
// its bytes. The budgets are VersionBudgets of that shape under the
// tuner's format version, the targets scale
// them to spend the average asked over the live keys (targetsFor), and
// each level's debt is what its live tables spend under its target,
// counted over the tables whose filters this tuner wrote: their distinct
// keys are known exactly, while those of a table written before a reopen
// are estimated from its name's budget, and an error in that estimate is
// no debt of the level's.
func (t *Tuner) Refit(shape LevelShape, tables []LiveTable) (live float64, changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keys, knownKeys, knownBits [NumLevels]float64
	var allKeys, allBits float64
	for _, tb := range tables {
		if tb.Level < 0 || tb.Level >= NumLevels {
			continue
		}
		if t.unfilteredTable(tb) {
			keys[tb.Level] += float64(tb.PointKeys)
			allKeys += float64(tb.PointKeys)
			continue
		}
		if !tb.Ours || tb.FilterBytes == 0 {
			continue
		}
		d, known := t.lookup(tb)
		k, b := float64(d), 8*float64(tb.FilterBytes)
		keys[tb.Level] += k
		if known {
			knownKeys[tb.Level] += k
			knownBits[tb.Level] += b
		}
		allKeys, allBits = allKeys+k, allBits+b
	}
	l0Full := t.l0FullShare(shape)
	if allKeys > 0 {
		live = allBits / allKeys
		shape.Keys = keys
	}
	shape.SkipL6 = t.skipL6
	budgets := tunedBudgets("pebblecore", shape, t.asked, t.version)
	targets := targetsFor(shape, budgets, t.asked, l0Full)
	var targetBits [NumLevels]float64
	for l, b := range budgets {
		if t.budgets[l].Swap(math.Float64bits(b)) != math.Float64bits(b) {
			changed = true
		}
		t.targets[l].Store(math.Float64bits(targets[l]))
		targetBits[l] = targets[l] * knownKeys[l]
	}
	t.measured(targetBits, knownBits)
	return live, changed
}
