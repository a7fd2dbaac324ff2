package pebblecore

import (
	"math"
	"sync"
	"sync/atomic"
)

// Tuner holds the budgets of a self-tuning setup: one budget per level,
// refitted to the live tree (Refit) so that the budgets, spent on the
// tree as it stands, come to the average the user asked for.
//
// Budgets are read without locks on every table a level writes; refits
// are serialised by a mutex that no writer takes.
type Tuner struct {
	asked   float64
	budgets [NumLevels]atomic.Uint64 // math.Float64bits of each level's budget

	ledgerMu sync.Mutex
	ledger   map[ledgerKey]ledgerEntry // filters written, by (block bytes, keys added)
	ring     []ledgerKey               // the ledger's keys, oldest overwritten first
	next     int

	epoch uint64 // refits so far: the ledger marks each filter with the epoch it was written in

	mu     sync.Mutex // serialises refits
	offset float64    // the correction added to the average asked
}

type ledgerEntry struct{ distinct, epoch uint64 }

// ledgerKey identifies a written filter by what the table's properties
// also record: the block's length (FilterSize) and the keys Pebble handed
// the filter (the table's point entries, NumEntries minus
// NumRangeDeletions).
type ledgerKey struct{ bytes, added uint64 }

// ledgerSize bounds the ledger: a filter whose table is live is looked up
// at every refit, and one whose table was abandoned (a failed compaction)
// or compacted away is forgotten as newer ones arrive.
const ledgerSize = 1 << 14

// maxCorrection bounds the correction to a share of the asked average, so
// that a measurement gone wrong (a tree of foreign filters, tables Pebble
// never reported) cannot drive the budgets to an extreme.
const maxCorrection = 0.25

// correctionGain is the share of the live average's error the correction
// takes up per refit, scaled by the share of the live keys whose filters
// were written since the last refit: the live average moves only as fast
// as tables are replaced, and a larger step would overshoot and swing.
const correctionGain = 1

// NewTuner returns a tuner for the average asked, starting at budgets
// (points of the registered grid). It panics, naming pkg, unless asked is
// a valid budget.
func NewTuner(pkg string, asked float64, budgets [NumLevels]float64) *Tuner {
	CheckBitsPerKey(pkg, asked)
	t := &Tuner{asked: asked, ledger: make(map[ledgerKey]ledgerEntry), ring: make([]ledgerKey, ledgerSize)}
	for l, b := range budgets {
		CheckBitsPerKey(pkg, b)
		t.budgets[l].Store(math.Float64bits(b))
	}
	return t
}

// Asked returns the average the tuner keeps to.
func (t *Tuner) Asked() float64 { return t.asked }

// Budget returns level's current budget.
func (t *Tuner) Budget(level int) float64 {
	return math.Float64frombits(t.budgets[level].Load())
}

// Budgets returns every level's current budget.
func (t *Tuner) Budgets() [NumLevels]float64 {
	var b [NumLevels]float64
	for l := range b {
		b[l] = t.Budget(l)
	}
	return b
}

// Policy returns the version-3 policy of level's current budget: the name
// a table of that level written now carries.
func (t *Tuner) Policy(level int) Policy { return New(t.Budget(level), 0, false) }

// NewWriter returns a writer for one table of level, at the level's
// current budget, that records the filter it writes in the tuner's ledger.
func (t *Tuner) NewWriter(level int) *TunedWriter {
	return &TunedWriter{w: t.Policy(level).NewWriter(), t: t}
}

// TunedWriter is a Writer that reports each filter it finishes to its
// tuner.
type TunedWriter struct {
	w     *Writer
	t     *Tuner
	added uint64
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
	w.t.record(ledgerKey{uint64(len(dst) - n), w.added}, uint64(w.w.b.Stats().Keys))
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
	t.ledger[k] = ledgerEntry{distinct, t.epoch}
}

// correct updates the integral correction from the live average of the
// levels below L0 (of L0 alone while nothing lies below it). L0's tables
// live only until a compaction carries their keys into Lbase, and the fit
// gives them wide budgets (a lookup meets every L0 sublevel): counting them
// would let the correction lower every level's budget while L0 is full,
// and leave the tree under the average once L0 drains, too late for
// compactions to rewrite it. So the average holds over the levels keys
// stay on, and L0's small share of the keys spends its own budget on top
// while it lives.
func (t *Tuner) correct(keys, bits, fresh [NumLevels]float64) {
	var k, b, f float64
	for l := 1; l < NumLevels; l++ {
		k, b, f = k+keys[l], b+bits[l], f+fresh[l]
	}
	if k == 0 {
		k, b, f = keys[0], bits[0], fresh[0]
	}
	if k == 0 {
		return
	}
	t.offset += correctionGain * f / k * (t.asked - b/k)
	t.offset = max(-maxCorrection*t.asked, min(maxCorrection*t.asked, t.offset))
}

// nearestBudgets is LevelBudgets(shape, target), or, when that spends
// under target (on the half-bit grid an allocation seldom spends its
// average exactly), the allocation of a higher average that spends over
// target by less than the first spends under it. LevelBudgets never
// overspends, and an allocation that is always under would leave the tree
// under the average by that much for good, with the correction chasing it.
func nearestBudgets(shape LevelShape, target float64) [NumLevels]float64 {
	spend := func(b [NumLevels]float64) float64 {
		var k, s float64
		for l, w := range shape.Keys {
			if w > 0 && !math.IsInf(w, 0) {
				k, s = k+w, s+w*b[l]
			}
		}
		if k == 0 {
			return target
		}
		return s / k
	}
	under := LevelBudgets("pebblecore", shape, target)
	gap := target - spend(under)
	for step := BudgetStep / 8; gap > 0 && step <= 2*BudgetStep && target+step <= MaxBitsPerKey; step *= 2 {
		over := LevelBudgets("pebblecore", shape, target+step)
		if s := spend(over); s > target {
			if s-target < gap {
				return over
			}
			break
		}
	}
	return under
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

// lookup is distinct, and whether the table's filter was written since
// the last refit.
func (t *Tuner) lookup(tb LiveTable) (distinct uint64, fresh bool) {
	t.ledgerMu.Lock()
	e, ok := t.ledger[ledgerKey{tb.FilterBytes, tb.PointKeys}]
	epoch := t.epoch
	t.ledgerMu.Unlock()
	if ok {
		return e.distinct, e.epoch == epoch
	}
	if tb.Budget > 0 {
		return min(tb.PointKeys, uint64(math.Ceil(8*float64(tb.FilterBytes)/tb.Budget))), false
	}
	return tb.PointKeys, false
}

// LiveAverage returns the bits per distinct key the lsmcuckoo filters of
// tables spend together, and the keys counted (0 when there are none).
func (t *Tuner) LiveAverage(tables []LiveTable) (bitsPerKey float64, keys uint64) {
	var bits uint64
	for _, tb := range tables {
		if tb.Ours && tb.FilterBytes > 0 {
			bits += 8 * tb.FilterBytes
			keys += t.distinct(tb)
		}
	}
	if keys == 0 {
		return 0, 0
	}
	return float64(bits) / float64(keys), keys
}

// Refit sets every level's budget from the live tree: shape (whose L0Runs
// it keeps, and whose Keys serve only while no table has an lsmcuckoo
// filter) and its tables' filters. It returns the live average it
// measured (0 for a tree without lsmcuckoo filters) and whether a budget
// changed.
//
// Two measurements make the fit meet the average on the live tree rather
// than on a model of it. The shape is the distinct keys of each level's
// filters, not its bytes. And each level's spend ratio, what its filters
// spend over what their budgets planned (small tables' filters round up
// to whole lines and carry a trailer), weighs its keys in the fit's
// constraint, so that the budgets' planned spend times those ratios is the
// average asked. Of the grid's allocations it takes the one whose planned
// spend is nearest that (nearestBudgets). What the live tree still spends
// off the average, tables written under an earlier allocation above all,
// the integral correction takes up (correct).
func (t *Tuner) Refit(shape LevelShape, tables []LiveTable) (live float64, changed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keys, bits, planned, fresh [NumLevels]float64
	var allKeys, allBits, allPlanned float64
	for _, tb := range tables {
		if !tb.Ours || tb.FilterBytes == 0 || tb.Level < 0 || tb.Level >= NumLevels {
			continue
		}
		d, isFresh := t.lookup(tb)
		k := float64(d)
		if isFresh {
			fresh[tb.Level] += k
		}
		keys[tb.Level] += k
		bits[tb.Level] += 8 * float64(tb.FilterBytes)
		planned[tb.Level] += k * tb.Budget
		allKeys, allBits, allPlanned = allKeys+k, allBits+8*float64(tb.FilterBytes), allPlanned+k*tb.Budget
	}
	t.ledgerMu.Lock()
	t.epoch++
	t.ledgerMu.Unlock()
	target := t.asked
	if allKeys > 0 {
		live = allBits / allKeys
		t.correct(keys, bits, fresh)
		ratio := func(bits, planned float64) float64 {
			if planned <= 0 {
				return 1
			}
			return max(0.5, min(2, bits/planned))
		}
		all := ratio(allBits, allPlanned)
		cost := 0.0
		for l := range keys {
			r := all
			if planned[l] > 0 {
				r = ratio(bits[l], planned[l])
			}
			shape.Keys[l] = keys[l] * r
			cost += keys[l] / allKeys * r
		}
		target = (t.asked + t.offset) / cost
	}
	target = max(MinBitsPerKey, min(MaxBitsPerKey, target))
	budgets := nearestBudgets(shape, target)
	for l, b := range budgets {
		if t.budgets[l].Swap(math.Float64bits(b)) != math.Float64bits(b) {
			changed = true
		}
	}
	return live, changed
}
