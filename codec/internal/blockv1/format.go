// Package blockv1 is format version 1, blocks with an offset table: about
// 1024 keys to a block, each block exactly the four-slot buckets (package
// bucket) its keys need, and an offset table saying where each block
// starts, behind a 32-byte header that every lookup checks. It holds the
// layout, the lookup, Decode's checks, the sizing and the encoder, whose
// placement runs relocate's breadth-first search over one block;
// FORMAT.md has the byte diagram.
package blockv1

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/bitpack"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// Version is the version byte of this layout.
const Version = 1

const (
	// HeaderSize is the fixed header; TrailerSize the CRC-32C after the
	// buckets.
	HeaderSize  = 32
	TrailerSize = 4
	// MaxDeltaW is the widest offset-table field.
	MaxDeltaW = 32
)

// Header is the fixed 32-byte version-1 header, little-endian:
//
//	0  magic "LSMC"      4  version     5  fingerprint bits f
//	6  offset width w    7  hash kind   8  distinct keys (u32)
//	12 seed (u32)        16 blocks C    20 buckets N
//	24 stride S: expected buckets per block, 16.16 fixed point
//	28 header check: headerCheck of bytes 0..27
//
// The header check lets every lookup, not only Decode, notice a damaged
// header: a flipped seed or stride would otherwise move every key to other
// buckets and turn present keys absent. It costs four bytes and a few
// multiplies that run beside the lookup, not in front of it.
type Header struct {
	Version  uint8
	FPBits   uint8
	DeltaW   uint8
	Kind     uint8
	Keys     uint32
	Seed     uint32
	Blocks   uint32
	Buckets  uint32
	Stride   uint32
	OffStart uint64 // byte offset of the offset table
	BktStart uint64 // byte offset of the bucket array
	Size     uint64 // total block size the header implies
}

func (h *Header) BucketBits() uint { return 4*uint(h.FPBits) - 4 }

// Layout fills the derived offsets and the size the fields imply.
func (h *Header) Layout() {
	h.OffStart = HeaderSize
	h.BktStart = h.OffStart + bitpack.Bytes((uint64(h.Blocks)+1)*uint64(h.DeltaW))
	h.Size = h.BktStart + bitpack.Bytes(uint64(h.Buckets)*uint64(h.BucketBits())) + TrailerSize
}

// ExpectedStart is where block i would start if every block had exactly the
// average number of buckets; the offset table stores the difference.
func (h *Header) ExpectedStart(i uint32) int64 {
	return int64((uint64(i) * uint64(h.Stride)) >> 16)
}

// BlockStart returns the first bucket of block i (i may equal blocks).
func (h *Header) BlockStart(block []byte, i uint32) int64 {
	w := uint(h.DeltaW)
	raw := bitpack.Read(block, h.OffStart*8+uint64(i)*uint64(w), w)
	var delta int64
	if w > 0 {
		delta = int64(raw) - int64(1)<<(w-1)
	}
	return h.ExpectedStart(i) + delta
}

func (h *Header) Put(dst []byte) {
	copy(dst[0:4], frame.Magic[:])
	dst[4] = h.Version
	dst[5] = h.FPBits
	dst[6] = h.DeltaW
	dst[7] = h.Kind
	binary.LittleEndian.PutUint32(dst[8:], h.Keys)
	binary.LittleEndian.PutUint32(dst[12:], h.Seed)
	binary.LittleEndian.PutUint32(dst[16:], h.Blocks)
	binary.LittleEndian.PutUint32(dst[20:], h.Buckets)
	binary.LittleEndian.PutUint32(dst[24:], h.Stride)
	binary.LittleEndian.PutUint32(dst[28:], HeaderCheck(dst))
}

// HeaderCheck hashes header bytes 0..27. Independent multiplies per word,
// then one mix, so every bit of the result depends on every header bit.
func HeaderCheck(b []byte) uint32 {
	w0 := binary.LittleEndian.Uint64(b[0:])
	w1 := binary.LittleEndian.Uint64(b[8:])
	w2 := binary.LittleEndian.Uint64(b[16:])
	w3 := uint64(binary.LittleEndian.Uint32(b[24:]))
	x := w0*0x9e3779b97f4a7c15 ^ w1*0xc2b2ae3d27d4eb4f ^ w2*0x165667b19e3779f9 ^ w3*0xd6e8feb86659fd93
	return uint32(keyhash.Mix(x, 0x4c534d43))
}

// headerProblem names what ReadHeader found wrong; the hot path only tests
// it against zero, Decode turns it into a descriptive error.
type headerProblem uint8

const (
	HeaderOK headerProblem = iota
	headerShort
	headerMagic
	headerVersion
	headerFPBits
	headerDeltaW
	headerKind
	headerBlocks
	headerKeys
	headerLength
	headerChecksum
)

// ReadHeader decodes and sanity-checks the header: every field in range and
// the block exactly as long as the fields imply. It does not read the body
// and does not allocate: MayContain runs it on every lookup.
func ReadHeader(block []byte, h *Header) headerProblem {
	if len(block) < HeaderSize+TrailerSize {
		return headerShort
	}
	id := binary.LittleEndian.Uint64(block)
	sizes := binary.LittleEndian.Uint64(block[16:])
	h.Version, h.FPBits, h.DeltaW, h.Kind = uint8(id>>32), uint8(id>>40), uint8(id>>48), uint8(id>>56)
	h.Keys = binary.LittleEndian.Uint32(block[8:])
	h.Seed = binary.LittleEndian.Uint32(block[12:])
	h.Blocks, h.Buckets = uint32(sizes), uint32(sizes>>32)
	h.Stride = binary.LittleEndian.Uint32(block[24:])
	if uint32(id) != frame.MagicWord {
		return headerMagic
	}
	if h.Version != Version {
		return headerVersion // checked first: another version may lay out its header otherwise
	}
	if binary.LittleEndian.Uint32(block[28:]) != HeaderCheck(block) {
		return headerChecksum
	}
	if h.FPBits-bucket.MinFPBits > bucket.MaxFPBits-bucket.MinFPBits { // unsigned: also catches < min
		return headerFPBits
	}
	if h.DeltaW > MaxDeltaW {
		return headerDeltaW
	}
	if h.Kind > frame.HashHost32 {
		return headerKind
	}
	if h.Blocks == 0 {
		return headerBlocks
	}
	if uint64(h.Keys) > uint64(h.Buckets)*bucket.Slots {
		return headerKeys
	}
	h.Layout()
	if uint64(len(block)) != h.Size {
		return headerLength
	}
	return HeaderOK
}

// ParseHeader is ReadHeader with a descriptive error.
func ParseHeader(block []byte) (Header, error) {
	var h Header
	switch ReadHeader(block, &h) {
	case HeaderOK:
		return h, nil
	case headerShort:
		return h, fmt.Errorf("%w: truncated: %d bytes, need at least %d", frame.ErrCorrupt, len(block), HeaderSize+TrailerSize)
	case headerMagic:
		return h, fmt.Errorf("%w: bad magic", frame.ErrCorrupt)
	case headerChecksum:
		return h, fmt.Errorf("%w: header check mismatch", frame.ErrCorrupt)
	case headerVersion:
		return h, fmt.Errorf("%w %d (this reader knows 1, 2 and 3)", frame.ErrVersion, h.Version)
	case headerFPBits:
		return h, fmt.Errorf("%w: fingerprint bits %d outside [%d,%d]", frame.ErrCorrupt, h.FPBits, bucket.MinFPBits, bucket.MaxFPBits)
	case headerDeltaW:
		return h, fmt.Errorf("%w: offset width %d > %d", frame.ErrCorrupt, h.DeltaW, MaxDeltaW)
	case headerKind:
		return h, fmt.Errorf("%w: unknown hash kind %d", frame.ErrCorrupt, h.Kind)
	case headerBlocks:
		return h, fmt.Errorf("%w: zero blocks", frame.ErrCorrupt)
	case headerKeys:
		return h, fmt.Errorf("%w: %d keys cannot fit %d buckets", frame.ErrCorrupt, h.Keys, h.Buckets)
	default:
		if uint64(len(block)) < h.Size {
			return h, fmt.Errorf("%w: truncated: %d bytes, header implies %d", frame.ErrCorrupt, len(block), h.Size)
		}
		return h, fmt.Errorf("%w: %d bytes, header implies %d", frame.ErrCorrupt, len(block), h.Size)
	}
}

// Position turns a key's hash into the 64 bits every position and the
// fingerprint are cut from. xxhash64 output is already uniform, so with the
// default seed 0 it is used as is (a lookup saves three multiplies); any
// other seed, and every 32-bit host hash, goes through keyhash.Mix.
func Position(h uint64, kind uint8, seed uint32) uint64 {
	if kind == frame.HashKey64 && seed == 0 {
		return h
	}
	return keyhash.Mix(h, seed)
}

// Unposition inverts Position, for re-placing stored keys under a new seed.
func Unposition(x uint64, kind uint8, seed uint32) uint64 {
	if kind == frame.HashKey64 && seed == 0 {
		return x
	}
	return keyhash.Unmix(x, seed)
}

// MayContain is the lookup of key hash h (of the given kind) in a
// version-1 block: true unless the block is well formed, of that kind, and
// proves the key absent.
func MayContain(block []byte, h uint64, kind uint8) bool {
	var hd Header
	if ReadHeader(block, &hd) != HeaderOK || hd.Kind != kind {
		return true
	}
	return hd.MayContain(block, Position(h, kind, hd.Seed))
}

// MayContain probes the two candidate buckets of position hash x. It is
// written flat (the helpers it mirrors are candidates and blockStart) because
// a lookup is a few dozen instructions and every call costs.
func (h *Header) MayContain(block []byte, x uint64) bool {
	hi := keyhash.Hi(x)
	prod := uint64(hi) * uint64(h.Blocks)
	blk, rest := uint32(prod>>32), uint32(prod)

	// The block's first and one-past-last bucket: two adjacent offset-table
	// fields, one load when they fit in it.
	w := uint(h.DeltaW)
	off := h.OffStart*8 + uint64(blk)*uint64(w)
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
	start := int64((uint64(blk)*uint64(h.Stride))>>16) + d0
	end := int64((uint64(blk+1)*uint64(h.Stride))>>16) + d1
	if start < 0 || end < start || end > int64(h.Buckets) {
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
	f := uint(h.FPBits)
	fp := keyhash.Fingerprint(x, f)
	bb := uint64(4*f - 4)
	base := h.BktStart*8 + uint64(start)*bb
	// Load both buckets before looking at either, so the two (possibly
	// cache-missing) loads are in flight together.
	o1, o2 := base+uint64(i1)*bb, base+uint64(i2)*bb
	w1 := bitpack.Load64(block, int(o1>>3)) >> (o1 & 7)
	w2 := bitpack.Load64(block, int(o2>>3)) >> (o2 & 7)
	return bucket.Has(w1, fp, f) || bucket.Has(w2, fp, f)
}

// Info is what Decode reports of a version-1 block.
type Info struct {
	frame.Common
	Blocks          int
	Buckets         int
	FingerprintBits int
	Load            float64
}

// Decode verifies a whole version-1 block: what MayContain checks, the
// CRC-32C, the whole offset table (block 0
// starts at bucket 0, the starts never decrease, the last block ends at
// the header's bucket count), every bucket's code and canonical order,
// and that the stored fingerprints number exactly the recorded keys.
func Decode(block []byte) (Info, error) {
	h, err := ParseHeader(block)
	if err != nil {
		if errors.Is(err, frame.ErrVersion) || len(block) < frame.TrailerSize || binary.LittleEndian.Uint32(block) == frame.MagicWord {
			return Info{}, err
		}
		return Info{}, fmt.Errorf("%w: neither a version-2 trailer nor a version-1 header", frame.ErrCorrupt)
	}
	if err := frame.VerifyChecksum(block[:h.Size-TrailerSize], binary.LittleEndian.Uint32(block[h.Size-TrailerSize:])); err != nil {
		return Info{}, err
	}
	if s := h.BlockStart(block, 0); s != 0 {
		return Info{}, fmt.Errorf("%w: block 0 starts at bucket %d", frame.ErrCorrupt, s)
	}
	prev := int64(0)
	for i := uint32(1); i <= h.Blocks; i++ {
		s := h.BlockStart(block, i)
		if s < prev || s > int64(h.Buckets) {
			return Info{}, fmt.Errorf("%w: block %d starts at bucket %d (previous %d, total %d)", frame.ErrCorrupt, i, s, prev, h.Buckets)
		}
		prev = s
	}
	if prev != int64(h.Buckets) {
		return Info{}, fmt.Errorf("%w: blocks end at bucket %d, header says %d", frame.ErrCorrupt, prev, h.Buckets)
	}
	bb := uint64(h.BucketBits())
	f := uint(h.FPBits)
	stored := uint64(0)
	for i := uint64(0); i < uint64(h.Buckets); i++ {
		n, err := bucket.Check(bitpack.Read(block, h.BktStart*8+i*bb, uint(bb)), f)
		if err != nil {
			return Info{}, fmt.Errorf("%w: bucket %d: %s", frame.ErrCorrupt, i, err)
		}
		stored += uint64(n)
	}
	if stored != uint64(h.Keys) {
		return Info{}, fmt.Errorf("%w: %d fingerprints, header says %d keys", frame.ErrCorrupt, stored, h.Keys)
	}
	load := 0.0
	if h.Buckets > 0 {
		load = float64(h.Keys) / (bucket.Slots * float64(h.Buckets))
	}
	return Info{
		Common: frame.Common{Kind: h.Kind, Keys: h.Keys, Seed: h.Seed, Bytes: int(h.Size),
			BitsPerKey: frame.BitsPerKey(h.Size, h.Keys), ExpectedFPR: bucket.ExpectedFPR(uint(h.FPBits), load)},
		Blocks:          int(h.Blocks),
		Buckets:         int(h.Buckets),
		FingerprintBits: int(h.FPBits),
		Load:            load,
	}, nil
}
