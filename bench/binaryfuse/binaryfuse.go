// Package binaryfuse is a binary fuse table filter behind Pebble v2's
// FilterPolicy: the anchor lsmcuckoo is compared with. Pebble's unreleased
// master ships binary fuse table filters; no released Pebble does, so the
// benchmarks measure this one, shaped like master's: fingerprints of 4, 8,
// 10, 12 or 16 bits, bit-packed, probed in place.
//
// The construction is FastFilter's (github.com/FastFilter/xorfilter, after
// Graf and Lemire, "Binary Fuse Filters: Fast and Smaller Than Xor
// Filters"). It builds 8-bit slots for widths up to 8 and 16-bit slots
// above, and the block keeps the low w bits of each slot. That is a
// correct w-bit filter: a lookup compares the key's fingerprint with the
// XOR of three slots, and the low w bits of an XOR are the XOR of the low
// w bits.
//
// The key hash is the project's xxhash64 and the byte layout is this
// package's own, so the policy's name is not Pebble master's: a block
// written here must never be handed to master's reader.
package binaryfuse

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/FastFilter/xorfilter"
	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
)

// Widths are the fingerprint widths a policy can have, Pebble master's.
// A width w gives a false-positive rate of 2^-w.
var Widths = []int{4, 8, 10, 12, 16}

// Policy is a pebble.FilterPolicy writing binary fuse filters of one
// fingerprint width. Its MayContain is safe for concurrent use and reads
// the filter block in place, at any alignment, without retaining it.
type Policy struct{ width int }

// NewPolicy is the policy of w-bit fingerprints; w must be one of Widths.
func NewPolicy(w int) Policy {
	if !slices.Contains(Widths, w) {
		panic(fmt.Sprintf("binaryfuse: fingerprint width %d is not one of %v", w, Widths))
	}
	return Policy{width: w}
}

// namePrefix begins every policy's name; the width follows in parentheses.
const namePrefix = "lsmcuckoo.bench.binaryfuse"

// Name is the name stored in each table: the width, because a reader finds
// the policy by it (PolicyFromName). Every width reads every block.
func (p Policy) Name() string { return fmt.Sprintf("%s(%d)", namePrefix, p.width) }

// Width is the fingerprint width in bits.
func (p Policy) Width() int { return p.width }

// PolicyFromName is the policy a table's filter name stands for, and false
// for a name this package does not write.
func PolicyFromName(name string) (Policy, bool) {
	for _, w := range Widths {
		if name == NewPolicy(w).Name() {
			return Policy{width: w}, true
		}
	}
	return Policy{}, false
}

// MayContain reports whether key may be in the table whose filter block is
// filter. A block that does not parse answers true: a filter may only ever
// let a read through in doubt.
func (p Policy) MayContain(ftype pebble.FilterType, filter, key []byte) bool {
	return mayContain(filter, keyhash.Hash(key))
}

// NewWriter returns a writer for one table's filter.
func (p Policy) NewWriter(ftype pebble.FilterType) pebble.FilterWriter {
	return &writer{width: p.width}
}

// The block: the slots, slot i at bits [i·w, (i+1)·w) of the payload,
// least significant bit first, in ceil(slots·w/8) bytes, then a trailer.
// A lookup reads each slot as a little-endian 32-bit word from the slot's
// first byte; the trailer behind the payload keeps that read in bounds.
const (
	trailerLen = 14
	// Trailer fields, by offset.
	seedAt     = 0  // uint64: FastFilter's seed
	segCountAt = 8  // uint32: segments a key's first slot may fall in
	segShiftAt = 12 // byte: log2 of the segment length in slots
	widthAt    = 13 // byte: fingerprint width; 0 marks a block without a filter
	// maxSlots bounds the slots of a block that parses, far above any
	// table's filter, so a damaged trailer cannot overflow the size check.
	maxSlots = 1 << 40
)

// layout reads a block's trailer. ok is false for a block without a filter
// or one whose length does not match its trailer.
func layout(filter []byte) (seed uint64, segCount uint32, shift, width uint, ok bool) {
	n := len(filter) - trailerLen
	if n < 0 {
		return 0, 0, 0, 0, false
	}
	t := filter[n:]
	seed = binary.LittleEndian.Uint64(t[seedAt:])
	segCount = binary.LittleEndian.Uint32(t[segCountAt:])
	shift, width = uint(t[segShiftAt]), uint(t[widthAt])
	if segCount == 0 || shift > 24 || !slices.Contains(Widths, int(width)) {
		return 0, 0, 0, 0, false
	}
	slots := (uint64(segCount) + 2) << shift
	if slots > maxSlots || uint64(n) != (slots*uint64(width)+7)/8 {
		return 0, 0, 0, 0, false
	}
	return seed, segCount, shift, width, true
}

// mayContain is FastFilter's lookup over the packed block: the key's hash
// mixed with the seed gives a fingerprint and three slots, one in each of
// three consecutive segments, whose XOR equals the fingerprint for every
// key the filter was built from.
func mayContain(filter []byte, keyHash uint64) bool {
	seed, segCount, shift, width, ok := layout(filter)
	if !ok {
		return true
	}
	h := murmur64(keyHash + seed)
	mask := uint32(1)<<width - 1
	fp := uint32(h^h>>32) & mask
	segLen := uint32(1) << shift
	hi, _ := bits.Mul64(h, uint64(segCount)<<shift)
	h0 := uint32(hi)
	h1 := h0 + segLen
	h2 := h1 + segLen
	h1 ^= uint32(h>>18) & (segLen - 1)
	h2 ^= uint32(h) & (segLen - 1)
	slot := func(i uint32) uint32 {
		bit := uint64(i) * uint64(width)
		return binary.LittleEndian.Uint32(filter[bit>>3:]) >> (bit & 7) & mask
	}
	return fp == slot(h0)^slot(h1)^slot(h2)
}

// murmur64 is the finaliser FastFilter mixes a key's hash and the seed
// with (MurmurHash3's fmix64).
func murmur64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// writer collects one table's key hashes.
type writer struct {
	width  int
	hashes *[]uint64 // lent by hashBuffers from the first AddKey to Finish
}

// hashBuffers lend the key hashes' slice from one table's writer to the
// next, as lsmcuckoo's builder lends its pages and Pebble master's binary
// fuse writer its hash blocks: Pebble asks for a new writer per table, and
// the anchor's build time is to be its construction's, not the slice's
// growth.
var hashBuffers = sync.Pool{New: func() any { return new([]uint64) }}

// AddKey adds a key. Pebble hands the filter each key's prefix in the
// table's order, so the versions of one key arrive one after another: a
// hash equal to the last is dropped here. FastFilter's construction drops
// any other repeat, in a filter sized for the hashes it was handed.
func (w *writer) AddKey(key []byte) {
	if w.hashes == nil {
		w.hashes = hashBuffers.Get().(*[]uint64)
		*w.hashes = (*w.hashes)[:0]
	}
	h := keyhash.Hash(key)
	hs := *w.hashes
	if n := len(hs); n > 0 && hs[n-1] == h {
		return
	}
	*w.hashes = append(hs, h)
}

// builders lend FastFilter's construction buffers from one table's build
// to the next.
var builders = sync.Pool{New: func() any { return new(xorfilter.BinaryFuseBuilder) }}

// Finish appends the filter block of the keys added since the last Finish
// to dst. A table without keys, or a construction that fails, gets a block
// that answers "maybe" to every key.
func (w *writer) Finish(dst []byte) []byte {
	var hashes []uint64
	if lent := w.hashes; lent != nil {
		hashes, w.hashes = *lent, nil
		defer hashBuffers.Put(lent) // after the construction has read them
	}
	if len(hashes) == 0 {
		return appendMaybe(dst)
	}
	b := builders.Get().(*xorfilter.BinaryFuseBuilder)
	defer builders.Put(b)
	if w.width <= 8 {
		f, err := xorfilter.BuildBinaryFuse[uint8](b, hashes)
		if err != nil {
			return appendMaybe(dst)
		}
		return appendBlock(dst, f.Fingerprints, w.width, f.Seed, f.SegmentCount, f.SegmentLength)
	}
	f, err := xorfilter.BuildBinaryFuse[uint16](b, hashes)
	if err != nil {
		return appendMaybe(dst)
	}
	return appendBlock(dst, f.Fingerprints, w.width, f.Seed, f.SegmentCount, f.SegmentLength)
}

// appendBlock packs the low width bits of each slot and appends the
// trailer.
func appendBlock[T uint8 | uint16](dst []byte, slots []T, width int, seed uint64, segCount, segLen uint32) []byte {
	dst = slices.Grow(dst, (len(slots)*width+7)/8+trailerLen)
	mask := uint64(1)<<width - 1
	var acc uint64 // bits not yet appended, least significant first
	held := 0
	for _, s := range slots {
		acc |= (uint64(s) & mask) << held
		held += width
		for held >= 8 {
			dst = append(dst, byte(acc))
			acc >>= 8
			held -= 8
		}
	}
	if held > 0 {
		dst = append(dst, byte(acc))
	}
	dst = binary.LittleEndian.AppendUint64(dst, seed)
	dst = binary.LittleEndian.AppendUint32(dst, segCount)
	return append(dst, byte(bits.TrailingZeros32(segLen)), byte(width))
}

// appendMaybe appends a block without a filter: a trailer of width 0.
func appendMaybe(dst []byte) []byte {
	return append(dst, make([]byte, trailerLen)...)
}
