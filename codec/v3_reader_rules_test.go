package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// The rules of FORMAT.md's "What readers check" for version 3, one at a
// time: damaged or forged trailers and lines must answer "maybe", never
// "absent", never panic, and Decode must reject them.

// v3AlwaysMaybeBlock is the version-3 block a builder writes when every
// attempt failed.
func v3AlwaysMaybeBlock(kind HashKind) []byte {
	b := NewBuilder(Options{Version: 3, Hash: kind})
	b.rejectSeeds = frame.Attempts
	b.addHash(7)
	return b.Finish(nil)
}

// TestV3EveryTrailerBitFlip flips every bit of version-3 trailers (keys,
// id and its inverted copy), one at a time, in blocks of several shapes
// and the always-maybe block: a flip in the id or its copy must make the
// trailer unreadable, every key must still answer "maybe", and Decode
// must reject every flip.
func TestV3EveryTrailerBitFlip(t *testing.T) {
	race.SkipLong(t)
	keys := testkeys.Random(3000, 16, 12)
	for _, o := range []Options{{BitsPerKey: 10}, {BitsPerKey: 4}, {BitsPerKey: 16}, {BitsPerKey: 48}, {FalsePositiveRate: 0.2}} {
		o.Seed, o.Version = 77, 3
		block := Build(keys, o)
		testV3TrailerFlips(t, fmt.Sprintf("%+v", o), block, keys)
	}
	testV3TrailerFlips(t, "always-maybe", v3AlwaysMaybeBlock(HashKey64), keys[:50])
}

func testV3TrailerFlips(t *testing.T, name string, block []byte, keys [][]byte) {
	t.Helper()
	n := len(block)
	for bit := 0; bit < 8*(frame.TrailerSize-4); bit++ {
		bad := bytes.Clone(block)
		bad[n-frame.TrailerSize+bit/8] ^= 1 << (bit % 8)
		var h linev3.Header
		if id := bit/8 >= 4; id && linev3.Read(bad, &h) {
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

// resealV3 returns a copy of a version-3 block with its trailer id (16
// bytes) edited and the inverted copy and CRC rewritten to match.
func resealV3(block []byte, edit func(id []byte)) []byte { return resealV2(block, edit) }

// TestV3TrailerRulesAnswerMaybe forges self-consistent trailers (copy and
// CRC agree) that break one rule each: the always-maybe flag beside
// lines, beside other fields or with the seeded-lines flag, an always-maybe trailer after
// a line, zero lines without the flag, every out-of-range r, K and Q, a
// shape whose header leaves three words or whose fields overflow a line,
// and lengths other than 64·L + 40. Each must answer "maybe" for every key
// (absent ones too, through both lookups) and Decode must reject it.
func TestV3TrailerRulesAnswerMaybe(t *testing.T) {
	keys := testkeys.Random(2000, 16, 41)
	absent := testkeys.Absent(2000, 42)
	normal := Build(keys, Options{BitsPerKey: 10, Seed: 5, Version: 3})
	am := v3AlwaysMaybeBlock(HashKey64)
	var h linev3.Header
	if !linev3.Read(normal, &h) || !linev3.Read(am, new(linev3.Header)) || len(am) != frame.TrailerSize {
		t.Fatal("the blocks under test are not version 3")
	}
	withGap := func(block []byte, extra int) []byte {
		n := len(block)
		out := append(bytes.Clone(block[:n-frame.TrailerSize]), make([]byte, extra)...)
		return append(out, block[n-frame.TrailerSize:]...)
	}
	shape := func(r, k, q int) func(id []byte) {
		return func(id []byte) { id[5], id[6], id[7] = id[5]&^31|byte(r), byte(k), byte(q) }
	}
	s := h.Shape
	cases := []struct {
		name  string
		block []byte
	}{
		{"always-maybe flag beside lines", resealV3(normal, func(id []byte) { id[5] |= linev3.FlagAlwaysMaybe })},
		{"always-maybe trailer after a line", resealV3(withGap(am, frame.LineBytes), func([]byte) {})},
		{"always-maybe trailer with r set", resealV3(am, func(id []byte) { id[5] |= 3 })},
		{"always-maybe trailer with K set", resealV3(am, func(id []byte) { id[6] = 1 })},
		{"always-maybe trailer with Q set", resealV3(am, func(id []byte) { id[7] = 1 })},
		{"always-maybe trailer with lines set", resealV3(am, func(id []byte) { id[8] = 1 })},
		{"always-maybe trailer with bit 7 set", resealV3(am, func(id []byte) { id[5] |= 0x80 })},
		{"zero lines without the flag", resealV3(am, func(id []byte) { id[5], id[6], id[7] = 4, 10, 10 })},
		{"zero lines of a valid shape", resealV3(normal, func(id []byte) { binary.LittleEndian.PutUint32(id[8:], 0) })},
		{"r = 0", resealV3(normal, shape(0, int(s.K), int(s.Q)))},
		{"r = 17", resealV3(normal, shape(17, 10, 10))},
		{"r = 31", resealV3(normal, shape(31, 5, 5))},
		{"K = 0", resealV3(normal, shape(int(s.R), 0, int(s.Q)))},
		{"Q = 0", resealV3(normal, shape(int(s.R), int(s.K), 0))},
		{"Q + K = 193", resealV3(normal, shape(1, 100, 93))},
		{"Q + K + K·r + len(Q) = 513", resealV3(normal, v3ShapeOverBy(t, 1))},
		{"a line's bytes between lines and trailer", resealV3(withGap(normal, frame.LineBytes), func([]byte) {})},
		{"one byte between lines and trailer", resealV3(withGap(normal, 1), func([]byte) {})},
		{"one line fewer than recorded", resealV3(normal[frame.LineBytes:], func([]byte) {})},
		{"lines count 2^32-1", resealV3(normal, func(id []byte) { binary.LittleEndian.PutUint32(id[8:], 1<<32-1) })},
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
	// The constraints' edges themselves are valid shapes: Q+K = 192, and
	// Q + K + K·r + len(Q) = 512.
	for _, sh := range []linev3.Shape{{R: 1, K: 96, Q: 96}, v3ShapeAt(t, 0)} {
		if !sh.Valid() {
			t.Errorf("shape %+v at the constraints' edge is not valid", sh)
		}
	}
}

// v3ShapeAt finds a shape with Q + K + K·r + len(Q) = 512 + over and
// Q + K <= 192.
func v3ShapeAt(t *testing.T, over int) linev3.Shape {
	t.Helper()
	for r := uint32(1); r <= 16; r++ {
		for k := uint32(1); k < 192; k++ {
			for q := uint32(1); q+k <= 192; q++ {
				if int(q+k+k*r)+bits.Len32(q) == 512+over {
					return linev3.Shape{R: r, K: k, Q: q}
				}
			}
		}
	}
	t.Fatalf("no shape %d bits over a line", over)
	return linev3.Shape{}
}

func v3ShapeOverBy(t *testing.T, over int) func(id []byte) {
	s := v3ShapeAt(t, over)
	return func(id []byte) { id[5], id[6], id[7] = id[5]&^31|byte(s.R), byte(s.K), byte(s.Q) }
}

// TestV3DecodeRejectsSealedInconsistencies forges blocks whose trailer
// copies and CRC agree but whose lines or counts break FORMAT.md's rules
// for version 3: Decode must reject each with ErrCorrupt.
func TestV3DecodeRejectsSealedInconsistencies(t *testing.T) {
	keys := testkeys.Random(2000, 16, 71)
	block := Build(keys, Options{BitsPerKey: 10, Seed: 72, Version: 3})
	var h linev3.Header
	if !linev3.Read(block, &h) {
		t.Fatal("not a version-3 block")
	}
	s := h.Shape
	seal := func(b []byte) []byte { return resealV3(b, func([]byte) {}) }
	setBit := func(b []byte, i uint32) { b[i>>3] |= 1 << (i & 7) }
	var cases []struct {
		name  string
		block []byte
	}
	add := func(name string, edit func(b []byte)) {
		b := bytes.Clone(block)
		edit(b)
		cases = append(cases, struct {
			name  string
			block []byte
		}{name, seal(b)})
	}
	add("trailer counting one key more", func(b []byte) {
		n := len(b)
		binary.LittleEndian.PutUint32(b[n-40:], binary.LittleEndian.Uint32(b[n-40:])+1)
	})
	add("a header of only ones", func(b []byte) {
		for i := uint32(0); i < s.Q+s.K; i++ {
			setBit(b, i)
		}
	})
	add("a run longer than linev3.MaxRun", func(b []byte) {
		line := b[:frame.LineBytes]
		clear(line)
		// Quotient 0 holds linev3.MaxRun+1 keys when K allows, else every
		// slot: either breaks a rule.
		for i := uint32(0); i <= min(linev3.MaxRun, s.K); i++ {
			setBit(line, i)
		}
	})
	add("a remainder bit past the stored keys", func(b []byte) {
		for ln := 0; ln < int(h.Lines); ln++ {
			line := b[ln*frame.LineBytes : (ln+1)*frame.LineBytes]
			if c, err := linev3.CheckLine(line, s); err == nil && uint32(c) < s.K {
				setBit(line, s.RemOff()+uint32(c)*s.R)
				return
			}
		}
		t.Fatal("no line below capacity")
	})
	add("a header bit between the last run and the remainders", func(b []byte) {
		line := b[2*frame.LineBytes : 3*frame.LineBytes]
		setBit(line, s.RemOff()-1)
	})
	add("a threshold above Q", func(b []byte) {
		line := b[3*frame.LineBytes : 4*frame.LineBytes]
		w := binary.LittleEndian.Uint64(line[frame.LineBytes-8:])
		w |= uint64(1<<s.TBits()-1) << (64 - s.TBits())
		binary.LittleEndian.PutUint64(line[frame.LineBytes-8:], w)
	})
	am := bytes.Clone(v3AlwaysMaybeBlock(HashKey64))
	binary.LittleEndian.PutUint32(am, 1)
	cases = append(cases, struct {
		name  string
		block []byte
	}{"always-maybe block recording a key", seal(am)})
	for _, c := range cases {
		if _, err := Decode(c.block); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Decode = %v, want ErrCorrupt", c.name, err)
		}
		for _, k := range keys {
			if !MayContain(c.block, k) && c.name == "trailer counting one key more" {
				t.Fatalf("%s: key %q lost", c.name, k)
			}
		}
	}
	// A version-3 trailer damaged in one copy is corruption, not a block
	// of a newer version (except a flip of the version byte itself).
	n := len(block)
	for bit := 0; bit < 8*32; bit++ {
		if bit/8 == 4 {
			continue
		}
		bad := bytes.Clone(block)
		bad[n-36+bit/8] ^= 1 << (bit % 8)
		if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrVersion) {
			t.Fatalf("trailer bit %d flipped: Decode = %v, want ErrCorrupt only", bit, err)
		}
	}
}

// TestV3MalformedLinesAnswerMaybe damages the lines of valid blocks so
// that their headers break FORMAT.md's rules where a lookup reads them:
// no zero at all in the header's three words, or a header of only ones
// (the runs do not end within Q+K bits, so the remainders they would
// index lie past the stored ones, up to past the line). A lookup that
// meets such a header is reading a damaged block and must answer "maybe",
// for every key whose primary line it is, without panicking; Decode must
// reject the block.
func TestV3MalformedLinesAnswerMaybe(t *testing.T) {
	keys := testkeys.Random(5000, 16, 1)
	probes := testkeys.Absent(20_000, 2)
	for _, bpk := range []float64{4, 8, 10, 16, 30} {
		block := buildExactV3(keys, Options{BitsPerKey: bpk, Seed: 3})
		var h linev3.Header
		if !linev3.Read(block, &h) {
			t.Fatal("not a version-3 block")
		}
		s := h.Shape
		for _, c := range []struct {
			name string
			ones uint32 // the line's first bits set to one
		}{{"no zero in the header's three words", linev3.HeaderMax}, {"a header of only ones", s.Q + s.K}} {
			bad := bytes.Clone(block)
			for ln := 0; ln < int(h.Lines); ln++ {
				for i := uint32(0); i < c.ones; i++ {
					bad[ln*frame.LineBytes+int(i>>3)] |= 1 << (i & 7)
				}
			}
			name := fmt.Sprintf("bpk %v shape %+v: %s", bpk, s, c.name)
			if _, err := Decode(resealV3(bad, func([]byte) {})); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: Decode = %v", name, err)
			}
			lost := 0
			for _, k := range append(probes, keys...) {
				if !MayContain(bad, k) {
					lost++
				}
			}
			if lost > 0 {
				t.Errorf("%s: %d of %d lookups answered absent", name, lost, len(probes)+len(keys))
			}
		}
	}
}

// FuzzV3TrailerDamage damages a valid version-3 block's trailer at two
// fuzzer-chosen places. Unless the damage leaves the id bytes and their
// inverted copy consistent (which no single fault does), every present key
// must still answer "maybe"; in every case the reader must not panic and
// Decode must reject the block.
func FuzzV3TrailerDamage(f *testing.F) {
	keys := testkeys.Random(2000, 16, 5)
	block := Build(keys, Options{BitsPerKey: 10, Seed: 8, Version: 3})
	f.Add(uint8(12), uint8(1), uint8(28), uint8(1))       // lines, and its copy
	f.Add(uint8(9), uint8(0x80), uint8(25), uint8(0x80))  // byte 5 bit 7, and its copy
	f.Add(uint8(9), uint8(0x40), uint8(0), uint8(0))      // the always-maybe flag
	f.Add(uint8(10), uint8(0xff), uint8(26), uint8(0xff)) // K, and its copy
	f.Add(uint8(4), uint8(0xff), uint8(20), uint8(0xff))
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

// FuzzV3LineContents writes fuzzer-chosen bytes over one line of a valid
// version-3 block and reseals its checksum. Whatever the bytes, a lookup
// must not panic; when Decode accepts the line, the package's lookup must
// answer exactly as FORMAT.md's reader (spec_test.go) for every probe
// whose primary or secondary line it is (present keys and absent ones),
// and the headers must hold the keys the trailer counts. Mutations of a
// valid line (a flipped remainder bit, a moved run boundary) are what it
// explores: the seeds are the block's own lines.
func FuzzV3LineContents(f *testing.F) {
	keys := testkeys.Random(3000, 16, 7)
	block := Build(keys, Options{BitsPerKey: 8, Seed: 13, Version: 3})
	lines := (len(block) - frame.TrailerSize) / frame.LineBytes
	// The probes that read each line, as primary or secondary line.
	var h linev3.Header
	if !linev3.Read(block, &h) || h.SeededLines {
		f.Fatal("want a version-3 block under the fixed line hash")
	}
	reading := make([][][]byte, lines)
	for _, k := range append(testkeys.Absent(30_000, 8), keys...) {
		hk := keyhash.MulHash(k)
		prim, sec := v3Where(hk, h.Seed, linev3.Plan{Shape: h.Shape, Lines: h.Lines}, false)
		reading[prim.line] = append(reading[prim.line], k)
		if sec.line != prim.line {
			reading[sec.line] = append(reading[sec.line], k)
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
		bad = resealV3(bad, func([]byte) {})
		for _, k := range reading[ln] {
			MayContain(bad, k)
		}
		flt, err := Decode(bad)
		if err != nil {
			return
		}
		spec := newSpecV3(t, bad)
		for _, k := range reading[ln] {
			if got, want := MayContain(bad, k), spec.contains(specMulHash(k)); got != want || flt.MayContain(k) != got {
				t.Fatalf("line %d: MayContain(%q) = %v, FORMAT.md's reader says %v", ln, k, got, want)
			}
		}
	})
}
