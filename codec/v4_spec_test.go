package codec

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// specV4 reads a version-4 block as FORMAT.md describes it, and nothing
// else: the trailer's fields, the line and position hashes, each column's
// parity walked bit by bit, and the threshold.
type specV4 struct {
	b                        []byte
	r, m, u, e, kind         uint64
	alwaysMaybe, seededLines bool
	lines, seed              uint64
}

func newSpecV4(t *testing.T, b []byte) *specV4 {
	t.Helper()
	n := len(b)
	if n < 40 {
		t.Fatal("shorter than the trailer")
	}
	tr := b[n-40:]
	for i := 0; i < 16; i++ {
		if tr[4+i] != ^tr[20+i] {
			t.Fatalf("trailer byte n-%d is not the inverse of its copy", 36-i)
		}
	}
	if string(tr[4:8]) != "LSMC" || tr[8] != 4 {
		t.Fatal("not a v4 trailer")
	}
	r := &specV4{b: b, r: uint64(tr[9] & 31), kind: uint64(tr[9] >> 5 & 1), alwaysMaybe: tr[9]>>6&1 == 1,
		seededLines: tr[9]>>7 == 1, m: uint64(tr[10]), u: uint64(tr[11])}
	r.lines = uint64(binary.LittleEndian.Uint32(tr[12:]))
	r.seed = uint64(binary.LittleEndian.Uint32(tr[16:]))
	if crc32.Checksum(b[:n-4], crc32.MakeTable(crc32.Castagnoli)) != binary.LittleEndian.Uint32(b[n-4:]) {
		t.Fatal("CRC-32C mismatch")
	}
	if r.alwaysMaybe {
		if n != 40 || r.r != 0 || r.m != 0 || r.u != 0 || r.lines != 0 || r.seededLines || binary.LittleEndian.Uint32(tr) != 0 {
			t.Fatal("an always-maybe trailer with fields set")
		}
		return r
	}
	if uint64(n) != 64*r.lines+40 || r.lines == 0 {
		t.Fatalf("length %d does not match FORMAT.md's 64·L+40", n)
	}
	if r.r < 1 || r.m < 1 || r.m > 128 || r.r*r.m > 506 || (r.u > 0 && r.r*r.m == 506) {
		t.Fatalf("shape r=%d M=%d U=%d breaks FORMAT.md's constraints", r.r, r.m, r.u)
	}
	if r.u > 0 {
		r.e = min(48, 506-r.r*r.m)
	}
	return r
}

func (r *specV4) bit(off uint64) uint64 { return uint64(r.b[off/8] >> (off % 8) & 1) }

// parity is the XOR over rows i < rows of coefficient bit i (bit i of c
// below 64, bit i−64 of c1 from there) AND the line's bit at off+i.
func (r *specV4) parity(off, rows, c, c1 uint64) uint64 {
	p := uint64(0)
	for i := uint64(0); i < rows; i++ {
		ci := c >> i & 1
		if i >= 64 {
			ci = c1 >> (i - 64) & 1
		}
		p ^= ci & r.bit(off+i)
	}
	return p
}

func (r *specV4) line(z uint64) uint64 { return (z >> 32) * r.lines >> 32 }

// solves reports whether line ln solves the equations of position hash x:
// in its primary line (primary) the extra column too, for a share byte
// below U.
func (r *specV4) solves(ln, x uint64, primary bool) bool {
	c := specMix(x, 0xc0eff1c1)
	c1 := specMix(x, 0xc0eff1c2)
	f := x&0xffff | c>>48<<16
	base := ln * 512
	for j := uint64(0); j < r.r; j++ {
		if r.parity(base+j*r.m, r.m, c, c1) != f>>j&1 {
			return false
		}
	}
	if primary && x>>16&0xff < r.u {
		return r.parity(base+r.r*r.m, r.e, c, c1) == f>>r.r&1
	}
	return true
}

func (r *specV4) threshold(ln uint64) uint64 {
	t := uint64(0)
	for i := uint64(0); i < 6; i++ {
		t |= r.bit(ln*512+506+i) << i
	}
	return t
}

// unusedZero reports whether the bits between the columns and the
// threshold of line ln are zero.
func (r *specV4) unusedZero(ln uint64) bool {
	for i := r.r*r.m + r.e; i < 506; i++ {
		if r.bit(ln*512+i) != 0 {
			return false
		}
	}
	return true
}

func (r *specV4) contains(h uint64) bool {
	if r.alwaysMaybe {
		return true
	}
	y := h * (((r.seed + 1) * 0x9e3779b97f4a7c15) | 1)
	x := y ^ y>>32
	yl := h * 0xd6e8feb86659fd93
	z := yl ^ yl>>32
	if r.seededLines {
		z = x
	}
	prim := r.line(z)
	if r.solves(prim, x, true) {
		return true
	}
	if (x>>24&0xff)*63>>8 < r.threshold(prim) {
		return false
	}
	x2 := specMix(x, 0x5ec011d2)
	return r.solves(r.line(x2), x2, false)
}

// TestFormatSpecMatchesCodeV4 checks every version-4 golden block, and
// fresh blocks of many shapes and key lengths, against the specification
// reader: it finds every key, agrees with MayContain on absent probes,
// and finds every line's unused bits zero.
func TestFormatSpecMatchesCodeV4(t *testing.T) {
	absent := testkeys.Absent(2000, 79)
	check := func(name string, block []byte, keys [][]byte, h32 []uint32, probes [][]byte) {
		t.Helper()
		spec := newSpecV4(t, block)
		for ln := uint64(0); ln < spec.lines; ln++ {
			if !spec.unusedZero(ln) {
				t.Fatalf("%s: line %d has unused bits set", name, ln)
			}
		}
		specAgrees(t, name, block, spec.contains, keys, h32, probes)
	}
	for _, c := range goldenCases(4) {
		block, err := os.ReadFile(filepath.Join("..", "testdata", "codec", "v4", c.name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		check(c.name, block, c.keys, c.h32, absent)
	}
	// A few shapes here; every width in TestFormatSpecMatchesCodeV4Large.
	keys := testkeys.Random(3000, 16, 81)
	for _, bpk := range []float64{4.5, 6, 10, 19.67, 48} {
		block, _ := buildExactV4(keys, Options{BitsPerKey: bpk, Seed: 21})
		check(fmt.Sprintf("bpk %v", bpk), block, keys, nil, absent)
	}
}

// TestFormatSpecMatchesCodeV4Large checks large version-4 filters
// against the specification reader: many absent probes at several
// budgets, seeded lines, host hashes.
func TestFormatSpecMatchesCodeV4Large(t *testing.T) {
	race.SkipLong(t)
	absent := testkeys.Absent(2000, 79)
	check := func(name string, block []byte, keys [][]byte, h32 []uint32, probes [][]byte) {
		t.Helper()
		spec := newSpecV4(t, block)
		specAgrees(t, name, block, spec.contains, keys, h32, probes)
	}
	// Keys of every length 0..40 (MulHash's branches), at budgets that give
	// 1 to 31 columns, with and without the extra column.
	var keys [][]byte
	for l := 0; l <= 40; l++ {
		for i := 0; i < 50; i++ {
			k := make([]byte, l)
			for j := range k {
				k[j] = byte(i*31 + j*7 + l)
			}
			keys = append(keys, k)
		}
	}
	var settings []Options
	for bpk := 4.5; bpk <= 48; bpk += 0.5 {
		settings = append(settings, Options{BitsPerKey: bpk})
	}
	settings = append(settings, Options{FalsePositiveRate: 0.3}, Options{FingerprintBits: 5}, Options{FingerprintBits: 16}, Options{BitsPerKey: 4})
	columns, extra := map[int]bool{}, 0
	for _, o := range settings {
		o.Seed = 21
		block, _ := buildExactV4(keys, o)
		check(fmt.Sprintf("lengths %+v", o), block, keys, nil, absent)
		info := mustInfo(t, block)
		columns[info.V4.Columns] = true
		if info.V4.ExtraShare > 0 {
			extra++
		}
	}
	for _, r := range []int{3, 5, 7, 8, 9, 12, 15, 16, 17, 20, 31} {
		if !columns[r] {
			t.Errorf("no block of %d columns was checked", r)
		}
	}
	if extra == 0 {
		t.Error("no block with an extra column was checked")
	}
	// Many absent probes against large filters; seeded lines; host hashes.
	many := testkeys.Random(20_000, 16, 5)
	probes := testkeys.Absent(100_000, 6)
	for _, bpk := range []float64{9.5, 10, 16, 19.67} {
		block, _ := buildExactV4(many, Options{BitsPerKey: bpk, Seed: 9})
		check(fmt.Sprintf("20k keys bpk %v", bpk), block, many, nil, probes)
	}
	sb := NewBuilder(Options{BitsPerKey: 10, Seed: 5, Version: NewestVersion})
	sb.rejectSeeds = 2
	for _, k := range many {
		sb.Add(k)
	}
	seeded := sb.Finish(nil)
	if !mustInfo(t, seeded).V4.SeededLines {
		t.Fatal("the third attempt's block has no seeded lines")
	}
	check("seeded lines", seeded, many, nil, probes)
	h32 := make([]uint32, 5000)
	for i := range h32 {
		h32[i] = uint32(i)*0x9e3779b9 + 7
	}
	b := NewBuilder(Options{Hash: HashHost32, BitsPerKey: 10, Seed: 4, Version: NewestVersion})
	for _, h := range h32 {
		b.AddHash32(h)
	}
	check("host32", b.Finish(nil), nil, h32, absent)
}
