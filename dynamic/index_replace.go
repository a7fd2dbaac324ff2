package dynamic

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
)

// added, cleared and recoded keep the entry counts (writer only).
func (x *Index) added(s *idxSegment, t int) {
	s.entries.Add(1)
	for len(s.byTable) <= t {
		s.byTable = append(s.byTable, 0)
	}
	s.byTable[t]++
	x.count[t]++
}

func (x *Index) cleared(s *idxSegment, t int) {
	s.entries.Add(-1)
	s.byTable[t]--
	x.count[t]--
	if x.hooks.entryCleared != nil {
		x.hooks.entryCleared(s)
	}
}

func (x *Index) recoded(s *idxSegment, from, to int) {
	for len(s.byTable) <= to {
		s.byTable = append(s.byTable, 0)
	}
	s.byTable[from]--
	s.byTable[to]++
	x.count[from]--
	x.count[to]++
}

// RemoveTable removes every entry of table id, and nothing else. An id
// not in the index is an error wrapping ErrNoTable.
func (x *Index) RemoveTable(id uint64) error {
	x.mu.Lock()
	defer x.unlock()
	t, ok := x.byID[id]
	if !ok {
		return fmt.Errorf("%w: %d", ErrNoTable, id)
	}
	x.removeLocked(t)
	return nil
}

// RemoveTables removes every entry of the given tables, and nothing else,
// in one pass over the index (RemoveTable costs a pass per table). An
// unknown or repeated ID is an error wrapping ErrNoTable and removes
// nothing.
func (x *Index) RemoveTables(ids ...uint64) error {
	x.mu.Lock()
	defer x.unlock()
	ts, err := x.slotsOf(ids)
	if err != nil {
		return err
	}
	x.removeLocked(ts...)
	return nil
}

// slotsOf returns the table slots of ids; an unknown or repeated ID is an
// error wrapping ErrNoTable.
func (x *Index) slotsOf(ids []uint64) ([]int, error) {
	ts := make([]int, 0, len(ids))
	for _, id := range ids {
		t, ok := x.byID[id]
		if !ok || contains(ts, t) {
			return nil, fmt.Errorf("%w: %d", ErrNoTable, id)
		}
		ts = append(ts, t)
	}
	return ts, nil
}

// Replace puts table merged, holding the keys given by hashes, in the
// place of inputs (its rank is the newest input's), recoding the inputs'
// entries in place: an entry of an input for a key of merged is rewritten
// to name merged, so a compaction needs no room beyond what its inputs
// held and no pass over the index. dropped lists the hashes of the keys
// the inputs held that merged leaves out (deleted keys a merge at the
// oldest end drops); their entries are cleared by hash. A key's input
// entries are looked for only in the newest segment that holds its merged
// entry or any of them; its other versions, in older segments, are then
// cleared by the keys' hashes, or by one pass over such a segment where
// that reads fewer buckets. Input entries left after that (dropped was
// nil or incomplete) are cleared by one pass over the segments holding
// them.
//
// While Replace runs, a Lookup of a key of merged names merged or an
// input holding it, or both (package doc, step 5); once it returns, merged.
// A store that still lets Gets read the inputs (views opened before the
// compaction) must therefore treat "merged is named" as "each input may
// hold the key". A key merged drops has its inputs' entries cleared one
// at a time, so a Lookup meanwhile may name an input holding it and not
// a newer one (the deleted value, not its tombstone): such a store treats
// any input named as "each input may hold the key" too.
//
// merged must be a new ID: one already in the index (an input's included)
// is an error wrapping ErrTableExists; an input not in the index, or
// named twice, is an error wrapping ErrNoTable. Either changes nothing.
// With no inputs, Replace adds merged as the newest table, as AddTable
// does, and like it refuses a table past IndexMaxTables (ErrTooManyTables);
// with inputs, it never does.
func (x *Index) Replace(inputs []uint64, merged uint64, hashes, dropped []uint64) error {
	x.mu.Lock()
	defer x.unlock()
	if _, ok := x.byID[merged]; ok {
		return fmt.Errorf("%w: %d", ErrTableExists, merged)
	}
	slots, err := x.slotsOf(inputs)
	if err != nil {
		return err
	}
	book := x.book.Load()
	var rank uint64
	for _, t := range slots {
		rank = max(rank, book.tables[t].rank)
	}
	if len(inputs) == 0 {
		if err := x.tooMany(1); err != nil {
			return err
		}
		x.nextRank++
		rank = x.nextRank
	}
	t, ok := x.claim(merged, rank, len(hashes), slots)
	if ok {
		x.recode(slots, t, hashes, dropped)
	}
	x.removeLocked(slots...)
	return nil
}

// idxProbeCost: clearing a key's entries by its hash (two buckets read at
// random) costs about as much as a pass over a segment spends on this many
// buckets (read in a row, each decoded whole); measured with
// BenchmarkIndexReplaceAcrossGrowth, where the two costs meet.
const idxProbeCost = 4

// recode moves the keys of inputs to table t (package doc, step 5): each
// key of t gets its own entry, then the input entries nothing relies on
// any more are cleared, then one codebook ends the relaxed match.
func (x *Index) recode(inputs []int, t int, hashes, dropped []uint64) {
	r := x.newRecoder(inputs, t)
	for j, h := range hashes {
		if ns := r.segs[len(r.segs)-1]; j+idxAhead < len(hashes) && ns.large {
			x.prefetchKey(ns, hashes[j+idxAhead])
		}
		r.recodeKey(h)
		if x.hooks.recoded != nil {
			x.hooks.recoded()
		}
	}
	r.clearInputEntries(hashes, dropped)
	if x.hooks.cleared != nil {
		x.hooks.cleared()
	}
	r.finish()
}

// recoder is one Replace's recoding of its inputs' entries to the merged
// table's code.
type recoder struct {
	x       *Index
	book    *codebook // decodes the inputs' entries; published with t's relax
	inputs  []int     // the inputs' table slots
	isInput []bool    // by table slot
	t       int       // the merged table's slot
	code    uint32    // t's code
	length  uint      // and its length
	mine    []int     // the table slots whose entries this Replace looks for
	segs    []*idxSegment
	// inStash holds the keys (mixed hashes) with an input's entry in the
	// stash, and what becomes of those entries. A merge would otherwise
	// add a stash entry per input to merged, for keys that need none: the
	// versions of a key overwritten in every flush, stashed because they
	// crowd its buckets, would fill the stash within a few hundred merges.
	inStash map[uint64]stashFate
	later   []staleEntry // input entries to clear once every key of t has its own
	stashed []stashEntry // t's new stash entries
	always  bool         // some key of t found no place: every lookup names t
}

// stashFate is what becomes of a key's input entries in the stash when
// Replace ends.
type stashFate int8

const (
	stashRename  stashFate = iota // a key merged does not list: its entries name merged
	stashKept                     // a key of merged whose only entries are in the stash: renamed
	stashSlotted                  // a key with a slot entry for merged: cleared
	stashDropped                  // a key merged drops (never one it keeps): cleared
)

// inputPos is an input entry found for a key: its bucket, value and table
// slot (by value, not position: a bucket's entries move within it at
// every write).
type inputPos struct {
	i uint32
	v uint32
	t int
}

// segScan is what a key's two buckets in one segment hold of it.
type segScan struct {
	n       int
	present bool // the key's entry for t is there already
	found   [2 * idxSlots]inputPos
}

// staleEntry is an input entry to clear once every key of merged has its
// own entry.
type staleEntry struct {
	s *idxSegment
	inputPos
}

// newRecoder prepares the recoding of inputs to t, publishing t's relaxed
// match first if t's code is shorter than an input's: while recoding, t's
// entries match a key on their bits above the fewest fingerprint bits any
// input's entries carry.
func (x *Index) newRecoder(inputs []int, t int) *recoder {
	book := x.book.Load()
	r := &recoder{
		x:       x,
		inputs:  inputs,
		isInput: make([]bool, len(book.tables)),
		t:       t,
		code:    book.tables[t].code,
		length:  uint(book.tables[t].length),
		mine:    append(slices.Clone(inputs), t),
		segs:    *x.segs.Load(),
	}
	relax := uint(0)
	for _, it := range inputs {
		r.isInput[it] = true
		relax = max(relax, uint(book.tables[it].length))
	}
	if relax > r.length {
		relax = relax - r.length // t's extra bits beyond the shortest input's
	} else {
		relax = 0
	}
	if relax > 0 {
		x.publish(func(b *codebook) { b.tables[t].relax = uint8(relax) })
		book = x.book.Load()
	}
	r.book = book
	for _, e := range book.stash {
		if int(e.table) < len(r.isInput) && r.isInput[e.table] {
			if r.inStash == nil {
				r.inStash = map[uint64]stashFate{}
			}
			r.inStash[e.x] = stashRename
		}
	}
	return r
}

// inputEntry reports whether slot value sv is an input's entry for p, and
// which input's.
func (r *recoder) inputEntry(sv uint32, p probe) (int, bool) {
	x := r.x
	it := r.book.decode[(sv>>(x.w-x.m-x.d))&(1<<x.d-1)]
	if it < 0 || !r.isInput[it] {
		return 0, false
	}
	ti := &r.book.tables[it]
	return int(it), sv == x.slotValue(p, ti.code, uint(ti.length))
}

// own rewrites sc.found[0] to v in segment s unless the key's entry is
// there already, then clears the key's other input entries there: at
// every instant one of them names the key.
func (r *recoder) own(s *idxSegment, sc *segScan, v uint32) {
	f := sc.found[:sc.n]
	if !sc.present && len(f) > 0 {
		r.x.swap(s, f[0].i, f[0].v, v)
		r.x.recoded(s, f[0].t, r.t)
		f = f[1:]
	}
	for _, e := range f {
		r.x.swap(s, e.i, e.v, 0)
		r.x.cleared(s, e.t)
	}
}

// scan looks for p's entry for t (value v) and its input entries in the
// segments newest first, up to the first that holds either; found is
// that segment's index, -1 if none. Input entries of the key in older
// segments (its versions, most often) are cleared once every key of
// merged has its own entry (clearInputEntries).
func (r *recoder) scan(p probe, v uint32) (sc segScan, found int) {
	x := r.x
	for k := len(r.segs) - 1; k >= 0; k-- {
		s := r.segs[k]
		if k < len(r.segs)-1 && !s.holds(r.mine) {
			continue // nothing of t's or the inputs' here
		}
		i1 := s.primary(p.hi)
		i2 := x.alt(s, i1, p.tag)
		for _, i := range [2]uint32{i1, i2} {
			tagged, nt := x.tagged(x.raw(s, i), p.tag)
			for _, sv := range tagged[:nt] {
				if sv == v {
					sc.present = true
				} else if it, ok := r.inputEntry(sv, p); ok {
					sc.found[sc.n] = inputPos{i, sv, it}
					sc.n++
				}
			}
			if i2 == i1 {
				break
			}
		}
		if sc.present || sc.n > 0 {
			return sc, k
		}
	}
	return sc, -1
}

// recodeKey gives the key of hash h its own entry for t.
func (r *recoder) recodeKey(h uint64) {
	x := r.x
	p := x.probeOf(h)
	v := x.slotValue(p, r.code, r.length)
	sc, found := r.scan(p, v)
	newest := len(r.segs) - 1
	switch {
	case found < 0:
	case sc.present || found == newest:
		r.own(r.segs[found], &sc, v)
	default:
		// The key's input entries are in an older segment: give it its
		// entry in the newest if it has room (relocating while it is below
		// idxNearFull), so that compactions drain older segments (dropped
		// once empty), and clear the input entries once every key of
		// merged has its own (a clear now could hide a key sharing them
		// whose entry is elsewhere); else rewrite one where it is.
		ns := r.segs[newest]
		if x.insertSegment(ns, p, v, float64(ns.entries.Load()) < idxNearFull*float64(ns.n)*idxSlots) {
			x.added(ns, r.t)
			for _, e := range sc.found[:sc.n] {
				r.later = append(r.later, staleEntry{r.segs[found], e})
			}
		} else {
			r.own(r.segs[found], &sc, v)
		}
	}
	fate, stashedInput := r.inStash[p.x]
	switch {
	case !stashedInput:
	case found < 0:
		r.inStash[p.x] = stashKept // its only entries are in the stash
	case fate != stashKept:
		r.inStash[p.x] = stashSlotted
	}
	if found >= 0 || stashedInput {
		return
	}
	switch res, s := x.insert(p, v); res {
	case idxInserted:
		x.added(s, r.t)
	case idxDuplicate:
	case idxStash:
		if len(r.book.stash)+len(r.stashed) < idxStashSize {
			r.stashed = append(r.stashed, stashEntry{p.x, int16(r.t)})
		} else {
			r.always = true
		}
	}
	r.segs = *x.segs.Load() // insert may have added one
}

// clearInputsIn clears the input entries of the key of hash h in segment s.
func (r *recoder) clearInputsIn(s *idxSegment, h uint64) {
	x := r.x
	p := x.probeOf(h)
	i1 := s.primary(p.hi)
	i2 := x.alt(s, i1, p.tag)
	for _, i := range [2]uint32{i1, i2} {
		tagged, nt := x.tagged(x.raw(s, i), p.tag)
		for _, sv := range tagged[:nt] {
			if it, ok := r.inputEntry(sv, p); ok {
				x.swap(s, i, sv, 0)
				x.cleared(s, it)
			}
		}
		if i2 == i1 {
			break
		}
	}
}

// clearInputEntries clears, once every key of merged has its own entry,
// the entries nothing of merged relies on any more: those of keys merged
// leaves out, input entries left beside a key's entry in another segment,
// and, where that costs less than a pass, input entries of the keys'
// versions in older segments.
func (r *recoder) clearInputEntries(hashes, dropped []uint64) {
	x := r.x
	leftover := false
	for _, s := range r.segs {
		leftover = leftover || s.holds(r.inputs)
	}
	if len(dropped)+len(r.later) > 0 || leftover {
		// A lookup reads segments one after the other: it may have read
		// the segment where a key just got its entry before the entry was
		// written (or loaded the segment list before that segment was
		// added), and read the segment of the key's input entry after it
		// is cleared below. A codebook published in between makes such a
		// lookup read again (package doc, steps 3 and 5).
		x.publish(func(*codebook) {})
	}
	for _, h := range dropped {
		for _, s := range r.segs {
			if s.holds(r.inputs) {
				r.clearInputsIn(s, h)
			}
		}
		if len(r.inStash) > 0 {
			hx := x.probeOf(h).x
			if fate, ok := r.inStash[hx]; ok && fate == stashRename {
				r.inStash[hx] = stashDropped
			}
		}
	}
	for _, e := range r.later {
		// Entries of older segments stay in their bucket (only the newest
		// relocates); one another key cleared or rewrote meanwhile (a
		// shared entry) is simply not there.
		if x.swap(e.s, e.i, e.v, 0) {
			x.cleared(e.s, e.t)
		}
	}
	// Input entries still in a segment now are, most often, versions of
	// keys of merged in segments older than the one where their search
	// stopped. Clear them by the keys' hashes where that costs less than
	// the pass over the segment that removing the inputs makes otherwise,
	// so that a small merge in a large index costs what the merge holds,
	// not what the index holds (BenchmarkIndexReplaceAcrossGrowth).
	for _, s := range r.segs {
		if !s.holds(r.inputs) || idxProbeCost*uint64(len(hashes)) >= uint64(s.n) {
			continue
		}
		for _, h := range hashes {
			r.clearInputsIn(s, h)
			if !s.holds(r.inputs) {
				break // no more of the inputs' entries here
			}
		}
	}
}

// finish publishes the codebook that ends the Replace: inputs' stash
// entries now name merged, once each, except those of keys with a slot
// entry for merged or that merged drops (keys merged does not list, whose
// fate is unknown, keep theirs: a false candidate, never a miss); every
// key of merged has its exact entry, so the relaxed match ends.
func (r *recoder) finish() {
	r.x.publish(func(b *codebook) {
		kept := b.stash[:0]
		for _, e := range b.stash {
			if r.isInput[e.table] {
				if f := r.inStash[e.x]; f == stashSlotted || f == stashDropped {
					continue
				}
				e.table = int16(r.t)
			}
			kept = append(kept, e)
		}
		b.stash = append(kept, r.stashed...)
		slices.SortFunc(b.stash, func(a, b stashEntry) int {
			return cmp.Or(cmp.Compare(a.x, b.x), cmp.Compare(a.table, b.table))
		})
		b.stash = slices.Compact(b.stash)
		b.tables[r.t].relax = 0
		b.tables[r.t].always = r.always
	})
}

// rewriteEach calls fn for every entry of the segments that hold entries
// of a table in ts, with the table book's code leaf names (-1: none), and
// puts in its place the value fn returns (the entry itself to keep it, 0
// to clear it): a pass over the index, for the writer. A bucket with a
// change is written once, which is as safe for a lookup as writing each
// change alone: every change a pass makes (a removed table's entry
// cleared, an entry rewritten to its table's longer code) keeps lookups
// right at every instant whichever of the bucket's other changes have
// been made.
func (x *Index) rewriteEach(book *codebook, ts []int, fn func(s *idxSegment, v uint32, t int) uint32) {
	tagShift := x.w - x.m
	leafMask := uint32(1)<<x.d - 1
	for _, s := range *x.segs.Load() {
		if !s.holds(ts) {
			continue
		}
		for i := uint32(0); i < s.n; i++ {
			b := x.raw(s, i)
			if b == 0 {
				continue // the code of four empty slots is 0, as are their low bits
			}
			e, _ := semisort.Decode(b, x.w)
			changed := false
			for j, v := range e {
				if v == 0 {
					continue
				}
				if nv := fn(s, v, int(book.decode[(v>>(tagShift-x.d))&leafMask])); nv != v {
					e[j], changed = nv, true
				}
			}
			if changed {
				x.store(s, i, e)
			}
		}
	}
}

// removeLocked clears every entry whose code is table t's, then frees the
// code (package doc, step 4) and drops segments left empty.
func (x *Index) removeLocked(ts ...int) {
	book := x.book.Load()
	gone := make([]bool, len(book.tables))
	scan := false
	for _, t := range ts {
		gone[t] = true
		scan = scan || book.tables[t].length > 0 && x.count[t] > 0
	}
	if scan {
		// One pass clears the entries of every table leaving: a slot's
		// code leaf names its table unambiguously (codes are prefix-free
		// and none is being lengthened under the writer mutex).
		x.rewriteEach(book, ts, func(s *idxSegment, v uint32, t int) uint32 {
			if t >= 0 && gone[t] {
				x.cleared(s, t)
				return 0
			}
			return v
		})
	}
	x.dropEmptySegments()
	for _, t := range ts {
		ti := book.tables[t]
		if ti.length > 0 {
			first := int(ti.code) << (x.d - uint(ti.length))
			for i := first; i < first+1<<(x.d-uint(ti.length)); i++ {
				x.leafUsed[i] = false
			}
		}
		delete(x.byID, ti.id)
	}
	x.publish(func(b *codebook) {
		for _, t := range ts {
			ti := b.tables[t]
			if ti.length > 0 {
				first := int(ti.code) << (x.d - uint(ti.length))
				for i := first; i < first+1<<(x.d-uint(ti.length)); i++ {
					if b.decode[i] == int16(t) {
						b.decode[i] = -1
					}
				}
			}
			b.tables[t] = tableInfo{}
		}
		for _, t := range ts {
			x.count[t] = 0
		}
		kept := b.stash[:0]
		for _, e := range b.stash {
			if !gone[e.table] {
				kept = append(kept, e)
			}
		}
		b.stash = kept
	})
}

// dropEmptySegments unpublishes segments that hold no entry (the newest
// always stays): lookups stop probing them (package doc, step 4).
func (x *Index) dropEmptySegments() {
	segs := *x.segs.Load()
	var keep []*idxSegment
	for k, s := range segs {
		if s.entries.Load() > 0 || k == len(segs)-1 {
			keep = append(keep, s)
		}
	}
	if len(keep) != len(segs) {
		x.segs.Store(&keep)
	}
}
