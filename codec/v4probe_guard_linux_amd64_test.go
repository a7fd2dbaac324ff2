package codec

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestV4AssemblyStaysInBounds runs MayContain's version-4 assembly on
// keys and blocks that end right before an inaccessible page or start
// right after one: a read outside the key or the block would fault the
// test. Keys of every length 0..300, blocks at budgets whose columns
// have over 64 rows (4.5–8 bits per key) and fewer, of 1 to 3,000 keys,
// cut short and damaged: no present key is answered absent, and the
// answers agree with the Go lookup.
func TestV4AssemblyStaysInBounds(t *testing.T) {
	if !linev4.UsePOPCNT {
		t.Skip("this processor has no POPCNT: version 4's assembly does not run")
	}
	r := rand.New(rand.NewPCG(14, 15))
	mem := guardedPages(t, 64)
	keys := testkeys.Random(3000, 16, 3)
	small := buildExactV4Block(t, keys[:40], 10)
	for n := 0; n <= 300; n++ {
		for _, key := range [][]byte{mem[len(mem)-n:], mem[:n]} {
			for i := range key {
				key[i] = byte(r.Uint32())
			}
			if MayContain(small, key) != mayContainGo(small, key) {
				t.Fatalf("%d-byte key at an edge of the mapping: the assembly and Go disagree", n)
			}
		}
	}
	absent := testkeys.Absent(2000, 5)
	for _, nk := range []int{1, 3, 40, 700, 3000} {
		for _, bpk := range []float64{4.5, 6, 8, 10, 16, 24, 40} {
			built := buildExactV4Block(t, keys[:nk], bpk)
			if len(built) > len(mem) {
				t.Fatalf("a %d-byte block does not fit the %d-byte mapping", len(built), len(mem))
			}
			for cut := 0; cut <= 2; cut++ {
				src := built[:len(built)-cut]
				for _, block := range [][]byte{mem[len(mem)-len(src):], mem[:len(src)]} {
					copy(block, src)
					if cut == 0 {
						for _, k := range keys[:nk] {
							if !MayContain(block, k) {
								t.Fatalf("%d keys, %v bits/key: present key %x answered absent", nk, bpk, k)
							}
						}
					}
					for i, k := range absent {
						if i%200 == 0 && i > 0 {
							copy(block, src)
							block[r.IntN(len(block))] ^= byte(1 + r.IntN(255))
						}
						if MayContain(block, k) != mayContainGo(block, k) {
							t.Fatalf("%d keys, %v bits/key, cut %d, probe %d: the assembly and Go disagree", nk, bpk, cut, i)
						}
					}
				}
			}
		}
	}
}

// buildExactV4Block is a version-4 block of keys at bpk, failing the test
// if the budget gave another version.
func buildExactV4Block(t *testing.T, keys [][]byte, bpk float64) []byte {
	t.Helper()
	b, _ := buildExactV4(keys, Options{BitsPerKey: bpk, Seed: 3})
	if info := mustInfo(t, b); info.Version != 4 || info.AlwaysMaybe {
		t.Fatalf("%d keys at %v bits/key: version %d, always maybe %v", len(keys), bpk, info.Version, info.AlwaysMaybe)
	}
	return b
}

// TestV4AssemblyEveryShapeGuarded runs every valid version-4 shape (1–31
// columns of 1–128 rows, U from 0 to 255 where the line leaves room),
// fixed and seeded lines, on random lines sealed into blocks placed
// against a guard page at either end, with keys of 0–39 bytes against
// another: MayContain (the assembly), the Go lookup and FORMAT.md's
// reader (v4_spec_test.go) answer alike, and nothing reads outside the
// block or the key.
func TestV4AssemblyEveryShapeGuarded(t *testing.T) {
	if !linev4.UsePOPCNT {
		t.Skip("this processor has no POPCNT: version 4's assembly does not run")
	}
	rng := rand.New(rand.NewPCG(77, 78))
	mem := guardedPages(t, 4)
	kmem := guardedPages(t, 1)
	probes, absent := 0, 0
	for r := uint32(1); r <= linev4.MaxColumns; r++ {
		for m := uint32(1); m <= linev4.MaxHeight && r*m <= linev4.ColumnBits; m++ {
			us := []uint32{0}
			if r*m < linev4.ColumnBits {
				us = append(us, 1, uint32(1+rng.IntN(254)), 255)
			}
			for _, u := range us {
				for _, lines := range []uint32{1, 3} {
					for _, seeded := range []bool{false, true} {
						hd := linev4.Header{Shape: linev4.Shape{R: r, M: m, U: u}, SeededLines: seeded, Lines: lines, Seed: rng.Uint32()}
						src := make([]byte, int(lines)*frame.LineBytes+frame.TrailerSize)
						for i := range src[:len(src)-frame.TrailerSize] {
							src[i] = byte(rng.Uint32())
						}
						hd.Put(src[len(src)-frame.TrailerSize:], 1)
						frame.Seal(src)
						spec := newSpecV4(t, src)
						for _, block := range [][]byte{mem[len(mem)-len(src):], mem[:len(src)]} {
							copy(block, src)
							for range 12 {
								kl := rng.IntN(40)
								key := kmem[:kl]
								if rng.IntN(2) == 0 {
									key = kmem[len(kmem)-kl:]
								}
								for i := range key {
									key[i] = byte(rng.Uint32())
								}
								got, want := MayContain(block, key), spec.contains(keyhash.MulHash(key))
								if inGo := mayContainGo(block, key); got != want || inGo != want {
									t.Fatalf("shape %+v, %d lines, seeded %v, key %x: assembly %v, Go %v, FORMAT.md's reader %v", hd.Shape, lines, seeded, key, got, inGo, want)
								}
								probes++
								if !got {
									absent++
								}
							}
						}
					}
				}
			}
		}
	}
	if absent < probes/10 || absent > probes*19/20 {
		t.Fatalf("%d of %d probes absent: the random lines do not exercise both answers", absent, probes)
	}
	t.Logf("%d probes, %d absent", probes, absent)
}

// TestV4AssemblySeededLinesHoldTheirKeys builds real version-4 blocks of
// keys chosen to crowd the fixed line hash (so that the writer seeds the
// lines), at budgets of short and tall columns, and asks the assembly
// for every key.
func TestV4AssemblySeededLinesHoldTheirKeys(t *testing.T) {
	var keys [][]byte
	for i := 0; len(keys) < 4000; i++ {
		k := []byte(fmt.Sprintf("crowd-%08d", i))
		if keyhash.MulHash(k)*linev4.LineMultiplier>>32 < 1<<26 {
			keys = append(keys, k)
		}
	}
	keys = append(keys, testkeys.Random(4000, 16, 3)...)
	for _, bpk := range []float64{4.5, 6, 8, 10, 16, 40} {
		b, _ := buildExactV4(keys, Options{BitsPerKey: bpk, Seed: 5})
		if !mustInfo(t, b).V4.SeededLines {
			t.Fatalf("%v bits/key: the crowded keys did not seed the lines", bpk)
		}
		for _, k := range keys {
			if !MayContain(b, k) {
				t.Fatalf("%v bits/key: present key %q answered absent", bpk, k)
			}
		}
	}
}
