package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// v4Block builds an exact version-4 block of keys.
func v4Block(t *testing.T, keys [][]byte, o Options) []byte {
	t.Helper()
	block, _ := buildExactV4(keys, o)
	if !linev4.Read(block, new(linev4.Header)) {
		t.Fatalf("%+v: not a version-4 block", o)
	}
	return block
}

// TestV4EveryTrailerBitFlip flips every bit of version-4 trailers, one at
// a time, in blocks of several shapes and the always-maybe block: a flip
// in the id or its copy must make the trailer unreadable, every key must
// still answer "maybe", and Decode must reject every flip.
func TestV4EveryTrailerBitFlip(t *testing.T) {
	keys := testkeys.Random(3000, 16, 12)
	for _, o := range []Options{{BitsPerKey: 10}, {BitsPerKey: 16}, {BitsPerKey: 48}, {FalsePositiveRate: 0.001}} {
		o.Seed = 77
		testV4TrailerFlips(t, fmt.Sprintf("%+v", o), v4Block(t, keys, o), keys[:300])
	}
	testV4TrailerFlips(t, "always-maybe", linev4.AlwaysMaybe(nil, 0, 7), keys[:50])
}

func testV4TrailerFlips(t *testing.T, name string, block []byte, keys [][]byte) {
	t.Helper()
	n := len(block)
	for bit := 0; bit < 8*(frame.TrailerSize-4); bit++ {
		bad := bytes.Clone(block)
		bad[n-frame.TrailerSize+bit/8] ^= 1 << (bit % 8)
		if id := bit/8 >= 4; id && linev4.Read(bad, new(linev4.Header)) {
			t.Fatalf("%s: trailer bit %d flipped alone still reads as a valid trailer", name, bit)
		}
		for _, k := range keys {
			if !MayContain(bad, k) {
				t.Fatalf("%s: trailer bit %d flipped: key %q lost", name, bit, k)
			}
		}
		if _, err := Decode(bad); err == nil {
			t.Fatalf("%s: trailer bit %d flipped: Decode accepted it", name, bit)
		}
	}
}

// TestV4TrailerRulesAnswerMaybe forges self-consistent trailers (copy and
// CRC agree) that break one rule of FORMAT.md each: the always-maybe flag
// beside lines or fields, zero lines, every out-of-range r and M, a shape
// whose columns overflow a line, an extra column with no bits left, a hash
// kind the lookup did not ask for, and lengths other than 64·L + 40. Each
// must answer "maybe" for every key and Decode must reject it.
func TestV4TrailerRulesAnswerMaybe(t *testing.T) {
	keys := testkeys.Random(2000, 16, 41)
	absent := testkeys.Absent(2000, 42)
	normal := v4Block(t, keys, Options{BitsPerKey: 10, Seed: 5})
	am := linev4.AlwaysMaybe(nil, 0, 5)
	withGap := func(block []byte, extra int) []byte {
		n := len(block)
		out := append(bytes.Clone(block[:n-frame.TrailerSize]), make([]byte, extra)...)
		return append(out, block[n-frame.TrailerSize:]...)
	}
	shape := func(r, m, u int) func(id []byte) {
		return func(id []byte) { id[5], id[6], id[7] = id[5]&^31|byte(r), byte(m), byte(u) }
	}
	cases := []struct {
		name  string
		block []byte
	}{
		{"always-maybe flag beside lines", resealV2(normal, func(id []byte) { id[5] |= linev4.FlagAlwaysMaybe })},
		{"always-maybe trailer after a line", resealV2(withGap(am, frame.LineBytes), func([]byte) {})},
		{"always-maybe trailer with r set", resealV2(am, func(id []byte) { id[5] |= 3 })},
		{"always-maybe trailer with M set", resealV2(am, func(id []byte) { id[6] = 1 })},
		{"always-maybe trailer with U set", resealV2(am, func(id []byte) { id[7] = 1 })},
		{"always-maybe trailer with lines set", resealV2(am, func(id []byte) { id[8] = 1 })},
		{"always-maybe trailer with bit 7 set", resealV2(am, func(id []byte) { id[5] |= 0x80 })},
		{"zero lines without the flag", resealV2(am, func(id []byte) { id[5], id[6] = 9, 50 })},
		{"zero lines of a valid shape", resealV2(normal, func(id []byte) { binary.LittleEndian.PutUint32(id[8:], 0) })},
		{"r = 0", resealV2(normal, shape(0, 50, 0))},
		{"M = 0", resealV2(normal, shape(9, 0, 0))},
		{"M = 129", resealV2(normal, shape(3, 129, 0))},
		{"r·M = 507", resealV2(normal, shape(13, 39, 0))},
		{"r·M = 506 with an extra column", resealV2(normal, shape(11, 46, 1))},
		{"a line's bytes between lines and trailer", resealV2(withGap(normal, frame.LineBytes), func([]byte) {})},
		{"one line fewer than recorded", resealV2(normal[frame.LineBytes:], func([]byte) {})},
		{"lines count 2^32-1", resealV2(normal, func(id []byte) { binary.LittleEndian.PutUint32(id[8:], 1<<32-1) })},
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
	// A HashKey64 block answers "maybe" to a HashHost32 lookup.
	for _, k := range absent[:200] {
		if !MayContainHash32(normal, keyhash.Hi(keyhash.MulHash(k))) {
			t.Fatal("a HashKey64 block answered a host-hash lookup")
		}
	}
	// The constraints' edges themselves are valid shapes.
	for _, sh := range []linev4.Shape{{R: 11, M: 46}, {R: 1, M: 128, U: 255}, {R: 31, M: 16, U: 255}, {R: 2, M: 129}, {R: 2, M: 253}} {
		if sh.Valid() != (sh.M <= 128) {
			t.Errorf("shape %+v: Valid() = %v", sh, sh.Valid())
		}
	}
}

// TestV4DecodeRejectsUnusedBits sets, one at a time, each bit a line
// leaves unused (between the columns and the threshold) and reseals the
// checksum: Decode must reject the block, and a lookup must not panic.
func TestV4DecodeRejectsUnusedBits(t *testing.T) {
	keys := testkeys.Random(3000, 16, 44)
	for _, o := range []Options{{BitsPerKey: 10, Seed: 3}, {BitsPerKey: 9.5, Seed: 3}, {BitsPerKey: 19.67, Seed: 3}, {BitsPerKey: 6, Seed: 3}} {
		block := v4Block(t, keys, o)
		var h linev4.Header
		linev4.Read(block, &h)
		s := h.Shape
		used := s.R*s.M + s.Extra()
		if used >= linev4.ColumnBits {
			continue
		}
		for _, ln := range []uint32{0, h.Lines - 1} {
			for bit := used; bit < linev4.ColumnBits; bit++ {
				bad := bytes.Clone(block)
				off := int(ln)*frame.LineBits + int(bit)
				bad[off/8] ^= 1 << (off % 8)
				bad = resealV2(bad, func([]byte) {})
				if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%+v: unused bit %d of line %d set: Decode = %v", o, bit, ln, err)
				}
				MayContain(bad, keys[0])
			}
		}
	}
}

// FuzzV4TrailerDamage damages a valid version-4 block's trailer at two
// fuzzer-chosen places. Unless the damage leaves the id bytes and their
// inverted copy consistent (which no single fault does), every present key
// must still answer "maybe"; in every case the reader must not panic and
// Decode must reject the block.
func FuzzV4TrailerDamage(f *testing.F) {
	keys := testkeys.Random(2000, 16, 5)
	block, _ := buildExactV4(keys, Options{BitsPerKey: 10, Seed: 8})
	f.Add(uint8(12), uint8(1), uint8(28), uint8(1))       // lines, and its copy
	f.Add(uint8(9), uint8(0x80), uint8(25), uint8(0x80))  // byte 5 bit 7, and its copy
	f.Add(uint8(9), uint8(0x40), uint8(0), uint8(0))      // the always-maybe flag
	f.Add(uint8(10), uint8(0xff), uint8(26), uint8(0xff)) // M, and its copy
	f.Add(uint8(11), uint8(0x80), uint8(27), uint8(0x80)) // U, and its copy
	f.Fuzz(func(t *testing.T, at1, x1, at2, x2 uint8) {
		bad := bytes.Clone(block)
		n := len(bad)
		bad[n-frame.TrailerSize+int(at1)%frame.TrailerSize] ^= x1
		bad[n-frame.TrailerSize+int(at2)%frame.TrailerSize] ^= x2
		if bytes.Equal(bad, block) {
			return
		}
		consistent := true
		for i := 0; i < 16; i++ {
			if bad[n-36+i] != ^bad[n-20+i] {
				consistent = false
			}
		}
		idChanged := !bytes.Equal(bad[n-36:n-20], block[n-36:n-20])
		for _, k := range keys {
			if !MayContain(bad, k) && !(consistent && idChanged) {
				t.Fatalf("trailer damaged at %d^%#x, %d^%#x: key lost", at1, x1, at2, x2)
			}
		}
		if _, err := Decode(bad); err == nil {
			t.Fatal("Decode accepted a damaged trailer")
		}
	})
}

// FuzzV4LineContents writes fuzzer-chosen bytes over one line of a valid
// version-4 block and reseals its checksum. Whatever the bytes, a lookup
// must not panic; when Decode accepts the line, the package's lookup must
// answer exactly as FORMAT.md's reader (v4_spec_test.go) for every probe
// whose primary or secondary line it is, present keys and absent ones.
func FuzzV4LineContents(f *testing.F) {
	keys := testkeys.Random(3000, 16, 7)
	block, _ := buildExactV4(keys, Options{BitsPerKey: 10, Seed: 13})
	lines := (len(block) - frame.TrailerSize) / frame.LineBytes
	var h linev4.Header
	if !linev4.Read(block, &h) || h.SeededLines {
		f.Fatal("want a version-4 block under the fixed line hash")
	}
	reading := make([][][]byte, lines)
	for _, k := range append(testkeys.Absent(30_000, 8), keys...) {
		hk := keyhash.MulHash(k)
		x := frame.Position(hk, frame.Multiplier(h.Seed))
		prim := linev4.Line(frame.Position(hk, linev4.LineMultiplier), uint64(h.Lines))
		sec := linev4.Line(linev4.Secondary(x), uint64(h.Lines))
		reading[prim] = append(reading[prim], k)
		if sec != prim {
			reading[sec] = append(reading[sec], k)
		}
	}
	for _, ln := range []int{0, 1, lines / 2, lines - 1} {
		f.Add(uint16(ln), bytes.Clone(block[ln*frame.LineBytes:(ln+1)*frame.LineBytes]))
	}
	f.Add(uint16(0), bytes.Repeat([]byte{0xff}, frame.LineBytes))
	f.Add(uint16(3), make([]byte, frame.LineBytes))
	f.Fuzz(func(t *testing.T, line uint16, data []byte) {
		ln := int(line) % lines
		bad := bytes.Clone(block)
		copy(bad[ln*frame.LineBytes:(ln+1)*frame.LineBytes], data)
		bad = resealV2(bad, func([]byte) {})
		for _, k := range reading[ln] {
			MayContain(bad, k)
		}
		flt, err := Decode(bad)
		if err != nil {
			return
		}
		spec := newSpecV4(t, bad)
		for _, k := range reading[ln] {
			if got, want := MayContain(bad, k), spec.contains(specMulHash(k)); got != want || flt.MayContain(k) != got {
				t.Fatalf("line %d: MayContain(%q) = %v, FORMAT.md's reader says %v", ln, k, got, want)
			}
		}
	})
}
