package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"github.com/lsmcuckoo/lsmcuckoo/internal/bitpack"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/semisort"
)

// MayContain reports whether key may be among the keys block was built
// from (a block of hash kind HashKey64, the default: built with Add). It
// reads the block in place: no copy, no allocation, any alignment, safe
// for concurrent use. It answers false only when the block
// is well formed and proves the key absent; for a block that is truncated,
// malformed, of an unknown version or of another hash kind it answers true.
//
// MayContain checks the block's header (trailer, in version 2) and exact
// length on every call, and the bucket codes it reads, but not the
// checksum (that would cost a pass over the whole block per lookup): a bit
// flipped inside a bucket (or, in version 1, inside the offset table, which
// can make a block look empty) is caught by Decode, and by the block
// checksums Pebble and Badger verify when they read a block from disk.
func MayContain(block, key []byte) bool {
	var h uint64
	if v3UseBMI2 {
		// The hash and version 3's common case in one call: in a loop of
		// cold lookups every instruction costs throughput (the README's
		// "Why a loop of cold lookups costs what it costs").
		o, x := v3ProbeBMI2(block, key)
		if o <= v3Maybe {
			return o == v3Maybe
		}
		h = x
	} else {
		h = keyhash.MulHash(key)
	}
	// v3OrV2Lookup, written out: a call level less under the lookup
	// measurably speeds a loop of cold version-3 lookups (the README's
	// "Which version to run").
	var maybe, ok bool
	if trailerSaysV2(block) {
		maybe, ok = v2Lookup(block, h, HashKey64)
	} else {
		maybe, ok = v3Lookup(block, h, HashKey64)
	}
	if ok {
		return maybe
	}
	return v1MayContain(block, keyhash.Hash(key), HashKey64)
}

// v3OrV2Lookup is the lookup in a version-3 or version-2 block; ok is
// false for a block that is neither. The version byte of their common
// trailer frame picks the one lookup to run: in a loop of lookups over
// cold blocks, a lookup of the other version tried first, failing on the
// trailer, made the right one cost half as much again (FORMAT.md: a block
// is version 3 or 2 only if that byte says so).
func v3OrV2Lookup(block []byte, h uint64, kind HashKind) (maybe, ok bool) {
	if trailerSaysV2(block) {
		return v2Lookup(block, h, kind)
	}
	return v3Lookup(block, h, kind)
}

// trailerSaysV2 reports whether the version byte of block's trailer frame
// says 2 (the lookup then checks the rest of the trailer).
func trailerSaysV2(block []byte) bool {
	n := len(block)
	return n >= v2TrailerSize && block[n-v2TrailerSize+v2VersionAt] == 2
}

// v1MayContain is the lookup in a version-1 block.
func v1MayContain(block []byte, h uint64, kind HashKind) bool {
	var hd header
	if readHeader(block, &hd) != headerOK || hd.kind != kind {
		return true
	}
	return hd.mayContain(block, position(h, kind, hd.seed))
}

// MayContainHash32 is MayContain for a HashHost32 block (built with
// AddHash32) and the host's 32-bit hash of the key. Like MayContain it reads
// the block in place, allocates nothing, is safe for concurrent use, and
// answers true for a block it cannot trust or of the other hash kind.
func MayContainHash32(block []byte, h uint32) bool {
	if maybe, ok := v3OrV2Lookup(block, uint64(h), HashHost32); ok {
		return maybe
	}
	return v1MayContain(block, uint64(h), HashHost32)
}

// mayContain probes the two candidate buckets of position hash x. It is
// written flat (the helpers it mirrors are candidates and blockStart) because
// a lookup is a few dozen instructions and every call costs.
func (h *header) mayContain(block []byte, x uint64) bool {
	hi := keyhash.Hi(x)
	prod := uint64(hi) * uint64(h.blocks)
	blk, rest := uint32(prod>>32), uint32(prod)

	// The block's first and one-past-last bucket: two adjacent offset-table
	// fields, one load when they fit in it.
	w := uint(h.deltaW)
	off := h.offStart*8 + uint64(blk)*uint64(w)
	var d0, d1 int64
	if w > 0 {
		mask := uint64(1)<<w - 1
		bias := int64(1) << (w - 1)
		if 2*w+7 <= 64 {
			v := bitpack.Load64(block, int(off>>3)) >> (off & 7)
			d0, d1 = int64(v&mask)-bias, int64(v>>w&mask)-bias
		} else {
			d0 = int64(bitpack.Read(block, off, w)) - bias
			d1 = int64(bitpack.Read(block, off+uint64(w), w)) - bias
		}
	}
	start := int64((uint64(blk)*uint64(h.stride))>>16) + d0
	end := int64((uint64(blk+1)*uint64(h.stride))>>16) + d1
	if start < 0 || end < start || end > int64(h.buckets) {
		return true // corrupt offset table
	}
	m := uint32(end - start)
	if m == 0 {
		return false // a block that received no keys
	}
	i1 := uint32((uint64(rest) * uint64(m)) >> 32)
	// i2 = (i1 + 1 + offset) mod m without a branch: whether it wraps is a
	// coin flip, and a mispredicted branch here costs more than the lookup.
	i2 := i1 + 1 + keyhash.AltOffset(x, m-1)
	i2 -= m & uint32(int32(m-1-i2)>>31)
	if m == 1 {
		i2 = 0
	}
	f := uint(h.fpBits)
	fp := keyhash.Fingerprint(x, f)
	bb := uint64(4*f - 4)
	base := h.bktStart*8 + uint64(start)*bb
	// Load both buckets before looking at either, so the two (possibly
	// cache-missing) loads are in flight together.
	o1, o2 := base+uint64(i1)*bb, base+uint64(i2)*bb
	w1 := bitpack.Load64(block, int(o1>>3)) >> (o1 & 7)
	w2 := bitpack.Load64(block, int(o2>>3)) >> (o2 & 7)
	return bucketHas(w1, fp, f) || bucketHas(w2, fp, f)
}

// bucketHas reports whether the bucket word w holds fp; a
// bucket with an invalid nibble code (only in a corrupt block) answers true.
//
// The nibbles are tested first, all four at once: XOR with fp's nibble in
// every lane and an exact zero-lane test. About three lookups in four find
// no equal nibble and stop there without touching the low bits; the rest
// compare the low bits of just the matching slots.
//
// w is the bucket's word: buckets are 4f-4 bits and start nibble-aligned,
// so a bucket is always inside the 64-bit word loaded at its first byte.
func bucketHas(w uint64, fp uint32, f uint) bool {
	code := w & 0xfff
	if code >= nibbleCodes {
		return true
	}
	low := (f - 4) & 15
	xn := uint32(semisort.NibblesOfCode[code]) ^ (fp>>low)*0x1111
	eq := ^((xn&0x7777 + 0x7777) | xn) & 0x8888 // bit 4j+3 set: slot j's nibble matches
	return eq != 0 && lowsMatch(w, eq, fp, low)
}

// lowsMatch compares the low bits of the slots flagged in eq with fp's; it
// is bucketHas's rare path, apart so that bucketHas inlines.
func lowsMatch(w uint64, eq, fp uint32, low uint) bool {
	lowMask := uint64(1)<<low - 1
	for eq != 0 {
		j := uint(bits.TrailingZeros32(eq)) >> 2
		if w>>((12+j*low)&63)&lowMask == uint64(fp)&lowMask {
			return true
		}
		eq &= eq - 1
	}
	return false
}

// Filter is a decoded, verified filter block. It references the block's
// bytes (no copy); the caller must keep them unchanged while it is used.
type Filter struct {
	block []byte
	info  Info
}

// Info describes a filter block.
type Info struct {
	Version         int
	Hash            HashKind
	Keys            int // fingerprints stored (distinct keys)
	Seed            uint32
	Lines           int // versions 2 and 3: 64-byte lines
	WideLines       int // version 2: lines holding wider fingerprints (FORMAT.md)
	Blocks          int // version 1: blocks
	Buckets         int
	FingerprintBits int // version 2: of the narrow lines
	Bytes           int
	BitsPerKey      float64 // Bytes*8/Keys
	Load            float64 // Keys / (4·Buckets)
	ExpectedFPR     float64 // from f and load, before the few second-line reads of version 2
	AlwaysMaybe     bool    // versions 2 and 3: the builder fell back to a block that answers "maybe"
	Quotients       int     // version 3: Q, quotients per line (FingerprintBits is the remainder width)
	LineCapacity    int     // version 3: K, keys a line holds
	SeededLines     bool    // version 3: lines chosen by the seeded hash (FORMAT.md)
}

// Decode verifies a whole filter block: header, exact length, checksum,
// every bucket's encoding, that the stored fingerprints number exactly the
// recorded keys, and (version 1) the offset table. Errors wrap ErrCorrupt,
// or ErrVersion for a block of a version this package does not know, and
// say what is wrong.
func Decode(block []byte) (*Filter, error) {
	var h3 v3Header
	if readV3(block, &h3) {
		return decodeV3(block, &h3)
	}
	var h2 v2Header
	if readV2(block, &h2) {
		return decodeV2(block, &h2)
	}
	if len(block) >= v2TrailerSize && binary.LittleEndian.Uint32(block[len(block)-36:]) == magicWord && block[len(block)-32] > FormatVersion {
		return nil, fmt.Errorf("%w %d (this reader knows 1, 2 and 3)", ErrVersion, block[len(block)-32])
	}
	h, err := parseHeader(block)
	if err != nil {
		if errors.Is(err, ErrVersion) || len(block) < v2TrailerSize || binary.LittleEndian.Uint32(block) == magicWord {
			return nil, err
		}
		return nil, fmt.Errorf("%w: neither a version-2 trailer nor a version-1 header", ErrCorrupt)
	}
	body := block[:h.size-trailerSize]
	if got, want := checksum(body), binary.LittleEndian.Uint32(block[h.size-trailerSize:]); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch: computed %#08x, stored %#08x", ErrCorrupt, got, want)
	}
	if s := h.blockStart(block, 0); s != 0 {
		return nil, fmt.Errorf("%w: block 0 starts at bucket %d", ErrCorrupt, s)
	}
	prev := int64(0)
	for i := uint32(1); i <= h.blocks; i++ {
		s := h.blockStart(block, i)
		if s < prev || s > int64(h.buckets) {
			return nil, fmt.Errorf("%w: block %d starts at bucket %d (previous %d, total %d)", ErrCorrupt, i, s, prev, h.buckets)
		}
		prev = s
	}
	if prev != int64(h.buckets) {
		return nil, fmt.Errorf("%w: blocks end at bucket %d, header says %d", ErrCorrupt, prev, h.buckets)
	}
	bb := uint64(h.bucketBits())
	f := uint(h.fpBits)
	stored := uint64(0)
	for i := uint64(0); i < uint64(h.buckets); i++ {
		n, err := checkBucket(bitpack.Read(block, h.bktStart*8+i*bb, uint(bb)), f)
		if err != nil {
			return nil, fmt.Errorf("%w: bucket %d: %s", ErrCorrupt, i, err)
		}
		stored += uint64(n)
	}
	if stored != uint64(h.keys) {
		return nil, fmt.Errorf("%w: %d fingerprints, header says %d keys", ErrCorrupt, stored, h.keys)
	}
	load := 0.0
	if h.buckets > 0 {
		load = float64(h.keys) / (slots * float64(h.buckets))
	}
	return &Filter{block: block, info: Info{
		Version:         int(h.version),
		Hash:            h.kind,
		Keys:            int(h.keys),
		Seed:            h.seed,
		Blocks:          int(h.blocks),
		Buckets:         int(h.buckets),
		FingerprintBits: int(h.fpBits),
		Bytes:           int(h.size),
		BitsPerKey:      bitsPerKey(h.size, h.keys),
		Load:            load,
		ExpectedFPR:     expectedFPR(uint(h.fpBits), load),
	}}, nil
}

func decodeV2(block []byte, h *v2Header) (*Filter, error) {
	n := len(block)
	if got, want := checksum(block[:n-4]), binary.LittleEndian.Uint32(block[n-4:]); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch: computed %#08x, stored %#08x", ErrCorrupt, got, want)
	}
	keys := binary.LittleEndian.Uint32(block[n-v2TrailerSize:])
	info := Info{
		Version:         2,
		Hash:            h.kind,
		Keys:            int(keys),
		Seed:            h.seed,
		Lines:           int(h.lines),
		FingerprintBits: int(h.fpBits),
		Bytes:           n,
		AlwaysMaybe:     h.flags == v2FlagAlwaysIn,
	}
	if info.AlwaysMaybe {
		if keys != 0 {
			return nil, fmt.Errorf("%w: an always-maybe block records %d keys", ErrCorrupt, keys)
		}
		info.ExpectedFPR = 1
		return &Filter{block: block, info: info}, nil
	}
	g := h.geom()
	stored := uint64(0)
	for ln := uint32(0); ln < h.lines; ln++ {
		f := g.width(ln)
		s := &lineShapes[f]
		bb := uint64(s.bktBits)
		for i := uint64(0); i < uint64(s.buckets); i++ {
			c, err := checkBucket(bitpack.Read(block, uint64(ln)*lineBits+i*bb, uint(bb)), f)
			if err != nil {
				return nil, fmt.Errorf("%w: line %d bucket %d: %s", ErrCorrupt, ln, i, err)
			}
			stored += uint64(c)
		}
	}
	if stored != uint64(keys) {
		return nil, fmt.Errorf("%w: %d fingerprints, trailer says %d keys", ErrCorrupt, stored, keys)
	}
	info.Buckets = int(g.firstBucket(h.lines))
	info.WideLines = int(g.wide)
	info.Load = float64(keys) / (slots * float64(info.Buckets))
	info.BitsPerKey = bitsPerKey(uint64(n), keys)
	wide := float64(g.wide) / float64(h.lines)
	info.ExpectedFPR = (1 - wide) * expectedFPR(g.f, info.Load)
	if g.wide > 0 {
		info.ExpectedFPR += wide * expectedFPR(uint(wideWidth[g.f]), info.Load)
	}
	return &Filter{block: block, info: info}, nil
}

func decodeV3(block []byte, h *v3Header) (*Filter, error) {
	n := len(block)
	if got, want := checksum(block[:n-4]), binary.LittleEndian.Uint32(block[n-4:]); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch: computed %#08x, stored %#08x", ErrCorrupt, got, want)
	}
	keys := binary.LittleEndian.Uint32(block[n-v2TrailerSize:])
	s := h.shape
	info := Info{
		Version:         3,
		Hash:            h.kind,
		Keys:            int(keys),
		Seed:            h.seed,
		Lines:           int(h.lines),
		FingerprintBits: int(s.r),
		Quotients:       int(s.q),
		LineCapacity:    int(s.k),
		SeededLines:     h.seededLines,
		Bytes:           n,
		AlwaysMaybe:     h.alwaysMaybe,
	}
	if info.AlwaysMaybe {
		if keys != 0 {
			return nil, fmt.Errorf("%w: an always-maybe block records %d keys", ErrCorrupt, keys)
		}
		info.ExpectedFPR = 1
		return &Filter{block: block, info: info}, nil
	}
	stored := uint64(0)
	for ln := uint64(0); ln < uint64(h.lines); ln++ {
		c, err := checkLineV3(block[ln*lineBytes:(ln+1)*lineBytes], s)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %s", ErrCorrupt, ln, err)
		}
		stored += uint64(c)
	}
	if stored != uint64(keys) {
		return nil, fmt.Errorf("%w: %d remainders, trailer says %d keys", ErrCorrupt, stored, keys)
	}
	info.Load = float64(keys) / (float64(h.lines) * float64(s.k))
	info.BitsPerKey = bitsPerKey(uint64(n), keys)
	info.ExpectedFPR = v3ExpectedFPR(s, float64(keys)/float64(h.lines))
	return &Filter{block: block, info: info}, nil
}

// checkLineV3 returns the keys a version-3 line holds, or what is wrong
// with it: the header must end its Q runs within Q+K bits, every bit the
// format leaves unused must be zero, no run may exceed v3MaxRun, and the
// threshold must be at most Q.
func checkLineV3(line []byte, s v3Shape) (int, error) {
	bit := func(i uint32) uint64 { return uint64(line[i>>3]>>(i&7)) & 1 }
	zeros, ones, run := uint32(0), uint32(0), uint32(0)
	i := uint32(0)
	for ; zeros < s.q; i++ {
		if i >= s.q+s.k {
			return 0, fmt.Errorf("header holds %d of %d quotients' runs", zeros, s.q)
		}
		if bit(i) == 1 {
			ones++
			run++
			if run > v3MaxRun {
				return 0, fmt.Errorf("a run longer than %d", v3MaxRun)
			}
		} else {
			zeros++
			run = 0
		}
	}
	if ones > s.k {
		return 0, fmt.Errorf("%d keys, capacity %d", ones, s.k)
	}
	end := s.remOff() + ones*s.r
	for ; i < lineBits-s.tBits(); i++ {
		if (i < s.remOff() || i >= end) && bit(i) != 0 {
			return 0, fmt.Errorf("bit %d is set outside the header's runs and the remainders", i)
		}
	}
	if t := binary.LittleEndian.Uint64(line[lineBytes-8:]) >> (64 - s.tBits()); t > uint64(s.q) {
		return 0, fmt.Errorf("threshold %d above %d quotients", t, s.q)
	}
	return int(ones), nil
}

// checkBucket returns the number of occupied slots of a bucket word, or
// what is wrong with it.
func checkBucket(w uint64, f uint) (int, error) {
	fps, ok := semisort.Decode(w, f)
	if !ok {
		return 0, fmt.Errorf("invalid nibble code %d", w&0xfff)
	}
	n := 0
	for j := 0; j < slots; j++ {
		if j > 0 && fps[j] < fps[j-1] {
			return 0, errors.New("not in canonical order")
		}
		if fps[j] != 0 {
			n++
		}
	}
	return n, nil
}

func bitsPerKey(size uint64, keys uint32) float64 {
	if keys == 0 {
		return 0
	}
	return float64(size) * 8 / float64(keys)
}

// MayContain is the package-level MayContain on the decoded block: for a
// HashKey64 block (Info().Hash), whether key may be among its keys; a
// HashHost32 block answers true (use MayContainHash32). A Filter is
// read-only: any number of goroutines may query it at once.
func (f *Filter) MayContain(key []byte) bool { return MayContain(f.block, key) }

// MayContainHash32 is the package-level MayContainHash32 on the decoded
// block: for a HashHost32 block, whether a key whose host hash is h may be
// among its keys; a HashKey64 block answers true (use MayContain).
func (f *Filter) MayContainHash32(h uint32) bool { return MayContainHash32(f.block, h) }

// Info describes the filter.
func (f *Filter) Info() Info { return f.info }
