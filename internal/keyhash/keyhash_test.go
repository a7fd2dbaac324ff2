package keyhash

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestUnmixInvertsMix(t *testing.T) {
	for _, seed := range []uint32{0, 1, 0xffffffff} {
		for i := uint64(0); i < 100000; i++ {
			h := i * 0x9e3779b97f4a7c15 >> (i % 64)
			if got := Unmix(Mix(h, seed), seed); got != h {
				t.Fatalf("Unmix(Mix(%#x, %d)) = %#x", h, seed, got)
			}
		}
	}
}

func TestFingerprintRange(t *testing.T) {
	for f := uint(1); f <= 16; f++ {
		seen := map[uint32]bool{}
		for lo := uint64(0); lo < 1<<16; lo++ {
			fp := Fingerprint(lo|0xabcdef<<32, f)
			if fp == 0 || fp >= 1<<f {
				t.Fatalf("f=%d: fingerprint %d out of [1, 2^f)", f, fp)
			}
			seen[fp] = true
		}
		if len(seen) != 1<<f-1 {
			t.Fatalf("f=%d: %d distinct fingerprints, want every one of %d", f, len(seen), 1<<f-1)
		}
	}
}

func TestReduceUniform(t *testing.T) {
	counts := make([]int, 7)
	for v := uint32(0); v < 1<<20; v++ {
		i, _ := Reduce(v<<12, 7)
		counts[i]++
	}
	for i, c := range counts {
		if c < (1<<20)/7-1 || c > (1<<20)/7+1 {
			t.Fatalf("bin %d got %d of %d", i, c, 1<<20)
		}
	}
}

// TestMulHashDistinct checks that MulHash separates the key shapes filters
// meet: sequential IDs, long shared prefixes, every length 0..64 of one
// pattern, single-byte differences anywhere, and that its output bits are
// balanced (each bit set in about half of the sequential keys).
func TestMulHashDistinct(t *testing.T) {
	seen := map[uint64]string{}
	add := func(k []byte) {
		h := MulHash(k)
		if prev, ok := seen[h]; ok && prev != string(k) {
			t.Fatalf("MulHash(%q) == MulHash(%q)", k, prev)
		}
		seen[h] = string(k)
	}
	var ones [64]int
	const n = 200_000
	for i := 0; i < n; i++ {
		k := fmt.Appendf(nil, "key%010d", i)
		add(k)
		h := MulHash(k)
		for b := range ones {
			ones[b] += int(h >> b & 1)
		}
		add(fmt.Appendf(nil, "%s%d", strings.Repeat("p", 100), i))
		add(fmt.Appendf(nil, "%d", i))
	}
	for b, c := range ones {
		if c < n/2-n/50 || c > n/2+n/50 {
			t.Errorf("bit %d set in %d of %d sequential keys", b, c, n)
		}
	}
	base := []byte(strings.Repeat("abcdefgh", 8))
	for l := 0; l <= len(base); l++ {
		add(base[:l])
		for i := 0; i < l; i++ {
			k := bytes.Clone(base[:l])
			k[i] ^= 0x01
			add(k)
		}
	}
}

func BenchmarkKeyHash(b *testing.B) {
	for _, l := range []int{8, 15, 16, 24, 64} {
		key := []byte(strings.Repeat("k", l))
		b.Run(fmt.Sprintf("xxhash/%d", l), func(b *testing.B) {
			for b.Loop() {
				key[0] = byte(Hash(key))
			}
		})
		b.Run(fmt.Sprintf("mulhash/%d", l), func(b *testing.B) {
			for b.Loop() {
				key[0] = byte(MulHash(key))
			}
		})
	}
}

// TestMulHashWordsIsMulHash: the written-out form a filter writer uses for
// keys of 8 to 16 bytes gives MulHash's value for every such key.
func TestMulHashWordsIsMulHash(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 100_000 {
		k := make([]byte, 8+r.IntN(9))
		for i := range k {
			k[i] = byte(r.Uint32())
		}
		n := len(k)
		if got, want := MulHashWords(binary.LittleEndian.Uint64(k), binary.LittleEndian.Uint64(k[n-8:]), n), MulHash(k); got != want {
			t.Fatalf("key %x: MulHashWords %#x, MulHash %#x", k, got, want)
		}
	}
}
