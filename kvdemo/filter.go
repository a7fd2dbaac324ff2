package kvdemo

import (
	"fmt"
	"math"
	"time"

	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// tableFilter is how a store skips tables on a Get. One implementation per
// FilterKind, chosen once at Open from the manifest; the rest of the store
// never switches on the kind. Its life cycle follows the table's:
//
//   - configure, once, before any table is built or opened (a kind that
//     lives inside Badger's table, like bloom, sets its options here);
//   - newBuilder at every flush and compaction: it sees each user key the
//     table will hold (and, in a compaction, each key its inputs held that
//     it leaves out), and finish makes the filter durable (bound to the
//     table's identity) before the manifest names the table;
//   - merged, after a compaction's table took its inputs' place in the
//     table list (Gets on older views may still read the inputs);
//   - attach at Open for each listed table; false means "no trustworthy
//     filter": the table is read unfiltered and rebuild is called in the
//     background;
//   - attachedAll once Open has attached every listed table;
//   - prepare once per Get that reaches the tables, then search, which
//     screens each table the Get reaches (mayContain) with what prepare
//     derived from the key and searches those it does not rule out;
//   - drop when the table leaves the store (compacted away, or a build
//     abandoned before the manifest named it);
//   - upkeep in the flush goroutine, after flushes and when the store is
//     quiet; upkeepRunning while what it started still runs (Settle
//     waits for it);
//   - describe for Stats, checkStored for Check (filtercheck.go).
//
// A store-wide kind (one index over every table) fits the same shape:
// finish and drop add and remove a table's keys from the index, prepare
// does the one index lookup per Get and keeps its answer in the query,
// and mayContain reads it for each table.
//
// The contract every implementation keeps: mayContain answers filterAbsent
// only if the table certainly does not hold the key. Anything doubtful
// (a filter not yet attached, not bound to this table, damaged) answers
// filterNone and the table is searched.
type tableFilter interface {
	kind() FilterKind
	configure(o *table.Options)
	newBuilder(merging bool) filterBuilder
	merged(st *sstable, inputs []*sstable)
	attach(st *sstable) bool
	attachedAll() error
	rebuild(st *sstable) error
	// warm starts bringing in what prepare will read for the key of hash
	// h (dynamic.KeyHash), so that its cache misses overlap the
	// memtables' probes; prepare derives the Get's query.
	warm(h uint64)
	prepare(key []byte, h uint64) filterQuery
	mayContain(st *sstable, q filterQuery) filterAnswer
	// search screens tables (a Get's view, newest first, after its
	// memtables) with q, and searches each one the filter does not rule
	// out (tableSearch.next) until the Get has its answer. The loop is
	// each kind's own so that it screens with a direct call on q in
	// place: an interface call per table, each copying the query, costs
	// more than the screening itself, and one taking q's address (or a
	// slice built for the Get) would move it to the heap, an allocation
	// per Get.
	search(tables []*sstable, q filterQuery) tableSearch
	drop(st *sstable)
	// upkeep is the flush goroutine's: after a flush's edit (idle
	// false), and when no flush has come for a while or Settle asks
	// (idle true), in both cases when no flushed table waits for its
	// edit. upkeepRunning: work upkeep started still runs in the
	// background.
	upkeep(idle bool)
	upkeepRunning() bool
	// describe is what Stats reports of the filters of tables (a view's).
	describe(tables []*sstable) filterStats
	// checkStored verifies what the kind keeps beside st on disk: the
	// file's name ("" if it keeps nothing there) and what Check reports.
	checkStored(st *sstable) (file, detail string, err error)
}

// filterBuilder collects a new table's keys (each user key once, in order).
type filterBuilder interface {
	add(userKey []byte)
	// omit: a key the compaction's inputs held that the table leaves out
	// (a deleted key dropped at the oldest end).
	omit(userKey []byte)
	// finish makes the filter durable beside st (the table's file is
	// written, its identity known) and attaches it. The caller syncs the
	// directory before the manifest names the table.
	finish(st *sstable) error
}

// filterQuery is one Get's key, with what a kind derives from it once per
// Get however many tables the Get reaches. It is passed by value: a
// pointer handed to an interface method would move it to the heap, one
// allocation per Get.
type filterQuery struct {
	key  []byte
	hash uint32 // bloom: Badger's y.Hash of the key
	// global: the tables the index names for key (up to 4), or many when
	// it named more (every table is then searched).
	cands  [4]uint64
	ncands uint8
	many   bool
	// global: the filter's epoch read before the lookup; a table indexed
	// in a later epoch is searched.
	epoch uint64
}

type filterAnswer uint8

const (
	filterNone   filterAnswer = iota // no usable filter: search the table
	filterMaybe                      // the filter says the key may be there
	filterAbsent                     // certainly not in the table
)

// tableSearch is one Get's search of its view's tables: the answer once
// found, and what the filters spared.
type tableSearch struct {
	value []byte
	err   error // the Get's error: a damaged table, a failed read, a tombstone (ErrNotFound)
	found bool  // value is the answer
	// Counted here and added to the store's counters once per Get:
	// per-table atomic adds on shared counters would cost more than the
	// filters save.
	negatives, probed, falsePos int64
}

// seekKey is what a table search looks key up with: its newest version.
// Each search builds its own (see tableFilter.search).
func seekKey(key []byte) []byte { return y.KeyWithTs(key, math.MaxUint64) }

// next searches st, for which the filter answered ans; true once the Get
// has its answer (found, or err set).
func (s *tableSearch) next(st *sstable, ans filterAnswer, seek, key []byte) bool {
	if ans == filterAbsent {
		s.negatives++
		return false
	}
	if st.damaged != nil {
		// It may hold a newer version of key than any older table.
		s.err = errorf("%w (a Get for this key needs it)", st.damaged)
		return true
	}
	s.probed++
	vs, ok, err := st.get(seek, key)
	switch {
	case err != nil:
		s.err = err
	case !ok:
		if ans == filterMaybe {
			s.falsePos++
		}
		return false
	case vs.Meta&metaDelete != 0:
		s.err = ErrNotFound
	default:
		s.value, s.found = vs.Value, true
	}
	return true
}

// filterStats is what Stats reports of a kind's filters over a view's
// tables.
type filterStats struct {
	bytes      int64 // held in memory
	unfiltered int   // tables Gets search for want of a usable filter
	// The store-wide kind's index, and whether it is being rebuilt in
	// one segment.
	index      dynamic.IndexStats
	rebuilding bool
}

// perTableFilter is what describeTables asks of a kind that keeps one
// filter per table.
type perTableFilter interface {
	memoryBytes(st *sstable) int64
	// unfiltered: Gets search st for want of a usable filter (a kind
	// that keeps none by choice answers false).
	unfiltered(st *sstable) bool
}

// describeTables is describe for a kind that keeps one filter per table;
// a damaged table, which no Get reads, is not counted.
func describeTables(f perTableFilter, tables []*sstable) filterStats {
	var s filterStats
	for _, st := range tables {
		if st.damaged != nil {
			continue
		}
		s.bytes += f.memoryBytes(st)
		if f.unfiltered(st) {
			s.unfiltered++
		}
	}
	return s
}

// newTableFilter is the implementation of kind for db (nil: only check
// that kind exists).
func newTableFilter(kind FilterKind, db *DB) (tableFilter, error) {
	switch kind {
	case FilterCuckoo:
		c := &cuckooFilter{db: db}
		if db != nil {
			c.bitsPerKey = db.opts.BitsPerKey
			c.version = db.opts.filterVersion
		}
		return c, nil
	case FilterBloom:
		return bloomFilter{}, nil
	case FilterNone:
		return noFilter{}, nil
	case FilterGlobal:
		g := &globalFilter{db: db}
		if db != nil {
			g.bitsPerKey = db.opts.BitsPerKey
		}
		return g, nil
	}
	return nil, fmt.Errorf("kvdemo: unknown filter %q (want cuckoo, bloom, global or none)", kind)
}

// noFilter: every table is searched.
type noFilter struct{}

func (noFilter) kind() FilterKind                              { return FilterNone }
func (noFilter) configure(*table.Options)                      {}
func (noFilter) newBuilder(bool) filterBuilder                 { return nopBuilder{} }
func (noFilter) merged(*sstable, []*sstable)                   {}
func (noFilter) attach(*sstable) bool                          { return true }
func (noFilter) rebuild(*sstable) error                        { return nil }
func (noFilter) warm(uint64)                                   {}
func (noFilter) prepare(key []byte, _ uint64) filterQuery      { return filterQuery{key: key} }
func (noFilter) mayContain(*sstable, filterQuery) filterAnswer { return filterNone }
func (noFilter) drop(*sstable)                                 {}
func (noFilter) memoryBytes(*sstable) int64                    { return 0 }
func (noFilter) attachedAll() error                            { return nil }
func (noFilter) upkeep(bool)                                   {}
func (noFilter) upkeepRunning() bool                           { return false }
func (f noFilter) describe(tables []*sstable) filterStats      { return describeTables(f, tables) }

func (noFilter) search(tables []*sstable, q filterQuery) (s tableSearch) {
	seek := seekKey(q.key)
	for _, st := range tables {
		if s.next(st, filterNone, seek, q.key) {
			break
		}
	}
	return s
}

type nopBuilder struct{}

func (nopBuilder) add([]byte)            {}
func (nopBuilder) omit([]byte)           {}
func (nopBuilder) finish(*sstable) error { return nil }

// bloomFilter is Badger's own bloom filter, written by Badger's table
// builder into the table's index: nothing to build, keep or remove beside
// the table, and it is as trustworthy as the table's checksummed index.
type bloomFilter struct{}

func (bloomFilter) kind() FilterKind { return FilterBloom }
func (bloomFilter) configure(o *table.Options) {
	o.BloomFalsePositive = 0.01 // Badger's default
}
func (bloomFilter) newBuilder(bool) filterBuilder { return nopBuilder{} }
func (bloomFilter) merged(*sstable, []*sstable)   {}
func (bloomFilter) attach(*sstable) bool          { return true }
func (bloomFilter) rebuild(*sstable) error        { return nil }
func (bloomFilter) warm(uint64)                   {}

func (bloomFilter) prepare(key []byte, _ uint64) filterQuery {
	return filterQuery{key: key, hash: y.Hash(key)}
}
func (bloomFilter) mayContain(st *sstable, q filterQuery) filterAnswer {
	if st.t == nil {
		return filterNone
	}
	if st.t.DoesNotHave(q.hash) {
		return filterAbsent
	}
	return filterMaybe
}
func (f bloomFilter) search(tables []*sstable, q filterQuery) (s tableSearch) {
	seek := seekKey(q.key)
	for _, st := range tables {
		if s.next(st, f.mayContain(st, q), seek, q.key) {
			break
		}
	}
	return s
}
func (bloomFilter) drop(*sstable)                            {}
func (bloomFilter) attachedAll() error                       { return nil }
func (bloomFilter) upkeep(bool)                              {}
func (bloomFilter) upkeepRunning() bool                      { return false }
func (f bloomFilter) describe(tables []*sstable) filterStats { return describeTables(f, tables) }
func (bloomFilter) memoryBytes(st *sstable) int64 {
	if st.t == nil {
		return 0
	}
	return int64(st.t.BloomFilterSize())
}

// cuckooFilter is lsmcuckoo's codec block in a file beside each table
// (NNNNNN.cf), held in memory while the table is live.
type cuckooFilter struct {
	db         *DB
	bitsPerKey float64
	version    int // codec format version written; 0: the codec's default
}

// codecOptions are the options of every block the store builds: new
// tables' filters and rebuilt ones alike. A filter file written by an
// earlier release (an older format version) is read as it is and stays
// until its table is compacted away, or until it is found damaged and
// rebuilt in the current version.
func (c *cuckooFilter) codecOptions() codec.Options {
	return codec.Options{BitsPerKey: c.bitsPerKey, Version: c.version}
}

func (*cuckooFilter) kind() FilterKind         { return FilterCuckoo }
func (*cuckooFilter) configure(*table.Options) {}

func (*cuckooFilter) merged(*sstable, []*sstable) {}
func (*cuckooFilter) attachedAll() error          { return nil }
func (*cuckooFilter) upkeep(bool)                 {}
func (*cuckooFilter) upkeepRunning() bool         { return false }
func (c *cuckooFilter) describe(tables []*sstable) filterStats {
	return describeTables(c, tables)
}

func (c *cuckooFilter) newBuilder(bool) filterBuilder {
	return &cuckooBuilder{c: c, b: codec.NewBuilder(c.codecOptions())}
}

type cuckooBuilder struct {
	c    *cuckooFilter
	b    *codec.Builder
	keys int64
}

func (b *cuckooBuilder) add(userKey []byte) { b.b.Add(userKey); b.keys++ }
func (*cuckooBuilder) omit([]byte)          {}

func (b *cuckooBuilder) finish(st *sstable) error {
	start := time.Now()
	block := b.b.Finish(nil)
	b.c.db.stats.filterBuildNanos.Add(time.Since(start).Nanoseconds())
	b.c.db.stats.filterBuildKeys.Add(b.keys)
	err := b.c.install(st, block)
	// The build's full cost includes its file (written and fsynced), which
	// the global index, kept only in memory, does not pay.
	b.c.db.stats.filterWriteNanos.Add(time.Since(start).Nanoseconds())
	return err
}

// install saves block as st's filter and attaches it.
func (c *cuckooFilter) install(st *sstable, block []byte) error {
	f, err := codec.Decode(block)
	if err != nil {
		// Our own builder's output always decodes; if it ever did not,
		// the table stays correct, only unfiltered.
		return fmt.Errorf("kvdemo: filter %06d does not decode: %w", st.id, err)
	}
	if err := c.db.writeFilterFile(st, block); err != nil {
		return fmt.Errorf("kvdemo: writing filter %06d: %w", st.id, err)
	}
	st.cf.Store(f)
	st.cfBytes.Store(int64(len(block)))
	return nil
}

func (c *cuckooFilter) attach(st *sstable) bool {
	raw, err := vfs.ReadFile(c.db.fs, fileName(c.db.dir, st.id, extFilter))
	read := err == nil
	if read {
		var block []byte
		if block, err = checkFilterBinding(raw, st); err == nil {
			var f *codec.Filter
			if f, err = codec.Decode(block); err == nil {
				st.cf.Store(f)
				st.cfBytes.Store(int64(len(block)))
				return true
			}
		}
	}
	c.db.opts.Logger.Printf("table %06d: filter unusable (%v); reading the table without it until it is rebuilt", st.id, err)
	// Bytes that were read and are damaged, or another table's, are
	// evidence (of a failing disk, of files copied over each other): the
	// rebuild, or the table's removal, moves them to lost/ first. Not
	// here: Open changes nothing before it knows it will not refuse.
	// (A damaged table's filter stays: nothing rebuilds or removes it.)
	st.badFilter.Store(read && st.damaged == nil)
	return false
}

// keepBadFilter moves st's unusable filter file (see attach) to lost/
// before anything writes over it or removes it. Once: the rebuild and
// the table's removal cannot both get there.
func (c *cuckooFilter) keepBadFilter(st *sstable, why string) error {
	if !st.badFilter.CompareAndSwap(true, false) {
		return nil
	}
	if err := c.db.moveAside(fmt.Sprintf("%06d.%s", st.id, extFilter), why); err != nil {
		st.badFilter.Store(true)
		return err
	}
	return nil
}

func (c *cuckooFilter) rebuild(st *sstable) error {
	b := codec.NewBuilder(c.codecOptions())
	it := st.t.NewIterator(table.NOCACHE)
	n := 0
	for it.Rewind(); it.Valid(); it.Next() {
		b.Add(y.ParseKey(it.Key()))
		n++
	}
	it.Close()
	// The iterator ends early, as if at the table's end, on a block it
	// cannot read: a filter built from part of the table would answer
	// "absent" for keys it holds.
	if n != int(st.t.KeyCount()) {
		return errorf("%w: table %06d: read %d of its %d entries to rebuild its filter; it stays unfiltered", ErrCorrupt, st.id, n, st.t.KeyCount())
	}
	block := b.Finish(nil)
	if c.db.noWrites {
		// Nothing is written or moved: the rebuilt filter serves from
		// memory, the file stays as it was.
		f, err := codec.Decode(block)
		if err == nil {
			st.cf.Store(f)
			st.cfBytes.Store(int64(len(block)))
		}
		return err
	}
	if err := c.keepBadFilter(st, "damaged, or another table's; the table's filter is rebuilt"); err != nil {
		// Not written over: the rebuilt filter serves from memory.
		if f, derr := codec.Decode(block); derr == nil {
			st.cf.Store(f)
			st.cfBytes.Store(int64(len(block)))
		}
		return err
	}
	if err := c.install(st, block); err != nil {
		// Keep using it from memory: it was built from the table itself.
		if f, derr := codec.Decode(block); derr == nil {
			st.cf.Store(f)
			st.cfBytes.Store(int64(len(block)))
		}
		return err
	}
	return c.db.syncDir()
}

func (*cuckooFilter) warm(uint64)                              {}
func (*cuckooFilter) prepare(key []byte, _ uint64) filterQuery { return filterQuery{key: key} }
func (c *cuckooFilter) mayContain(st *sstable, q filterQuery) filterAnswer {
	return c.screen(st, &q)
}

func (c *cuckooFilter) search(tables []*sstable, q filterQuery) (s tableSearch) {
	seek := seekKey(q.key)
	for _, st := range tables {
		if s.next(st, c.screen(st, &q), seek, q.key) {
			break
		}
	}
	return s
}

// screen is mayContain on the query in place (see search).
func (*cuckooFilter) screen(st *sstable, q *filterQuery) filterAnswer {
	f := st.cf.Load()
	if f == nil {
		return filterNone
	}
	if f.MayContain(q.key) {
		return filterMaybe
	}
	return filterAbsent
}

func (c *cuckooFilter) drop(st *sstable) {
	st.cf.Store(nil)
	if err := c.keepBadFilter(st, "damaged, or another table's; its table was compacted away"); err != nil {
		c.db.opts.Logger.Printf("%s (left in place)", quote(err))
		return
	}
	c.db.removeFile(st.id, extFilter)
}

func (*cuckooFilter) memoryBytes(st *sstable) int64 {
	if st.cf.Load() == nil {
		return 0
	}
	return st.cfBytes.Load()
}
