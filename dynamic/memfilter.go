package dynamic

import (
	"math/rand/v2"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/relocate"
	"github.com/lsmcuckoo/lsmcuckoo/internal/seed"
)

// MemFilter is a cuckoo filter for a memtable: any number of goroutines may
// Add keys and ask MayContain at the same time, and no path takes a lock.
// Readers never wait for writers and writers never wait for readers; every
// shared word is read with one atomic load and changed with one
// compare-and-swap.
//
// A MemFilter answers MayContain(k) == true for every k whose Add has
// returned before MayContain was called. Add never fails and never evicts:
// when the table cannot place a fingerprint it grows by publishing a larger
// segment if the newest is at least 3/4 full, and otherwise keeps the key's
// hash in a small stash or, past that, answers "maybe" for every key (see
// "Keys chosen by an adversary" below). There is no Delete (see Add).
//
// Layout. A segment is an array of n buckets, any n (no power-of-two
// rounding, which would waste up to half the memory); each bucket is one
// uint64 holding four 12-bit fingerprints (0 = empty slot) in bits 0..47 and
// a 16-bit relocation counter in bits 48..63, so a reader sees a bucket's
// slots and its counter in one consistent load. A key's buckets are
// i1 = hash mod n and i2 = (h(fingerprint) − i1) mod n. That map is an
// involution for any n (the "− i" form, not XOR, is what frees n from
// powers of two), so a relocated fingerprint finds its other bucket without
// the key.
//
// Invariants, and why lookups cannot miss (after Wang Hancheng et al.,
// "Lock-free concurrent cuckoo filter", Journal of Software, 2025):
//
//  1. A fingerprint is only ever moved copy-then-remove: it is first CASed
//     into an empty slot of its other bucket, then one copy is CASed out of
//     the bucket it left. At every instant a stored fingerprint is in at
//     least one of its two buckets; a race can leave an extra copy (a
//     wasted slot, a false positive), never none.
//  2. Every relocation adds 1 to the relocation counters of both buckets it
//     touches, in the same CAS that copies in or removes. Plain inserts into
//     an empty slot leave counters alone.
//  3. MayContain reads bucket i1 (t1), then i2, then i1 again (t1'). If the
//     fingerprint is in neither read and t1' == t1, the key is absent. Proof:
//     suppose the key's fingerprint f was stored before the lookup began. It
//     was not in i2 at the read of i2, so by (1) it was in i1 then; it was
//     not in i1 at the first read, so it entered i1 between the two reads,
//     which only a relocation does, which by (2) changed i1's counter. So
//     t1' != t1 whenever a stored key could have been missed, and the lookup
//     retries. This is the paper's two-phase query reduced to the counter
//     that matters: the paper re-reads both buckets and retries only on a bounce (two
//     moves), which needs a more delicate counter protocol to be sound;
//     retrying on any move into i1 is simpler to prove and, since moves
//     into one particular bucket during one lookup are rare, costs nothing
//     measurable.
//  4. The counter wraps at 2^16: a lookup could be fooled only if exactly a
//     multiple of 65536 relocations entered i1 between two of its loads.
//  5. Segments are only appended, and a key's fingerprint never leaves the
//     segment it was added to. Add returns only after the fingerprint is in
//     a segment that was already published, and MayContain loads the
//     segment list after that, so it looks in the right segment.
//
// Lock-freedom: a MayContain retries only if a relocation completed during
// it; an Add's CAS fails only if another CAS on the same bucket succeeded;
// a growth CAS fails only if another goroutine published a segment. In each
// case some goroutine made progress, so the system as a whole always does.
//
// Keys chosen by an adversary. Each filter draws a secret seed from
// crypto/rand and mixes it into every key's hash (keyhash.Mix), so nobody
// outside the process can compute which keys share buckets; without that, a
// tenant could precompute small clusters of keys that no relocation can
// place and force a growth with each. Growth is also tied to load, not to
// failure: an Add that cannot be placed grows the filter only if the newest
// segment is at least 3/4 full (an estimate from a random sample of its
// buckets). Otherwise its full 64-bit hash goes to a stash of 64 entries
// that every lookup scans while it is not empty; and if the stash too is
// full, the filter saturates: MayContain answers true for every key from
// then on (a correct "maybe", the memtable is simply searched). Since every
// segment but the newest was at least 3/4 full when its successor was made
// and fingerprints never leave a segment, all segments together hold at
// most 4/(3/4) slots per distinct key: memory stays below about 11 bytes
// per distinct key added, plus the first segment and the 512-byte stash,
// whatever the keys. Random keys never come near that: four-slot buckets
// fill far past 3/4 before an Add fails.
//
// Space and accuracy: a segment filled to a load α spends 64/(4α) bits
// per key (four 12-bit fingerprints and a 16-bit counter per bucket) and
// answers with a false-positive rate of about 8α/4095. Each growth adds a
// segment (twice the size of the newest) that lookups also probe, so a
// filter that grew k times answers with up to k times that rate: size it
// with the expected key count (capacityHint).
type MemFilter struct {
	segments atomic.Pointer[[]*memSegment]
	seed     uint32
	// stashUsed counts reserved stash entries; above memStashSize the
	// filter is saturated. It is read on every lookup but written only by
	// Adds that found no place, so it stays in every reader's cache.
	stashUsed atomic.Int32
	stash     [memStashSize]atomic.Uint64
	// No shared key counter: an atomic add by every Add would be one
	// cache line that all writers contend for, a cost on every Add for a
	// figure only Stats reads. Stats counts occupied slots instead.
}

const (
	memSlots      = 4
	memFPBits     = 12
	memFPMask     = 1<<memFPBits - 1
	memSlotsMask  = 1<<(memSlots*memFPBits) - 1
	memCounterOne = uint64(1) << (memSlots * memFPBits)
	// memLoad is the load a segment is sized for.
	memLoad = 0.95
	// memMaxPath bounds a relocation path (breadth-first search depth).
	memMaxPath = 5
	// memMaxAttempts bounds how often an Add retries a segment after its
	// moves were overtaken by others before it gives up on the segment.
	memMaxAttempts = 16
	// memGrowLoad is the newest segment's load below which a failed Add
	// goes to the stash instead of growing the filter.
	memGrowLoad = 0.75
	// memLoadSample is how many buckets the load estimate reads.
	memLoadSample = 512
	memStashSize  = 64
)

// memSegment is one cuckoo table.
type memSegment struct {
	buckets []atomic.Uint64
	n       uint32
	// afterFirstRead, set only by tests, runs between a lookup's read of
	// its first bucket and its read of the second: the window in which a
	// relocation can hide a fingerprint from a single-pass lookup.
	afterFirstRead func(s *memSegment)
}

// MaxCapacityHint is the largest capacity hint NewMemFilter, NewIndex and
// IndexBytes size for; a larger hint is taken as this one. A hint only
// sizes the first segment and a filter grows past it as keys come, so the
// cap never loses a key: a memtable or store of more keys pays a growth or
// two (a segment more to probe). Without it, a hint from a wrong size
// computation (a byte count for a key count, say) would allocate and zero
// gigabytes before the first key.
const MaxCapacityHint = 1 << 26

// NewMemFilter returns a filter sized so that capacityHint distinct keys fit
// without growing (at most MaxCapacityHint of them: a larger hint is
// taken as that); a hint below one gives the smallest filter, which grows
// as keys come. Use the filter it returns: the zero MemFilter is not ready
// to use, and a MemFilter must not be copied (go vet reports copies).
func NewMemFilter(capacityHint int) *MemFilter {
	capacityHint = min(capacityHint, MaxCapacityHint)
	// Small tables place less reliably at high load (a few buckets' worth
	// of bad luck is a large fraction of them): give them a bucket or two
	// and a lower load, so the hint really fits without growing.
	load := memLoad
	if capacityHint < 1000 {
		load = 0.85
	}
	n := max(2, uint64(float64(max(capacityHint, 1))/(memSlots*load))+2)
	return newMemFilterSeeded(n, seed.New())
}

func newMemFilterSeeded(n uint64, seed uint32) *MemFilter {
	f := &MemFilter{seed: seed}
	segs := []*memSegment{newMemSegment(n)}
	f.segments.Store(&segs)
	return f
}

// memMaxBuckets caps a segment (bucket indexes are 32-bit): a filter
// that outgrows it adds segments of this size. A variable so that a test
// can reach it.
var memMaxBuckets uint64 = 1 << 31

func newMemSegment(buckets uint64) *memSegment {
	buckets = min(buckets, memMaxBuckets)
	return &memSegment{buckets: make([]atomic.Uint64, buckets), n: uint32(buckets)}
}

// memKey derives a key's mixed hash, fingerprint and primary-bucket hash
// with the module's shared derivation (internal/keyhash) under the
// filter's secret seed: high half for buckets, low 16 bits for the
// fingerprint.
func (f *MemFilter) memKey(key []byte) (x uint64, fp, hi uint32) {
	return f.mixed(keyhash.Hash(key))
}

func (f *MemFilter) mixed(h uint64) (x uint64, fp, hi uint32) {
	x = keyhash.Mix(h, f.seed)
	return x, keyhash.Fingerprint(x, memFPBits), keyhash.Hi(x)
}

// alt is the other bucket of a fingerprint in bucket i:
// (h(fp) − i) mod n, so alt(alt(i)) = i. For one n-th of fingerprints per
// bucket it is i itself: such a key simply has one bucket of four slots.
func (s *memSegment) alt(i, fp uint32) uint32 {
	h, _ := keyhash.Reduce(keyhash.FingerprintHash(fp), s.n)
	if h >= i {
		return h - i
	}
	return h + s.n - i
}

// primary is a key's first bucket.
func (s *memSegment) primary(hi uint32) uint32 {
	i, _ := keyhash.Reduce(hi, s.n)
	return i
}

func slotFP(w uint64, slot int) uint32 { return uint32(w>>(slot*memFPBits)) & memFPMask }

const (
	memLanes = 0x001_001_001_001 // 1 in each 12-bit slot
	memHighs = 0x800_800_800_800 // top bit of each slot
)

// has reports whether bucket word w holds fp (never 0) in some slot: XOR fp
// into every slot and test for a zero slot with the borrow trick, which may
// misplace which slot is zero but never reports one where none is.
func has(w uint64, fp uint32) bool {
	x := (w ^ uint64(fp)*memLanes) & memSlotsMask
	return (x-memLanes)&^x&memHighs != 0
}

// contains runs the lookup of invariant 3 on one segment.
func (s *memSegment) contains(fp, hi uint32) bool {
	i1 := s.primary(hi)
	i2 := s.alt(i1, fp)
	for {
		w1 := s.buckets[i1].Load()
		if has(w1, fp) {
			return true
		}
		if s.afterFirstRead != nil {
			s.afterFirstRead(s)
		}
		w2 := s.buckets[i2].Load()
		if has(w2, fp) {
			return true
		}
		if s.buckets[i1].Load()>>(memSlots*memFPBits) == w1>>(memSlots*memFPBits) {
			return false
		}
		// A relocation entered i1 while we looked: look again.
	}
}

// MayContain reports whether key may have been added. It is false only if
// no Add(key) returned before the call. Safe for concurrent use, lock-free,
// allocation-free.
func (f *MemFilter) MayContain(key []byte) bool {
	x, fp, hi := f.memKey(key)
	return f.contains(x, fp, hi)
}

// MayContainHash is MayContain for a key given by KeyHash(key), for a
// caller that hashes a key once for several filters (a store's memtable
// filter and its Index, say).
func (f *MemFilter) MayContainHash(h uint64) bool {
	return f.contains(f.mixed(h))
}

func (f *MemFilter) contains(x uint64, fp, hi uint32) bool {
	for _, s := range *f.segments.Load() {
		if s.contains(fp, hi) {
			return true
		}
	}
	if used := f.stashUsed.Load(); used != 0 {
		if used > memStashSize {
			return true // saturated
		}
		return f.stashHas(x, int(used))
	}
	return false
}

// stashHas scans the first used stash entries. An entry reserved but not
// yet written reads 0 and matches nothing: its Add has not returned.
func (f *MemFilter) stashHas(x uint64, used int) bool {
	want := x | 1 // 0 marks an unwritten entry
	for i := 0; i < used; i++ {
		if f.stash[i].Load() == want {
			return true
		}
	}
	return false
}

// Add records key. Safe for concurrent use with Add and MayContain, and
// lock-free. Adding a key again (an overwritten memtable key) costs no
// slot: Add returns at once when the key's fingerprint is already in one of
// its buckets, so repeats can never fill a bucket pair (the trap that
// blog posts on cuckoo-filter deletion describe).
//
// There is no Delete, deliberately: two keys can share a bucket pair and
// fingerprint, and with repeats collapsed into one entry, deleting one key
// would delete the other's only entry, a false negative. A memtable is
// immutable once flushed; its filter is dropped with it.
//
// Add's time is bounded whatever the keys: at most 16 bounded relocation
// searches per segment it tries, one sampled load estimate, and
// one stash reservation; the number of segments is logarithmic in the
// number of distinct keys (see the type's documentation).
func (f *MemFilter) Add(key []byte) { f.addHash(keyhash.Hash(key)) }

// addHash adds a key by its unmixed hash; tests use it to play an
// adversary who can produce any hash.
func (f *MemFilter) addHash(h uint64) {
	x, fp, hi := f.mixed(h)
	if f.contains(x, fp, hi) {
		return
	}
	for {
		segs := f.segments.Load()
		s := (*segs)[len(*segs)-1]
		for attempt := 0; attempt < memMaxAttempts; attempt++ {
			switch s.insert(fp, hi) {
			case memInserted:
				return
			case memFull:
				attempt = memMaxAttempts // no path exists
			}
		}
		if s.loadEstimate() < memGrowLoad {
			// A cluster that cannot be placed although the segment has
			// room: bad luck in a tiny table, or crafted keys. Growing
			// would not help it (the next segment gets the same cluster
			// of buckets-to-be if the keys were made for it) and is what
			// an attacker wants; keep the key exactly instead.
			f.addToStash(x)
			return
		}
		f.grow(segs)
	}
}

// addToStash stores x's full hash in the stash, or saturates the filter
// when the stash is full.
func (f *MemFilter) addToStash(x uint64) {
	i := f.stashUsed.Add(1) - 1
	if i < memStashSize {
		f.stash[i].Store(x | 1)
	}
	// Otherwise stashUsed > memStashSize from now on: saturated.
}

// loadEstimate returns the fraction of occupied slots in the segment, read
// in full for small segments and from a random sample of buckets
// otherwise. The sample comes from the runtime's generator, not from the
// keys, so keys cannot steer it.
func (s *memSegment) loadEstimate() float64 {
	n := len(s.buckets)
	occupied := 0
	if n <= memLoadSample {
		for i := range s.buckets {
			occupied += occupiedSlots(s.buckets[i].Load())
		}
		return float64(occupied) / float64(n*memSlots)
	}
	for k := 0; k < memLoadSample; k++ {
		occupied += occupiedSlots(s.buckets[rand.IntN(n)].Load())
	}
	return float64(occupied) / float64(memLoadSample*memSlots)
}

func occupiedSlots(w uint64) int {
	c := 0
	for s := 0; s < memSlots; s++ {
		if slotFP(w, s) != 0 {
			c++
		}
	}
	return c
}

// grow publishes a new segment twice the size of the newest, unless
// another goroutine already grew past segs.
func (f *MemFilter) grow(segs *[]*memSegment) {
	newest := (*segs)[len(*segs)-1]
	next := append(append(make([]*memSegment, 0, len(*segs)+1), *segs...), newMemSegment(2*uint64(len(newest.buckets))))
	f.segments.CompareAndSwap(segs, &next) // losing means someone else grew: fine
}

type memInsertResult int

const (
	memInserted memInsertResult = iota
	memRaced                    // a concurrent change spoiled the plan: try again
	memFull                     // no relocation path within memMaxPath
)

// insert places fp in one of its buckets, relocating others along a
// shortest path found by breadth-first search if both are full.
func (s *memSegment) insert(fp, hi uint32) memInsertResult {
	i1 := s.primary(hi)
	i2 := s.alt(i1, fp)
	if s.putEmpty(i1, fp) || s.putEmpty(i2, fp) {
		return memInserted
	}
	// The search works on this stack, which it may do only while the path
	// does not outlive insert.
	var queue [2 + 2*memSlots + 4*memSlots*memSlots*2]relocate.Node
	var moves [memMaxPath]relocate.Step
	path := s.findPath(i1, i2, queue[:0], moves[:0])
	if path == nil {
		return memFull
	}
	// Execute the moves from the far end: each frees a slot in the bucket
	// the previous move will fill. Copy-then-remove keeps every moved
	// fingerprint visible throughout (invariant 1).
	for k := len(path) - 1; k >= 0; k-- {
		m := path[k]
		if !s.relocate(m.From, m.To, m.Item) {
			return memRaced
		}
	}
	if s.putEmpty(path[0].From, fp) {
		return memInserted
	}
	return memRaced
}

// memBuckets is a segment as the relocation search reads it: each bucket
// in one load, as it was at that instant. Other Adds move entries
// meanwhile, so a move of the path may find its entry gone or its
// destination full; relocate then fails and insert tries again.
type memBuckets struct{ s *memSegment }

func (b memBuckets) Items(i uint32) [memSlots]uint32 {
	w := b.s.buckets[i].Load()
	return [memSlots]uint32{slotFP(w, 0), slotFP(w, 1), slotFP(w, 2), slotFP(w, 3)}
}
func (b memBuckets) Other(i, v uint32) uint32 { return b.s.alt(i, v) }
func (b memBuckets) Room(i uint32) bool       { return free(b.s.buckets[i].Load()) }

// findPath searches, on a snapshot of the buckets, for a chain of moves
// from i1 or i2 to a bucket with an empty slot; path[0] moves a fingerprint
// out of i1 or i2, and nil is no path. The search keeps no set of buckets
// reached (relocate.Revisit): it is short (memMaxPath), and many Adds
// search at once, each in the storage it lends, queue and moves.
func (s *memSegment) findPath(i1, i2 uint32, queue []relocate.Node, moves []relocate.Step) []relocate.Step {
	path, _ := relocate.Revisit(memBuckets{s}, i1, i2, relocate.Limits{Depth: memMaxPath}, queue, moves)
	return path
}

func free(w uint64) bool {
	for s := 0; s < memSlots; s++ {
		if slotFP(w, s) == 0 {
			return true
		}
	}
	return false
}

// putEmpty CASes fp into an empty slot of bucket i. A plain insert does not
// touch the relocation counter: a key that was not there before cannot be
// missed by a lookup that started before it arrived.
func (s *memSegment) putEmpty(i, fp uint32) bool {
	b := &s.buckets[i]
	for {
		w := b.Load()
		slot := emptySlot(w)
		if slot < 0 {
			return false
		}
		if b.CompareAndSwap(w, w|uint64(fp)<<(slot*memFPBits)) {
			return true
		}
	}
}

func emptySlot(w uint64) int {
	for s := 0; s < memSlots; s++ {
		if slotFP(w, s) == 0 {
			return s
		}
	}
	return -1
}

// relocate moves one copy of fp from bucket from to bucket to: copy in,
// then remove, each CAS bumping the bucket's relocation counter. It fails,
// leaving everything as it was, if to has no empty slot or from no longer
// holds fp; if from loses fp between the copy and the removal (another
// mover took it), the extra copy in to stays: a wasted slot, never a lost
// key.
func (s *memSegment) relocate(from, to, fp uint32) bool {
	if !has(s.buckets[from].Load(), fp) {
		return false
	}
	dst := &s.buckets[to]
	for {
		w := dst.Load()
		slot := emptySlot(w)
		if slot < 0 {
			return false
		}
		if dst.CompareAndSwap(w, (w|uint64(fp)<<(slot*memFPBits))+memCounterOne) {
			break
		}
	}
	src := &s.buckets[from]
	for {
		w := src.Load()
		slot := -1
		for sl := 0; sl < memSlots; sl++ {
			if slotFP(w, sl) == fp {
				slot = sl
				break
			}
		}
		if slot < 0 {
			return false
		}
		if src.CompareAndSwap(w, (w&^(uint64(memFPMask)<<(slot*memFPBits)))+memCounterOne) {
			return true
		}
	}
}

// MemStats describes a MemFilter.
type MemStats struct {
	Keys       int     // fingerprints stored: keys added, less repeats and exact collisions
	Segments   int     // tables probed per lookup
	Buckets    int     // buckets over all segments
	Bytes      int     // memory held by the buckets and the stash
	Load       float64 // occupied slots / slots
	BitsPerKey float64 // Bytes*8/Keys
	Stashed    int     // keys kept in the stash (could not be placed at low load)
	Saturated  bool    // the stash overflowed: MayContain answers true for every key
}

// Stats reads the filter's size. It is safe for concurrent use; under
// concurrent Adds it is a moment's snapshot.
func (f *MemFilter) Stats() MemStats {
	var st MemStats
	occupied := 0
	for _, s := range *f.segments.Load() {
		st.Segments++
		st.Buckets += len(s.buckets)
		for i := range s.buckets {
			w := s.buckets[i].Load() & memSlotsMask
			for ; w != 0; w >>= memFPBits {
				if w&memFPMask != 0 {
					occupied++
				}
			}
		}
	}
	used := int(f.stashUsed.Load())
	st.Stashed = min(used, memStashSize)
	st.Saturated = used > memStashSize
	st.Keys = occupied + st.Stashed
	st.Bytes = st.Buckets*8 + memStashSize*8
	if st.Buckets > 0 {
		st.Load = float64(occupied) / float64(st.Buckets*memSlots)
	}
	if st.Keys > 0 {
		st.BitsPerKey = float64(st.Bytes*8) / float64(st.Keys)
	}
	return st
}
