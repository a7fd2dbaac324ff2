package codec

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/bits"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// specReader answers lookups from FORMAT.md alone: it shares no code with
// the package (not the bit reader, not the hash derivation, not the nibble
// table), so a divergence between the document and the code fails here.
type specReader struct {
	b                                []byte
	f, w, kind                       uint
	seed, blocks, buckets, stride    uint64
	offBitBase, bktBitBase, bucketSz uint64
}

func newSpecReader(t *testing.T, b []byte) *specReader {
	t.Helper()
	if string(b[:4]) != "LSMC" || b[4] != 1 {
		t.Fatalf("not a v1 block")
	}
	r := &specReader{b: b, f: uint(b[5]), w: uint(b[6]), kind: uint(b[7])}
	r.seed = uint64(binary.LittleEndian.Uint32(b[12:]))
	r.blocks = uint64(binary.LittleEndian.Uint32(b[16:]))
	r.buckets = uint64(binary.LittleEndian.Uint32(b[20:]))
	r.stride = uint64(binary.LittleEndian.Uint32(b[24:]))
	le64 := func(i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }
	x := le64(0)*0x9e3779b97f4a7c15 ^ le64(8)*0xc2b2ae3d27d4eb4f ^ le64(16)*0x165667b19e3779f9 ^
		uint64(binary.LittleEndian.Uint32(b[24:]))*0xd6e8feb86659fd93
	if uint32(specMix(x, 0x4c534d43)) != binary.LittleEndian.Uint32(b[28:]) {
		t.Fatal("header check mismatch")
	}
	r.bucketSz = uint64(4*r.f - 4)
	offBytes := ((r.blocks+1)*uint64(r.w) + 7) / 8
	bktBytes := (r.buckets*r.bucketSz + 7) / 8
	if uint64(len(b)) != 32+offBytes+bktBytes+4 {
		t.Fatalf("length %d does not match FORMAT.md's formula", len(b))
	}
	crc := crc32.Checksum(b[:len(b)-4], crc32.MakeTable(crc32.Castagnoli))
	if crc != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		t.Fatal("CRC-32C mismatch")
	}
	r.offBitBase = 32 * 8
	r.bktBitBase = (32 + offBytes) * 8
	return r
}

var keyhashMulHash = keyhash.MulHash

// bits reads an LSB-first field bit by bit.
func (r *specReader) bits(off, n uint64) uint64 {
	var v uint64
	for i := uint64(0); i < n; i++ {
		bit := (r.b[(off+i)/8] >> ((off + i) % 8)) & 1
		v |= uint64(bit) << i
	}
	return v
}

func specMix(h, seed uint64) uint64 {
	z := h + (seed+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func binomial(n, k int) int {
	if k > n {
		return 0
	}
	r := 1
	for i := 0; i < k; i++ {
		r = r * (n - i) / (i + 1)
	}
	return r
}

func (r *specReader) start(block uint64) uint64 {
	s := block * r.stride >> 16
	if r.w > 0 {
		d := int64(r.bits(r.offBitBase+block*uint64(r.w), uint64(r.w))) - int64(1)<<(r.w-1)
		return uint64(int64(s) + d)
	}
	return s
}

func (r *specReader) contains(h uint64) bool {
	x := h
	if !(r.kind == 0 && r.seed == 0) {
		x = specMix(h, r.seed)
	}
	hi := x >> 32
	block, rest := hi*r.blocks>>32, hi*r.blocks&0xffffffff
	start, end := r.start(block), r.start(block+1)
	m := end - start
	if m == 0 {
		return false
	}
	i1 := rest * m >> 32
	i2 := i1
	if m > 1 {
		i2 = (i1 + 1 + (((x >> 16) & 0xffff) * (m - 1) >> 16)) % m
	}
	fp := 1 + ((x & 0xffff) * (1<<r.f - 1) >> 16)
	for _, i := range []uint64{start + i1, start + i2} {
		if specBucketHas(r.bits(r.bktBitBase+i*r.bucketSz, r.bucketSz), r.f, fp) {
			return true
		}
	}
	return false
}

// specNibbles maps every rank to its sorted nibbles, enumerated from the
// rank formula of FORMAT.md.
var specNibbles = sync.OnceValue(func() map[int][4]int {
	m := map[int][4]int{}
	for a := 0; a < 16; a++ {
		for b := a; b < 16; b++ {
			for c := b; c < 16; c++ {
				for d := c; d < 16; d++ {
					m[binomial(a, 1)+binomial(b+1, 2)+binomial(c+2, 3)+binomial(d+3, 4)] = [4]int{a, b, c, d}
				}
			}
		}
	}
	return m
})

// specBucketHas decodes a semi-sorted bucket as FORMAT.md describes it
// ("Bucket encoding"), searching the nibble multiset by its rank.
func specBucketHas(bucket uint64, f uint, fp uint64) bool {
	nib, found := specNibbles()[int(bucket&0xfff)]
	if !found {
		return true // an invalid code: a reader answers "maybe"
	}
	L := uint64(f - 4)
	for j := uint64(0); j < 4; j++ {
		low := bucket >> (12 + j*L) & (1<<L - 1)
		if uint64(nib[j])<<L|low == fp {
			return true
		}
	}
	return false
}

// specV2 reads a version-2 block from FORMAT.md alone.
type specV2 struct {
	b                 []byte
	f, kind, flags    uint
	lines, seed, wide uint64
}

func newSpecV2(t *testing.T, b []byte) *specV2 {
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
	if string(tr[4:8]) != "LSMC" || tr[8] != 2 {
		t.Fatal("not a v2 trailer")
	}
	r := &specV2{b: b, f: uint(tr[9]), kind: uint(tr[10]), flags: uint(tr[11])}
	r.lines = uint64(binary.LittleEndian.Uint32(tr[12:]))
	r.seed = uint64(binary.LittleEndian.Uint32(tr[16:]))
	if uint64(n) != 64*r.lines+40 {
		t.Fatalf("length %d does not match FORMAT.md's 64·L+40", n)
	}
	crc := crc32.Checksum(b[:n-4], crc32.MakeTable(crc32.Castagnoli))
	if crc != binary.LittleEndian.Uint32(b[n-4:]) {
		t.Fatal("CRC-32C mismatch")
	}
	r.wide = r.lines * uint64(r.flags>>1) >> 7
	return r
}

// width is a line's fingerprint bits.
func (r *specV2) width(line uint64) uint {
	if line < r.wide {
		// The widest width whose lines hold as many buckets as f+1's.
		w := r.f + 1
		b, _ := specShape(w)
		for w < 16 {
			if nb, _ := specShape(w + 1); nb != b {
				break
			}
			w++
		}
		return w
	}
	return r.f
}

// shape is B and O for fingerprints of f bits: the most whole buckets of
// 4f-4 bits that leave at least 8 bits.
func specShape(f uint) (buckets, overflow uint64) {
	bb := uint64(4*f - 4)
	for buckets = 0; (buckets+1)*bb <= 504; buckets++ {
	}
	return buckets, 512 - buckets*bb
}

func (r *specV2) bit(off uint64) uint64 { return uint64(r.b[off/8] >> (off % 8) & 1) }

func (r *specV2) field(off, n uint64) uint64 {
	var v uint64
	for i := uint64(0); i < n; i++ {
		v |= r.bit(off+i) << i
	}
	return v
}

func specFold(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// specMulHash is MulHash as FORMAT.md writes it.
func specMulHash(key []byte) uint64 {
	const k0, k1, k2, k3 = 0x6a09e667f3bcc909, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1
	n := len(key)
	le64 := func(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
	le32 := func(b []byte) uint64 { return uint64(binary.LittleEndian.Uint32(b)) }
	if n <= 16 {
		var a, b uint64
		switch {
		case n >= 8:
			a, b = le64(key[0:8]), le64(key[n-8:n])
		case n >= 4:
			a, b = le32(key[0:4]), le32(key[n-4:n])
		case n >= 1:
			a = uint64(key[0])<<16 + uint64(key[n/2])<<8 + uint64(key[n-1])
		}
		return specFold(specFold(a^k0, b^k1)^k2, uint64(n)^k3)
	}
	acc := uint64(n) ^ k2
	for i := 0; n-i > 16; i += 16 {
		acc = specFold(le64(key[i:i+8])^k0, le64(key[i+8:i+16])^acc^k1)
	}
	t := key[n-16 : n]
	return specFold(specFold(le64(t[0:8])^k0, le64(t[8:16])^acc^k1)^k2, uint64(n)^k3)
}

// place returns line, i1, i2, ob and fp of a position hash.
func (r *specV2) place(x uint64) (line, i1, i2, ob, fp uint64) {
	p := (x >> 32) * r.lines // fits in 64 bits
	line = p >> 32
	f := r.width(line)
	buckets, overflow := specShape(f)
	i1 = (p & 0xffffffff) * buckets >> 32
	q := (x >> 16 & 0xffff) * (buckets - 1)
	i2 = i1 + 1 + q>>16
	if i2 >= buckets {
		i2 -= buckets
	}
	ob = (q & 0xffff) * overflow >> 16
	fp = 1 + ((x & 0xffff) * (1<<f - 1) >> 16)
	return
}

func (r *specV2) has(line, i uint64, fp uint64) bool {
	f := r.width(line)
	bb := uint64(4*f - 4)
	return specBucketHas(r.field(line*512+i*bb, bb), f, fp)
}

func (r *specV2) contains(h uint64) bool {
	if r.flags&1 != 0 {
		return true
	}
	m := (r.seed+1)*0x9e3779b97f4a7c15 | 1
	y := h * m
	x := y ^ y>>32
	line, i1, i2, ob, fp := r.place(x)
	if r.has(line, i1, fp) || r.has(line, i2, fp) {
		return true
	}
	buckets, _ := specShape(r.width(line))
	if r.bit(line*512+buckets*uint64(4*r.width(line)-4)+ob) == 0 {
		return false
	}
	s, j1, j2, _, fp2 := r.place(specMix(x, 0x5ec011d2))
	return r.has(s, j1, fp2) || r.has(s, j2, fp2)
}

// TestFormatSpecMatchesCodeV2 checks every version-2 golden block, and
// fresh blocks of many shapes, against the specification reader.
func TestFormatSpecMatchesCodeV2(t *testing.T) {
	absent := testkeys.Absent(2000, 78)
	check := func(name string, block []byte, keys [][]byte, h32 []uint32) {
		spec := newSpecV2(t, block)
		for _, k := range keys {
			if !spec.contains(specMulHash(k)) {
				t.Fatalf("%s: spec reader misses %q", name, k)
			}
		}
		for _, h := range h32 {
			if !spec.contains(uint64(h)) {
				t.Fatalf("%s: spec reader misses host hash %#x", name, h)
			}
		}
		for i, k := range absent {
			if len(h32) > 0 {
				h := uint32(i)*2654435761 + 1
				if spec.contains(uint64(h)) != MayContainHash32(block, h) {
					t.Fatalf("%s: spec and code disagree on %#x", name, h)
				}
				continue
			}
			if spec.contains(specMulHash(k)) != MayContain(block, k) {
				t.Fatalf("%s: spec and code disagree on %q", name, k)
			}
		}
	}
	for _, c := range goldenCases(2) {
		block, err := os.ReadFile(filepath.Join("..", "testdata", "codec", "v2", c.name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		check(c.name, block, c.keys, c.h32)
	}
	// Keys of every length 0..40 (MulHash's branches), and filters whose
	// lines overflow, and lines of two widths.
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
	for _, bpk := range []float64{8, 9.6, 12, 15, 16} {
		block := Build(keys, Options{BitsPerKey: bpk, Seed: 21, Version: 2})
		check(fmt.Sprintf("lengths-bpk%v", bpk), block, keys, nil)
	}
	// Many absent probes against full filters of narrow fingerprints,
	// where a bucket often holds two or three slots whose high nibble
	// agrees with the probe's: the lookup's branch-free compare of the
	// first two candidates and its loop for more must answer as the spec.
	many := testkeys.Random(20_000, 16, 5)
	probes := testkeys.Absent(100_000, 6)
	for _, bpk := range []float64{5, 6.5, 8, 10} {
		block := Build(many, Options{BitsPerKey: bpk, Seed: 9, Version: 2})
		spec := newSpecV2(t, block)
		for _, k := range many {
			if !MayContain(block, k) {
				t.Fatalf("bpk %v: false negative for %q", bpk, k)
			}
		}
		for _, k := range probes {
			if spec.contains(specMulHash(k)) != MayContain(block, k) {
				t.Fatalf("bpk %v: spec and code disagree on %q", bpk, k)
			}
		}
	}
	for i := uint64(0); i < 10_000; i++ {
		k := []byte(fmt.Sprint(i))
		if specMulHash(k) != keyhashMulHash(k) {
			t.Fatalf("MulHash(%q) differs from FORMAT.md's", k)
		}
	}
}

// TestFormatSpecMatchesCode checks every version-1 golden block against the
// specification reader for present and absent keys.
func TestFormatSpecMatchesCode(t *testing.T) {
	absent := testkeys.Absent(300, 77)
	for _, c := range goldenCases(1) {
		block, err := os.ReadFile(filepath.Join("..", "testdata", "codec", "v1", c.name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		spec := newSpecReader(t, block)
		if c.opts.Hash == HashHost32 {
			for _, h := range c.h32 {
				if !spec.contains(uint64(h)) {
					t.Fatalf("%s: spec reader misses host hash %#x", c.name, h)
				}
			}
			for i := uint32(0); i < 300; i++ {
				h := i*2654435761 + 1
				if spec.contains(uint64(h)) != MayContainHash32(block, h) {
					t.Fatalf("%s: spec and code disagree on %#x", c.name, h)
				}
			}
			continue
		}
		for _, k := range c.keys {
			if !spec.contains(xxhash.Sum64(k)) {
				t.Fatalf("%s: spec reader misses %q", c.name, k)
			}
		}
		for _, k := range absent {
			if spec.contains(xxhash.Sum64(k)) != MayContain(block, k) {
				t.Fatalf("%s: spec and code disagree on %q", c.name, k)
			}
		}
	}
}

// specV3 reads a version-3 block from FORMAT.md alone: the trailer's
// fields, the line and position hashes, the unary header walked bit by
// bit, the remainders and the threshold.
type specV3 struct {
	b                        []byte
	r, kind, k, q, t         uint64
	alwaysMaybe, seededLines bool
	lines, seed, remOffset   uint64
}

func newSpecV3(t *testing.T, b []byte) *specV3 {
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
	if string(tr[4:8]) != "LSMC" || tr[8] != 3 {
		t.Fatal("not a v3 trailer")
	}
	r := &specV3{b: b, r: uint64(tr[9] & 31), kind: uint64(tr[9] >> 5 & 1), alwaysMaybe: tr[9]>>6&1 == 1,
		seededLines: tr[9]>>7 == 1, k: uint64(tr[10]), q: uint64(tr[11])}
	r.lines = uint64(binary.LittleEndian.Uint32(tr[12:]))
	r.seed = uint64(binary.LittleEndian.Uint32(tr[16:]))
	crc := crc32.Checksum(b[:n-4], crc32.MakeTable(crc32.Castagnoli))
	if crc != binary.LittleEndian.Uint32(b[n-4:]) {
		t.Fatal("CRC-32C mismatch")
	}
	if r.alwaysMaybe {
		if n != 40 || r.r != 0 || r.k != 0 || r.q != 0 || r.lines != 0 || r.seededLines || binary.LittleEndian.Uint32(tr) != 0 {
			t.Fatal("an always-maybe trailer with fields set")
		}
		return r
	}
	if uint64(n) != 64*r.lines+40 {
		t.Fatalf("length %d does not match FORMAT.md's 64·L+40", n)
	}
	if r.r < 1 || r.r > 16 || r.k < 1 || r.q < 1 || r.q+r.k > 192 || r.q+r.k+r.k*r.r+uint64(bits.Len64(r.q)) > 512 {
		t.Fatalf("shape r=%d K=%d Q=%d breaks FORMAT.md's constraints", r.r, r.k, r.q)
	}
	r.t = uint64(bits.Len64(r.q))
	r.remOffset = r.q + r.k
	return r
}

func (r *specV3) bit(off uint64) uint64 { return uint64(r.b[off/8] >> (off % 8) & 1) }

func (r *specV3) field(off, n uint64) uint64 {
	var v uint64
	for i := uint64(0); i < n; i++ {
		v |= r.bit(off+i) << i
	}
	return v
}

// runs walks a line's unary header: for each quotient, how many keys it
// holds. ok is false when the header does not end Q runs within Q+K bits.
func (r *specV3) runs(line uint64) (c []uint64, ok bool) {
	base := line * 512
	i := uint64(0)
	for j := uint64(0); j < r.q; j++ {
		n := uint64(0)
		for ; i < r.q+r.k && r.bit(base+i) == 1; i++ {
			n++
		}
		if i >= r.q+r.k {
			return nil, false
		}
		i++ // the zero that ends the run
		c = append(c, n)
	}
	return c, true
}

// threshold is the line's T, the top bits.Len(Q) bits of its 512.
func (r *specV3) threshold(line uint64) uint64 { return r.field(line*512+512-r.t, r.t) }

// line is the line of a line hash z.
func (r *specV3) line(z uint64) uint64 { return (z >> 32) * r.lines >> 32 }

// qr is a position hash's quotient and remainder.
func (r *specV3) qr(x uint64) (q, rem uint64) {
	return ((x >> 16) & 0xffff) * r.q >> 16, x & (1<<r.r - 1)
}

func (r *specV3) lineHas(line, q, rem uint64) bool {
	c, ok := r.runs(line)
	if !ok {
		return true // not a block a writer makes: "maybe"
	}
	first := uint64(0)
	for j := uint64(0); j < q; j++ {
		first += c[j]
	}
	for i := first; i < first+c[q]; i++ {
		if r.field(line*512+r.remOffset+i*r.r, r.r) == rem {
			return true
		}
	}
	return false
}

func (r *specV3) contains(h uint64) bool {
	if r.alwaysMaybe {
		return true
	}
	m := (r.seed+1)*0x9e3779b97f4a7c15 | 1
	y := h * m
	x := y ^ y>>32
	yl := h * 0xd6e8feb86659fd93
	z := yl ^ yl>>32
	if r.seededLines {
		z = x
	}
	line := r.line(z)
	q, rem := r.qr(x)
	if r.lineHas(line, q, rem) {
		return true
	}
	if q < r.threshold(line) {
		return false
	}
	x2 := specMix(x, 0x5ec011d2)
	q2, rem2 := r.qr(x2)
	return r.lineHas(r.line(x2), q2, rem2)
}

// TestFormatSpecMatchesCodeV3 checks every version-3 golden block, and
// fresh blocks of many shapes and key lengths, against the specification
// reader: it finds every key, agrees with MayContain on absent probes,
// and reads from each line's header exactly the keys the trailer counts.
// specAgrees checks a specification reader's contains on block: it finds
// every key (or host hash), and answers as the package's lookup on the
// probes (for host-hash blocks, on hashes derived from the probes' index).
func specAgrees(t *testing.T, name string, block []byte, contains func(h uint64) bool, keys [][]byte, h32 []uint32, probes [][]byte) {
	t.Helper()
	for _, k := range keys {
		if !contains(specMulHash(k)) {
			t.Fatalf("%s: spec reader misses %q", name, k)
		}
	}
	for _, h := range h32 {
		if !contains(uint64(h)) {
			t.Fatalf("%s: spec reader misses host hash %#x", name, h)
		}
	}
	for i, k := range probes {
		if len(h32) > 0 {
			h := uint32(i)*2654435761 + 1
			if contains(uint64(h)) != MayContainHash32(block, h) {
				t.Fatalf("%s: spec and code disagree on %#x", name, h)
			}
			continue
		}
		if contains(specMulHash(k)) != MayContain(block, k) {
			t.Fatalf("%s: spec and code disagree on %q", name, k)
		}
	}
}

func TestFormatSpecMatchesCodeV3(t *testing.T) {
	race.SkipLong(t)
	absent := testkeys.Absent(2000, 79)
	check := func(name string, block []byte, keys [][]byte, h32 []uint32, probes [][]byte) {
		t.Helper()
		spec := newSpecV3(t, block)
		stored := uint64(0)
		for line := uint64(0); line < spec.lines; line++ {
			c, ok := spec.runs(line)
			if !ok {
				t.Fatalf("%s: line %d's header is malformed", name, line)
			}
			for _, n := range c {
				stored += n
			}
			if th := spec.threshold(line); th > spec.q {
				t.Fatalf("%s: line %d's threshold %d is above Q=%d", name, line, th, spec.q)
			}
		}
		if want := uint64(binary.LittleEndian.Uint32(block[len(block)-40:])); stored != want {
			t.Fatalf("%s: the headers hold %d keys, the trailer says %d", name, stored, want)
		}
		specAgrees(t, name, block, spec.contains, keys, h32, probes)
	}
	for _, c := range goldenCases(3) {
		block, err := os.ReadFile(filepath.Join("..", "testdata", "codec", "v3", c.name+".bin"))
		if err != nil {
			t.Fatal(err)
		}
		check(c.name, block, c.keys, c.h32, absent)
	}
	// Keys of every length 0..40 (MulHash's branches), at budgets that
	// give remainders of 1 to 16 bits, few and many quotients, and lines
	// that overflow.
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
	settings := []Options{{BitsPerKey: 24}, {BitsPerKey: 48}, {FalsePositiveRate: 0.3}, {FingerprintBits: 5}, {FingerprintBits: 16}}
	for bpk := 2.5; bpk <= 21; bpk += 0.25 {
		settings = append(settings, Options{BitsPerKey: bpk})
	}
	widths := map[int]bool{}
	for _, o := range settings {
		o.Seed = 21
		block := buildExactV3(keys, o)
		check(fmt.Sprintf("lengths %+v", o), block, keys, nil, absent)
		widths[mustInfo(t, block).V3.RemainderBits] = true
	}
	for r := 1; r <= 16; r++ {
		if !widths[r] {
			t.Errorf("no block of %d-bit remainders was checked", r)
		}
	}
	// Many absent probes against large filters of narrow and wide
	// remainders, where runs are long and the lookup's SWAR compare and
	// its long-run loop both answer: they must answer as the spec.
	many := testkeys.Random(20_000, 16, 5)
	probes := testkeys.Absent(100_000, 6)
	for _, bpk := range []float64{4, 6.5, 8, 10, 16} {
		block := buildExactV3(many, Options{BitsPerKey: bpk, Seed: 9})
		check(fmt.Sprintf("20k keys bpk %v", bpk), block, many, nil, probes)
	}
	// Seeded lines: the third attempt always takes them.
	sb := NewBuilder(Options{BitsPerKey: 10, Seed: 5, Version: 3})
	sb.rejectSeeds = 2
	for _, k := range many {
		sb.Add(k)
	}
	seeded := sb.Finish(nil)
	if !mustInfo(t, seeded).V3.SeededLines {
		t.Fatal("the third attempt's block has no seeded lines")
	}
	check("seeded lines", seeded, many, nil, probes)
	// Host hashes.
	h32 := make([]uint32, 5000)
	for i := range h32 {
		h32[i] = uint32(i)*0x9e3779b9 + 7
	}
	b := NewBuilder(Options{Hash: HashHost32, BitsPerKey: 10, Seed: 4, Version: 3})
	for _, h := range h32 {
		b.AddHash32(h)
	}
	check("host32", b.Finish(nil), nil, h32, absent)
}
