package linev4

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
)

// TestMayContainKey64MatchesLookup holds the assembly to Lookup, the Go
// code it follows, on random-line blocks of every test shape (both hash
// kinds, seeded lines, shapes it must leave to Go), keys of every length
// 0..40 (MulHash's branches), damaged and cut trailers, with the
// assembly on and off (UsePOPCNT): the answers agree, and the assembly
// answers the well-formed HashKey64 blocks itself (about a third of the
// probes: the rest are host-hash blocks, damaged ones, and shapes no
// block may have).
func TestMayContainKey64MatchesLookup(t *testing.T) {
	race.SkipLong(t)
	defer func(v bool, o func([]byte, []byte) bool) { UsePOPCNT, OtherLookup = v, o }(UsePOPCNT, OtherLookup)
	var handed atomic.Int64
	// What codec's lookup answers for a block Lookup does not take: maybe.
	OtherLookup = func(block, key []byte) bool {
		handed.Add(1)
		maybe, _ := Lookup(block, keyhash.MulHash(key), frame.HashKey64)
		return maybe
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var keys [][]byte
	for l := 0; l <= 40; l++ {
		for range 8 {
			k := make([]byte, l)
			for i := range k {
				k[i] = byte(rng.Uint32())
			}
			keys = append(keys, k)
		}
	}
	onThisCPU := UsePOPCNT
	for _, use := range []bool{true, false} {
		if use && !onThisCPU {
			t.Log("this processor has no POPCNT: the assembly's own path is not run")
			continue
		}
		UsePOPCNT = use
		probes, absent, fast := 0, 0, 0
		for _, s := range testShapes() {
			blocks := randomBlocks(rng, s)
			for _, b := range blocks[:4] {
				d := append([]byte(nil), b...)
				d[len(d)-1-rng.IntN(40)] ^= byte(1 + rng.IntN(255))
				blocks = append(blocks, d, b[:len(b)-1], b[1:])
			}
			for _, block := range blocks {
				for _, k := range keys {
					before := handed.Load()
					got := MayContainKey64(block, k)
					want, _ := Lookup(block, keyhash.MulHash(k), frame.HashKey64)
					if got != want {
						t.Fatalf("assembly %v, shape %+v, %d bytes, key %x: assembly %v, Lookup %v", use, s, len(block), k, got, want)
					}
					probes++
					if !got {
						absent++
					}
					if handed.Load() == before {
						fast++
					}
				}
			}
		}
		t.Logf("assembly %v: %d probes, %d absent, %d answered without Go", use, probes, absent, fast)
		if use && (fast < probes/5 || absent < probes/10) {
			t.Fatalf("the assembly answered %d of %d probes itself, %d absent: its paths are not exercised", fast, probes, absent)
		}
		if !use && fast != 0 {
			t.Fatalf("with the assembly off, %d probes were answered without Go", fast)
		}
	}
}

// BenchmarkMayContainKey64 times hot lookups of absent keys in one
// random-line block of 100k keys' lines at a 10-bits-per-key shape
// (9 columns of 53 rows, the extra column for about half the keys):
// the assembly against Lookup in Go.
func BenchmarkMayContainKey64(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	const lines = 100_000 * 10 / 512
	hd := Header{Shape: Shape{R: 9, M: 53, U: 130}, Lines: lines, Seed: 1}
	block := make([]byte, lines*frame.LineBytes+frame.TrailerSize)
	for i := range block[:len(block)-frame.TrailerSize] {
		block[i] = byte(rng.Uint32())
	}
	hd.Put(block[len(block)-frame.TrailerSize:], 100_000)
	frame.Seal(block)
	keys := make([][]byte, 1<<16)
	for i := range keys {
		keys[i] = []byte{byte(i), byte(i >> 8), 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	}
	b.Run("assembly", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			MayContainKey64(block, keys[i&(1<<16-1)])
		}
	})
	b.Run("go", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			Lookup(block, keyhash.MulHash(keys[i&(1<<16-1)]), frame.HashKey64)
		}
	})
}

// FuzzMayContainKey64 gives the assembly fuzzer-chosen lines, trailer
// fields and keys: it must agree with Lookup and with the column-by-column
// reference, whatever the bytes (a valid trailer around them, sealed, or
// the raw bytes as they come).
func FuzzMayContainKey64(f *testing.F) {
	defer func(o func([]byte, []byte) bool) { OtherLookup = o }(OtherLookup)
	OtherLookup = func(block, key []byte) bool {
		maybe, _ := Lookup(block, keyhash.MulHash(key), frame.HashKey64)
		return maybe
	}
	f.Add(uint8(9), uint8(53), uint8(130), uint8(0), uint32(7), []byte("lines"), []byte("key-0001"), true)
	f.Add(uint8(7), uint8(66), uint8(165), uint8(0x80), uint32(1), []byte{0xff, 0}, []byte(""), true)
	f.Add(uint8(31), uint8(15), uint8(255), uint8(0x20), uint32(0), []byte{1, 2, 3}, []byte("a somewhat longer key of 33 bytes"), false)
	f.Fuzz(func(t *testing.T, r, m, u, flags uint8, seed uint32, lineBytes, key []byte, seal bool) {
		lines := 1 + len(lineBytes)/frame.LineBytes
		block := make([]byte, lines*frame.LineBytes+frame.TrailerSize)
		for i := range block[:len(block)-frame.TrailerSize] {
			if len(lineBytes) > 0 {
				block[i] = lineBytes[i%len(lineBytes)] ^ byte(i*131)
			}
		}
		hd := Header{Shape: Shape{R: uint32(r), M: uint32(m), U: uint32(u)}, Kind: flags >> KindShift & 1,
			AlwaysMaybe: flags&FlagAlwaysMaybe != 0, SeededLines: flags&FlagSeededLines != 0, Lines: uint32(lines), Seed: seed}
		hd.Put(block[len(block)-frame.TrailerSize:], 5)
		if seal {
			frame.Seal(block)
		} else {
			copy(block[len(block)-frame.TrailerSize:], lineBytes)
		}
		h := keyhash.MulHash(key)
		got := MayContainKey64(block, key)
		want, _ := Lookup(block, h, frame.HashKey64)
		reference, _ := lookupAnyShape(block, h, frame.HashKey64)
		if got != want || want != reference {
			t.Fatalf("shape %+v, flags %#x, %d lines: assembly %v, Lookup %v, column by column %v", hd.Shape, flags, lines, got, want, reference)
		}
	})
}
