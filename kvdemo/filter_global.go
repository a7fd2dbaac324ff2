package kvdemo

import (
	"errors"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

// FilterGlobal is one store-wide cuckoo index (dynamic.Index) over every
// table instead of a filter per table: a Get probes it once and reads only
// the tables it names.
const FilterGlobal FilterKind = "global"

// globalFilter keeps the store's dynamic.Index. Nothing is written beside
// the tables: at Open the index is rebuilt from the tables' keys (Open logs
// how long that took), sized for all of them at once.
//
// A flush adds the new table's keys when the table is finished, before the
// manifest names it. A compaction does not add its output M: once the
// table list holds M in its inputs' place, merged calls Replace, which
// rewrites the inputs' entries to name M in place (no room for both, no
// pass over the index). Until Replace returns, M is unfiltered: every Get
// on the new list reads it, and so does a Get whose index lookup came
// before Replace returned, whenever it reaches M (epoch). Gets on older
// lists still read the inputs: each input I gets I.mergedInto = M before
// Replace starts, and a Get reads
// I when the index names I, or M, or what M was merged into later, or an
// input of any of those merges (the second order dynamic.Index's
// documentation describes). A table leaves
// the index by other means only when it was flushed and then abandoned,
// or a Replace failed: at its last view's release (drop), by a pass over
// the index.
//
// At Open the index is built from all tables at once (AddTables), in one
// segment. An index that has since grown to a few segments is rebuilt in
// one in the background (maybeRebuild, rebuildIndex), and swapped in.
type globalFilter struct {
	db         *DB
	bitsPerKey float64

	mu      sync.Mutex // guards idx creation and pending
	idx     atomic.Pointer[dynamic.Index]
	pending []*sstable // attached at Open, indexed by attachedAll
	leaving []uint64   // dropped tables whose entries are still in the index

	// An index that grew by segments is rebuilt in one from the tables'
	// keys (rebuildIndex). Every change to the index is made under swapMu,
	// and recorded while a rebuild runs, to be replayed on the new index
	// before it takes the old one's place.
	swapMu     sync.Mutex
	tracking   bool
	changes    []indexChange
	rebuilding atomic.Bool
	rebuilds   atomic.Int64
	builtWith  atomic.Int64 // entries of the index when it was last built in one segment

	// epoch counts the tables whose keys entered the index while views
	// already listed them (compaction outputs, at merged). A Get reads it
	// before its lookup; a table indexed in a later epoch (indexedAt) may
	// hold keys the lookup named under its inputs, which the Get's view
	// does not list, so the Get searches it.
	epoch atomic.Uint64

	refusedOnce atomic.Bool // the store has said that the index is full
}

// indexChange is one writer call made while a rebuild ran: add (with its
// keys) in the place of remove (a Replace), or only one of them.
type indexChange struct {
	add             uint64
	hashes, dropped []uint64
	remove          []uint64
}

// change runs op on the index under swapMu, and records c if a rebuild
// is under way. It returns the time op took, without the wait for swapMu:
// a flush waiting for a compaction's Replace would otherwise count that
// Replace's work as its own.
func (g *globalFilter) change(keys int, c indexChange, op func(idx *dynamic.Index) error) (time.Duration, error) {
	g.swapMu.Lock()
	defer g.swapMu.Unlock()
	start := time.Now()
	err := op(g.index(keys))
	// Only a change that took place is replayed on a rebuilt index: a
	// table the index refused stays unindexed, so the rebuilt index must
	// not hold it either (nothing would ever remove it).
	if g.tracking && err == nil {
		g.changes = append(g.changes, c)
	}
	return time.Since(start), err
}

// index returns the store's index, creating it for a store that had no
// tables at Open: sized for a few tables like the first one (keys), it
// grows by segments as the store does.
func (g *globalFilter) index(keys int) *dynamic.Index {
	if idx := g.idx.Load(); idx != nil {
		return idx
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.idx.Load() == nil {
		g.idx.Store(dynamic.NewIndex(max(4*keys, 1024), g.bitsPerKey))
	}
	return g.idx.Load()
}

func (*globalFilter) kind() FilterKind         { return FilterGlobal }
func (*globalFilter) configure(*table.Options) {}

func (g *globalFilter) newBuilder(merging bool) filterBuilder {
	return &globalBuilder{g: g, merging: merging}
}

type globalBuilder struct {
	g       *globalFilter
	merging bool
	hashes  []uint64
	dropped []uint64
}

// pendingMerge is a compaction output's keys, held from its build until
// merged puts them in the index (the inputs' keys it left out too).
type pendingMerge struct {
	hashes, dropped []uint64
}

func (b *globalBuilder) add(userKey []byte) { b.hashes = append(b.hashes, dynamic.KeyHash(userKey)) }
func (b *globalBuilder) omit(userKey []byte) {
	b.dropped = append(b.dropped, dynamic.KeyHash(userKey))
}

func (b *globalBuilder) finish(st *sstable) error {
	if b.merging {
		st.merge = &pendingMerge{hashes: b.hashes, dropped: b.dropped}
		return nil // unfiltered until merged
	}
	b.g.removeLeaving() // frees their codes and slots for this table
	spent, err := b.g.change(len(b.hashes), indexChange{add: st.id, hashes: b.hashes}, func(idx *dynamic.Index) error {
		return idx.AddTable(st.id, b.hashes)
	})
	if errors.Is(err, dynamic.ErrTooManyTables) {
		b.g.refused(st, err)
		return nil
	}
	if err != nil {
		return errorf("indexing table %06d: %w", st.id, err)
	}
	b.g.db.stats.indexUpdateNanos.Add(spent.Nanoseconds())
	b.g.db.stats.indexUpdateKeys.Add(int64(len(b.hashes)))
	st.indexed.Store(true)
	return nil
}

// attach defers a table listed at Open to attachedAll, which indexes them
// all at once.
func (g *globalFilter) attach(st *sstable) bool {
	if st.t == nil {
		return true // damaged: never indexed, every Get reaching it is told
	}
	g.mu.Lock()
	g.pending = append(g.pending, st)
	g.mu.Unlock()
	return true
}

// attachedAll builds the index from the keys of the tables attached at
// Open, oldest first, in one index sized for all of them.
func (g *globalFilter) attachedAll() error {
	g.mu.Lock()
	pending := g.pending
	g.pending = nil
	total := 0
	for _, st := range pending {
		total += int(st.t.KeyCount())
	}
	if g.idx.Load() == nil && len(pending) > 0 {
		// Sized for the tables at hand, with headroom for the next flushes
		// before a segment is added (a store with no tables yet sizes its
		// index from its first table, index).
		g.idx.Store(dynamic.NewIndex(indexCapacity(total, g.bitsPerKey), g.bitsPerKey))
	}
	g.mu.Unlock()
	start := time.Now()
	keys := 0
	// Read every table's keys, then add them in one call, so that the
	// index chooses each table's code knowing them all.
	var ids []uint64
	var sets [][]uint64
	var added []*sstable
	for _, st := range pending {
		hashes, err := tableHashes(st)
		if err != nil {
			g.db.opts.Logger.Printf("%s", quote(err))
			continue
		}
		ids = append(ids, st.id)
		sets = append(sets, hashes)
		added = append(added, st)
		keys += len(hashes)
	}
	room := dynamic.IndexMaxTables
	if idx := g.idx.Load(); idx != nil { // not made here for a store with no tables
		room -= idx.Tables()
	}
	if len(ids) > room {
		// The index holds at most IndexMaxTables tables: the newest ones
		// past it stay unindexed and every Get searches them.
		for _, st := range added[room:] {
			g.refused(st, dynamic.ErrTooManyTables)
		}
		ids, sets, added = ids[:room], sets[:room], added[:room]
	}
	if len(ids) > 0 {
		if err := g.index(keys).AddTables(ids, sets); err != nil {
			return errorf("indexing the tables at open: %w", err)
		}
		for _, st := range added {
			st.indexed.Store(true)
		}
		g.builtWith.Store(int64(keys))
	}
	if len(pending) > 0 {
		g.db.opts.Logger.Printf("global index rebuilt from %d tables (%d keys) in %v", len(pending), keys, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// indexTable adds st's keys to the index, read from the table itself.
func (g *globalFilter) indexTable(st *sstable) (int, error) {
	hashes, err := tableHashes(st)
	if err != nil {
		return 0, err
	}
	if _, err := g.change(len(hashes), indexChange{add: st.id, hashes: hashes}, func(idx *dynamic.Index) error {
		return idx.AddTable(st.id, hashes)
	}); errors.Is(err, dynamic.ErrTooManyTables) {
		g.refused(st, err)
		return 0, nil
	} else if err != nil {
		return 0, errorf("indexing table %06d: %w", st.id, err)
	}
	st.indexed.Store(true)
	return len(hashes), nil
}

// refused notes a table the index has no room for (IndexMaxTables): it
// stays unindexed, so every Get searches it, as it searches a table whose
// filter is being rebuilt. Its keys are never missed, only read more
// slowly; the store says so once.
func (g *globalFilter) refused(st *sstable, err error) {
	if g.refusedOnce.CompareAndSwap(false, true) {
		g.db.opts.Logger.Printf("table %06d: not in the global index, which is full; it and later tables past the limit are searched by every Get until compactions make room: %v", st.id, err)
	}
}

// tableHashes reads st's keys' hashes from the table itself.
func tableHashes(st *sstable) ([]uint64, error) {
	hashes := make([]uint64, 0, st.t.KeyCount())
	it := st.t.NewIterator(table.NOCACHE)
	for it.Rewind(); it.Valid(); it.Next() {
		hashes = append(hashes, dynamic.KeyHash(y.ParseKey(it.Key())))
	}
	it.Close()
	// The iterator ends early, as if at the table's end, on a block it
	// cannot read: indexing part of the table would make the index answer
	// "absent" for keys it holds. The table stays unindexed, so every Get
	// searches it (and learns of the damage from it).
	if len(hashes) != int(st.t.KeyCount()) {
		return nil, errorf("%w: table %06d: read %d of its %d entries to index it; every Get searches it", ErrCorrupt, st.id, len(hashes), st.t.KeyCount())
	}
	return hashes, nil
}

func (g *globalFilter) rebuild(st *sstable) error {
	if st.t == nil || st.indexed.Load() {
		return nil
	}
	_, err := g.indexTable(st)
	return err
}

// merged moves the keys of the run's indexed tables to st (Replace), then
// marks st indexed. Keys of inputs that were never indexed are added.
func (g *globalFilter) merged(st *sstable, inputs []*sstable) {
	pm := st.merge // cleared below, under swapMu (rebuildIndex reads it)
	if pm == nil || st.t == nil {
		return
	}
	var ids []uint64
	var from []*sstable
	for _, in := range inputs {
		if in.indexed.Load() {
			ids = append(ids, in.id)
			from = append(from, in)
		}
	}
	// Before Replace starts: a Get on an older view that is told st, or
	// any of these inputs, must read each of them.
	st.mergedFrom = ids
	for _, in := range from {
		in.mergedInto.Store(st)
	}
	var fellBack bool
	spent, err := g.change(len(pm.hashes), indexChange{add: st.id, hashes: pm.hashes, dropped: pm.dropped, remove: ids}, func(idx *dynamic.Index) error {
		st.merge = nil
		g.db.pauseAt(pauseReplacing)
		if err := idx.Replace(ids, st.id, pm.hashes, pm.dropped); errors.Is(err, dynamic.ErrTooManyTables) {
			return err // no input was indexed and the index is full: st stays unindexed
		} else if err != nil {
			// Only an index out of step with the tables (a bug); stay
			// correct: index st on its own, the inputs leave at their
			// release.
			g.db.opts.Logger.Printf("table %06d: replacing its inputs in the global index: %v", st.id, err)
			fellBack = true
			if err := idx.AddTable(st.id, pm.hashes); err != nil {
				return err
			}
		} else {
			for _, in := range from {
				in.indexed.Store(false) // its entries are st's now: nothing to remove at drop
			}
		}
		// Marked under swapMu: a rebuild that starts tracking after this
		// reads st as indexed in its view, one that started before
		// records this change and replays it. Gets on views that list st
		// and looked the key up before Replace returned were told st's
		// inputs (not in their view), so they must search st: the epoch
		// they read is below this one.
		st.indexedInEpoch(g.epoch.Add(1))
		return nil
	})
	if globalTestHookReplaced != nil {
		globalTestHookReplaced()
	}
	if errors.Is(err, dynamic.ErrTooManyTables) {
		g.refused(st, err)
	}
	if fellBack || err != nil {
		return
	}
	g.db.stats.indexUpdateNanos.Add(spent.Nanoseconds())
	g.db.stats.indexUpdateKeys.Add(int64(len(pm.hashes)))
}

// indexedInEpoch marks st indexed by a change made while views listed it:
// indexedAt first, then indexed, the order screen relies on (it reads
// them in the other).
func (st *sstable) indexedInEpoch(epoch uint64) {
	st.indexedAt.Store(epoch)
	st.indexed.Store(true)
}

// globalTestHookReplaced, when set by a test, runs in merged once its
// index change is made.
var globalTestHookReplaced func()

// maybeRebuild starts rebuildIndex when growth has left the index in
// rebuildSegments segments or more and it holds at least twice the
// entries it was last built for, or, when the store has gone idle (idle),
// in two segments or more and an eighth more entries: a bulk load then
// serves from one segment without waiting for the next reopen; or, idle,
// in one segment that takes a fifth more than the one Open would build
// for its entries (idleOversized): a new store's first index is sized at
// its first flush for a few tables like the first, and one that stays
// small would otherwise keep it (four times its budget with one table).
// Each rebuild is a read of every table, so the growth each one needs
// keeps their cost to a bounded number of reads per key added. It runs in the
// flush goroutine after a flush's edit, or when no flush has come for a
// while, when no flushed table is between its AddTable and the table list
// that names it: every table in the index is then in the view it takes,
// or is added later by a change the rebuild records.
func (g *globalFilter) maybeRebuild(idle bool) {
	idx := g.idx.Load()
	if idx == nil || g.rebuilding.Load() {
		return
	}
	st, built := idx.Stats(), g.builtWith.Load()
	switch {
	case st.Segments >= rebuildSegments && st.Entries >= 2*built:
	case idle && st.Segments >= 2 && st.Entries >= built+built/8:
	case idle && st.Segments == 1 && g.idleOversized(st, built):
	default:
		return
	}
	g.swapMu.Lock()
	g.tracking, g.changes = true, nil
	g.swapMu.Unlock()
	g.db.pauseAt(pauseRebuildTracking)
	v, err := g.db.acquire()
	if err != nil {
		g.stopTracking()
		return
	}
	g.rebuilding.Store(true)
	g.db.bg.Add(1) // the flush goroutine, itself counted, is running
	go func() {
		defer g.db.bg.Done()
		defer g.rebuilding.Store(false)
		defer v.release()
		g.rebuildIndex(v)
	}()
}

// idleOversized reports whether an index of one segment takes a fifth
// more than the index a rebuild would give its entries, or the keys it
// was last built for (built) if more: an index built at once takes what
// a rebuild would give it, however many of its keys share entries, so it
// is never rebuilt for this again until the store grows.
func (g *globalFilter) idleOversized(st dynamic.IndexStats, built int64) bool {
	fresh := dynamic.IndexBytes(indexCapacity(int(max(st.Entries, built)), g.bitsPerKey), g.bitsPerKey)
	return 5*st.Bytes > 6*fresh
}

// indexCapacity is the capacity an index built at once for entries keys
// is given: room for 4% more (about four flushes of a store that took 25
// to build), as far as 99% of the budget allows, the index's fixed memory
// counted (dynamic.IndexBytes); where that buys less than 1% more, as much
// of 1% as 100.5% of the budget buys (the last half percent is left to
// the codebook's rows); and at least half a percent or 1024 more, budget
// or not: an index with no room grows by half at the next flush, which
// costs far more than the budget's last percent. So a store whose budget
// buys 10-bit slots gets an index within 1% of its budget once the fixed
// memory (a few kilobytes) is a small part of that; a smaller store, or a
// budget under the slots' floor, gets the room alone.
func indexCapacity(entries int, bitsPerKey float64) int {
	budget := bitsPerKey * float64(entries) / 8 // bytes
	// most: the largest capacity up to hi whose index takes at most share
	// of the budget; entries-1 if none from entries on does.
	most := func(hi int, share float64) int {
		return entries - 1 + sort.Search(hi-entries+1, func(i int) bool {
			return float64(dynamic.IndexBytes(entries+i, bitsPerKey)) > share*budget
		})
	}
	c := most(entries+entries/25, 0.99)
	if c < entries+entries/100 {
		c = max(c, most(entries+entries/100, 1.005))
	}
	return max(c, entries+entries/200, entries+1024)
}

// rebuildSegments: an index in this many segments is rebuilt in one;
// idleRebuildAfter: a store with no flush for this long is idle.
const (
	rebuildSegments  = 3
	idleRebuildAfter = time.Second
)

func (g *globalFilter) stopTracking() {
	g.swapMu.Lock()
	g.tracking, g.changes = false, nil
	g.swapMu.Unlock()
}

// rebuildIndex builds a new index, in one segment, from the keys of v's
// indexed tables, replays on it the changes made to the old one since
// tracking began, and swaps it in, all under swapMu from the replay on.
// A Get that loaded the old index keeps a complete one for its view: no
// writer changes the old index after the swap, and any table added after
// the Get loaded it is missing from the Get's view too. A compaction
// whose output v lists and whose merged has not made its change by then
// would leave its inputs, which older views still list, out of both the
// new index and the changes: the rebuild is then given up.
func (g *globalFilter) rebuildIndex(v *view) {
	start := time.Now()
	var ids []uint64
	var sets [][]uint64
	total := 0
	for i := len(v.tables) - 1; i >= 0; i-- { // oldest first
		st := v.tables[i]
		if !st.indexed.Load() || st.t == nil {
			continue
		}
		select {
		case <-g.db.stop:
			g.stopTracking()
			return
		default:
		}
		hashes, err := tableHashes(st)
		if err != nil {
			g.stopTracking() // the table is damaged: keep the index as it is
			return
		}
		ids = append(ids, st.id)
		sets = append(sets, hashes)
		total += len(hashes)
	}
	fresh := dynamic.NewIndex(indexCapacity(total, g.bitsPerKey), g.bitsPerKey)
	if err := fresh.AddTables(ids, sets); err != nil {
		g.stopTracking()
		return
	}
	built := time.Since(start) // the wait for swapMu is not upkeep
	g.db.pauseAt(pauseRebuildBuilt)
	g.swapMu.Lock()
	defer g.swapMu.Unlock()
	for _, st := range v.tables {
		if st.merge != nil {
			// A compaction's output that v lists in its inputs' place,
			// whose merged has not made its change: the inputs' entries
			// are in the old index and not in the new one, which would
			// answer absent for their keys to Gets on older views until
			// merged runs. Keep the old index; a later upkeep rebuilds.
			g.tracking, g.changes = false, nil
			return
		}
	}
	start = time.Now()
	for _, c := range g.changes {
		var present []uint64
		for _, id := range c.remove {
			if fresh.HasTable(id) {
				present = append(present, id)
			}
		}
		var err error
		switch {
		case c.add != 0 && fresh.HasTable(c.add):
			// Indexed before the view was read, recorded too.
			if len(present) > 0 {
				err = fresh.RemoveTables(present...)
			}
		case c.add != 0:
			err = fresh.Replace(present, c.add, c.hashes, c.dropped)
		case len(present) > 0:
			err = fresh.RemoveTables(present...)
		}
		if err != nil {
			// The fresh index would not hold a table the old one holds
			// (and that its table is marked indexed in): a lookup on it
			// could miss that table's keys. Keep the old index.
			g.db.opts.Logger.Printf("global index rebuild abandoned: replaying a change: %v", err)
			g.tracking, g.changes = false, nil
			return
		}
	}
	g.tracking, g.changes = false, nil
	g.idx.Store(fresh)
	g.rebuilds.Add(1)
	g.builtWith.Store(int64(total))
	g.db.stats.indexUpdateNanos.Add((built + time.Since(start)).Nanoseconds())
}

// warm prefetches the index buckets that prepare's lookup reads.
func (g *globalFilter) warm(h uint64) {
	if idx := g.idx.Load(); idx != nil {
		idx.PrefetchHash(h)
	}
}

// prepare is the Get's one index lookup.
func (g *globalFilter) prepare(key []byte, h uint64) filterQuery {
	q := filterQuery{key: key, epoch: g.epoch.Load()}
	idx := g.idx.Load()
	if idx == nil {
		q.many = true // no table indexed yet: nothing to rule out
		return q
	}
	var buf [8]uint64
	c := idx.LookupHash(h, buf[:0])
	if len(c) > len(q.cands) {
		q.many = true
		return q
	}
	q.ncands = uint8(copy(q.cands[:], c))
	return q
}

func (g *globalFilter) mayContain(st *sstable, q filterQuery) filterAnswer {
	return g.screen(st, &q)
}

func (g *globalFilter) search(tables []*sstable, q filterQuery) (s tableSearch) {
	seek := seekKey(q.key)
	for _, st := range tables {
		if s.next(st, g.screen(st, &q), seek, q.key) {
			break
		}
	}
	return s
}

// screen is mayContain on the query in place (see tableFilter.search).
func (*globalFilter) screen(st *sstable, q *filterQuery) filterAnswer {
	if q.many {
		return filterNone
	}
	// indexed first: merged stores an output's indexedAt before its
	// indexed, and an input's mergedInto before clearing its indexed, so
	// what is read after indexed is at least as new. Read the other way, a
	// Get could take an output's indexedAt from before merged (0) and its
	// indexed from after, and trust a lookup that named only the inputs.
	indexed := st.indexed.Load()
	into := st.mergedInto.Load()
	if st.indexedAt.Load() > q.epoch {
		// Indexed after this Get's lookup (merged): the lookup may have
		// named its keys' inputs, or nothing yet.
		return filterNone
	}
	if !indexed && into == nil {
		return filterNone
	}
	c := q.cands[:q.ncands]
	if slices.Contains(c, st.id) {
		return filterMaybe
	}
	// A compaction's Replace may have moved st's keys to its output, and
	// later ones that output's keys: any of them named means st may hold
	// the key. So does any input of one of those merges named: a key a
	// merge drops (deleted) has its inputs' entries cleared one at a
	// time, and a lookup meanwhile may name the input holding its old
	// value and not st, holding its tombstone (mergedFrom).
	for ; into != nil; into = into.mergedInto.Load() {
		if slices.Contains(c, into.id) || namesAny(c, into.mergedFrom) {
			return filterMaybe
		}
	}
	return filterAbsent
}

// namesAny reports whether the candidates c name any of ids.
func namesAny(c, ids []uint64) bool {
	for _, id := range ids {
		if slices.Contains(c, id) {
			return true
		}
	}
	return false
}

// drop queues st's removal from the index: removals cost a pass over the
// whole index each, so they are done together, before the next table is
// added or once eight are waiting. Until then the index may still name
// st, which no Get asks about any more (no view lists it, and table IDs
// are never reused).
func (g *globalFilter) drop(st *sstable) {
	if !st.indexed.CompareAndSwap(true, false) {
		return
	}
	g.mu.Lock()
	g.leaving = append(g.leaving, st.id)
	n := len(g.leaving)
	g.mu.Unlock()
	if n >= 8 {
		g.removeLeaving()
	}
}

// removeLeaving removes the queued tables from the index in one pass.
func (g *globalFilter) removeLeaving() {
	g.mu.Lock()
	ids := g.leaving
	g.leaving = nil
	g.mu.Unlock()
	if len(ids) == 0 || g.idx.Load() == nil {
		return
	}
	spent, _ := g.change(0, indexChange{remove: ids}, func(idx *dynamic.Index) error {
		if err := idx.RemoveTables(ids...); err != nil {
			// Only an ID the index never had; remove the others one by one.
			for _, id := range ids {
				if err := idx.RemoveTable(id); err != nil && !errors.Is(err, dynamic.ErrNoTable) {
					g.db.opts.Logger.Printf("table %06d: leaving the global index: %v", id, err)
				}
			}
		}
		return nil
	})
	// Upkeep counts removals too, per key added.
	g.db.stats.indexUpdateNanos.Add(spent.Nanoseconds())
}

// unfiltered: a table that is not (yet) in the index is searched by every
// Get.
func (g *globalFilter) unfiltered(st *sstable) bool { return st.t != nil && !st.indexed.Load() }

// checkStored: the index keeps nothing on disk (Open rebuilds it from the
// tables, which Check verifies).
func (*globalFilter) checkStored(*sstable) (string, string, error) { return "", "", nil }

// upkeep rebuilds in one segment an index that grew by segments
// (maybeRebuild).
func (g *globalFilter) upkeep(idle bool) { g.maybeRebuild(idle) }

func (g *globalFilter) upkeepRunning() bool { return g.rebuilding.Load() }

// describe: the index's memory is the tables' filter memory, and a table
// not (yet) in the index is searched by every Get, a damaged one too.
func (g *globalFilter) describe(tables []*sstable) filterStats {
	s := filterStats{rebuilding: g.rebuilding.Load()}
	if idx := g.idx.Load(); idx != nil {
		s.index = idx.Stats()
	}
	s.bytes = s.index.Bytes
	for _, st := range tables {
		if !st.indexed.Load() {
			s.unfiltered++
		}
	}
	return s
}
