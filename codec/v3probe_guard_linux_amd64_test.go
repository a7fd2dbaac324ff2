package codec

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// guardedPages maps n usable pages between two inaccessible ones: a read a
// byte before the first usable page or past the last faults.
func guardedPages(t *testing.T, n int) []byte {
	t.Helper()
	ps := syscall.Getpagesize()
	m, err := syscall.Mmap(-1, 0, (n+2)*ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	t.Cleanup(func() { syscall.Munmap(m) })
	for _, g := range [][]byte{m[:ps], m[(n+1)*ps:]} {
		if err := syscall.Mprotect(g, syscall.PROT_NONE); err != nil {
			t.Skipf("mprotect: %v", err)
		}
	}
	return m[ps : (n+1)*ps]
}

// TestV3ProbeBMI2StaysInBounds runs the assembly probe on keys and blocks
// that end right before an inaccessible page or start right after one: a
// read outside the key or the block would fault the test. Keys of every
// length 0..300 (each of the hash's branches), blocks of every size class
// the probe answers for and shorter ones it hands back, and the same
// blocks damaged, whose lookups take the probe's other paths.
func TestV3ProbeBMI2StaysInBounds(t *testing.T) {
	if !linev3.UseBMI2 {
		t.Skip("this processor does not run the assembly probe (POPCNT, BMI1, BMI2 and a fast PDEP needed)")
	}
	r := rand.New(rand.NewPCG(12, 13))
	mem := guardedPages(t, 64)
	for n := 0; n <= 300; n++ {
		for range 20 {
			key := mem[len(mem)-n:]
			for i := range key {
				key[i] = byte(r.Uint32())
			}
			if o, h := linev3.ProbeBMI2(nil, key); o != linev3.Other || h != keyhash.MulHash(key) {
				t.Fatalf("%d-byte key at the end of the mapping: outcome %d, hash %#x, MulHash %#x", n, o, h, keyhash.MulHash(key))
			}
			key = mem[:n]
			copy(key, mem[len(mem)-n:])
			if _, h := linev3.ProbeBMI2(nil, key); h != keyhash.MulHash(key) {
				t.Fatalf("%d-byte key at the start of the mapping: hash %#x, MulHash %#x", n, h, keyhash.MulHash(key))
			}
		}
	}
	absent := testkeys.Absent(3000, 5)
	answered := 0
	for _, nk := range []int{1, 3, 40, 700, 3000} {
		for _, bpk := range []float64{6, 10, 16, 24} {
			built := buildExactV3(testkeys.Random(nk, 16, uint64(nk)), Options{BitsPerKey: bpk, Seed: 21})
			if len(built) > len(mem) {
				t.Fatalf("a %d-byte block does not fit the %d-byte mapping", len(built), len(mem))
			}
			for cut := 0; cut <= 3 && cut < len(built); cut++ {
				src := built[:len(built)-cut] // shorter blocks: handed back, or a length the trailer contradicts
				for _, block := range [][]byte{mem[len(mem)-len(src):], mem[:len(src)]} {
					for i, k := range absent {
						// Every 100 lookups a fresh copy, damaged in one
						// byte after the first 100.
						if i%100 == 0 {
							copy(block, src)
							if i > 0 && len(block) > 0 {
								block[r.IntN(len(block))] ^= byte(1 + r.IntN(255))
							}
						}
						if msg, ok := v3ProbeAgrees(block, k); !ok {
							t.Fatalf("%d keys, %v bits/key, cut %d: %s", nk, bpk, cut, msg)
						}
						if o, _ := linev3.ProbeBMI2(block, k); o != linev3.Other {
							answered++
						}
					}
				}
			}
		}
	}
	if answered == 0 {
		t.Error("the probe answered no lookup: the blocks did not reach its main path")
	}
	t.Logf("the probe answered %d lookups", answered)
}
