package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/blockv1"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/internal/bitpack"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// resealV2 returns a copy of a version-2 block whose trailer id bytes
// have been changed by edit, with the inverted copy and the CRC written to
// match: damage that no single fault produces, but a buggy or hostile
// writer can. Readers must then enforce FORMAT.md's rules one by one.
func resealV2(block []byte, edit func(id []byte)) []byte {
	b := bytes.Clone(block)
	n := len(b)
	id := b[n-36 : n-20]
	edit(id)
	for i := range id {
		b[n-20+i] = ^id[i]
	}
	binary.LittleEndian.PutUint32(b[n-4:], frame.Checksum(b[:n-4]))
	return b
}

// TestV2TrailerRulesAnswerMaybe builds blocks whose trailers are
// self-consistent (inverted copy and CRC agree) but break one rule of
// FORMAT.md ("What readers check"): an unknown hash kind, the always-maybe
// flag beside lines, an always-maybe trailer that is not the whole block,
// zero lines without the flag, a wide share with 16-bit fingerprints, and
// a length that is not 64·L + 40. Each must answer "maybe" for every key,
// absent ones included, without panicking, and Decode must reject it.
func TestV2TrailerRulesAnswerMaybe(t *testing.T) {
	keys := testkeys.Random(2000, 16, 41)
	absent := testkeys.Absent(2000, 42)
	normal := Build(keys, Options{BitsPerKey: 10, Seed: 5, Version: 2})
	wide16 := Build(keys, Options{FingerprintBits: 16, Seed: 6, Version: 2})
	b := NewBuilder(Options{Version: 2})
	b.rejectSeeds = frame.Attempts
	b.Add([]byte("k"))
	alwaysMaybe := b.Finish(nil)
	if len(alwaysMaybe) != frame.TrailerSize {
		t.Fatalf("the always-maybe block is %d bytes, want %d", len(alwaysMaybe), frame.TrailerSize)
	}

	// withGap puts extra bytes between a block's lines and its trailer.
	withGap := func(block []byte, extra int) []byte {
		n := len(block)
		out := append(bytes.Clone(block[:n-frame.TrailerSize]), make([]byte, extra)...)
		return append(out, block[n-frame.TrailerSize:]...)
	}
	cases := []struct {
		name  string
		block []byte
	}{
		{"hash kind 2", resealV2(normal, func(id []byte) { id[6] = 2 })},
		{"always-maybe flag beside lines", resealV2(normal, func(id []byte) { id[7] |= linev2.FlagAlwaysMaybe })},
		{"always-maybe trailer after a line", resealV2(withGap(alwaysMaybe, frame.LineBytes), func([]byte) {})},
		{"zero lines without the flag", resealV2(alwaysMaybe, func(id []byte) { id[7] = 0 })},
		{"wide lines with 16-bit fingerprints", resealV2(wide16, func(id []byte) { id[7] = 1 << linev2.WideShift })},
		{"a line's bytes between lines and trailer", resealV2(withGap(normal, frame.LineBytes), func([]byte) {})},
		{"one byte between lines and trailer", resealV2(withGap(normal, 1), func([]byte) {})},
	}
	if h := new(linev2.Header); !linev2.Read(wide16, h) || h.FPBits != bucket.MaxFPBits {
		t.Fatalf("FingerprintBits 16 built f=%d", h.FPBits)
	}
	for _, c := range cases {
		if _, err := Decode(c.block); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", c.name, err)
		}
		for _, k := range append(absent, keys[:100]...) {
			if !MayContain(c.block, k) {
				t.Errorf("%s: MayContain(%q) = false, want maybe", c.name, k)
				break
			}
		}
		for _, k := range absent[:200] {
			if !MayContainHash32(c.block, keyhash.Hi(keyhash.MulHash(k))) {
				t.Errorf("%s: MayContainHash32 = false, want maybe", c.name)
				break
			}
		}
	}
}

// TestInvalidBucketCodeAnswersMaybe writes the first invalid nibble code
// (bucket.NibbleCodes, one past the last valid one) into the buckets that
// absent keys read, in blocks of both versions: a lookup that meets an
// invalid code is reading a damaged block and must answer "maybe". The
// bound is the one most easily got wrong by one, and the code table
// has entries past it, so an off-by-one reads a plausible bucket rather
// than failing loudly.
func TestInvalidBucketCodeAnswersMaybe(t *testing.T) {
	keys := testkeys.Random(3000, 16, 43)
	absent := testkeys.Absent(300, 44)
	for _, v := range []int{1, 2} {
		block := Build(keys, Options{BitsPerKey: 10, Version: v, Seed: 9})
		for n, k := range absent {
			bad := bytes.Clone(block)
			var off []uint64 // bit offsets of the key's two buckets
			if v == 2 {
				var h linev2.Header
				if !linev2.Read(block, &h) {
					t.Fatal("not a version-2 block")
				}
				g := h.Geom()
				x := frame.Position(keyhash.MulHash(k), frame.Multiplier(h.Seed))
				p := linev2.Primary(x, &g)
				bb := uint64(g.Shape(p.Line).BktBits)
				base := uint64(p.Line) * frame.LineBits
				off = []uint64{base + uint64(p.I1)*bb, base + uint64(p.I2)*bb}
			} else {
				var h blockv1.Header
				if blockv1.ReadHeader(block, &h) != blockv1.HeaderOK {
					t.Fatal("not a version-1 block")
				}
				x := blockv1.Position(keyhash.Hash(k), frame.HashKey64, h.Seed)
				blk, _ := keyhash.Reduce(keyhash.Hi(x), h.Blocks)
				start, end := h.BlockStart(block, blk), h.BlockStart(block, blk+1)
				i1, i2, _ := blockv1.Candidates(x, h.Blocks, uint32(end-start), uint(h.FPBits))
				bb := uint64(h.BucketBits())
				base := h.BktStart*8 + uint64(start)*bb
				off = []uint64{base + uint64(i1)*bb, base + uint64(i2)*bb}
			}
			// Alternate which of the two buckets is damaged: a reader
			// must check both.
			bitpack.Write(bad, off[n%2], 12, bucket.NibbleCodes)
			if !MayContain(bad, k) {
				t.Fatalf("v%d: key %q whose bucket holds code %d answered absent", v, k, bucket.NibbleCodes)
			}
		}
	}
}
