package codec

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"

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
		bucket := r.bits(r.bktBitBase+i*r.bucketSz, r.bucketSz)
		code := int(bucket & 0xfff)
		// Find the sorted nibbles whose rank is code.
		var nib [4]int
		found := false
		for a := 0; a < 16 && !found; a++ {
			for b := a; b < 16 && !found; b++ {
				for c := b; c < 16 && !found; c++ {
					for d := c; d < 16 && !found; d++ {
						if binomial(a, 1)+binomial(b+1, 2)+binomial(c+2, 3)+binomial(d+3, 4) == code {
							nib, found = [4]int{a, b, c, d}, true
						}
					}
				}
			}
		}
		L := uint64(r.f - 4)
		for j := uint64(0); j < 4; j++ {
			low := bucket >> (12 + j*L) & (1<<L - 1)
			if uint64(nib[j])<<L|low == fp {
				return true
			}
		}
	}
	return false
}

// TestFormatSpecMatchesCode checks every golden block against the
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
