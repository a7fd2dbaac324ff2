package codec

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/blockv1"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
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
	// line per lookup, quotient lines, the default), 4 for version 4 (one
	// cache line per lookup, lines that solve a linear system, the lowest
	// rate: where version 3's densest layout or version 2 filters better,
	// below about 4.2 bits per key, version 4 writes that), 2 for version 2 (one
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
	// bloom filter's does, at some cost in rate; below 7 bits per key the
	// default plan is the densest too. Readers do not care: a block records its shape.
	Densest bool
}

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
	// rejectSeeds makes Finish count that many attempts as failed
	// without making them, so tests can drive the reseed path that real
	// key sets never reach.
	rejectSeeds int
	// exactVersion makes a version-3 Builder write version 3 at any
	// budget, so that tests reach the small-budget shapes, which a block
	// may hold and every reader must read, though the default writer
	// writes version 2 there.
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
	sorted []uint64 // dropRepeats' buffer
	v1     blockv1.Encoder
	v2     linev2.Encoder
	v3     linev3.Encoder
	v4     linev4.Encoder
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

// NewBuilder returns a Builder for the given options.
func NewBuilder(o Options) *Builder {
	if o.FingerprintBits != 0 {
		o.FingerprintBits = min(max(o.FingerprintBits, bucket.MinFPBits), bucket.MaxFPBits)
	}
	if o.Version != 1 && o.Version != 2 && o.Version != NewestVersion {
		o.Version = FormatVersion
	}
	return &Builder{opts: o, blockKeys: blockv1.DefaultBlockKeys, maxLoad: blockv1.DefaultMaxLoad}
}

// Add records a key. The key is hashed at once and not retained.
// It panics unless the builder's Options.Hash is HashKey64 (a HashHost32
// builder takes AddHash32).
func (b *Builder) Add(key []byte) {
	if b.opts.Hash != HashKey64 {
		panic("codec: Add needs Options.Hash == HashKey64 (a HashHost32 builder takes AddHash32 with the host's hash)")
	}
	var h uint64
	switch n := len(key); {
	case b.opts.Version == 1:
		h = keyhash.Hash(key)
	case n >= 8 && n <= 16:
		// MulHash, written out for the usual key lengths.
		h = keyhash.MulHashWords(binary.LittleEndian.Uint64(key), binary.LittleEndian.Uint64(key[n-8:]), n)
	default:
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
// resets the builder. It never fails and never drops a key. A placement
// that fails (only key sets aimed at a known seed, or astronomically
// unlucky ones, fail) is retried under a fresh seed from crypto/rand (for
// a pinned Seed, one derived from it), and in versions 2 and 3 in
// geometrically more lines, a bounded number of times; past that the
// block answers "maybe" for every key and Stats().Fallback says so. (A
// version-1 block whose keys cannot all be placed first gets a few more
// buckets; its first attempt is under Seed as given.)
func (b *Builder) Finish(dst []byte) []byte {
	b.seal()
	b.s = getScratch()
	defer func() {
		putScratch(b.s)
		b.s = nil
		b.Reset()
	}()
	var w writer
	if b.opts.Version == NewestVersion {
		if b.exactVersion || v4Serves(&b.opts) {
			return b.finish(dst, &v4Writer{})
		}
		// Version 3's densest layout serves the request (v4Serves).
		o := b.opts
		defer func() { b.opts = o }()
		b.opts.Version, b.opts.Densest = FormatVersion, true
	}
	switch {
	case b.opts.Version == 1:
		w = &v1Writer{}
	case b.opts.Version == 2 || !b.exactVersion && smallBudgetPrefersV2(&b.opts):
		w = &v2Writer{}
	default:
		w = &v3Writer{}
	}
	return b.finish(dst, w)
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
