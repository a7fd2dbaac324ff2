package codec

import (
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
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
