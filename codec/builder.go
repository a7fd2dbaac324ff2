package codec

import (
	"encoding/binary"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/internal/bitpack"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	freshseed "github.com/lsmcuckoo/lsmcuckoo/internal/seed"
)

// DefaultBitsPerKey is the budget used when Options names neither a budget
// nor a false-positive rate.
const DefaultBitsPerKey = 10

// Options size a filter. Set BitsPerKey or FalsePositiveRate; with neither,
// DefaultBitsPerKey applies. The zero value is ready to use.
type Options struct {
	// BitsPerKey is the space budget: the whole block divided by the
	// number of distinct keys. The builder picks the fingerprint widths and
	// load with the lowest false-positive rate that fits. Version 2 spends
	// whole 64-byte lines: a filter of a few thousand keys may take up to
	// 5% more than the budget to keep the fingerprints of a large one, and
	// a tiny one (whose 40-byte trailer is over 5% of its budget) may
	// exceed it by the trailer as well. A budget past what 16-bit
	// fingerprints fill at the lowest load the builder plans is spent only
	// up to there (further bits would buy almost nothing), so no value
	// makes a block unboundedly large; NaN or a budget of 0 or less means
	// DefaultBitsPerKey.
	BitsPerKey float64
	// FalsePositiveRate, if set, replaces BitsPerKey: the builder picks the
	// smallest filter whose expected rate is at most this; a target below
	// every filter's rate gets the lowest-rate filter (16-bit
	// fingerprints at the lowest planned load), and a target of 1 or more
	// the smallest filter. 0, a negative rate or NaN counts as not set.
	FalsePositiveRate float64
	// FingerprintBits forces the fingerprint width (version 3: the
	// remainder width; 5..16, a value outside that range is clamped into
	// it); 0 lets the builder choose.
	FingerprintBits int
	// Seed perturbs every hash-derived position; blocks record it. For
	// versions 2 and 3, 0 (the default) draws a fresh seed from
	// crypto/rand for every block, so that nobody can choose keys that
	// collide in a filter before it is built; set it only to make blocks
	// reproducible (tests, golden files). Version 1 builds under the
	// value as given, 0 included, and retries a failed placement (only
	// keys aimed at a known seed fail) under seeds from crypto/rand, or
	// under Seed+1, Seed+2, ... when Seed is not 0.
	Seed uint32
	// Hash says what the builder receives: HashKey64 (the default) for
	// keys (Add), HashHost32 for a host's 32-bit key hashes (AddHash32).
	// Calling the other method, or either under any other value, panics:
	// it is a programming error, not a property of the keys.
	Hash HashKind
	// Version selects the block format: 0 or 3 for version 3 (one cache
	// line per lookup, quotient lines, the default), 2 for version 2 (one
	// cache line per lookup, buckets of semi-sorted fingerprints), 1 for
	// the denser version-1 layout whose lookups read an offset table and
	// then the buckets. Any other value also builds FormatVersion: a
	// writer cannot ask this package for a format it does not know.
	// Version 3 at a budget of a few bits per key, where version 2's
	// modelled rate is lower than version 3's densest plan's (or, with
	// FalsePositiveRate, its block smaller), writes version 2, which every
	// version-3 reader reads; BuildStats.Version says which was written.
	Version int
	// Densest (version 3) plans each line for the lowest false-positive
	// rate the budget buys, filling lines until a good share of negative
	// lookups read a second line. By default the plan keeps that share
	// small, so that a cold lookup waits for one cache miss, as a blocked
	// bloom filter's does, at some cost in rate (README.md, "Which layout
	// to run", has both); below 7 bits per key the default plan is the
	// densest too. Readers do not care: a block records its shape.
	Densest bool
}

// sortBins is the number of bins sortBlock spreads a block over: as many as
// the keys of a default block, so about one key lands in each.
const (
	sortBinBits = 10
	sortBins    = 1 << sortBinBits
)

// hashPage is the unit in which a Builder stores hashes, so that a builder
// holding n hashes uses 8n bytes plus at most one partly filled page, never
// the up-to-2x of a growing slice.
const hashPage = 4096

// Builder accumulates the keys of one table and encodes them as a filter
// block. It keeps only 8 bytes per key (their hashes); consecutive repeats
// (the versions of one key in a sorted table) are dropped as they arrive,
// any other repeats at Finish. A Builder is reusable after Finish and is not
// safe for concurrent use.
type Builder struct {
	opts  Options
	pages [][]uint64 // the last is cur[:curN] once sealed
	// cur is the page being filled (all hashPage entries, the first curN
	// in use): Add writes one entry and bumps curN, with no slice growth.
	cur       []uint64
	curN      int
	n         int // hashes held, set by seal
	last      uint64
	haveLast  bool
	blockKeys int
	maxLoad   float64
	// rejectSeeds makes Finish discard that many successful encodings, so
	// tests can drive the reseed path that real key sets never reach.
	rejectSeeds int
	// exactVersion makes a version-3 Builder write version 3 at any
	// budget, so that tests reach the small-budget shapes that older
	// releases wrote and every reader must still read.
	exactVersion bool
	// placements counts version-1 block placements in the last Finish, so
	// tests can bound the work crafted keys cause without timing it.
	placements int

	s     *scratch // only inside Finish
	stats BuildStats
}

// scratch is the memory a Builder needs only inside Finish. A compaction
// writes tables one after another, each with a new writer, so scratch and
// hash pages are pooled across builders (as Pebble's bloom writer pools its
// hash blocks); a sync.Pool lets the GC reclaim them when idle.
type scratch struct {
	sorted  []uint64
	counts  []uint32
	fill    []uint32
	binned  []uint64
	bins    [sortBins + 1]uint32
	bucketW []uint64
	place   placer
	v2      v2Placer
	v3      v3Placer
}

var (
	scratchPool = sync.Pool{New: func() any { return new(scratch) }}
	pagePool    = sync.Pool{New: func() any { p := make([]uint64, 0, hashPage); return &p }}
	// warmScratch holds the scratch of the last Finish. A sync.Pool keeps
	// a returned object in a per-processor slot that only that processor
	// reads, so a writer whose goroutine moved to another processor
	// between two tables found the pool empty and allocated its scratch
	// anew, which the kernel then zeroes page by page. The one
	// warm scratch is shared by all processors. A garbage collection
	// that finds it unused since the one before sends it back to
	// scratchPool, so that an idle process still gives it up, as it
	// would the pool's own objects.
	warmScratch atomic.Pointer[scratch]
	// warmUsed records a Finish since the last garbage collection.
	warmUsed atomic.Bool
)

func getScratch() *scratch {
	if s := warmScratch.Swap(nil); s != nil {
		return s
	}
	return scratchPool.Get().(*scratch)
}

func putScratch(s *scratch) {
	warmUsed.Store(true)
	if !warmScratch.CompareAndSwap(nil, s) {
		scratchPool.Put(s)
	}
}

func init() { releaseWarmScratchAtGC() }

// releaseWarmScratchAtGC arranges for the warm scratch to go back to
// scratchPool at the next garbage collection unless a Finish used it since
// the one before, and for the arrangement to be made again then: a
// cleanup runs once its object is collected, and the object is
// unreachable from the start.
func releaseWarmScratchAtGC() {
	runtime.AddCleanup(new(gcTick), func(struct{}) {
		if !warmUsed.Swap(false) {
			if s := warmScratch.Swap(nil); s != nil {
				scratchPool.Put(s)
			}
		}
		releaseWarmScratchAtGC()
	}, struct{}{})
}

// gcTick is an object whose only use is to be collected. It holds a
// pointer so that it is not a tiny allocation, which shares its memory
// (and its collection) with other small objects.
type gcTick struct{ _ *byte }

// BuildStats describes the last block a Builder produced.
type BuildStats struct {
	Version         int     // format version of the block
	Keys            int     // fingerprints stored (distinct keys)
	FingerprintBits int     // f (version 2: of the narrow lines)
	Buckets         int     // buckets
	Load            float64 // keys / (4·buckets)
	Reseeds         int     // placements abandoned and restarted under a new seed
	Seed            uint32  // seed the block was built with
	Bytes           int     // block size

	// Versions 2 and 3.
	Lines           int // 64-byte lines
	WideLines       int // lines holding the wider fingerprints (FingerprintBits+1 bits; 15 when it is 13: FORMAT.md)
	PrimaryOverflow int // keys that did not fit their primary line
	Overflowed      int // keys stored in their secondary line (evictions included)
	OverflowLines   int // lines with at least one overflow bit set
	OverflowBits    int // overflow bits set, over all lines
	// SecondLineShare is the expected share of negative lookups that read
	// a second line: the set overflow bits of each line over its O, averaged.
	SecondLineShare float64
	Fallback        bool // placement failed under every cap: the block answers "maybe" for every key

	// Version 3 (FingerprintBits is the remainder width r; OverflowLines
	// counts lines whose threshold is below Q).
	Quotients    int  // Q, quotients per line
	LineCapacity int  // K, keys a line holds
	SeededLines  bool // lines chosen by the seeded hash (keys crowded lines under the fixed one)

	// Version 1.
	Blocks       int     // blocks
	PlannedLoad  float64 // load the sizing aimed for
	BumpedBlocks int     // blocks that needed more buckets than planned
}

// NewBuilder returns a Builder for the given options.
func NewBuilder(o Options) *Builder {
	if o.FingerprintBits != 0 {
		o.FingerprintBits = min(max(o.FingerprintBits, minFPBits), maxFPBits)
	}
	if o.Version != 1 && o.Version != 2 {
		o.Version = FormatVersion
	}
	return &Builder{opts: o, blockKeys: defaultBlockKeys, maxLoad: defaultMaxLoad}
}

// Add records a key. The key is hashed at once and not retained.
// It panics unless the builder's Options.Hash is HashKey64 (a HashHost32
// builder takes AddHash32).
func (b *Builder) Add(key []byte) {
	if b.opts.Hash != HashKey64 {
		panic("codec: Add needs Options.Hash == HashKey64 (a HashHost32 builder takes AddHash32 with the host's hash)")
	}
	var h uint64
	if b.opts.Version == formatV1 {
		h = keyhash.Hash(key)
	} else {
		h = keyhash.MulHash(key)
	}
	// addHash, written out: a table writer calls Add for every key, and
	// addHash is too large to inline.
	if h == b.last && b.haveLast {
		return
	}
	b.last, b.haveLast = h, true
	if b.curN == len(b.cur) {
		b.nextPage()
	}
	b.cur[b.curN] = h
	b.curN++
}

// AddHash32 records a key of a HashHost32 builder by the host's 32-bit
// hash of it (Badger's y.Hash). It panics unless the builder's
// Options.Hash is HashHost32 (a HashKey64 builder takes Add).
func (b *Builder) AddHash32(h uint32) {
	if b.opts.Hash != HashHost32 {
		panic("codec: AddHash32 needs Options.Hash == HashHost32 (a HashKey64 builder takes Add with the key)")
	}
	b.addHash(uint64(h))
}

// addHash records a key hash, dropping a repeat of the previous one.
func (b *Builder) addHash(h uint64) {
	if h == b.last && b.haveLast {
		return
	}
	b.last, b.haveLast = h, true
	if b.curN == len(b.cur) {
		b.nextPage()
	}
	b.cur[b.curN] = h
	b.curN++
}

// nextPage seals the page being filled and starts another.
func (b *Builder) nextPage() {
	b.seal()
	b.cur = (*pagePool.Get().(*[]uint64))[:hashPage]
	b.curN = 0
	b.pages = append(b.pages, nil)
}

// seal makes the last of b.pages hold exactly the hashes added to it, and
// b.n count them.
func (b *Builder) seal() {
	b.n = b.Len()
	if len(b.pages) > 0 {
		b.pages[len(b.pages)-1] = b.cur[:b.curN]
	}
}

// Len returns the number of hashes held (repeats not yet removed).
func (b *Builder) Len() int {
	if len(b.pages) == 0 {
		return 0
	}
	return (len(b.pages)-1)*hashPage + b.curN
}

// Stats describes the block the last Finish produced.
func (b *Builder) Stats() BuildStats { return b.stats }

// Reset forgets all added keys.
func (b *Builder) Reset() {
	b.seal()
	for i, pg := range b.pages {
		pg = pg[:0]
		pagePool.Put(&pg)
		b.pages[i] = nil
	}
	b.pages = b.pages[:0]
	b.cur, b.curN = nil, 0
	b.n, b.haveLast = 0, false
}

// Finish appends the encoded filter block to dst and returns it, then
// resets the builder. It never fails and never drops a key. A version-2
// placement that fails (only adversarial or astronomically unlucky key
// sets do) is retried under a fresh seed, then in geometrically more lines
// up to a cap; past the cap the block answers "maybe" for every key and
// Stats().Fallback says so. A version-1 block whose keys cannot all be
// placed gets another bucket, a few times; past that, or when one block
// received far more keys than a block is planned for (keys aimed at it
// under a known seed), placement restarts under a fresh seed from
// crypto/rand (Seed+1, Seed+2, ... for a pinned non-zero Seed), a bounded
// number of times, and past that Finish writes the version-2 block that
// answers "maybe" for every key (Stats().Fallback).
func (b *Builder) Finish(dst []byte) []byte {
	b.seal()
	b.s = getScratch()
	defer func() {
		putScratch(b.s)
		b.s = nil
		b.Reset()
	}()
	switch b.opts.Version {
	case FormatVersion:
		return b.finishV3(dst)
	case 2:
		return b.finishV2(dst)
	}
	// Version 1 works on hashes mixed under its seed; a reseed re-mixes
	// them through Unmix, so nothing but the hashes is ever stored.
	for _, pg := range b.pages {
		for i, h := range pg {
			pg[i] = position(h, b.opts.Hash, b.opts.Seed)
		}
	}
	// The first attempt is under the seed as given (0 by default, which
	// keeps version 1's lookups a mix shorter). Whoever knows the seed can
	// aim keys at one block, so a retry must be under a seed they cannot
	// know: the retries of an unpinned builder draw theirs from
	// crypto/rand. (They used to take seed+1: a key set crafted for seeds
	// 0, 1, 2, ... forced as many failed placements as it had parts.)
	b.placements = 0
	seed := b.opts.Seed
	for attempt := 0; attempt < v1Attempts; attempt++ {
		if out, ok := b.encode(dst, seed); ok && b.rejectSeeds <= 0 {
			b.stats.Reseeds = attempt
			b.stats.Seed = seed
			return out
		}
		b.rejectSeeds--
		next := seed + 1
		if b.opts.Seed == 0 {
			next = freshseed.New()
		}
		for _, pg := range b.pages {
			for i, x := range pg {
				pg[i] = position(unposition(x, b.opts.Hash, seed), b.opts.Hash, next)
			}
		}
		seed = next
	}
	return b.alwaysMaybe(dst, 0, seed, v1Attempts)
}

// alwaysMaybe appends the version-2 block that answers "maybe" for every
// key (the fallback of both versions: a version-1 reader that predates
// version 2 finds no version-1 header in it and answers "maybe" too).
func (b *Builder) alwaysMaybe(dst []byte, f uint, seed uint32, attempts int) []byte {
	out, blk := growBytes(dst, v2TrailerSize)
	h := v2Header{fpBits: uint8(max(f, minFPBits)), kind: b.opts.Hash, flags: v2FlagAlwaysIn, seed: seed}
	h.put(blk, 0)
	binary.LittleEndian.PutUint32(blk[v2TrailerSize-4:], checksum(blk[:v2TrailerSize-4]))
	b.stats = BuildStats{Version: 2, Reseeds: attempts, Fallback: true, Bytes: v2TrailerSize, FingerprintBits: int(h.fpBits), Seed: seed}
	return out
}

// Version-1 build limits: each caps the work keys aimed at a known seed
// can cause (a placement is linear in its block's keys times the BFS
// length, and the BFS is bounded by the block).
const (
	// v1Attempts bounds the seeds one Finish tries.
	v1Attempts = 4
	// v1MaxBumps is how many buckets a block may get beyond its plan
	// before the attempt is abandoned. Random keys need one or two at the
	// planned 97% load (FORMAT.md, "Choosing the block size and load").
	v1MaxBumps = 8
	// v1MaxBlockFactor: an attempt is abandoned when a block receives more
	// than this many times the keys a block is planned for (random keys
	// exceed 1.2 times with a probability under 1e-9).
	v1MaxBlockFactor = 2
)

// encode builds the block from mixed hashes under one seed; ok is false
// when a block received more than v1MaxBlockFactor times the keys a block
// is planned for, or could not be placed in v1MaxBumps buckets more than
// its plan: only keys aimed at this seed do either.
func (b *Builder) encode(dst []byte, seed uint32) ([]byte, bool) {
	blocks := max(1, (b.n+b.blockKeys-1)/b.blockKeys)
	c := uint32(blocks)

	// Group the hashes by block with a counting sort. A block is a range
	// of the high hash bits, so this is the first digit of a radix sort.
	b.s.counts = slices.Grow(b.s.counts[:0], blocks+1)[:blocks+1]
	clear(b.s.counts)
	for _, pg := range b.pages {
		for _, x := range pg {
			blk, _ := keyhash.Reduce(keyhash.Hi(x), c)
			b.s.counts[blk+1]++
		}
	}
	for i := 1; i <= blocks; i++ {
		b.s.counts[i] += b.s.counts[i-1]
	}
	b.s.sorted = slices.Grow(b.s.sorted[:0], b.n)[:b.n]
	b.s.fill = append(b.s.fill[:0], b.s.counts[:blocks]...)
	for _, pg := range b.pages {
		for _, x := range pg {
			blk, _ := keyhash.Reduce(keyhash.Hi(x), c)
			b.s.sorted[b.s.fill[blk]] = x
			b.s.fill[blk]++
		}
	}
	// Sort and de-duplicate within each block, compacting in place; counts
	// becomes the start of each block's distinct keys. Sorting makes the
	// output depend on the key set only, never on the order keys arrived.
	distinct := 0
	for i := 0; i < blocks; i++ {
		seg := b.sortBlock(b.s.sorted[b.s.counts[i]:b.s.counts[i+1]], c)
		seg = slices.Compact(seg)
		if len(seg) > v1MaxBlockFactor*b.blockKeys+slots*v1MaxBumps {
			// Far more distinct keys than a block is planned for: they
			// were aimed at it. Placing them would cost a BFS over the
			// whole oversized block per key; a fresh seed spreads them.
			return nil, false
		}
		b.s.counts[i] = uint32(distinct)
		distinct += copy(b.s.sorted[distinct:], seg)
	}
	b.s.counts[blocks] = uint32(distinct)

	sh := chooseShape(&b.opts, distinct, blocks, b.maxLoad)
	f := sh.fpBits
	perBucket := slots * sh.load

	b.s.bucketW = b.s.bucketW[:0]
	starts := make([]uint32, blocks+1)
	bumped := 0
	planned := 0
	for i := 0; i < blocks; i++ {
		keys := b.s.sorted[b.s.counts[i]:b.s.counts[i+1]]
		// Plan from the cumulative count so rounding never accumulates.
		plannedEnd := int(math.Ceil(float64(b.s.counts[i+1]) / perBucket))
		m := max(plannedEnd-planned, (len(keys)+slots-1)/slots)
		if len(keys) > 0 {
			m = max(m, 1)
		}
		planned = plannedEnd
		first := m
		for {
			b.placements++
			if b.s.place.place(keys, c, uint32(m), f) {
				break
			}
			m++
			if m > first+v1MaxBumps {
				return nil, false
			}
		}
		if m > first {
			bumped++
		}
		b.s.bucketW = b.s.place.appendBuckets(b.s.bucketW, f)
		starts[i+1] = starts[i] + uint32(m)
	}
	n := starts[blocks]

	h := header{
		version: formatV1,
		fpBits:  uint8(f),
		kind:    b.opts.Hash,
		keys:    uint32(distinct),
		seed:    seed,
		blocks:  c,
		buckets: n,
		stride:  uint32((uint64(n) << 16) / uint64(c)),
	}
	// Offset table: each block's start minus its expected start, in the
	// narrowest offset-binary width that holds them all.
	lo, hi := int64(0), int64(0)
	for i := 0; i <= blocks; i++ {
		d := int64(starts[i]) - h.expectedStart(uint32(i))
		lo, hi = min(lo, d), max(hi, d)
	}
	for w := uint8(0); w <= maxDeltaW; w++ {
		if w == 0 && lo == 0 && hi == 0 ||
			w > 0 && lo >= -(int64(1)<<(w-1)) && hi < int64(1)<<(w-1) {
			h.deltaW = w
			break
		}
	}
	h.layout()

	out, block := growBytes(dst, int(h.size))
	h.put(block)
	if w := uint(h.deltaW); w > 0 {
		for i := 0; i <= blocks; i++ {
			d := int64(starts[i]) - h.expectedStart(uint32(i))
			bitpack.Write(block, h.offStart*8+uint64(i)*uint64(w), w, uint64(d+int64(1)<<(w-1)))
		}
	}
	bb := uint64(h.bucketBits())
	for i, w := range b.s.bucketW {
		bitpack.Write(block, h.bktStart*8+uint64(i)*bb, uint(bb), w)
	}
	binary.LittleEndian.PutUint32(block[h.size-trailerSize:], checksum(block[:h.size-trailerSize]))

	b.stats = BuildStats{
		Version:         formatV1,
		Keys:            distinct,
		Blocks:          blocks,
		Buckets:         int(n),
		FingerprintBits: int(f),
		PlannedLoad:     sh.load,
		Load:            float64(distinct) / math.Max(1, float64(slots)*float64(n)),
		BumpedBlocks:    bumped,
		Bytes:           int(h.size),
	}
	return out, true
}

// sortBlock sorts one block's hashes. Within a block the position bits
// left over from choosing the block (keyhash.Reduce's rest) are uniform and
// ordered like the hashes, so one counting pass on their top sortBinBits bits leaves
// about one hash per bin and an insertion sort finishes in linear time:
// several times faster than a comparison sort for a few hundred keys.
func (b *Builder) sortBlock(seg []uint64, c uint32) []uint64 {
	if len(seg) < 32 {
		insertionSort(seg)
		return seg
	}
	clear(b.s.bins[:])
	for _, x := range seg {
		_, rest := keyhash.Reduce(keyhash.Hi(x), c)
		b.s.bins[rest>>(32-sortBinBits)+1]++
	}
	for i := 1; i < len(b.s.bins); i++ {
		b.s.bins[i] += b.s.bins[i-1]
	}
	b.s.binned = resize(b.s.binned, len(seg))
	for _, x := range seg {
		_, rest := keyhash.Reduce(keyhash.Hi(x), c)
		d := rest >> (32 - sortBinBits)
		b.s.binned[b.s.bins[d]] = x
		b.s.bins[d]++
	}
	insertionSort(b.s.binned)
	copy(seg, b.s.binned)
	return seg
}

func insertionSort(s []uint64) {
	for i := 1; i < len(s); i++ {
		v := s[i]
		j := i
		for ; j > 0 && s[j-1] > v; j-- {
			s[j] = s[j-1]
		}
		s[j] = v
	}
}

// growBytes extends dst by n zeroed bytes, returning the whole slice and the
// new part.
func growBytes(dst []byte, n int) (all, added []byte) {
	l := len(dst)
	dst = slices.Grow(dst, n)[:l+n]
	clear(dst[l:])
	return dst, dst[l:]
}

// Build is a convenience that encodes keys with the given options: a new
// Builder, Add for each key, Finish. Like Add it panics unless o.Hash is
// HashKey64.
func Build(keys [][]byte, o Options) []byte {
	b := NewBuilder(o)
	for _, k := range keys {
		b.Add(k)
	}
	return b.Finish(nil)
}
