package codec

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// v3ProbeAgrees reports whether linev3.ProbeBMI2, finished as MayContain
// finishes it, answers for key in block as linev3.Lookup does (for a block that
// is not version 3 at all, linev3.Lookup's "not mine" is matched only by
// linev3.Other), and hands back the key's hash where it leaves the lookup to Go.
func v3ProbeAgrees(block, key []byte) (string, bool) {
	h := keyhash.MulHash(key)
	want, isV3 := linev3.Lookup(block, h, uint8(HashKey64))
	o, x := linev3.ProbeBMI2(block, key)
	switch o {
	case linev3.Other:
		if x != h {
			return fmt.Sprintf("linev3.Other with hash %#x, MulHash %#x", x, h), false
		}
		return "", true
	case linev3.Absent, linev3.Maybe:
		if !isV3 || want != (o == linev3.Maybe) {
			return fmt.Sprintf("probe says %d, linev3.Lookup (%v, %v)", o, want, isV3), false
		}
	default:
		return fmt.Sprintf("outcome %d", o), false
	}
	return "", true
}

// TestV3ProbeBMI2MatchesLookup runs the assembly probe beside linev3.Lookup on
// blocks of every remainder width, many budgets and sizes (one line to
// tens of thousands), seeded lines, host-hash blocks (which the probe
// leaves to linev3.Lookup), absent and present keys and hashes crafted onto
// every quotient of a line, and on the same blocks with bytes damaged in
// their lines and trailers: wherever the probe answers, it answers as
// linev3.Lookup does, and it never misses a present key.
func TestV3ProbeBMI2MatchesLookup(t *testing.T) {
	race.SkipLong(t)
	if !linev3.UseBMI2 {
		t.Skip("this processor does not run the assembly probe (POPCNT, BMI1, BMI2 and a fast PDEP needed)")
	}
	r := rand.New(rand.NewPCG(3, 4))
	var blocks [][]byte
	var keySets [][][]byte
	add := func(keys [][]byte, o Options) {
		blocks = append(blocks, buildExactV3(keys, o))
		keySets = append(keySets, keys)
	}
	for _, n := range []int{1, 7, 60, 500, 5000, 40_000} {
		keys := testkeys.Random(n, 16, uint64(n))
		for _, bpk := range []float64{4, 6, 8, 9.5, 10, 12, 16, 24, 32} {
			add(keys, Options{BitsPerKey: bpk, Seed: uint32(n) + 1})
		}
	}
	for fb := 1; fb <= 16; fb++ {
		add(testkeys.Random(3000, 16, uint64(fb)), Options{FingerprintBits: fb, Seed: 7})
	}
	seeded := NewBuilder(Options{BitsPerKey: 10, Seed: 5, Version: 3})
	seeded.rejectSeeds = 2
	sk := testkeys.Random(5000, 16, 77)
	for _, k := range sk {
		seeded.Add(k)
	}
	blocks, keySets = append(blocks, seeded.Finish(nil)), append(keySets, sk)
	absent := testkeys.Absent(20_000, 91)
	checked, answered := 0, 0
	wide := 0 // blocks whose line header is past two words (the probe's other select)
	for bi, block := range blocks {
		if w0 := binary.LittleEndian.Uint64(block[len(block)-36:]); len(block) >= 104 && w0>>56+w0>>48&0xff > 128 {
			wide++
		}
		for _, k := range keySets[bi] {
			if o, _ := linev3.ProbeBMI2(block, k); o == linev3.Absent {
				t.Fatalf("block %d: the probe misses a present key", bi)
			}
			if msg, ok := v3ProbeAgrees(block, k); !ok {
				t.Fatalf("block %d, present key: %s", bi, msg)
			}
		}
		for _, k := range absent {
			if msg, ok := v3ProbeAgrees(block, k); !ok {
				t.Fatalf("block %d, absent key: %s", bi, msg)
			}
			checked++
			if o, _ := linev3.ProbeBMI2(block, k); o != linev3.Other {
				answered++
			}
		}
		// Damage: random bytes of lines and trailer, one at a time.
		for range 200 {
			d := append([]byte(nil), block...)
			i := r.IntN(len(d))
			d[i] ^= byte(1 + r.IntN(255))
			for _, k := range absent[r.IntN(len(absent)-50):][:50] {
				if msg, ok := v3ProbeAgrees(d, k); !ok {
					t.Fatalf("block %d damaged at byte %d of %d: %s", bi, i, len(d), msg)
				}
			}
		}
	}
	t.Logf("%d blocks (%d with headers past two words): the probe answered %d of %d lookups of absent keys", len(blocks), wide, answered, checked)
	if wide == 0 || wide == len(blocks) {
		t.Errorf("%d of %d blocks have headers past two words: both of the probe's selects should be run", wide, len(blocks))
	}
	if answered < checked*9/10 {
		t.Errorf("the probe answered %d of %d lookups of absent keys: it should settle nearly all", answered, checked)
	}
}

// FuzzV3ProbeBMI2 gives the assembly probe arbitrary blocks and keys: it
// must not fault, and where it answers it answers as linev3.Lookup does.
func FuzzV3ProbeBMI2(f *testing.F) {
	if !linev3.UseBMI2 {
		f.Skip("this processor does not run the assembly probe")
	}
	for _, bpk := range []float64{6, 10, 16} {
		f.Add(buildExactV3(testkeys.Random(300, 16, 1), Options{BitsPerKey: bpk, Seed: 3}), []byte("user0000012345"))
	}
	f.Fuzz(func(t *testing.T, block, key []byte) {
		if msg, ok := v3ProbeAgrees(block, key); !ok {
			t.Fatal(msg)
		}
	})
}

// TestV3ProbeBMI2Hash holds the assembly's key hash to keyhash.MulHash at
// every length from 0 to 300 bytes (each branch of the hash and every
// count of 16-byte rounds), on random bytes and on keys that differ from
// each other in one byte, read from the end of an allocation so that a
// read past the key would touch bytes the key does not own.
func TestV3ProbeBMI2Hash(t *testing.T) {
	if !linev3.UseBMI2 {
		t.Skip("this processor does not run the assembly probe (POPCNT, BMI1, BMI2 and a fast PDEP needed)")
	}
	r := rand.New(rand.NewPCG(9, 9))
	for n := 0; n <= 300; n++ {
		for range 50 {
			buf := make([]byte, n+16)
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			key := buf[16:]
			for _, k := range [][]byte{key, buf[:n]} {
				if o, h := linev3.ProbeBMI2(nil, k); o != linev3.Other || h != keyhash.MulHash(k) {
					t.Fatalf("%d-byte key %x: outcome %d hash %#x, MulHash %#x", n, k, o, h, keyhash.MulHash(k))
				}
			}
			if n > 0 {
				key[r.IntN(n)]++
				if _, h := linev3.ProbeBMI2(nil, key); h != keyhash.MulHash(key) {
					t.Fatalf("%d-byte key %x: hash %#x, MulHash %#x", n, key, h, keyhash.MulHash(key))
				}
			}
		}
	}
}
