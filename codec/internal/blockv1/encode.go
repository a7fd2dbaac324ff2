package blockv1

import (
	"encoding/binary"
	"math"
	"slices"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/bitpack"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// Version-1 shape decisions, each measured with
// `go test ./codec -run TestPlacementSweep -sweep -v`
// (see FORMAT.md, "Choosing the block size and load").
const (
	// DefaultBlockKeys is the expected number of keys per block. Blocks are
	// sized for the keys they actually receive, so balls-into-bins does not
	// bound the block size; it trades offset-table bits (about w/1024, under
	// 0.015 bit/key at 1M keys) and BFS cost against the finite-size loss
	// of small random graphs: at a planned load of 97%, 64-key blocks reach
	// 95.6% and need extra buckets in 16% of blocks, 256-key blocks reach
	// 96.8% (15%), 1024-key blocks 97.0% (5.5%). A block of 1024 keys is
	// about 1.2 KiB at f=10, so its two buckets still share a page.
	DefaultBlockKeys = 1024
	// DefaultMaxLoad is the highest planned fraction of occupied slots, just
	// under the 97.7% orientability threshold of 2-choice, 4-slot cuckoo
	// tables. Offline placement reaches it in most blocks; the rest get a
	// bucket or two more. A high ceiling matters because the fingerprint
	// width is chosen as the widest that fits the budget at this load.
	DefaultMaxLoad = 0.97
	// fixedOverheadBits is header plus checksum.
	fixedOverheadBits = (HeaderSize + TrailerSize) * 8
)

// estOffsetBits estimates the offset table's size for d keys in c blocks:
// cumulative block sizes drift from the average by a Brownian bridge of
// standard deviation about sqrt(d)/2 keys, i.e. sqrt(d)/8 buckets.
func estOffsetBits(d, c int) float64 {
	if c <= 1 {
		return 0 // a single block starts at 0 and ends at N: both deltas are 0
	}
	dev := 4*math.Sqrt(float64(d))/8 + 2
	return float64(c+1) * (math.Ceil(math.Log2(dev)) + 2)
}

type shape struct {
	fpBits uint
	load   float64
}

// chooseShape picks the fingerprint width and planned load for d distinct
// keys. With a bits-per-key budget it takes the widest fingerprint whose
// buckets still fit at the maximum load, then spends any slack on a lower
// load (the false-positive rate is proportional to load, so slack is never
// wasted). With a target rate it takes the cheapest width that meets it.
func chooseShape(o *frame.Sizing, d, blocks int, maxLoad float64) shape {
	overhead := float64(fixedOverheadBits) + estOffsetBits(d, blocks)
	if o.FingerprintBits != 0 {
		f := uint(o.FingerprintBits)
		load := maxLoad
		switch {
		case o.FalsePositiveRate > 0:
			load = math.Min(maxLoad, bucket.LoadForFPR(f, o.FalsePositiveRate))
		case o.BitsPerKey > 0 && d > 0:
			avail := o.BitsPerKey*float64(d) - overhead
			load = math.Min(maxLoad, float64(f-1)*float64(d)/math.Max(avail, 1))
		}
		return shape{f, math.Max(load, bucket.MinLoad)}
	}
	if o.FalsePositiveRate > 0 {
		best := shape{bucket.MaxFPBits, bucket.MinLoad}
		bestBits := math.Inf(1)
		for f := uint(bucket.MinFPBits); f <= bucket.MaxFPBits; f++ {
			load := math.Min(maxLoad, bucket.LoadForFPR(f, o.FalsePositiveRate))
			if load < bucket.MinLoad {
				continue
			}
			if bits := float64(f-1) / load; bits < bestBits {
				best, bestBits = shape{f, load}, bits
			}
		}
		return best
	}
	budget := o.BitsPerKey
	if !(budget > 0) { // NaN too
		budget = frame.DefaultBitsPerKey
	}
	// Per key, slots cost (f-1)/load bits; the fixed overhead is shared.
	perKey := budget
	if d > 0 {
		perKey = budget - overhead/float64(d)
	}
	for f := uint(bucket.MaxFPBits); f >= bucket.MinFPBits; f-- {
		if load := float64(f-1) / perKey; load <= maxLoad {
			return shape{f, math.Max(load, bucket.MinLoad)}
		}
	}
	return shape{bucket.MinFPBits, maxLoad}
}

// Version-1 build limits: each caps the work keys aimed at a known seed
// can cause (a placement is linear in its block's keys times the BFS
// length, and the BFS is bounded by the block).
const (
	// MaxBumps is how many buckets a block may get beyond its plan
	// before the attempt is abandoned. Random keys need one or two at the
	// planned 97% load (FORMAT.md, "Choosing the block size and load").
	MaxBumps = 8
	// MaxBlockFactor: an attempt is abandoned when a block receives more
	// than this many times the keys a block is planned for (random keys
	// exceed 1.2 times with a probability under 1e-9).
	MaxBlockFactor = 2
)

// Params are the sizing and hash kind of a build, and the block size and
// load the builder plans (DefaultBlockKeys and DefaultMaxLoad; tests
// sweep them).
type Params struct {
	Sizing    frame.Sizing
	Kind      uint8
	BlockKeys int
	MaxLoad   float64
}

// Stats describes the block Encode appended.
type Stats struct {
	Keys            int
	Blocks          int
	Buckets         int
	FingerprintBits int
	PlannedLoad     float64
	Load            float64
	BumpedBlocks    int
	Bytes           int
}

// Encoder is the memory a version-1 build needs, kept across builds.
type Encoder struct {
	sorted  []uint64
	counts  []uint32
	fill    []uint32
	binned  []uint64
	bins    [sortBins + 1]uint32
	bucketW []uint64
	starts  []uint32
	place   placer
	// Placements counts block placements since the last Reset, so that
	// tests can bound the work crafted keys cause without timing it.
	Placements int
}

// sortBins is the number of bins sortBlock spreads a block over: as many as
// the keys of a default block, so about one key lands in each.
const (
	sortBinBits = 10
	sortBins    = 1 << sortBinBits
)

// Mix replaces each raw key hash of pages by its position hash under
// seed.
func Mix(pages [][]uint64, kind uint8, seed uint32) {
	for _, pg := range pages {
		for i, h := range pg {
			pg[i] = Position(h, kind, seed)
		}
	}
}

// Remix replaces each position hash of pages, under seed from, by the
// same key's position hash under seed to: nothing but the hashes is ever
// stored.
func Remix(pages [][]uint64, kind uint8, from, to uint32) {
	for _, pg := range pages {
		for i, x := range pg {
			pg[i] = Position(Unposition(x, kind, from), kind, to)
		}
	}
}

// Encode builds the block from the hashes position hashes, in pages, mixed under seed (Mix); ok is false
// when a block received more than MaxBlockFactor times the keys a block
// is planned for, or could not be placed in MaxBumps buckets more than
// its plan: only keys aimed at this seed do either.
func (e *Encoder) Encode(dst []byte, pages [][]uint64, hashes int, seed uint32, p *Params) ([]byte, Stats, bool) {
	blocks := max(1, (hashes+p.BlockKeys-1)/p.BlockKeys)
	c := uint32(blocks)
	distinct, ok := e.groupBlocks(pages, hashes, blocks, p.BlockKeys)
	if !ok {
		return nil, Stats{}, false
	}

	sh := chooseShape(&p.Sizing, distinct, blocks, p.MaxLoad)
	f := sh.fpBits
	perBucket := bucket.Slots * sh.load

	e.bucketW = e.bucketW[:0]
	e.starts = frame.Resize(e.starts, blocks+1)
	starts := e.starts
	starts[0] = 0
	bumped := 0
	planned := 0
	for i := 0; i < blocks; i++ {
		keys := e.sorted[e.counts[i]:e.counts[i+1]]
		// Plan from the cumulative count so rounding never accumulates.
		plannedEnd := int(math.Ceil(float64(e.counts[i+1]) / perBucket))
		m := max(plannedEnd-planned, (len(keys)+bucket.Slots-1)/bucket.Slots)
		if len(keys) > 0 {
			m = max(m, 1)
		}
		planned = plannedEnd
		first := m
		for {
			e.Placements++
			if e.place.place(keys, c, uint32(m), f) {
				break
			}
			m++
			if m > first+MaxBumps {
				return nil, Stats{}, false
			}
		}
		if m > first {
			bumped++
		}
		e.bucketW = e.place.appendBuckets(e.bucketW, f)
		starts[i+1] = starts[i] + uint32(m)
	}
	n := starts[blocks]

	h := Header{
		Version: Version,
		FPBits:  uint8(f),
		Kind:    p.Kind,
		Keys:    uint32(distinct),
		Seed:    seed,
		Blocks:  c,
		Buckets: n,
		Stride:  uint32((uint64(n) << 16) / uint64(c)),
	}
	// Offset table: each block's start minus its expected start, in the
	// narrowest offset-binary width that holds them all.
	lo, hi := int64(0), int64(0)
	for i := 0; i <= blocks; i++ {
		d := int64(starts[i]) - h.ExpectedStart(uint32(i))
		lo, hi = min(lo, d), max(hi, d)
	}
	for w := uint8(0); w <= MaxDeltaW; w++ {
		if w == 0 && lo == 0 && hi == 0 ||
			w > 0 && lo >= -(int64(1)<<(w-1)) && hi < int64(1)<<(w-1) {
			h.DeltaW = w
			break
		}
	}
	h.Layout()

	out, block := frame.GrowBytes(dst, int(h.Size))
	h.Put(block)
	if w := uint(h.DeltaW); w > 0 {
		for i := 0; i <= blocks; i++ {
			d := int64(starts[i]) - h.ExpectedStart(uint32(i))
			bitpack.Write(block, h.OffStart*8+uint64(i)*uint64(w), w, uint64(d+int64(1)<<(w-1)))
		}
	}
	bb := uint64(h.BucketBits())
	for i, w := range e.bucketW {
		bitpack.Write(block, h.BktStart*8+uint64(i)*bb, uint(bb), w)
	}
	binary.LittleEndian.PutUint32(block[h.Size-TrailerSize:], frame.Checksum(block[:h.Size-TrailerSize]))

	st := Stats{
		Keys:            distinct,
		Blocks:          blocks,
		Buckets:         int(n),
		FingerprintBits: int(f),
		PlannedLoad:     sh.load,
		Load:            float64(distinct) / math.Max(1, float64(bucket.Slots)*float64(n)),
		BumpedBlocks:    bumped,
		Bytes:           int(h.Size),
	}
	return out, st, true
}

// groupBlocks gathers the hashes of pages in e.sorted by block, each
// block's sorted and without repeats, e.counts holding where each starts,
// and returns how many are distinct; ok is false when a block received
// more than MaxBlockFactor times the keys a block is planned for.
func (e *Encoder) groupBlocks(pages [][]uint64, hashes, blocks, blockKeys int) (distinct int, ok bool) {
	c := uint32(blocks)
	// Group the hashes by block with a counting sort. A block is a range
	// of the high hash bits, so this is the first digit of a radix sort.
	e.counts = slices.Grow(e.counts[:0], blocks+1)[:blocks+1]
	clear(e.counts)
	for _, pg := range pages {
		for _, x := range pg {
			blk, _ := keyhash.Reduce(keyhash.Hi(x), c)
			e.counts[blk+1]++
		}
	}
	for i := 1; i <= blocks; i++ {
		e.counts[i] += e.counts[i-1]
	}
	e.sorted = slices.Grow(e.sorted[:0], hashes)[:hashes]
	e.fill = append(e.fill[:0], e.counts[:blocks]...)
	for _, pg := range pages {
		for _, x := range pg {
			blk, _ := keyhash.Reduce(keyhash.Hi(x), c)
			e.sorted[e.fill[blk]] = x
			e.fill[blk]++
		}
	}
	// Sort and de-duplicate within each block, compacting in place; counts
	// becomes the start of each block's distinct keys. Sorting makes the
	// output depend on the key set only, never on the order keys arrived.
	for i := 0; i < blocks; i++ {
		seg := e.sortBlock(e.sorted[e.counts[i]:e.counts[i+1]], c)
		seg = slices.Compact(seg)
		if len(seg) > MaxBlockFactor*blockKeys+bucket.Slots*MaxBumps {
			// Far more distinct keys than a block is planned for: they
			// were aimed at it. Placing them would cost a BFS over the
			// whole oversized block per key; a fresh seed spreads them.
			return 0, false
		}
		e.counts[i] = uint32(distinct)
		distinct += copy(e.sorted[distinct:], seg)
	}
	e.counts[blocks] = uint32(distinct)
	return distinct, true
}

// sortBlock sorts one block's hashes. Within a block the position bits
// left over from choosing the block (keyhash.Reduce's rest) are uniform and
// ordered like the hashes, so one counting pass on their top sortBinBits bits leaves
// about one hash per bin and an insertion sort finishes in linear time:
// several times faster than a comparison sort for a few hundred keys.
func (e *Encoder) sortBlock(seg []uint64, c uint32) []uint64 {
	if len(seg) < 32 {
		insertionSort(seg)
		return seg
	}
	clear(e.bins[:])
	for _, x := range seg {
		_, rest := keyhash.Reduce(keyhash.Hi(x), c)
		e.bins[rest>>(32-sortBinBits)+1]++
	}
	for i := 1; i < len(e.bins); i++ {
		e.bins[i] += e.bins[i-1]
	}
	e.binned = frame.Resize(e.binned, len(seg))
	for _, x := range seg {
		_, rest := keyhash.Reduce(keyhash.Hi(x), c)
		d := rest >> (32 - sortBinBits)
		e.binned[e.bins[d]] = x
		e.bins[d]++
	}
	insertionSort(e.binned)
	copy(seg, e.binned)
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
