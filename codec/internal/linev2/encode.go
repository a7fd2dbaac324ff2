package linev2

import (
	"cmp"
	"encoding/binary"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// Encoder is the memory a version-2 build needs, kept across builds, and
// the seed its hash pages are mixed under.
type Encoder struct {
	p      placer
	counts []uint32
	fill   []uint32
	// mixed is the seed the pages' hashes are mixed under, 0 while they
	// are raw (no version-2 seed is 0).
	mixed uint32
}

// Stats describes the block Encode appended.
type Stats struct {
	Keys            int
	Lines           int
	WideLines       int
	Buckets         int
	FingerprintBits int // of the narrow lines
	Load            float64
	PrimaryOverflow int
	Overflowed      int
	OverflowLines   int
	OverflowBits    int
	SecondLineShare float64
	Bytes           int
}

// Start readies the encoder for a build whose pages hold raw key hashes.
func (e *Encoder) Start() { e.mixed = 0 }

// Encode places the n key hashes of pages under one seed and geometry (g,
// with a share wide/128 of wide lines) and appends the block; ok is false
// when placement failed (the caller reseeds or grows). It leaves the pages
// holding the position hashes under seed, in place of whatever they held,
// so that nothing but the hashes is ever stored.
func (e *Encoder) Encode(dst []byte, pages [][]uint64, n int, kind uint8, seed uint32, g Geom, wide uint8) ([]byte, Stats, bool) {
	p := &e.p
	p.g = g
	e.group(pages, n, seed)
	nb := int(g.FirstBucket(g.Lines))
	p.bkt = frame.Resize(p.bkt, nb)
	p.keys = frame.Resize(p.keys, nb)
	p.ovMask = frame.Resize(p.ovMask, int(g.Lines))
	clear(p.ovMask)
	p.queue = p.queue[:0]
	p.evicted, p.dups = 0, 0
	p.placePrimaryLines(e.counts)
	primaryOverflow := len(p.queue)
	if !p.placeSecondary(n) {
		return nil, Stats{}, false
	}
	out, st := p.write(dst, kind, seed, wide)
	st.PrimaryOverflow = primaryOverflow
	return out, st, true
}

// group mixes the hashes of pages under seed, in place, and groups them
// by primary line into p.x with a counting sort (e.counts has where each
// line's start), so that each line is then placed while its keys and
// buckets are in cache.
func (e *Encoder) group(pages [][]uint64, n int, seed uint32) {
	p := &e.p
	prevSeed := e.mixed
	e.mixed = seed
	lines := p.g.Lines
	counts := slices.Grow(e.counts[:0], int(lines)+1)[:lines+1]
	clear(counts)
	m := frame.Multiplier(seed)
	var prevInv uint64
	if prevSeed != 0 {
		prevInv = keyhash.ModInverse(frame.Multiplier(prevSeed))
	}
	for _, pg := range pages {
		for i, h := range pg {
			if prevSeed != 0 {
				h = frame.Unposition(h, prevInv)
			}
			x := frame.Position(h, m)
			pg[i] = x
			counts[(uint64(uint32(x>>32))*uint64(lines))>>32+1]++
		}
	}
	for i := 1; i <= int(lines); i++ {
		counts[i] += counts[i-1]
	}
	e.fill = append(e.fill[:0], counts[:lines]...)
	fill := e.fill
	p.x = frame.Resize(p.x, n)
	for _, pg := range pages {
		for _, x := range pg {
			ln := (uint64(uint32(x>>32)) * uint64(lines)) >> 32
			p.x[fill[ln]] = x
			fill[ln]++
		}
	}
	e.counts = counts
}

// placePrimaryLines places every key in its primary line, one line at a
// time while its keys and buckets are in cache, and queues the keys that
// do not fit for their secondary lines.
func (p *placer) placePrimaryLines(counts []uint32) {
	for ln := uint32(0); ln < p.g.Lines; ln++ {
		bk, ks := p.line(ln)
		for i := range bk {
			bk[i].fp = 0
		}
		first := len(p.queue)
		p.placePrimary(bk, ks, p.x[counts[ln]:counts[ln+1]], ln)
		// A key pushed out of this line may have a repeat that arrived
		// later and stayed: then the key is stored already. No copy can
		// enter the line after this, so this is the one place to look.
		kept := first
		for _, m := range p.queue[first:] {
			pos := Primary(m.x, &p.g)
			if p.holds(bk, ks, m.x, pos.I1, pos.I2, pos.fp) {
				p.dups++
				continue
			}
			p.queue[kept] = m
			kept++
		}
		p.queue = p.queue[:kept]
	}
}

// placeSecondary places the queued keys in their secondary lines, in
// rounds: each round's keys sorted by their secondary line, so the lines
// are visited in memory order; the keys a round pushes out of their
// primary lines make the next round. It reports false when a key finds
// no place or the evictions pass their cap (frame.EvictionsPerKey of the
// n keys).
func (p *placer) placeSecondary(n int) bool {
	nb := int(p.g.FirstBucket(p.g.Lines))
	touch := nb*int(unsafe.Sizeof(lineBucket{})+unsafe.Sizeof(slotKeys{})) > touchBytes
	limit := int(frame.EvictionsPerKey*float64(n)) + 64
	for start := 0; start < len(p.queue); {
		end := len(p.queue)
		var touched uint64
		for i, m := range p.sortRound(p.queue[start:end]) {
			// Load the buckets and keys of the line some moves ahead, so
			// that their cache misses overlap this insert (Go has no
			// prefetch instruction; loads whose sum is kept serve as one).
			// A small filter's lines are in cache already.
			if a := i + touchAhead; a < len(p.sorted) && touch {
				touched += p.touch(p.sorted[a].line)
			}
			bk, ks := p.line(m.line)
			if !p.insert(bk, ks, m.x, m.line, uint32(m.i1), uint32(m.i2), m.fp, secondaryMeta) || p.evicted > limit {
				return false
			}
		}
		p.touched += touched
		start = end
	}
	return true
}

// sortRound returns a round's moves in p.sorted, sorted by secondary line,
// stably, so that keys of one line keep their queue order: a counting
// sort, or for the short tail rounds (each round is a fraction of the one
// before) a comparison sort, which costs less than a pass over every line.
func (p *placer) sortRound(round []move) []move {
	lines := p.g.Lines
	p.sorted = frame.Resize(p.sorted, len(round))
	if len(round)*smallRound < int(lines) {
		copy(p.sorted, round)
		slices.SortStableFunc(p.sorted, func(a, b move) int { return cmp.Compare(a.line, b.line) })
		return p.sorted
	}
	p.lineCount = frame.Resize(p.lineCount, int(lines)+1)
	clear(p.lineCount)
	for _, m := range round {
		p.lineCount[m.line+1]++
	}
	for i := 1; i <= int(lines); i++ {
		p.lineCount[i] += p.lineCount[i-1]
	}
	for _, m := range round {
		p.sorted[p.lineCount[m.line]] = m
		p.lineCount[m.line]++
	}
	return p.sorted
}

// write appends the placed lines and the trailer.
func (p *placer) write(dst []byte, kind uint8, seed uint32, wide uint8) ([]byte, Stats) {
	g := &p.g
	lines := g.Lines
	nb := int(g.FirstBucket(lines))
	size := int(lines)*frame.LineBytes + frame.TrailerSize
	out, blk := frame.GrowBytes(dst, size)
	stored, ovLines, ovBits, p2 := 0, 0, 0, 0.0
	for ln := 0; ln < int(lines); ln++ {
		var w [frame.LineBytes / 8]uint64
		bk, _ := p.line(uint32(ln))
		f := g.Width(uint32(ln))
		shape := g.Shape(uint32(ln))
		bb := uint(shape.BktBits)
		for i := range bk {
			stored += int(bk[i].count())
			v := bucket.EncodeLanes(bk[i].fp, f)
			off := uint(i) * bb
			w[off>>6] |= v << (off & 63)
			if (off&63)+bb > 64 {
				w[off>>6+1] |= v >> (64 - off&63)
			}
		}
		m := p.ovMask[ln]
		w[len(w)-1] |= m << shape.OvShift
		if m != 0 {
			ovLines++
			ovBits += bits.OnesCount64(m)
			p2 += float64(bits.OnesCount64(m)) / float64(shape.Overflow)
		}
		line := blk[ln*frame.LineBytes:]
		for j, v := range w {
			binary.LittleEndian.PutUint64(line[j*8:], v)
		}
	}
	h := Header{FPBits: uint8(g.F), Kind: kind, Lines: lines, Seed: seed, Flags: wide << WideShift}
	h.Put(blk[size-frame.TrailerSize:], uint32(stored))
	frame.Seal(blk)
	return out, Stats{
		Keys:            stored,
		Lines:           int(lines),
		Buckets:         nb,
		FingerprintBits: int(g.F),
		WideLines:       int(g.Wide),
		Load:            float64(stored) / (float64(nb) * bucket.Slots),
		Overflowed:      len(p.queue),
		OverflowLines:   ovLines,
		OverflowBits:    ovBits,
		SecondLineShare: p2 / float64(lines),
		Bytes:           size,
	}
}

// AlwaysMaybe appends the version-2 block that answers "maybe" for every
// key: a trailer with the always-maybe flag and no lines, f bits recorded
// (at least bucket.MinFPBits). It is also version 1's fallback: a
// version-1 header has no such flag, and a version-1 reader finds no
// header in this block and answers "maybe" too.
func AlwaysMaybe(dst []byte, kind uint8, f uint, seed uint32) []byte {
	out, blk := frame.GrowBytes(dst, frame.TrailerSize)
	h := Header{FPBits: uint8(max(f, bucket.MinFPBits)), Kind: kind, Flags: FlagAlwaysMaybe, Seed: seed}
	h.Put(blk, 0)
	frame.Seal(blk)
	return out
}
