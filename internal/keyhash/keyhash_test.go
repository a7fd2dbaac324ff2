package keyhash

import "testing"

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
