// Package bitpack reads and writes little-endian bit fields of up to 57 bits
// at arbitrary bit offsets of a byte slice.
//
// Bit i of a stream lives in byte i/8 at bit position i%8; a field of width w
// at offset o occupies stream bits [o, o+w). This is the order the codec's
// diagrams use, and it lets a reader fetch any field with one unaligned
// 8-byte load (encoding/binary, so unaligned buffers from a block cache are
// fine) when at least 8 bytes remain, falling back to byte loads at the very
// end of the slice.
package bitpack

import "encoding/binary"

// Load64 returns the 8 bytes at p as a little-endian word, reading only the
// bytes that exist (missing high bytes read as zero).
func Load64(buf []byte, p int) uint64 {
	if p+8 <= len(buf) {
		return binary.LittleEndian.Uint64(buf[p:])
	}
	return load64Tail(buf, p)
}

// load64Tail is Load64's rare path, kept apart so Load64 inlines.
func load64Tail(buf []byte, p int) uint64 {
	var w uint64
	for i := len(buf) - 1; i >= p; i-- {
		w = w<<8 | uint64(buf[i])
	}
	return w
}

// Read returns the w-bit field (w <= 57) at bit offset off.
func Read(buf []byte, off uint64, w uint) uint64 {
	if w == 0 {
		return 0
	}
	return Load64(buf, int(off>>3)) >> (off & 7) & (1<<w - 1)
}

// Write stores the low w bits (w <= 57) of v at bit offset off. Bits outside
// the field are left untouched, so fields can be written in any order.
func Write(buf []byte, off uint64, w uint, v uint64) {
	if w == 0 {
		return
	}
	p := int(off >> 3)
	shift := off & 7
	mask := (uint64(1)<<w - 1) << shift
	v = (v << shift) & mask
	if p+8 <= len(buf) {
		old := binary.LittleEndian.Uint64(buf[p:])
		binary.LittleEndian.PutUint64(buf[p:], old&^mask|v)
		return
	}
	for i := 0; p+i < len(buf) && i < 8; i++ {
		m := byte(mask >> (8 * i))
		buf[p+i] = buf[p+i]&^m | byte(v>>(8*i))
	}
}

// Bytes returns how many bytes hold n bits.
func Bytes(n uint64) uint64 { return (n + 7) / 8 }
