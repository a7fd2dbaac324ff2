package codec

import (
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestMayContainKey64MatchesGo holds MayContain (linev3.MayContainKey64:
// the assembly, which jumps to the Go lookups for what it leaves) to
// mayContainGo on blocks of versions 1 to 4, the always-maybe block,
// host-hash blocks, truncated blocks, blocks with bytes damaged in their
// lines and trailers, and random bytes, with the assembly on and off
// (linev3.UseBMI2): the answers agree, and no present key of an intact
// block is answered absent.
func TestMayContainKey64MatchesGo(t *testing.T) {
	defer func(v bool) { linev3.UseBMI2 = v }(linev3.UseBMI2)
	onThisCPU := linev3.UseBMI2
	r := rand.New(rand.NewPCG(5, 8))
	keys := testkeys.Random(3000, 16, 21)
	absent := testkeys.Absent(3000, 22)
	type block struct {
		b      []byte
		intact bool
	}
	var blocks []block
	for _, o := range []Options{{BitsPerKey: 10}, {BitsPerKey: 10, Densest: true}, {BitsPerKey: 3},
		{BitsPerKey: 10, Version: 2}, {BitsPerKey: 10, Version: 1}, {BitsPerKey: 10, Version: 4},
		{BitsPerKey: 16, Version: 4}, {BitsPerKey: 10, Hash: HashHost32}} {
		o.Seed = 9
		var b []byte
		if o.Hash == HashHost32 {
			hb := NewBuilder(o)
			for i := range keys {
				hb.AddHash32(uint32(i) * 0x9e3779b1)
			}
			b = hb.Finish(nil)
		} else {
			b = Build(keys, o)
		}
		blocks = append(blocks, block{b, o.Hash == HashKey64})
		for range 20 {
			d := append([]byte(nil), b...)
			i := r.IntN(len(d))
			if r.IntN(2) == 0 {
				i = len(d) - 1 - r.IntN(min(len(d), 40))
			}
			d[i] ^= byte(1 + r.IntN(255))
			blocks = append(blocks, block{d, false})
		}
		for _, n := range []int{0, 1, 39, 40, 103, 104, len(b) - 1} {
			blocks = append(blocks, block{b[:min(n, len(b))], false})
		}
	}
	blocks = append(blocks, block{Build(nil, Options{BitsPerKey: 10}), false}) // empty: agreement only
	for range 20 {
		d := make([]byte, 40+64*r.IntN(4))
		for i := range d {
			d[i] = byte(r.Uint32())
		}
		blocks = append(blocks, block{d, false})
	}
	for _, use := range []bool{true, false} {
		if use && !onThisCPU {
			continue
		}
		linev3.UseBMI2 = use
		for bi, bl := range blocks {
			for _, set := range [][][]byte{keys, absent} {
				for _, k := range set[:500] {
					got, want := MayContain(bl.b, k), mayContainGo(bl.b, k)
					if got != want {
						t.Fatalf("assembly %v, block %d (%d bytes), key %x: MayContain %v, the Go lookup %v", use, bi, len(bl.b), k, got, want)
					}
				}
			}
			if bl.intact {
				for _, k := range keys {
					if !MayContain(bl.b, k) {
						t.Fatalf("assembly %v, block %d: present key %x answered absent", use, bi, k)
					}
				}
			}
		}
	}
}

// TestMayContainKey64GrowsStack calls MayContain on blocks the assembly
// hands to Go (versions 1, 2 and 4, and with the assembly off) from fresh
// goroutines at every stack depth over a few kilobytes, so that some call
// finds the goroutine's stack full at the Go function the assembly jumps
// to, whose prologue then grows the stack under a frame the assembly
// entered by a jump: the answers stay right.
func TestMayContainKey64GrowsStack(t *testing.T) {
	defer func(v bool) { linev3.UseBMI2 = v }(linev3.UseBMI2)
	keys := testkeys.Random(500, 16, 31)
	blocks := [][]byte{Build(keys, Options{BitsPerKey: 10, Version: 1}), Build(keys, Options{BitsPerKey: 10, Version: 2}),
		Build(keys, Options{BitsPerKey: 10, Version: 4})}
	v3 := Build(keys, Options{BitsPerKey: 10})
	for _, use := range []bool{linev3.UseBMI2, false} {
		linev3.UseBMI2 = use
		for depth := range 300 {
			done := make(chan bool)
			go func() {
				ok := true
				for _, b := range append(blocks, v3) {
					ok = ok && stackDeep(depth, b, keys[depth%len(keys)])
				}
				done <- ok
			}()
			if !<-done {
				t.Fatalf("assembly %v, depth %d: a present key answered absent", use, depth)
			}
		}
	}
}

// stackDeep calls MayContain under depth frames of about 100 bytes.
//
//go:noinline
func stackDeep(depth int, block, key []byte) bool {
	var pad [12]uint64
	if depth == 0 {
		return MayContain(block, key)
	}
	pad[depth%12] = uint64(depth)
	return stackDeep(depth-1, block, key) && pad[depth%12] == uint64(depth)
}
