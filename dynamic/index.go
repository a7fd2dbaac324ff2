package dynamic

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/relocate"
	"github.com/lsmcuckoo/lsmcuckoo/internal/seed"
)

// Index is a store-wide cuckoo index: one filter of (fingerprint, table
// code) entries for all of a store's tables, so that a Get probes one
// filter and reads only the tables it names, instead of probing one filter
// per table (after Dayan & Twitto, "Chucky: A Succinct Cuckoo Filter for
// LSM-Tree", SIGMOD 2021).
//
// Lookup and LookupHash take no lock, allocate nothing and never wait: a
// lookup that keeps meeting writers in its buckets names every table
// instead, which is always a correct answer. AddTable, AddTables, Replace,
// RemoveTable and RemoveTables are serialised by a mutex and may come from
// any goroutines. A table added before a lookup began (its call returned)
// and not removed since is always named if it holds the key; the package
// documentation argues why, including in the middle of a compaction, and
// says how a store keeps Gets correct across one (Replace, or AddTable
// then RemoveTable).
//
// Memory grows with the entries held, by segments twice the newest, and
// only when the newest is 3/4 full, whatever the keys: a key that cannot
// be placed goes to a small exact stash, and past that its table is named
// by every lookup.
//
// An Index holds at most IndexMaxTables tables at once: a call that would
// add one more fails with ErrTooManyTables and changes nothing.
type Index struct {
	mu   sync.Mutex // serialises writers
	seed uint32
	w    uint // slot width
	m    uint // tag bits
	d    uint // code tree depth

	// altHash[tag] places the second bucket: alt = (altHash[tag] reduced
	// to n) − i mod n. A strong hash under the index's seed, because the
	// offsets it gives the 2^m tags decide how far a relocation search
	// reaches (see idxTagLoad).
	altHash [idxMaxTags]uint32

	segs atomic.Pointer[[]*idxSegment]
	book atomic.Pointer[codebook]
	// contended counts lookups that named every table (everyTable); the
	// only write a lookup makes, and a rare one.
	contended atomic.Int64

	// Writer state, under mu.
	byID     map[uint64]int // table ID -> table slot in the codebook
	leafUsed []bool         // code tree leaves taken
	nextRank uint64
	count    []int64 // by table slot: slots holding the table's code, exactly
	// tableLimit is IndexMaxTables; a test lowers it on its own index to
	// reach the limit at a small scale.
	tableLimit int
	// search is the relocation search's working memory, held only while a
	// writer call runs (unlock returns it to idxSearchPool).
	search *relocate.Search
	// pendingSqrt: Σ√keys of the tables an AddTables call has yet to add,
	// so that the codes it gives first leave room for them.
	pendingSqrt float64
	presetCode  *[2]uint32 // AddTables: the code claim is to use (already taken)
	builtAtOnce bool       // AddTables filled the index's first segment

	hooks indexHooks
}

// indexHooks stop a lookup or a writer at the instant an interleaving
// under test needs (a lookup between its two bucket reads, a Replace
// between two keys). Only tests set them; a nil hook costs a load and a
// branch.
type indexHooks struct {
	afterFirstRead func(s *idxSegment) // between a lookup's reads of its two buckets
	recoded        func()              // after each key a Replace recodes
	// cleared runs when a Replace has cleared the input entries left
	// beside its keys' entries, before its last codebook.
	cleared      func()
	entryCleared func(s *idxSegment) // after each entry a writer clears
	searched     func(nodes int)     // after each relocation search, with the nodes it queued
}

const (
	idxSlots      = 4
	idxGroupShift = 8 // one seqlock counter per 256 buckets
	idxGrowLoad   = 0.75
	idxNearFull   = 0.85 // relocation searches get long beyond this load
	idxMaxPath    = 7    // the writer alone searches: it can afford a deep path
	idxMaxNodes   = 2048
	idxStashSize  = 1024
	idxTag        = 5 // bits placing the second bucket; fewer lose load at 1M entries
	idxMinDepth   = 5 // code tree depth: 31 codes, enough for a size-tiered store's tables
	idxMaxDepth   = 8
	idxMinSlot    = idxTag + idxMinDepth
	idxMaxTags    = 1 << 9 // tags have at most 9 bits (idxTagLoad)
	idxAltSalt    = 0x7a11_5eed
)

// idxTagLoad[m] is the load a segment is sized to when tags have m bits.
// The tag alone places an entry's second bucket, so a bucket's entries have
// at most 2^m other buckets to move to; with the offsets of altHash, even
// 5-bit tags let a relocation search fill a segment about as far as longer
// tags do before the first insert fails (which grows the index). Each
// figure is a little below the lowest load of a first failure that
// TestIndexLoadSweep measures over segment sizes and seeds. altHash must
// be a strong hash: an unkeyed multiplicative hash of the tag gives the
// 2^m offsets in near arithmetic progression, so a search walks a line
// rather than a tree, and short tags fail far earlier on some segment
// sizes. TestIndexTagLoads checks that segments reach these loads.
var idxTagLoad = [...]float64{5: 0.96, 6: 0.96, 7: 0.96, 8: 0.96, 9: 0.96}

// NewIndex returns an index sized so that capacityHint entries (keys summed
// over tables) fit without growing, at about bitsPerKey bits per entry,
// table codes included. A bucket of four w-bit slots is stored semi-sorted
// in 4w−4 bits, so with one 32-bit counter per 256 buckets an entry costs
// (4w − 4 + 0.125) / (4·load) bits, where load is what segments with m-bit
// tags reliably reach (a constant of the package, which its tests check
// segments reach). NewIndex takes the widest
// slot (each bit halves the false candidates) that some tag width fits in
// the budget, with the shortest such tag (more code bits, more tables with
// a code).
// Slots are at least 10 bits (a 5-bit tag and up to 5 code bits, 31
// tables), so smaller budgets (0, negative or NaN included) are raised to
// what 10-bit slots cost; slots are at most 16 bits. A capacityHint below
// one builds the smallest index, which grows as tables are added, and one
// above MaxCapacityHint is taken as that.
//
// Use the index NewIndex returns; the zero Index is not ready to use.
func NewIndex(capacityHint int, bitsPerKey float64) *Index {
	return newIndexSeeded(capacityHint, bitsPerKey, seed.New())
}

// IndexEntryBits is what an entry costs, in bits, in an index NewIndex
// builds for bitsPerKey when it is filled to its capacity hint (at most
// bitsPerKey, except below the 10-bit slots' floor). The rest of the
// budget can buy headroom: NewIndex(n·bitsPerKey/IndexEntryBits(bitsPerKey),
// bitsPerKey) takes about bitsPerKey·n bits and holds n entries with room
// for more before it grows.
func IndexEntryBits(bitsPerKey float64) float64 {
	w, _, load := indexShape(bitsPerKey)
	return entryBits(w, load)
}

// IndexBytes is the memory that an index NewIndex(capacityHint,
// bitsPerKey) builds takes before any table is added, as Stats counts it:
// its first segment's buckets and counters, and its fixed tables (the
// code tree's, the tag offsets'). Tables add their codebook rows, and
// keys that go to the stash their exact entries. With IndexEntryBits, it
// lets a store size an index to a memory budget exactly: the fixed part
// is a few kilobytes, which matter in a small store.
func IndexBytes(capacityHint int, bitsPerKey float64) int64 {
	w, m, load := indexShape(bitsPerKey)
	words, ctrs := segmentArrays(firstBuckets(capacityHint, load), idxSlots*uint64(w)-4)
	return int64(words)*8 + int64(ctrs)*4 + int64(1)<<(w-m)*2 + idxMaxTags*4
}

// indexShape returns the slot width w and tag width m for a budget, and the
// load segments are sized to (NewIndex).
func indexShape(bitsPerKey float64) (w, m uint, load float64) {
	for w := 16; w >= idxMinSlot; w-- {
		for m := max(idxTag, w-idxMaxDepth); m <= min(w-idxMinDepth, len(idxTagLoad)-1); m++ {
			l := idxTagLoad[m]
			if entryBits(uint(w), l) <= bitsPerKey {
				return uint(w), uint(m), l
			}
		}
	}
	return idxMinSlot, idxTag, idxTagLoad[idxTag]
}

func newIndexSeeded(capacityHint int, bitsPerKey float64, seed uint32) *Index {
	w, m, load := indexShape(bitsPerKey)
	x := &Index{seed: seed, w: w, m: m, d: w - m, byID: map[uint64]int{}, tableLimit: IndexMaxTables}
	for tag := range x.altHash {
		x.altHash[tag] = uint32(keyhash.Mix(uint64(tag), seed^idxAltSalt) >> 32)
	}
	x.leafUsed = make([]bool, 1<<x.d)
	segs := []*idxSegment{x.newSegment(firstBuckets(capacityHint, load))}
	x.segs.Store(&segs)
	dec := make([]int16, 1<<x.d)
	for i := range dec {
		dec[i] = -1
	}
	x.book.Store(&codebook{decode: dec})
	return x
}

// KeyHash is the hash AddTable, AddTables, Replace and LookupHash expect
// for each key: xxhash64 of the key, unseeded, so it is the same in every
// process and may be stored beside a table and read back at Open (each
// index mixes its own secret seed into it). A store whose tables are keyed
// by version (MVCC) passes the user key, so that the versions of one key
// in a table repeat one hash and take one entry.
func KeyHash(key []byte) uint64 { return keyhash.Hash(key) }

// ErrTableExists and ErrNoTable report a writer call that does not match
// the index's tables; ErrTooManyTables one that would hold more than
// IndexMaxTables tables.
var (
	ErrTableExists   = errors.New("dynamic: table already in the index")
	ErrNoTable       = errors.New("dynamic: table not in the index")
	ErrTooManyTables = errors.New("dynamic: too many tables for the index")
)

// IndexMaxTables is the most tables an Index holds at once. AddTable,
// AddTables, and Replace with no inputs, refuse a table past it with an
// error wrapping ErrTooManyTables, and change nothing; Replace with inputs
// never adds to the count, so a store at the limit still compacts. The
// code tree has at most 255 codes, so past a few hundred tables each
// further table is named by every lookup, and every writer call copies
// the codebook, a row per table: an index of thousands of tables filters
// little and costs its writers more than a filter per table would. A
// store past the limit filters its further tables another way (a filter
// of their own, or none: searched by every Get).
const IndexMaxTables = 4096

// Table slots are int16 in a codebook (decode, always, stash entries),
// and slots run from 0 to IndexMaxTables: a Replace takes its merged
// table's slot before it frees its inputs'.
const _ uint16 = math.MaxInt16 - IndexMaxTables

// tooMany reports whether adding n tables would pass the limit, and the
// error that says so.
func (x *Index) tooMany(n int) error {
	if len(x.byID)+n <= x.tableLimit {
		return nil
	}
	return fmt.Errorf("%w: %d held, %d more would pass the limit of %d", ErrTooManyTables, len(x.byID), n, x.tableLimit)
}

// HasTable reports whether table id is in the index. Safe for concurrent
// use; unlike Lookup, it takes the writers' mutex, so it waits for a writer
// call in progress.
func (x *Index) HasTable(id uint64) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.byID[id]
	return ok
}

// Tables returns the number of tables in the index. Safe for concurrent
// use; it waits for a writer call in progress, as HasTable does.
func (x *Index) Tables() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.byID)
}

func contains(s []int, v int) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// unlock ends a writer call: the search's working memory goes back to the
// pool, then the writer mutex is released.
func (x *Index) unlock() {
	if x.search != nil {
		idxSearchPool.Put(x.search)
		x.search = nil
	}
	x.mu.Unlock()
}
