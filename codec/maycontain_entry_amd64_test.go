package codec

import (
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestMayContainKey64MatchesGo holds MayContain (linev3.MayContainKey64:
// the assembly, which jumps to the Go lookups for what it leaves) to
// mayContainGo on blocks of versions 1 to 4, the always-maybe block,
// host-hash blocks, truncated blocks, blocks with bytes damaged in their
// lines and trailers, and random bytes, with both versions' assembly on
// and off (linev3.UseBMI2, linev4.UsePOPCNT): the answers agree, and no
// present key of an intact block is answered absent.
func TestMayContainKey64MatchesGo(t *testing.T) {
	defer func(v, v4 bool) { linev3.UseBMI2, linev4.UsePOPCNT = v, v4 }(linev3.UseBMI2, linev4.UsePOPCNT)
	onThisCPU, v4OnThisCPU := linev3.UseBMI2, linev4.UsePOPCNT
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
		if use && !onThisCPU && !v4OnThisCPU {
			continue
		}
		linev3.UseBMI2, linev4.UsePOPCNT = use && onThisCPU, use && v4OnThisCPU
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
// hands to Go (versions 1 and 2, a host-hash version-4 block, and every
// block with both assemblies off) from fresh
// goroutines at every stack depth over a few kilobytes, so that some call
// finds the goroutine's stack full at the Go function the assembly jumps
// to, whose prologue then grows the stack under a frame the assembly
// entered by a jump: the answers stay right.
func TestMayContainKey64GrowsStack(t *testing.T) {
	defer func(v, v4 bool) { linev3.UseBMI2, linev4.UsePOPCNT = v, v4 }(linev3.UseBMI2, linev4.UsePOPCNT)
	keys := testkeys.Random(500, 16, 31)
	// A version-4 block of the host hash kind: its assembly hands it to Go.
	host := Build(keys, Options{BitsPerKey: 10, Version: 4})
	host[len(host)-31] |= 1 << linev4.KindShift
	host[len(host)-15] &^= 1 << linev4.KindShift
	blocks := [][]byte{Build(keys, Options{BitsPerKey: 10, Version: 1}), Build(keys, Options{BitsPerKey: 10, Version: 2}),
		Build(keys, Options{BitsPerKey: 10, Version: 4}), host}
	v3 := Build(keys, Options{BitsPerKey: 10})
	for _, use := range []bool{true, false} {
		linev3.UseBMI2, linev4.UsePOPCNT = use && linev3.UseBMI2, use && linev4.UsePOPCNT
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

// TestV4HandOffWithTheBlockOnTheStack calls MayContain on a version-4
// block and key held in arrays on the goroutine's stack, at every depth
// over a few kilobytes, for a block the assembly answers and one it hands
// to Go (the host hash kind): where the Go function the assembly jumps to
// grows the stack, the runtime moves the block and the key, and the
// answers stay right.
func TestV4HandOffWithTheBlockOnTheStack(t *testing.T) {
	keys := testkeys.Random(6, 16, 9)
	b, _ := buildExactV4(keys, Options{BitsPerKey: 40, Seed: 1})
	if len(b) > 3*frame.LineBytes+frame.TrailerSize {
		t.Fatalf("a %d-byte block does not fit the stack array", len(b))
	}
	host := append([]byte(nil), b...)
	host[len(host)-31] |= 1 << linev4.KindShift
	host[len(host)-15] &^= 1 << linev4.KindShift
	for depth := range 400 {
		done := make(chan bool)
		go func() {
			ok := true
			for _, k := range keys {
				ok = ok && stackBlock(depth, b, k) && stackBlock(depth, host, k)
			}
			done <- ok
		}()
		if !<-done {
			t.Fatalf("depth %d: a present key answered absent", depth)
		}
	}
}

// stackBlock copies block and key into arrays on the stack under depth
// frames of about 130 bytes and calls MayContain on them.
//
//go:noinline
func stackBlock(depth int, block, key []byte) bool {
	var pad [16]uint64
	if depth == 0 {
		var b [3*frame.LineBytes + frame.TrailerSize]byte
		var k [24]byte
		copy(b[:], block)
		copy(k[:], key)
		return MayContain(b[:len(block)], k[:len(key)])
	}
	pad[depth%16] = uint64(depth)
	return stackBlock(depth-1, block, key) && pad[depth%16] == uint64(depth)
}
