package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/lsmcuckoo/lsmcuckoo/internal/bitpack"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// FormatVersion is the version this package writes by default. Readers
// read versions 1 and 2 and answer "maybe" for any other; see FORMAT.md for
// the compatibility promise.
const FormatVersion = 3

// formatV1 is the version byte of the dense, offset-table layout.
const formatV1 = 1

// magic identifies a filter block: the first four bytes of a version-1
// block, bytes n-36..n-33 of a version-2 block of n bytes.
var magic = [4]byte{'L', 'S', 'M', 'C'}

// HashKind records which hash a block's keys were reduced to. A block must be
// queried with the same kind it was built from: a lookup with the other kind
// answers "maybe" rather than guess.
type HashKind uint8

const (
	// HashKey64 blocks hold 64-bit hashes of the keys themselves: xxhash64
	// in version 1, MulHash in version 2 (FORMAT.md).
	HashKey64 HashKind = 0
	// HashHost32 blocks hold 32-bit hashes computed by a host store (Badger's
	// y.Hash). Only 32 bits reach the filter, which puts a floor of about
	// keys/2^32 under the false-positive rate.
	HashHost32 HashKind = 1
)

const (
	headerSize  = 32
	trailerSize = 4 // CRC-32C
	minFPBits   = 5
	maxFPBits   = 16
	maxDeltaW   = 32
	slots       = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// header is the fixed 32-byte version-1 header, little-endian:
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
type header struct {
	version  uint8
	fpBits   uint8
	deltaW   uint8
	kind     HashKind
	keys     uint32
	seed     uint32
	blocks   uint32
	buckets  uint32
	stride   uint32
	offStart uint64 // byte offset of the offset table
	bktStart uint64 // byte offset of the bucket array
	size     uint64 // total block size the header implies
}

func (h *header) bucketBits() uint { return 4*uint(h.fpBits) - 4 }

// layout fills the derived offsets and the size the fields imply.
func (h *header) layout() {
	h.offStart = headerSize
	h.bktStart = h.offStart + bitpack.Bytes((uint64(h.blocks)+1)*uint64(h.deltaW))
	h.size = h.bktStart + bitpack.Bytes(uint64(h.buckets)*uint64(h.bucketBits())) + trailerSize
}

// expectedStart is where block i would start if every block had exactly the
// average number of buckets; the offset table stores the difference.
func (h *header) expectedStart(i uint32) int64 {
	return int64((uint64(i) * uint64(h.stride)) >> 16)
}

// blockStart returns the first bucket of block i (i may equal blocks).
func (h *header) blockStart(block []byte, i uint32) int64 {
	w := uint(h.deltaW)
	raw := bitpack.Read(block, h.offStart*8+uint64(i)*uint64(w), w)
	var delta int64
	if w > 0 {
		delta = int64(raw) - int64(1)<<(w-1)
	}
	return h.expectedStart(i) + delta
}

func (h *header) put(dst []byte) {
	copy(dst[0:4], magic[:])
	dst[4] = h.version
	dst[5] = h.fpBits
	dst[6] = h.deltaW
	dst[7] = byte(h.kind)
	binary.LittleEndian.PutUint32(dst[8:], h.keys)
	binary.LittleEndian.PutUint32(dst[12:], h.seed)
	binary.LittleEndian.PutUint32(dst[16:], h.blocks)
	binary.LittleEndian.PutUint32(dst[20:], h.buckets)
	binary.LittleEndian.PutUint32(dst[24:], h.stride)
	binary.LittleEndian.PutUint32(dst[28:], headerCheck(dst))
}

// headerCheck hashes header bytes 0..27. Independent multiplies per word,
// then one mix, so every bit of the result depends on every header bit.
func headerCheck(b []byte) uint32 {
	w0 := binary.LittleEndian.Uint64(b[0:])
	w1 := binary.LittleEndian.Uint64(b[8:])
	w2 := binary.LittleEndian.Uint64(b[16:])
	w3 := uint64(binary.LittleEndian.Uint32(b[24:]))
	x := w0*0x9e3779b97f4a7c15 ^ w1*0xc2b2ae3d27d4eb4f ^ w2*0x165667b19e3779f9 ^ w3*0xd6e8feb86659fd93
	return uint32(keyhash.Mix(x, 0x4c534d43))
}

// Errors returned by Decode, wrapped with a description of what is wrong.
var (
	// ErrCorrupt: the bytes are not a well-formed filter block.
	ErrCorrupt = errors.New("codec: corrupt filter block")
	// ErrVersion: a filter block of a format version this package does not
	// read (a newer writer's).
	ErrVersion = errors.New("codec: unsupported filter format version")
)

// headerProblem names what readHeader found wrong; the hot path only tests
// it against zero, Decode turns it into a descriptive error.
type headerProblem uint8

const (
	headerOK headerProblem = iota
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

// readHeader decodes and sanity-checks the header: every field in range and
// the block exactly as long as the fields imply. It does not read the body
// and does not allocate: MayContain runs it on every lookup.
func readHeader(block []byte, h *header) headerProblem {
	if len(block) < headerSize+trailerSize {
		return headerShort
	}
	id := binary.LittleEndian.Uint64(block)
	sizes := binary.LittleEndian.Uint64(block[16:])
	h.version, h.fpBits, h.deltaW, h.kind = uint8(id>>32), uint8(id>>40), uint8(id>>48), HashKind(id>>56)
	h.keys = binary.LittleEndian.Uint32(block[8:])
	h.seed = binary.LittleEndian.Uint32(block[12:])
	h.blocks, h.buckets = uint32(sizes), uint32(sizes>>32)
	h.stride = binary.LittleEndian.Uint32(block[24:])
	if uint32(id) != magicWord {
		return headerMagic
	}
	if h.version != formatV1 {
		return headerVersion // checked first: another version may lay out its header otherwise
	}
	if binary.LittleEndian.Uint32(block[28:]) != headerCheck(block) {
		return headerChecksum
	}
	if h.fpBits-minFPBits > maxFPBits-minFPBits { // unsigned: also catches < min
		return headerFPBits
	}
	if h.deltaW > maxDeltaW {
		return headerDeltaW
	}
	if h.kind > HashHost32 {
		return headerKind
	}
	if h.blocks == 0 {
		return headerBlocks
	}
	if uint64(h.keys) > uint64(h.buckets)*slots {
		return headerKeys
	}
	h.layout()
	if uint64(len(block)) != h.size {
		return headerLength
	}
	return headerOK
}

var magicWord = binary.LittleEndian.Uint32(magic[:])

// parseHeader is readHeader with a descriptive error.
func parseHeader(block []byte) (header, error) {
	var h header
	switch readHeader(block, &h) {
	case headerOK:
		return h, nil
	case headerShort:
		return h, fmt.Errorf("%w: truncated: %d bytes, need at least %d", ErrCorrupt, len(block), headerSize+trailerSize)
	case headerMagic:
		return h, fmt.Errorf("%w: bad magic", ErrCorrupt)
	case headerChecksum:
		return h, fmt.Errorf("%w: header check mismatch", ErrCorrupt)
	case headerVersion:
		return h, fmt.Errorf("%w %d (this reader knows 1 and 2)", ErrVersion, h.version)
	case headerFPBits:
		return h, fmt.Errorf("%w: fingerprint bits %d outside [%d,%d]", ErrCorrupt, h.fpBits, minFPBits, maxFPBits)
	case headerDeltaW:
		return h, fmt.Errorf("%w: offset width %d > %d", ErrCorrupt, h.deltaW, maxDeltaW)
	case headerKind:
		return h, fmt.Errorf("%w: unknown hash kind %d", ErrCorrupt, h.kind)
	case headerBlocks:
		return h, fmt.Errorf("%w: zero blocks", ErrCorrupt)
	case headerKeys:
		return h, fmt.Errorf("%w: %d keys cannot fit %d buckets", ErrCorrupt, h.keys, h.buckets)
	default:
		if uint64(len(block)) < h.size {
			return h, fmt.Errorf("%w: truncated: %d bytes, header implies %d", ErrCorrupt, len(block), h.size)
		}
		return h, fmt.Errorf("%w: %d bytes, header implies %d", ErrCorrupt, len(block), h.size)
	}
}

// position turns a key's hash into the 64 bits every position and the
// fingerprint are cut from. xxhash64 output is already uniform, so with the
// default seed 0 it is used as is (a lookup saves three multiplies); any
// other seed, and every 32-bit host hash, goes through keyhash.Mix.
func position(h uint64, kind HashKind, seed uint32) uint64 {
	if kind == HashKey64 && seed == 0 {
		return h
	}
	return keyhash.Mix(h, seed)
}

// unposition inverts position, for re-placing stored keys under a new seed.
func unposition(x uint64, kind HashKind, seed uint32) uint64 {
	if kind == HashKey64 && seed == 0 {
		return x
	}
	return keyhash.Unmix(x, seed)
}

func checksum(body []byte) uint32 { return crc32.Checksum(body, castagnoli) }
