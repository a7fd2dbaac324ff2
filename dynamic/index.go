package dynamic

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
)

// Index is a store-wide cuckoo index: one table of (fingerprint, table)
// entries for all of a store's tables, so that a Get probes one filter and
// reads only the tables it names, instead of probing one filter per table
// (after Dayan & Twitto, "Chucky: A Succinct Cuckoo Filter for LSM-Tree",
// SIGMOD 2021). Lookups take no lock and allocate nothing, and they never
// wait: they read bucket groups under a sequence counter and read again a
// group that a writer changed meanwhile (a seqlock), but only a few times;
// a lookup that still finds a writer in the middle of its group (one
// descheduled mid-write, say), or codebooks published under it, names
// every table instead, which is always a correct answer (a "maybe" for
// each). So a lookup finishes in a bounded number of steps whatever the
// writers do, and never blocks one. AddTable, RemoveTable and Replace are
// serialised by a mutex.
//
// Entries. A slot holds w bits: a tag of m bits, then a prefix-free table
// code of ℓ bits, then w−m−ℓ more fingerprint bits. The tag and the extra
// bits together are the key's fingerprint for that table, so a table with
// a short code keeps a long fingerprint. The tag alone places the key's
// second bucket (alt = (h(tag) − i) mod n, an involution for any n, h a
// strong hash under the index's seed), which lets the writer relocate an
// entry without its key and without knowing its table. One entry is stored per (key, table): a key with versions in three
// tables has three entries, each naming its table, and two keys of one
// table that agree on bucket pair and fingerprint share one entry (which is
// removed only with the table, so sharing loses nothing).
//
// Table codes. Codes are nodes of a binary code tree of depth D (the node
// holding the all-zero leaf is never used, so no entry is all zeros, the
// empty slot). A table of s keys gets a code of length
// ℓ = ⌈log2(Σ√s_i / √s)⌉ over the tables live at that moment: a false
// candidate costs the same whichever table it names, and the expected
// number of false candidates per absent key, proportional to
// Σ p_t·2^ℓ_t (p_t the share of entries of table t), is smallest under
// Kraft's inequality when 2^−ℓ_t ∝ √p_t. Huffman codes (ℓ_t = −log2 p_t)
// minimise the code bits per entry instead and give Σ p_t·2^ℓ_t = T, the
// same as fixed-width IDs of log2 T bits; the square-root rule gives
// (Σ√p_t)², which is smaller whenever table sizes differ. Stats reports the
// code bits per entry beside the entropy of the table sizes. A table that
// finds no free code, or some of whose keys could not be placed (below),
// is named by every lookup instead: a correct "maybe".
//
// Each table's number of entries is counted exactly, in total and per
// segment (insertions, rewrites and clears), so removing a table whose
// entries are all gone costs no pass over the index, and Replace, removals
// and code lengthening visit only the segments holding their tables'
// entries.
//
// Layout. A segment is n buckets of four w-bit slots, each bucket stored
// semi-sorted in 4w−4 bits (Fan et al., "Cuckoo Filter: Practically Better
// Than Bloom", §5.2; the encoding of the per-table filters, codec/FORMAT.md
// "Bucket encoding"): the four entries, the empty one being 0, are kept in
// ascending order, so their top nibbles (the top of the tag) form a sorted
// multiset stored as a 12-bit code, followed by the entries' low w−4 bits
// in the same order. Buckets are packed into 64-bit words (a bucket may
// straddle two), with one 32-bit seqlock counter per 256 buckets. A lookup
// compares the tag's nibble with the four decoded from the code at once
// and decodes only the entries whose nibble matches. Every change to a
// bucket rewrites it whole (decode, change one entry, sort, encode), so
// an entry's position in its bucket changes when another entry comes or
// goes: writers name an entry by its bucket and value, never by its
// position. The words a bucket shares with its neighbours are rewritten
// with their neighbours' bits unchanged (only the writer writes). The
// index grows by adding segments, which
// lookups probe in turn; a segment that its tables' removals have emptied
// is dropped. Inserts go to the newest segment (relocating while it is
// not nearly full, then into a free slot of an older one), and Replace
// moves a key whose entries sit only in older segments into the newest
// when it has room, so compactions drain older segments; entries of
// tables no compaction touches stay where they are (an entry does not
// carry enough of its hash to be placed in another segment).
//
// Why a concurrent Lookup never misses. Say table T's entries were all
// added (AddTable or Replace returned) before Lookup(k) began, and T has
// not been removed since. Its entry e for k sits in one of k's two buckets
// i1, i2 of some segment.
//
//  1. The writer moves an entry copy-then-remove: it writes e into the new
//     bucket, then clears it in the old one. At every instant e is in i1
//     or i2 (or both).
//  2. Every bucket write happens inside the bucket group's seqlock: the
//     group's counter is incremented before the write (odd: writing) and
//     after (even). Lookup reads i1's counter, i1, i2's counter, i2, then
//     both counters again, and reads again unless both were even and
//     unchanged. If e is in neither read, then e was in i1 when i2 was
//     read (1) but not when i1 was read, so the copy into i1 wrote after
//     the first counter read and finished before the clear of i2 that
//     hid e, which came before the second reads: i1's counter changed,
//     and Lookup reads again. A bucket spread over two words and read
//     half-written is caught the same way. A bucket write changes one
//     entry (a copy, a clear, or a rewrite of an entry to its new value),
//     or, in a pass over the index, several changes each of which would
//     be safe alone (clears of removed tables' entries, rewrites to a
//     lengthened code); the other entries may move within the bucket but
//     keep their values, and a lookup compares all four.
//  3. A lookup decodes entries with the codebook it loaded first, and
//     reads the codebook again at the end: if another was published in
//     between (a table's code lengthened, its entries rewritten), it reads
//     again. So every entry it matched was written in a format its
//     codebook knows.
//     Where (2) or (3) would read again for the eighth time, the
//     lookup answers every table live in the codebook it loads then
//     instead. T is live in every codebook published from before its
//     entries were written until its removal (4), so T is named.
//  4. Segments are published before entries are put in them, and a
//     segment is dropped only when it holds no entries; the codebook
//     (codes → tables) is published before a table's entries are written
//     and changed only after all of a removed table's entries are cleared.
//     A Lookup that starts after AddTable returned therefore sees T's code,
//     T's segment and T's entry.
//  5. Replace (inputs I merged into M) rewrites entries in place: for each
//     key k of M, in the newest segment holding k's M entry or an input
//     entry of k, it rewrites one of k's input entries to M's value for k
//     in a single bucket write (step 2 makes that write atomic to a
//     lookup), then clears k's other input entries there; a key with no
//     input entry gets a new one. Input entries of k in older segments
//     (other versions of k) are not searched for then: they are cleared
//     after every key of M has its own entry, by k's hash or by the
//     removal of I. The trap is an entry that k shares with another key
//     k' of an input (same buckets and fingerprint): when M's code is
//     shorter than the input's, M's value keeps more fingerprint bits,
//     which differ for k and k', so the rewritten entry is k's, no
//     longer that of k'. Hence, while Replace
//     runs, lookups match M's entries only on the tag, the code and the
//     fingerprint bits that every input's entries keep (the codebook's
//     relax, published before the first rewrite, removed after the
//     last). k' agrees with k on those bits, on the buckets and on the
//     segment, so at every instant k' is named by its own input entry, by
//     M through a relaxed match, or by its own M entry once Replace
//     reaches it. Entries of keys M drops, and input entries of a key in
//     a segment other than the one where it got its M entry, are cleared
//     only after every key of M has its own entry, so no key of M relies
//     on them, and only after a codebook is published: a lookup reads
//     segments one at a time, so it may have read the segment of a key's
//     M entry before that entry was written there (or not have that
//     segment in its list at all) and read the key's cleared input entry
//     after; by (3) it reads again. The inputs' codes are freed last (4).
//
// A store keeps Gets correct across a compaction (inputs I merged into
// table M) in one of two ways. Either AddTable(M), then switch its table
// list from I to M, then RemoveTable for each input once no Get still
// reading the old list can ask for it: simple, but the index holds I's
// and M's entries at once, and each removal is a pass over the index. Or
// switch the table list to M, then Replace(I, M): no extra room and no
// pass, but a Get must treat M named as "each of I may hold the key" (a
// Get still reading the old list reads I, and after Replace only M is
// named), and M as unfiltered until Replace returns, and by any Get
// whose lookup began before Replace returned (its keys may be named
// under I, which that Get's list no longer holds). Candidates are
// returned newest first (tables added later are newer; a merged table
// takes the place of its newest input).
//
// Keys chosen by an adversary: each Index draws a secret seed from
// crypto/rand and mixes it into every key hash and into h, so bucket pairs
// cannot be computed from outside. A key that still cannot be placed while the
// newest segment is less than 3/4 full, or whose own entries for other
// tables (its versions) take half of its two buckets, goes to a stash of
// up to 1024 exact entries (full 64-bit hashes, sorted, searched only when
// not empty); beyond that its table becomes one that every lookup names.
// A segment is added only when the newest is at least 3/4 full, and is twice the
// newest (half of it when it is the only one, filled by AddTables), so
// memory stays within about 4/(3/4)·(4w−4)/4 bits per entry ever held by
// live segments, whatever the keys.
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
	// search is the relocation search's working memory, held only while a
	// writer call runs (unlock returns it to idxSearchPool).
	search *idxSearch
	// pendingSqrt: Σ√keys of the tables an AddTables call has yet to add,
	// so that the codes it gives first leave room for them.
	pendingSqrt float64
	presetCode  *[2]uint32 // AddTables: the code claim is to use (already taken)
	builtAtOnce bool       // AddTables filled the index's first segment
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
// TestIndexLoadSweep measures over segment sizes and seeds (the README has
// the figures). An unkeyed multiplicative hash of the tag, used before,
// gives the 2^m offsets in near arithmetic progression: a search then
// walks a line rather than a tree, and short tags fail far earlier on
// some segment sizes. TestIndexTagLoads checks that segments reach these
// loads.
var idxTagLoad = [...]float64{5: 0.96, 6: 0.96, 7: 0.96, 8: 0.96, 9: 0.96}

// codebook maps codes to tables. It is replaced, never changed, so a
// lookup reads a consistent one with a single load.
type codebook struct {
	tables []tableInfo // by table slot; id==0 && !live means free
	decode []int16     // code tree leaf -> table slot, -1 none
	always []int16     // table slots every lookup names
	stash  []stashEntry
}

type tableInfo struct {
	id     uint64
	rank   uint64
	code   uint32
	length uint8
	// While the table's code is being lengthened, entries in the old
	// format (prevCode, prevLength) still match.
	prevCode   uint32
	prevLength uint8
	// While a Replace recodes its inputs' entries to this table's code,
	// lookups compare its entries only above bit relax (documentation, 5).
	relax   uint8
	live    bool
	always  bool
	entries int64 // slots holding the code (writer's count, copied at publish)
	keys    int   // keys given
}

type stashEntry struct {
	x     uint64
	table int16
}

// idxSegment is one cuckoo table of packed buckets.
type idxSegment struct {
	large   bool // prefetched by bulk updates (idxPrefetchBytes)
	n       uint32
	words   []atomic.Uint64
	ctr     []atomic.Uint32
	entries atomic.Int64 // written by the writer only; read by Stats
	// byTable counts the entries of each table slot here (writer only),
	// so that Replace and removals visit only the segments that hold
	// their tables' entries.
	byTable []int64
}

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
	if idxTestHookEntryCleared != nil {
		idxTestHookEntryCleared(s)
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

// holds reports whether s has entries of any of the table slots ts.
func (s *idxSegment) holds(ts []int) bool {
	for _, t := range ts {
		if t < len(s.byTable) && s.byTable[t] > 0 {
			return true
		}
	}
	return false
}

// NewIndex returns an index sized so that capacityHint entries (keys summed
// over tables) fit without growing, at about bitsPerKey bits per entry,
// table codes included. A bucket of four w-bit slots is stored semi-sorted
// in 4w−4 bits, so with one 32-bit counter per 256 buckets an entry costs
// (4w − 4 + 0.125) / (4·load) bits, where load is what segments with m-bit
// tags reliably reach (a constant of the package, which its tests check
// segments reach; the README has the figures). NewIndex takes the widest
// slot (each bit halves the false candidates) that some tag width fits in
// the budget, with the shortest such tag (more code bits, more tables with
// a code).
// Slots are at least 10 bits (a 5-bit tag and up to 5 code bits, 31
// tables), so smaller budgets (0, negative or NaN included) are raised to
// what 10-bit slots cost; slots are at most 16 bits. A capacityHint below
// one builds the smallest index, which grows as tables are added.
//
// Use the index NewIndex returns; the zero Index is not ready to use.
func NewIndex(capacityHint int, bitsPerKey float64) *Index {
	return newIndexSeeded(capacityHint, bitsPerKey, randomSeed())
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

// firstBuckets is the size of an index's first segment: capacityHint
// entries at the load its tags reach.
func firstBuckets(capacityHint int, load float64) uint64 {
	return uint64(float64(max(capacityHint, 1))/(idxSlots*load)) + 2
}

// segmentArrays returns the lengths of the words and counters of a
// segment asked for buckets buckets of bucketBits bits each.
func segmentArrays(buckets, bucketBits uint64) (words, ctrs uint64) {
	buckets = segmentBuckets(buckets)
	return buckets*bucketBits/64 + 2, buckets>>idxGroupShift + 1 // +1 word so a straddling read never runs off
}

// segmentBuckets is the size of a segment asked for buckets buckets: at
// least two, at most idxMaxBuckets.
func segmentBuckets(buckets uint64) uint64 { return min(max(buckets, 2), idxMaxBuckets) }

// entryBits is what an entry costs in a segment of w-bit slots at load:
// a semi-sorted bucket and its share of a 32-bit counter, over four
// entries times the load.
func entryBits(w uint, load float64) float64 {
	return (float64(idxSlots*w-4) + 32.0/(1<<idxGroupShift)) / (idxSlots * load)
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
	x := &Index{seed: seed, w: w, m: m, d: w - m, byID: map[uint64]int{}}
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

// idxMaxBuckets caps a segment (bucket indexes are 32-bit): an index that
// outgrows it adds segments of this size. A variable so that a test can
// reach it.
var idxMaxBuckets uint64 = 1 << 31

func (x *Index) newSegment(buckets uint64) *idxSegment {
	words, ctrs := segmentArrays(buckets, x.bucketBits())
	buckets = segmentBuckets(buckets)
	return &idxSegment{
		large: buckets*x.bucketBits()/8 > idxPrefetchBytes,
		n:     uint32(buckets),
		words: make([]atomic.Uint64, words),
		ctr:   make([]atomic.Uint32, ctrs),
	}
}

// KeyHash is the hash AddTable, AddTables, Replace and LookupHash expect
// for each key: xxhash64 of the key, unseeded, so it is the same in every
// process and may be stored beside a table and read back at Open (each
// index mixes its own secret seed into it). A store whose tables are keyed
// by version (MVCC) passes the user key, so that the versions of one key
// in a table repeat one hash and take one entry.
func KeyHash(key []byte) uint64 { return keyhash.Hash(key) }

// probe is a key's position in the index: its mixed hash, tag, and the
// fingerprint bits after the tag.
type probe struct {
	x   uint64
	hi  uint32
	lo  uint32
	tag uint32
}

func (x *Index) probeOf(h uint64) probe {
	v := keyhash.Mix(h, x.seed)
	lo := uint32(v)
	return probe{x: v, hi: keyhash.Hi(v), lo: lo, tag: lo >> (32 - x.m)}
}

// slotValue is the entry of a key for a table with code c of length l.
func (x *Index) slotValue(p probe, c uint32, l uint) uint32 {
	k := x.w - x.m - l
	var extra uint32
	if k > 0 {
		extra = (p.lo >> (32 - x.m - k)) & (1<<k - 1)
	}
	return p.tag<<(x.w-x.m) | c<<k | extra
}

func (s *idxSegment) primary(hi uint32) uint32 {
	i, _ := keyhash.Reduce(hi, s.n)
	return i
}

func (x *Index) alt(s *idxSegment, i, tag uint32) uint32 {
	h, _ := keyhash.Reduce(x.altHash[tag&(idxMaxTags-1)], s.n)
	if h >= i {
		return h - i
	}
	return h + s.n - i
}

// bucketBits is a bucket's size: four w-bit entries, semi-sorted.
func (x *Index) bucketBits() uint64 { return uint64(idxSlots*x.w - 4) }

// raw reads bucket i's encoded bits. Each word is one atomic load; see the
// type's documentation for why a bucket spread over two loads is safe.
func (x *Index) raw(s *idxSegment, i uint32) uint64 {
	bw := x.bucketBits()
	off := uint64(i) * bw
	q, r := off>>6, off&63
	v := s.words[q].Load() >> r
	if r+bw > 64 {
		v |= s.words[q+1].Load() << (64 - r)
	}
	return v & (1<<bw - 1)
}

// A bulk update (AddTable, Replace) prefetches the buckets of the key
// idxAhead keys ahead of the one it writes, in segments larger than
// idxPrefetchBytes: its keys are independent, so their cache misses can
// overlap. A smaller segment stays in the processor's caches, where the
// prefetch would only add work.
const idxAhead = 8

// idxPrefetchBytes is a variable so that a benchmark can compare a large
// segment's bulk updates with and without the prefetch.
var idxPrefetchBytes uint64 = 1 << 20

// prefetchKey prefetches h's two buckets in segment s.
func (x *Index) prefetchKey(s *idxSegment, h uint64) {
	p := x.probeOf(h)
	i1 := s.primary(p.hi)
	i2 := x.alt(s, i1, p.tag)
	bw := x.bucketBits()
	prefetch(uintptr(unsafe.Pointer(&s.words[uint64(i1)*bw>>6])))
	prefetch(uintptr(unsafe.Pointer(&s.words[uint64(i2)*bw>>6])))
}

// PrefetchHash asks the processor to bring in the buckets a lookup of the
// key given by KeyHash(key) will read, and returns at once: a caller with
// other work before the lookup (a memtable probe, say) overlaps the two
// cache misses. Safe for concurrent use; it changes nothing.
func (x *Index) PrefetchHash(h uint64) {
	for _, s := range *x.segs.Load() {
		x.prefetchKey(s, h)
	}
}

// entries decodes bucket i (writer only: the writer reads what it wrote, so
// the code is always valid): its four entries in ascending order, empty
// slots (0) first.
func (x *Index) entries(s *idxSegment, i uint32) [idxSlots]uint32 {
	e, _ := semisort.Decode(x.raw(s, i), x.w)
	return e
}

// store writes bucket i's entries (writer only), sorted and encoded, inside
// its group's seqlock: the counter is odd while the bucket's words are
// being written.
func (x *Index) store(s *idxSegment, i uint32, e [idxSlots]uint32) {
	semisort.Sort4(&e)
	enc := semisort.Pack(e[0], e[1], e[2], e[3], x.w)
	bw := x.bucketBits()
	off := uint64(i) * bw
	q, r := off>>6, off&63
	mask := uint64(1)<<bw - 1
	g := &s.ctr[i>>idxGroupShift]
	g.Add(1)
	w0 := s.words[q].Load()
	s.words[q].Store(w0&^(mask<<r) | enc<<r)
	if r+bw > 64 {
		sh := 64 - r
		w1 := s.words[q+1].Load()
		s.words[q+1].Store(w1&^(mask>>sh) | enc>>sh)
	}
	g.Add(1)
}

// swap replaces one entry old of bucket i by new in one bucket write (old 0
// takes an empty slot, new 0 clears the entry) and reports whether the
// bucket held old. Entries are re-sorted by every write, so writers name an
// entry by its bucket and value, never by its position; two equal entries
// of a bucket are interchangeable, so which one is replaced does not
// matter.
func (x *Index) swap(s *idxSegment, i uint32, old, new uint32) bool {
	e := x.entries(s, i)
	for j := range e {
		if e[j] == old {
			e[j] = new
			x.store(s, i, e)
			return true
		}
	}
	return false
}

// Lookup appends to dst the IDs of the tables that may hold key, newest
// first, and returns the extended slice. A table added before the call
// (its AddTable, AddTables or Replace returned) and not removed since is
// always among them if it holds key. Other tables appear as false
// candidates, at the rate the slot width buys, and every table is named
// when the lookup keeps meeting writers (IndexStats.Contended). Safe for
// concurrent use with everything; takes no lock and never waits for a
// writer (see Index); allocation-free when dst has room.
func (x *Index) Lookup(key []byte, dst []uint64) []uint64 {
	return x.LookupHash(keyhash.Hash(key), dst)
}

// LookupHash is Lookup for a key given by KeyHash(key).
func (x *Index) LookupHash(h uint64, dst []uint64) []uint64 {
	p := x.probeOf(h)
	start := len(dst)
	var book *codebook
	for try := 0; ; try++ {
		if try == idxReadTries {
			return x.everyTable(dst[:start])
		}
		book = x.book.Load()
		read := true
		for _, s := range *x.segs.Load() {
			if dst, read = x.lookupSegment(s, p, book, dst); !read {
				break
			}
		}
		if !read {
			return x.everyTable(dst[:start])
		}
		// Entries change format only between two codebook publications
		// (lengthen): if none happened while we read, the codebook we
		// decoded with describes every entry we saw.
		if x.book.Load() == book {
			break
		}
		dst = dst[:start]
	}
	if len(book.stash) > 0 {
		// Sorted by hash: the first entry >= p.x, then its equals.
		lo, hi := 0, len(book.stash)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if book.stash[mid].x < p.x {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		for ; lo < len(book.stash) && book.stash[lo].x == p.x; lo++ {
			dst = append(dst, uint64(book.stash[lo].table))
		}
	}
	for _, t := range book.always {
		dst = append(dst, uint64(t))
	}
	if len(dst) == start {
		return dst
	}
	// Newest first, each table once; then table slots become IDs. A few
	// candidates are sorted by insertion; many (tables named by every
	// lookup, once the code tree is full) in n log n steps, which an
	// insertion sort's n² would make the cost of every lookup.
	c := dst[start:]
	if len(c) <= idxInsertionSortMax {
		for i := 1; i < len(c); i++ {
			for j := i; j > 0 && newer(book, c[j], c[j-1]); j-- {
				c[j], c[j-1] = c[j-1], c[j]
			}
		}
	} else {
		sortNewestFirst(book, c)
	}
	n := 0
	for i := range c {
		if i > 0 && c[i] == c[n-1] {
			continue
		}
		c[n] = c[i]
		n++
	}
	for i := 0; i < n; i++ {
		c[i] = book.tables[c[i]].id
	}
	return dst[:start+n]
}

// idxInsertionSortMax: answers up to this long are sorted by insertion.
const idxInsertionSortMax = 16

// sortNewestFirst sorts table slots newest first (newer).
func sortNewestFirst(book *codebook, c []uint64) {
	slices.SortFunc(c, func(a, b uint64) int {
		switch {
		case a == b:
			return 0
		case newer(book, a, b):
			return -1
		}
		return 1
	})
}

// newer orders table slots newest first; equal ranks (a merged table and
// its inputs during Replace) by slot, so that repeats end up adjacent.
func newer(book *codebook, a, b uint64) bool {
	ra, rb := book.tables[a].rank, book.tables[b].rank
	return ra > rb || ra == rb && a > b
}

// lookupSegment appends the tables that s names for p; read is false when
// a writer changed p's buckets under each of idxReadTries reads.
func (x *Index) lookupSegment(s *idxSegment, p probe, book *codebook, dst []uint64) (_ []uint64, read bool) {
	i1 := s.primary(p.hi)
	i2 := x.alt(s, i1, p.tag)
	g1, g2 := &s.ctr[i1>>idxGroupShift], &s.ctr[i2>>idxGroupShift]
	for try := 0; try < idxReadTries; try++ {
		t1 := g1.Load()
		b1 := x.raw(s, i1)
		if idxTestHookAfterFirstRead != nil {
			idxTestHookAfterFirstRead(s)
		}
		t2 := g2.Load()
		b2 := x.raw(s, i2)
		if t1&1 != 0 || t2&1 != 0 || g1.Load() != t1 || g2.Load() != t2 {
			continue // i1 or i2 changed while we looked
		}
		dst = x.matchBucket(b1, p, book, dst)
		if i2 != i1 {
			dst = x.matchBucket(b2, p, book, dst)
		}
		return dst, true
	}
	return dst, false
}

// idxReadTries bounds a lookup's reads of one segment, and its passes
// over the segments while codebooks are published under it: a writer
// holds a group for a few stores, so a lookup that meets one that often
// has met a writer stopped mid-write, and does not wait for it.
const idxReadTries = 8

// everyTable is a lookup's answer when it could not read the index
// consistently: every table it holds, newest first. A table whose
// AddTable returned before the lookup began and that has not been removed
// is live in every codebook published since, so it is among them.
func (x *Index) everyTable(dst []uint64) []uint64 {
	x.contended.Add(1)
	book := x.book.Load()
	start := len(dst)
	for t := range book.tables {
		if book.tables[t].live {
			dst = append(dst, uint64(t))
		}
	}
	c := dst[start:]
	sortNewestFirst(book, c)
	for i := range c {
		c[i] = book.tables[c[i]].id
	}
	return dst
}

// idxTestHookAfterFirstRead, when set by a test, runs between a lookup's
// reads of its two buckets; idxTestHookRecoded after each key a Replace
// recodes; idxTestHookCleared when a Replace has cleared the input
// entries left beside its keys' entries, before its last codebook;
// idxTestHookEntryCleared after each entry a writer clears.
var (
	idxTestHookAfterFirstRead func(s *idxSegment)
	idxTestHookRecoded        func()
	idxTestHookCleared        func()
	idxTestHookEntryCleared   func(s *idxSegment)
)

// matchBucket appends the tables that bucket b (encoded, read whole)
// names for p. The four high nibbles are compared with the tag's at once
// (XOR into every 4-bit lane, then an exact zero-lane test), so most
// buckets are done after one table load; only slots whose nibble matches
// are decoded.
func (x *Index) matchBucket(b uint64, p probe, book *codebook, dst []uint64) []uint64 {
	nibs := uint32(semisort.NibblesOfCode[b&0xfff])
	xn := nibs ^ (p.tag>>(x.m-4))*0x1111
	eq := ^((xn&0x7777 + 0x7777) | xn) & 0x8888 // bit 4j+3 set: slot j's nibble matches
	if eq == 0 {
		return dst
	}
	return x.matchSlots(b, nibs, eq, p, book, dst)
}

// matchSlots is matchBucket for the slots flagged in eq.
func (x *Index) matchSlots(b uint64, nibs, eq uint32, p probe, book *codebook, dst []uint64) []uint64 {
	tagShift := x.w - x.m
	low := x.w - 4
	lowMask := uint64(1)<<low - 1
	for eq != 0 {
		j := uint(bits.TrailingZeros32(eq)) >> 2
		eq &= eq - 1
		v := (nibs>>(4*j)&0xf)<<low | uint32(b>>(12+j*low)&lowMask)
		if v>>tagShift != p.tag || v == 0 {
			continue
		}
		leaf := (v >> (tagShift - x.d)) & (1<<x.d - 1)
		t := book.decode[leaf]
		if t < 0 {
			continue
		}
		ti := &book.tables[t]
		if v>>ti.relax == x.slotValue(p, ti.code, uint(ti.length))>>ti.relax ||
			ti.prevLength != 0 && v == x.slotValue(p, ti.prevCode, uint(ti.prevLength)) {
			dst = append(dst, uint64(t))
		}
	}
	return dst
}

// ErrTableExists and ErrNoTable report a writer call that does not match
// the index's tables.
var (
	ErrTableExists = errors.New("dynamic: table already in the index")
	ErrNoTable     = errors.New("dynamic: table not in the index")
)

// AddTable adds the keys of a new table (each given by KeyHash), as the
// newest table. Repeated hashes (versions of one key) take one entry.
// An id already in the index is an error wrapping ErrTableExists, and
// adds nothing; any other id, 0 included, is valid. Writer calls (AddTable,
// AddTables, Replace, RemoveTable, RemoveTables) may come from any
// goroutines: they are serialised by the index's mutex, and Lookups run
// beside them without waiting.
func (x *Index) AddTable(id uint64, hashes []uint64) error {
	x.mu.Lock()
	defer x.unlock()
	if _, ok := x.byID[id]; ok {
		return fmt.Errorf("%w: %d", ErrTableExists, id)
	}
	x.nextRank++
	x.addLocked(id, x.nextRank, hashes, nil)
	return nil
}

// AddTables adds several tables at once, oldest first (as if by AddTable
// in that order). Each table's code length is chosen knowing all of them,
// so a store that opens with many tables does not give the first ones
// short codes that the later ones must then lengthen, with a pass over the
// index each time. An ID already present, or repeated, is an error
// wrapping ErrTableExists, and adds nothing; so does len(ids) !=
// len(hashes), an error of its own.
func (x *Index) AddTables(ids []uint64, hashes [][]uint64) error {
	x.mu.Lock()
	defer x.unlock()
	if len(ids) != len(hashes) {
		return fmt.Errorf("dynamic: %d table IDs for %d key sets", len(ids), len(hashes))
	}
	seen := map[uint64]bool{}
	for _, id := range ids {
		if _, ok := x.byID[id]; ok || seen[id] {
			return fmt.Errorf("%w: %d", ErrTableExists, id)
		}
		seen[id] = true
	}
	// Lengths by the square-root rule over the live tables and all of
	// these; then, largest tables first, one bit shorter while the free
	// leaves allow (rounding every length up leaves part of the tree
	// unused); codes taken shortest first, so that no long code splits a
	// subtree a short one needs.
	var sum float64
	for _, hs := range hashes {
		sum += math.Sqrt(float64(max(len(hs), 1)))
	}
	x.pendingSqrt = sum
	lengths := make([]uint, len(ids))
	for i, hs := range hashes {
		x.pendingSqrt = sum - math.Sqrt(float64(max(len(hs), 1)))
		lengths[i] = x.codeLength(len(hs), nil)
	}
	x.pendingSqrt = 0
	free := 0
	for leaf := 1; leaf < len(x.leafUsed); leaf++ {
		if !x.leafUsed[leaf] {
			free++
		}
	}
	used := 0
	for _, l := range lengths {
		used += 1 << (x.d - l)
	}
	// A bit off table i's code halves its false candidates, keys_i·2^ℓ,
	// and takes 2^(d−ℓ) more leaves: take the best ratio while leaves
	// last.
	for {
		best, bestGain := -1, 0.0
		for i, l := range lengths {
			if l <= 1 || used+1<<(x.d-l) > free {
				continue
			}
			if g := float64(max(len(hashes[i]), 1)) * math.Ldexp(1, 2*int(l)); g > bestGain {
				best, bestGain = i, g
			}
		}
		if best < 0 {
			break
		}
		used += 1 << (x.d - lengths[best])
		lengths[best]--
	}
	// Growth while these tables are added is by half too (insert): the
	// index was sized for them, and a hot key must not triple it.
	x.builtAtOnce = len(*x.segs.Load()) == 1
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(lengths[a], lengths[b]) })
	pre := make([]*[2]uint32, len(ids))
	for _, i := range order {
		if code, length, ok := x.allocCode(lengths[i]); ok {
			pre[i] = &[2]uint32{code, uint32(length)}
		}
	}
	for i, id := range ids {
		x.nextRank++
		x.presetCode = pre[i] // nil: claim finds one itself
		x.addLocked(id, x.nextRank, hashes[i], nil)
	}
	x.presetCode = nil
	x.builtAtOnce = len(*x.segs.Load()) == 1
	return nil
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
	ts := make([]int, 0, len(ids))
	for _, id := range ids {
		t, ok := x.byID[id]
		if !ok || contains(ts, t) {
			return fmt.Errorf("%w: %d", ErrNoTable, id)
		}
		ts = append(ts, t)
	}
	x.removeLocked(ts...)
	return nil
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
// input holding it, or both (documentation, 5); once it returns, merged.
// A store that still lets Gets read the inputs (views opened before the
// compaction) must therefore treat "merged is named" as "each input may
// hold the key".
//
// merged must be a new ID: one already in the index (an input's included)
// is an error wrapping ErrTableExists; an input not in the index, or
// named twice, is an error wrapping ErrNoTable. Either changes nothing.
// With no inputs, Replace adds merged as the newest table, as AddTable
// does.
func (x *Index) Replace(inputs []uint64, merged uint64, hashes, dropped []uint64) error {
	x.mu.Lock()
	defer x.unlock()
	if _, ok := x.byID[merged]; ok {
		return fmt.Errorf("%w: %d", ErrTableExists, merged)
	}
	book := x.book.Load()
	var rank uint64
	slots := make([]int, 0, len(inputs))
	for _, id := range inputs {
		t, ok := x.byID[id]
		if !ok || contains(slots, t) {
			return fmt.Errorf("%w: %d", ErrNoTable, id)
		}
		slots = append(slots, t)
		rank = max(rank, book.tables[t].rank)
	}
	if len(inputs) == 0 {
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

// recode moves the keys of inputs to table t (documentation, 5).
func (x *Index) recode(inputs []int, t int, hashes, dropped []uint64) {
	book := x.book.Load()
	isInput := make([]bool, len(book.tables))
	// The fewest fingerprint bits any input's entries carry: while
	// recoding, t's entries match a key on their bits above those.
	relax := uint(0)
	code, length := book.tables[t].code, uint(book.tables[t].length)
	for _, it := range inputs {
		isInput[it] = true
		relax = max(relax, uint(book.tables[it].length))
	}
	if relax > length {
		relax = relax - length // t's extra bits beyond the shortest input's
	} else {
		relax = 0
	}
	if relax > 0 {
		x.publish(func(b *codebook) { b.tables[t].relax = uint8(relax) })
		book = x.book.Load()
	}
	tagShift := x.w - x.m
	leafMask := uint32(1)<<x.d - 1
	// inputEntry reports whether slot value sv is an input's entry for p.
	inputEntry := func(sv uint32, p probe) (int, bool) {
		it := book.decode[(sv>>(tagShift-x.d))&leafMask]
		if it < 0 || !isInput[it] {
			return 0, false
		}
		ti := &book.tables[it]
		return int(it), sv == x.slotValue(p, ti.code, uint(ti.length))
	}
	// An input entry found for a key: its bucket, value and table slot (by
	// value, not position: a bucket's entries move within it at every
	// write).
	type pos struct {
		i uint32
		v uint32
		t int
	}
	// inStash: the keys (mixed hashes) with an input's entry in the stash,
	// and what becomes of those entries: they name merged, unless the key
	// got a slot entry for merged (stashSlotted) or merged drops it
	// (stashDropped, never for a key merged keeps: stashKept). A merge
	// would otherwise add a stash entry per input to merged, for keys
	// that need none: the versions of a key overwritten in every flush,
	// stashed because they crowd its buckets, would fill the stash within
	// a few hundred merges.
	const (
		stashRename = iota // a key merged does not list
		stashKept
		stashSlotted
		stashDropped
	)
	var inStash map[uint64]int8
	for _, e := range book.stash {
		if int(e.table) < len(isInput) && isInput[e.table] {
			if inStash == nil {
				inStash = map[uint64]int8{}
			}
			inStash[e.x] = stashRename
		}
	}
	// segScan is what a key's two buckets in one segment hold of it.
	type segScan struct {
		n       int
		present bool // the key's entry for t is there already
		found   [2 * idxSlots]pos
	}
	// An input entry to clear once every key of merged has its own entry.
	type stale struct {
		s *idxSegment
		pos
	}
	var later []stale
	var stashed []stashEntry
	always := false
	segs := *x.segs.Load()
	// own rewrites sc.found[0] to v in segment s unless the key's entry is
	// there already, then clears the key's other input entries there: at
	// every instant one of them names the key.
	own := func(s *idxSegment, sc *segScan, v uint32) {
		f := sc.found[:sc.n]
		if !sc.present && len(f) > 0 {
			x.swap(s, f[0].i, f[0].v, v)
			x.recoded(s, f[0].t, t)
			f = f[1:]
		}
		for _, e := range f {
			x.swap(s, e.i, e.v, 0)
			x.cleared(s, e.t)
		}
	}
	// The table slots whose entries this Replace looks for.
	mine := append(slices.Clone(inputs), t)
	for j, h := range hashes {
		if ns := segs[len(segs)-1]; j+idxAhead < len(hashes) && ns.large {
			x.prefetchKey(ns, hashes[j+idxAhead])
		}
		p := x.probeOf(h)
		v := x.slotValue(p, code, length)
		// Segments newest first, up to the first that holds the key's
		// entry for t or an input entry of it. Input entries of the key in
		// older segments (its versions, most often) are cleared once every
		// key of merged has its own entry (below).
		var sc segScan
		found := -1
		for k := len(segs) - 1; k >= 0; k-- {
			s := segs[k]
			if k < len(segs)-1 && !s.holds(mine) {
				continue // nothing of t's or the inputs' here
			}
			i1 := s.primary(p.hi)
			i2 := x.alt(s, i1, p.tag)
			for _, i := range [2]uint32{i1, i2} {
				tagged, nt := x.tagged(x.raw(s, i), p.tag)
				for _, sv := range tagged[:nt] {
					if sv == v {
						sc.present = true
					} else if it, ok := inputEntry(sv, p); ok {
						sc.found[sc.n] = pos{i, sv, it}
						sc.n++
					}
				}
				if i2 == i1 {
					break
				}
			}
			if sc.present || sc.n > 0 {
				found = k
				break
			}
		}
		newest := len(segs) - 1
		switch {
		case found < 0:
		case sc.present || found == newest:
			own(segs[found], &sc, v)
		default:
			// The key's input entries are in an older segment: give it
			// its entry in the newest if it has room (relocating while it
			// is below idxNearFull), so that compactions drain older
			// segments (dropped once empty), and clear the input entries
			// once every key of merged has its own (a clear now could
			// hide a key sharing them whose entry is elsewhere); else
			// rewrite one where it is.
			ns := segs[newest]
			if x.insertSegment(ns, p, v, float64(ns.entries.Load()) < idxNearFull*float64(ns.n)*idxSlots) {
				x.added(ns, t)
				for _, e := range sc.found[:sc.n] {
					later = append(later, stale{segs[found], e})
				}
			} else {
				own(segs[found], &sc, v)
			}
		}
		fate, stashedInput := inStash[p.x]
		switch {
		case !stashedInput:
		case found < 0:
			inStash[p.x] = stashKept // its only entries are in the stash
		case fate != stashKept:
			inStash[p.x] = stashSlotted
		}
		if found >= 0 || stashedInput {
			if idxTestHookRecoded != nil {
				idxTestHookRecoded()
			}
			continue
		}
		switch r, s := x.insert(p, v); r {
		case idxInserted:
			x.added(s, t)
		case idxDuplicate:
		case idxStash:
			if len(book.stash)+len(stashed) < idxStashSize {
				stashed = append(stashed, stashEntry{p.x, int16(t)})
			} else {
				always = true
			}
		}
		segs = *x.segs.Load() // insert may have added one
		if idxTestHookRecoded != nil {
			idxTestHookRecoded()
		}
	}
	// Keys merged leaves out, and input entries left beside a key's entry
	// in another segment: nothing of merged relies on them any more (every
	// key of merged has its own entry now), so clear them.
	clearInputsIn := func(s *idxSegment, h uint64) {
		p := x.probeOf(h)
		i1 := s.primary(p.hi)
		i2 := x.alt(s, i1, p.tag)
		for _, i := range [2]uint32{i1, i2} {
			tagged, nt := x.tagged(x.raw(s, i), p.tag)
			for _, sv := range tagged[:nt] {
				if it, ok := inputEntry(sv, p); ok {
					x.swap(s, i, sv, 0)
					x.cleared(s, it)
				}
			}
			if i2 == i1 {
				break
			}
		}
	}
	clearInputs := func(h uint64) {
		for _, s := range segs {
			if s.holds(inputs) {
				clearInputsIn(s, h)
			}
		}
	}
	// Input entries left in a segment by the keys' search (below) are
	// cleared after the same publication.
	leftover := false
	for _, s := range segs {
		leftover = leftover || s.holds(inputs)
	}
	if len(dropped)+len(later) > 0 || leftover {
		// A lookup reads segments one after the other: it may have read
		// the segment where a key just got its entry before the entry was
		// written (or loaded the segment list before that segment was
		// added), and read the segment of the key's input entry after it
		// is cleared below. A codebook published in between makes such a
		// lookup read again (documentation, 3 and 5).
		x.publish(func(*codebook) {})
	}
	for _, h := range dropped {
		clearInputs(h)
		if len(inStash) > 0 {
			hx := x.probeOf(h).x
			if fate, ok := inStash[hx]; ok && fate == stashRename {
				inStash[hx] = stashDropped
			}
		}
	}
	for _, e := range later {
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
	for _, s := range segs {
		if !s.holds(inputs) || idxProbeCost*uint64(len(hashes)) >= uint64(s.n) {
			continue
		}
		for _, h := range hashes {
			clearInputsIn(s, h)
			if !s.holds(inputs) {
				break // no more of the inputs' entries here
			}
		}
	}
	if idxTestHookCleared != nil {
		idxTestHookCleared()
	}
	// Inputs' stash entries now name merged, once each, except those of
	// keys with a slot entry for merged or that merged drops (inStash;
	// keys merged does not list, whose fate is unknown, keep theirs: a
	// false candidate, never a miss); every key of merged has its exact
	// entry, so the relaxed match ends.
	x.publish(func(b *codebook) {
		kept := b.stash[:0]
		for _, e := range b.stash {
			if isInput[e.table] {
				if f := inStash[e.x]; f == stashSlotted || f == stashDropped {
					continue
				}
				e.table = int16(t)
			}
			kept = append(kept, e)
		}
		b.stash = append(kept, stashed...)
		slices.SortFunc(b.stash, func(a, b stashEntry) int {
			return cmp.Or(cmp.Compare(a.x, b.x), cmp.Compare(a.table, b.table))
		})
		b.stash = slices.Compact(b.stash)
		b.tables[t].relax = 0
		b.tables[t].always = always
	})
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

// publish copies the codebook with change applied and publishes it.
func (x *Index) publish(change func(b *codebook)) {
	old := x.book.Load()
	b := &codebook{
		tables: append([]tableInfo(nil), old.tables...),
		decode: append([]int16(nil), old.decode...),
		stash:  append([]stashEntry(nil), old.stash...),
	}
	change(b)
	b.always = b.always[:0]
	for t := range b.tables {
		if t < len(x.count) && b.tables[t].live {
			b.tables[t].entries = x.count[t]
		}
		if b.tables[t].live && b.tables[t].always {
			b.always = append(b.always, int16(t))
		}
	}
	x.book.Store(b)
}

// codeLength is the square-root rule of the type's documentation, over the
// live tables not leaving.
func (x *Index) codeLength(keys int, leaving []int) uint {
	book := x.book.Load()
	sum := math.Sqrt(float64(max(keys, 1))) + x.pendingSqrt
	for t, ti := range book.tables {
		if !ti.live || contains(leaving, t) {
			continue
		}
		sum += math.Sqrt(float64(max(ti.keys, 1)))
	}
	l := math.Ceil(math.Log2(sum / math.Sqrt(float64(max(keys, 1)))))
	return uint(min(max(l, 1), float64(x.d)))
}

func contains(s []int, v int) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// allocCode takes a free node of the code tree at depth want, or failing
// that the shallowest free node deeper down. It prefers nodes whose
// sibling is taken, so large free subtrees stay whole for large tables.
func (x *Index) allocCode(want uint) (code uint32, length uint, ok bool) {
	for l := want; l <= x.d; l++ {
		size := 1 << (x.d - l)
		best, bestScore := -1, -1
		for start := size; start < len(x.leafUsed); start += size { // node 0 holds leaf 0
			if !x.allFree(start, size) {
				continue
			}
			score := 0
			if l > 0 {
				sib := start ^ size
				if !x.allFree(sib, size) {
					score = 1
				}
			}
			if score > bestScore {
				best, bestScore = start, score
			}
		}
		if best >= 0 {
			for i := best; i < best+size; i++ {
				x.leafUsed[i] = true
			}
			return uint32(best >> (x.d - l)), l, true
		}
	}
	return 0, 0, false
}

func (x *Index) allFree(start, size int) bool {
	if start == 0 {
		return false // the all-zero leaf is reserved
	}
	for i := start; i < start+size; i++ {
		if x.leafUsed[i] {
			return false
		}
	}
	return true
}

// claim takes a table slot and a code for a new table of keys entries
// (lengthening other tables' codes if the code tree is full) and
// publishes them, before any entry uses the code (documentation, 4). ok
// is false when no code could be found: the table is then named by every
// lookup.
func (x *Index) claim(id, rank uint64, keys int, leaving []int) (t int, ok bool) {
	old := x.book.Load()
	t = -1
	for i, ti := range old.tables {
		if !ti.live {
			t = i
			break
		}
	}
	if t < 0 {
		t = len(old.tables)
	}
	for len(x.count) <= t {
		x.count = append(x.count, 0)
	}
	x.count[t] = 0
	want := x.codeLength(keys, leaving)
	var code uint32
	var length uint
	if pc := x.presetCode; pc != nil {
		code, length, ok = pc[0], uint(pc[1]), true
	} else {
		code, length, ok = x.allocCode(want)
	}
	if !ok {
		// Make room: lengthen, one bit at a time, the code of the table
		// holding the largest share of the code tree (each bit frees half
		// of its subtree) until the new table fits; then rewrite all the
		// lengthened tables' entries in one pass over the index.
		plan := map[int]uint{}
		for !ok {
			victim := x.recodeCandidate(old, leaving, plan)
			if victim < 0 {
				break
			}
			ti := old.tables[victim]
			l := uint(ti.length)
			if pl, ok := plan[victim]; ok {
				l = pl
			}
			c := ti.code << (l - uint(ti.length))
			freed := int(c<<1|1) << (x.d - l - 1)
			for i := freed; i < freed+1<<(x.d-l-1); i++ {
				x.leafUsed[i] = false
			}
			plan[victim] = l + 1
			code, length, ok = x.allocCode(want)
		}
		if len(plan) > 0 {
			x.lengthen(plan)
		}
	}
	info := tableInfo{id: id, rank: rank, code: code, length: uint8(length), live: true, always: !ok, keys: keys}
	x.publish(func(b *codebook) {
		if t == len(b.tables) {
			b.tables = append(b.tables, info)
		} else {
			b.tables[t] = info
		}
		if ok {
			first := int(code) << (x.d - length)
			for i := first; i < first+1<<(x.d-length); i++ {
				b.decode[i] = int16(t)
			}
		}
	})
	x.byID[id] = t
	return t, ok
}

func (x *Index) addLocked(id uint64, rank uint64, hashes []uint64, leaving []int) {
	t, ok := x.claim(id, rank, len(hashes), leaving)
	if !ok {
		return // named by every lookup: no entries needed
	}
	x.fill(t, hashes)
}

// fill inserts the entries of table t for hashes; keys that cannot be
// placed go to the stash or, past it, make t a table every lookup names.
func (x *Index) fill(t int, hashes []uint64) {
	old := x.book.Load()
	code, length := old.tables[t].code, uint(old.tables[t].length)
	var stashed []stashEntry
	always := false
	for j, h := range hashes {
		if segs := *x.segs.Load(); j+idxAhead < len(hashes) && segs[len(segs)-1].large {
			x.prefetchKey(segs[len(segs)-1], hashes[j+idxAhead])
		}
		p := x.probeOf(h)
		v := x.slotValue(p, code, length)
		switch r, s := x.insert(p, v); r {
		case idxInserted:
			x.added(s, t)
		case idxDuplicate:
		case idxStash:
			e := stashEntry{p.x, int16(t)}
			switch {
			case slices.Contains(stashed, e):
			case len(old.stash)+len(stashed) < idxStashSize:
				stashed = append(stashed, e)
			default:
				always = true
			}
		}
		if always {
			break
		}
	}
	x.publish(func(b *codebook) {
		b.tables[t].always = always
		b.stash = append(b.stash, stashed...)
		slices.SortFunc(b.stash, func(a, b stashEntry) int { return cmp.Compare(a.x, b.x) })
	})
}

// recodeCandidate is the live table with the shortest code (as planned)
// that can still grow, preferring tables that are not leaving; -1 if none.
func (x *Index) recodeCandidate(book *codebook, leaving []int, plan map[int]uint) int {
	best, bestScore := -1, 0
	for t, ti := range book.tables {
		l := uint(ti.length)
		if pl, ok := plan[t]; ok {
			l = pl
		}
		if !ti.live || l == 0 || l >= x.d {
			continue
		}
		score := int(l)
		if contains(leaving, t) {
			score += 100
		}
		if best < 0 || score < bestScore {
			best, bestScore = t, score
		}
	}
	return best
}

// lengthen moves each planned table t to the first descendant of its code
// node at length plan[t], taking that many fingerprint bits from each of
// its entries: the bits after the code are the key's next hash bits, so
// dropping the last ones leaves exactly the entry the longer code would
// have written. Lookups match both formats until every entry is
// rewritten; then the rest of each old subtree is released in the
// codebook (x.leafUsed was updated by the caller).
func (x *Index) lengthen(plan map[int]uint) {
	type change struct {
		oldCode, newCode uint32
		oldLen, newLen   uint
	}
	before := x.book.Load()
	changes := make([]change, len(before.tables)) // by table slot; newLen 0: unchanged
	for t, nl := range plan {
		ti := before.tables[t]
		ol := uint(ti.length)
		changes[t] = change{ti.code, ti.code << (nl - ol), ol, nl}
	}
	x.publish(func(b *codebook) {
		for t, c := range changes {
			if c.newLen == 0 {
				continue
			}
			b.tables[t].code, b.tables[t].length = c.newCode, uint8(c.newLen)
			b.tables[t].prevCode, b.tables[t].prevLength = c.oldCode, uint8(c.oldLen)
		}
	})
	tagShift := x.w - x.m
	planned := make([]int, 0, len(plan))
	for t := range plan {
		planned = append(planned, t)
	}
	x.rewriteEach(before, planned, func(_ *idxSegment, v uint32, t int) uint32 {
		if t < 0 || changes[t].newLen == 0 {
			return v
		}
		c := changes[t]
		kOld := tagShift - c.oldLen
		delta := c.newLen - c.oldLen
		extra := v & (1<<kOld - 1)
		return v>>tagShift<<tagShift | c.newCode<<(kOld-delta) | extra>>delta
	})
	x.publish(func(b *codebook) {
		for t, c := range changes {
			if c.newLen == 0 {
				continue
			}
			b.tables[t].prevCode, b.tables[t].prevLength = 0, 0
			oldStart := int(c.oldCode) << (x.d - c.oldLen)
			newEnd := int(c.newCode)<<(x.d-c.newLen) + 1<<(x.d-c.newLen)
			for i := newEnd; i < oldStart+1<<(x.d-c.oldLen); i++ {
				b.decode[i] = -1
			}
		}
	})
}

type idxInsertResult int

const (
	idxInserted idxInsertResult = iota
	idxDuplicate
	idxStash
)

// insert places entry v of probe p: in the newest segment, else in an
// older one with room, else in a new segment if the newest is loaded
// enough to justify one; idxStash otherwise.
func (x *Index) insert(p probe, v uint32) (idxInsertResult, *idxSegment) {
	segs := *x.segs.Load()
	// The newest segment first, relocating if need be: its two buckets
	// are all a typical insert reads (older segments would cost a cache
	// miss each). Repeats of one key in one AddTable meet in the same
	// segment, so the duplicate check there is enough; a repeat split by
	// a growth costs a slot, never an entry.
	newest := segs[len(segs)-1]
	if x.dupOrFree(newest, p, v) == idxDuplicate {
		return idxDuplicate, nil
	}
	// The newest segment, relocating while it is loaded little enough
	// for the search to be short, keeps a table's entries together, so
	// that Replace and removals visit few segments. Past that, a free slot
	// in an older segment (drained by compactions) before a search in the
	// nearly full newest: a search per insert would be the whole cost.
	if x.insertSegment(newest, p, v, float64(newest.entries.Load()) < idxNearFull*float64(newest.n)*idxSlots) {
		return idxInserted, newest
	}
	for k := len(segs) - 2; k >= 0; k-- {
		if x.insertSegment(segs[k], p, v, false) {
			return idxInserted, segs[k]
		}
	}
	if x.insertSegment(newest, p, v, true) {
		return idxInserted, newest
	}
	if float64(newest.entries.Load()) < idxGrowLoad*float64(newest.n)*idxSlots || x.versionsCrowd(newest, p) {
		return idxStash, nil
	}
	// Twice the newest, except that an index built for a store's tables at
	// once (AddTables, at Open or by a store's rebuild) first grows by half:
	// such a store rebuilds again when it holds a few segments (kvdemo),
	// and a first growth of twice its size would triple its memory.
	size := 2 * uint64(newest.n)
	if len(segs) == 1 && x.builtAtOnce {
		size = uint64(newest.n) / 2
	}
	s := x.newSegment(size)
	next := append(append([]*idxSegment(nil), segs...), s)
	x.segs.Store(&next) // published before any entry goes in (documentation, 4)
	if x.insertSegment(s, p, v, true) {
		return idxInserted, s
	}
	return idxStash, nil
}

// versionsCrowd reports whether p's key's own entries (naming other
// tables: versions of the key) take half of its two buckets in s or more.
// Such a key, held by more tables than the buckets have slots (a counter
// overwritten in every flush), fails its insert however empty the rest of
// the segment is, and a new segment would hold eight more of its versions
// at the price of the whole index's memory: the stash holds them exactly.
func (x *Index) versionsCrowd(s *idxSegment, p probe) bool {
	var buf [2 * idxSlots]uint64
	book := x.book.Load()
	i1 := s.primary(p.hi)
	i2 := x.alt(s, i1, p.tag)
	named := x.matchBucket(x.raw(s, i1), p, book, buf[:0])
	if i2 != i1 {
		named = x.matchBucket(x.raw(s, i2), p, book, named)
	}
	return len(named) >= idxSlots
}

// bucketHas reports whether bucket i holds entry v, testing the four
// nibbles at once as a lookup does (matchBucket).
func (x *Index) bucketHas(s *idxSegment, i uint32, v uint32) bool {
	b := x.raw(s, i)
	low := x.w - 4
	nibs := uint32(semisort.NibblesOfCode[b&0xfff])
	xn := nibs ^ (v>>low)*0x1111
	eq := ^((xn&0x7777 + 0x7777) | xn) & 0x8888
	lowMask := uint64(1)<<low - 1
	for eq != 0 {
		j := uint(bits.TrailingZeros32(eq)) >> 2
		eq &= eq - 1
		if b>>(12+j*low)&lowMask == uint64(v)&lowMask {
			return true
		}
	}
	return false
}

// tagged returns the entries of the encoded bucket b whose tag is tag, and
// how many there are, decoding only those whose nibble matches the tag's.
func (x *Index) tagged(b uint64, tag uint32) (vals [idxSlots]uint32, n int) {
	low := x.w - 4
	nibs := uint32(semisort.NibblesOfCode[b&0xfff])
	xn := nibs ^ (tag>>(x.m-4))*0x1111
	eq := ^((xn&0x7777 + 0x7777) | xn) & 0x8888
	lowMask := uint64(1)<<low - 1
	for eq != 0 {
		j := uint(bits.TrailingZeros32(eq)) >> 2
		eq &= eq - 1
		v := (nibs>>(4*j)&0xf)<<low | uint32(b>>(12+j*low)&lowMask)
		if v>>(x.w-x.m) == tag && v != 0 {
			vals[n&(idxSlots-1)] = v
			n++
		}
	}
	return vals, n
}

// hasRoom reports whether bucket i has an empty slot: the smallest entry,
// stored first, is 0 (nibble and low bits).
func (x *Index) hasRoom(s *idxSegment, i uint32) bool {
	b := x.raw(s, i)
	return semisort.NibblesOfCode[b&0xfff]&0xf == 0 && b>>12&(1<<(x.w-4)-1) == 0
}

// idxNode is a bucket reached by the relocation search: from its parent's
// bucket, entry val moves here.
type idxNode struct {
	bucket uint32
	parent int32
	val    uint32
}

type idxMove struct {
	from, to uint32
	val      uint32
}

// dupOrFree reports idxDuplicate if v is already in one of p's buckets
// of s.
func (x *Index) dupOrFree(s *idxSegment, p probe, v uint32) idxInsertResult {
	i1 := s.primary(p.hi)
	if x.bucketHas(s, i1, v) || x.bucketHas(s, x.alt(s, i1, p.tag), v) {
		return idxDuplicate
	}
	return idxInserted
}

// insertSegment puts v in one of p's buckets of s, relocating other
// entries along a shortest path if both are full.
func (x *Index) insertSegment(s *idxSegment, p probe, v uint32, relocate bool) bool {
	i1 := s.primary(p.hi)
	i2 := x.alt(s, i1, p.tag)
	for _, i := range [2]uint32{i1, i2} {
		if x.swap(s, i, 0, v) {
			return true
		}
	}
	if !relocate {
		return false
	}
	path, ok := x.findPath(s, i1, i2)
	if !ok {
		return false
	}
	// From the far end: each move frees the slot the previous fills. A
	// path that visits a bucket twice can find a move's entry gone or its
	// destination full; it stops there, every entry moved so far being in
	// its other bucket, and the insert goes elsewhere.
	for k := len(path) - 1; k >= 0; k-- {
		if !x.move(s, path[k]) {
			return false
		}
	}
	return x.swap(s, path[0].from, 0, v)
}

// move relocates one entry copy-then-remove, bumping the destination's
// counter between the two (documentation, 1 and 2); false, and nothing
// written, if the entry is not in its bucket or the destination is full.
func (x *Index) move(s *idxSegment, m idxMove) bool {
	if !x.bucketHas(s, m.from, m.val) || !x.hasRoom(s, m.to) {
		return false
	}
	x.swap(s, m.to, 0, m.val) // completes, counter even, before the clear
	x.swap(s, m.from, m.val, 0)
	return true
}

// bucketSet is the set of buckets a relocation search has reached: open
// addressing over twice the most nodes a search holds, emptied in O(1) by
// a new generation.
type bucketSet struct {
	bucket [idxSeenSize]uint32
	gen    [idxSeenSize]uint32
	cur    uint32
}

const (
	idxSeenBits = 13
	idxSeenSize = 1 << idxSeenBits // > 2 × (idxMaxNodes + the last node's 4 children)
)

func (b *bucketSet) reset() {
	if b.cur++; b.cur == 0 {
		clear(b.gen[:])
		b.cur = 1
	}
}

// add reports whether i was not in the set yet, and adds it.
func (b *bucketSet) add(i uint32) bool {
	for h := (i * 0x9e3779b1) >> (32 - idxSeenBits); ; h = (h + 1) & (idxSeenSize - 1) {
		if b.gen[h] != b.cur {
			b.gen[h], b.bucket[h] = b.cur, i
			return true
		}
		if b.bucket[h] == i {
			return false
		}
	}
}

// idxSearch is a relocation search's working memory: its queue and the
// set of buckets it reached. The set alone is larger than the buckets of
// an index of tens of thousands of entries, and Stats does not count it:
// an index holds one only while a writer call runs, from a pool that
// every index shares, so that an index keeps between calls the memory
// Stats reports and no more (TestIndexHeldMemoryCounted).
type idxSearch struct {
	nodes []idxNode
	seen  bucketSet
}

var idxSearchPool = sync.Pool{New: func() any { return new(idxSearch) }}

// unlock ends a writer call: the search's working memory goes back to the
// pool, then the writer mutex is released.
func (x *Index) unlock() {
	if x.search != nil {
		idxSearchPool.Put(x.search)
		x.search = nil
	}
	x.mu.Unlock()
}

// idxTestHookSearched, when set by a test, runs at the end of each
// relocation search with the number of nodes it queued.
var idxTestHookSearched func(nodes int)

func (x *Index) findPath(s *idxSegment, i1, i2 uint32) ([]idxMove, bool) {
	if x.search == nil {
		x.search = idxSearchPool.Get().(*idxSearch)
	}
	sr := x.search
	nodes := sr.nodes[:0]
	defer func() {
		if idxTestHookSearched != nil {
			idxTestHookSearched(len(nodes))
		}
		sr.nodes = nodes[:0]
	}()
	nodes = append(nodes, idxNode{i1, -1, 0}, idxNode{i2, -1, 0})
	// Each bucket is visited once: a bucket already reached is full (it
	// was tested when reached), and entries with equal tags move between
	// the same two buckets, so that without this a pair crowded with one
	// key's versions (a key overwritten in flush after flush) sends the
	// search back and forth between its two buckets until the node limit;
	// and anywhere, a bucket reached again through another entry spends
	// the node budget on nothing, so the search reaches fewer buckets and
	// inserts fail at a lower load.
	seen := &sr.seen
	seen.reset()
	seen.add(i1)
	seen.add(i2)
	for head, depth := 0, 0; head < len(nodes) && depth < idxMaxPath; depth++ {
		end := len(nodes)
		for ; head < end && len(nodes) < idxMaxNodes; head++ {
			n := nodes[head]
			for _, v := range x.entries(s, n.bucket) {
				to := x.alt(s, n.bucket, v>>(x.w-x.m))
				if to == n.bucket || !seen.add(to) {
					continue
				}
				nodes = append(nodes, idxNode{to, int32(head), v})
				if x.hasRoom(s, to) {
					var path []idxMove
					for c := int32(len(nodes) - 1); nodes[c].parent >= 0; c = nodes[c].parent {
						par := nodes[nodes[c].parent]
						path = append(path, idxMove{from: par.bucket, to: nodes[c].bucket, val: nodes[c].val})
					}
					for a, b := 0, len(path)-1; a < b; a, b = a+1, b-1 {
						path[a], path[b] = path[b], path[a]
					}
					return path, true
				}
			}
		}
	}
	return nil, false
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
// code (documentation, 4) and drops segments left empty.
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
// always stays): lookups stop probing them (documentation, 4).
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

// IndexStats describes an Index.
type IndexStats struct {
	Tables      int
	Entries     int64   // (key, table) entries stored
	Segments    int     // segments probed per lookup
	Bytes       int64   // buckets, counters, codebook and stash
	Load        float64 // entries / slots
	BitsPerKey  float64 // Bytes*8/Entries
	SlotBits    int     // bits per slot: tag + code + fingerprint
	CodeBits    float64 // table-code bits per entry, averaged over entries
	SizeEntropy float64 // entropy of the tables' shares of entries, bits
	Stashed     int     // entries kept exactly in the stash
	Always      int     // tables every lookup names (no code, or unplaceable keys)
	// Contended counts lookups that met writers in their buckets on every
	// read and named every table instead of waiting.
	Contended int64
}

// Stats reads the index's size. Safe for concurrent use; it takes the
// writers' mutex (it waits for a writer call in progress, a long Replace
// say) and visits every segment's counters and the codebook, so call it
// for reporting, not on a Get's path.
func (x *Index) Stats() IndexStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	var st IndexStats
	book := x.book.Load()
	slots := int64(0)
	for _, s := range *x.segs.Load() {
		st.Segments++
		st.Entries += s.entries.Load()
		st.Bytes += int64(len(s.words))*8 + int64(len(s.ctr))*4
		slots += int64(s.n) * idxSlots
	}
	st.Bytes += int64(len(book.decode))*2 + int64(cap(book.tables))*int64(unsafe.Sizeof(tableInfo{})) + int64(len(book.stash))*int64(unsafe.Sizeof(stashEntry{})) + int64(len(x.altHash))*4
	st.Stashed = len(book.stash)
	st.Contended = x.contended.Load()
	st.Entries += int64(st.Stashed)
	st.SlotBits = int(x.w)
	if slots > 0 {
		st.Load = float64(st.Entries-int64(st.Stashed)) / float64(slots)
	}
	var total float64
	for _, ti := range book.tables {
		if ti.live {
			st.Tables++
			total += float64(ti.entries)
			if ti.always {
				st.Always++
			}
		}
	}
	for _, ti := range book.tables {
		if ti.live && ti.entries > 0 && total > 0 {
			p := float64(ti.entries) / total
			st.CodeBits += p * float64(ti.length)
			st.SizeEntropy -= p * math.Log2(p)
		}
	}
	if st.Entries > 0 {
		st.BitsPerKey = float64(st.Bytes*8) / float64(st.Entries)
	}
	return st
}
