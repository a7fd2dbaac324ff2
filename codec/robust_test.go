package codec

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

var update = flag.Bool("update", false, "rewrite the golden blocks (only together with a format version bump)")

// goldenCases are small fixed key sets whose encoded bytes are frozen for
// format version 1. Any change to hashing, sizing, placement or layout that
// alters them must bump FormatVersion (and keep version-1 blocks readable).
type goldenCase struct {
	name string
	keys [][]byte
	opts Options
	h32  []uint32
}

func (c goldenCase) build() []byte {
	b := NewBuilder(c.opts)
	for _, k := range c.keys {
		b.Add(k)
	}
	for _, h := range c.h32 {
		b.AddHash(uint64(h))
	}
	return b.Finish(nil)
}

func goldenCases() []goldenCase {
	h32 := make([]uint32, 300)
	for i := range h32 {
		h32[i] = uint32(i) * 2654435761
	}
	return []goldenCase{
		{"empty", nil, Options{}, nil},
		{"one-key", [][]byte{[]byte("lsmcuckoo")}, Options{}, nil},
		{"seq100-bpk10", testkeys.Sequential("user", 0, 100), Options{BitsPerKey: 10}, nil},
		{"seq1000-bpk16", testkeys.Sequential("k", 0, 1000), Options{BitsPerKey: 16}, nil},
		{"seq700-fpr1pct-seed7", testkeys.Sequential("v", 0, 700), Options{FalsePositiveRate: 0.01, Seed: 7}, nil},
		{"host32-300", nil, Options{BitsPerKey: 10, Hash: HashHost32}, h32},
	}
}

func TestGoldenBlocks(t *testing.T) {
	dir := filepath.Join("..", "testdata", "codec", fmt.Sprintf("v%d", FormatVersion))
	for _, c := range goldenCases() {
		got := c.build()
		path := filepath.Join(dir, c.name+".bin")
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run go test ./codec -run TestGoldenBlocks -update once per format version)", c.name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: encoding changed (%d bytes, golden %d). Changing the bytes of format v%d breaks every table on disk: bump FormatVersion and keep reading v%d.",
				c.name, len(got), len(want), FormatVersion, FormatVersion)
		}
		// The frozen block itself must stay readable and complete.
		f, err := Decode(want)
		if err != nil {
			t.Fatalf("%s: golden block no longer decodes: %v", c.name, err)
		}
		for _, k := range c.keys {
			if !MayContain(want, k) {
				t.Fatalf("%s: golden block lost key %q", c.name, k)
			}
		}
		for _, h := range c.h32 {
			if !MayContainHash32(want, h) {
				t.Fatalf("%s: golden block lost hash %#x", c.name, h)
			}
		}
		if f.Info().Keys != len(c.keys)+len(c.h32) {
			t.Fatalf("%s: %d keys recorded", c.name, f.Info().Keys)
		}
	}
}

func TestDeterministicAcrossInputOrder(t *testing.T) {
	keys := testkeys.Random(20_000, 16, 21)
	a := Build(keys, Options{BitsPerKey: 10})
	rev := make([][]byte, len(keys))
	for i, k := range keys {
		rev[len(keys)-1-i] = k
	}
	if b := Build(rev, Options{BitsPerKey: 10}); !bytes.Equal(a, b) {
		t.Fatal("the same key set in another order encoded differently")
	}
}

func TestReseedKeepsEveryKey(t *testing.T) {
	for _, kind := range []HashKind{HashKey64, HashHost32} {
		keys := testkeys.Random(5000, 16, 31)
		b := NewBuilder(Options{BitsPerKey: 10, Hash: kind, Seed: 0})
		b.rejectSeeds = 2
		hashes := make([]uint64, len(keys))
		for i, k := range keys {
			hashes[i] = keyhash.Hash(k)
			if kind == HashHost32 {
				hashes[i] &= 0xffffffff
			}
			b.AddHash(hashes[i])
		}
		block := b.Finish(nil)
		if st := b.Stats(); st.Reseeds != 2 {
			t.Fatalf("kind %d: %d reseeds, want 2", kind, st.Reseeds)
		}
		f, err := Decode(block)
		if err != nil {
			t.Fatal(err)
		}
		if f.Info().Seed != 2 {
			t.Fatalf("kind %d: seed %d recorded, want 2", kind, f.Info().Seed)
		}
		for _, h := range hashes {
			ok := MayContainHash(block, h)
			if kind == HashHost32 {
				ok = MayContainHash32(block, uint32(h))
			}
			if !ok {
				t.Fatalf("kind %d: key lost across reseed", kind)
			}
		}
	}
}

// TestEveryTruncationAnswersMaybe cuts a valid block at every length: the
// reader must say "maybe" (never "absent", never panic) and Decode must
// report truncation.
func TestEveryTruncationAnswersMaybe(t *testing.T) {
	keys := testkeys.Sequential("t", 0, 300)
	block := Build(keys, Options{BitsPerKey: 10})
	probe := testkeys.Absent(50, 1)
	for n := 0; n < len(block); n++ {
		cut := block[:n:n]
		for _, k := range append(probe, keys[:20]...) {
			if !MayContain(cut, k) {
				t.Fatalf("block cut to %d of %d bytes answered absent", n, len(block))
			}
		}
		if _, err := Decode(cut); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Decode of a block cut to %d bytes: %v", n, err)
		}
	}
	// Extra trailing bytes are as wrong as missing ones.
	if !MayContain(append(block[:len(block):len(block)], 0), probe[0]) {
		t.Fatal("block with a trailing byte answered absent")
	}
}

// TestEveryByteCorruption flips each byte of a valid block in turn. Decode
// must reject every one (the checksum covers all bytes), MayContain must
// never panic, and damage to the header (caught per lookup by the header
// check) must never turn a present key absent. Damage inside the offset
// table or buckets is Decode's to catch, and the host's block checksum's.
func TestEveryByteCorruption(t *testing.T) {
	keys := testkeys.Sequential("c", 0, 400)
	block := Build(keys, Options{BitsPerKey: 12})
	var hd header
	if readHeader(block, &hd) != headerOK {
		t.Fatal("valid block rejected")
	}
	for i := range block {
		for _, flip := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(block)
			bad[i] ^= flip
			if _, err := Decode(bad); err == nil {
				t.Fatalf("Decode accepted a block with byte %d flipped by %#x", i, flip)
			}
			for _, k := range keys {
				present := MayContain(bad, k)
				if !present && i < headerSize {
					t.Fatalf("flipping header/offset byte %d by %#x lost key %q", i, flip, k)
				}
			}
		}
	}
}

func TestUnknownVersionAnswersMaybe(t *testing.T) {
	keys := testkeys.Sequential("u", 0, 100)
	block := Build(keys, Options{})
	bad := bytes.Clone(block)
	bad[4] = FormatVersion + 1
	for _, k := range testkeys.Absent(1000, 2) {
		if !MayContain(bad, k) {
			t.Fatal("a block of an unknown version answered absent")
		}
	}
	if _, err := Decode(bad); !errors.Is(err, ErrVersion) {
		t.Fatalf("Decode of an unknown version: %v", err)
	}
}

func TestMayContainDoesNotAllocate(t *testing.T) {
	keys := testkeys.Random(10_000, 16, 4)
	block := Build(keys, Options{})
	probe := testkeys.Absent(100, 5)
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		MayContain(block, probe[i%len(probe)])
		i++
	}); a != 0 {
		t.Fatalf("MayContain allocates %.1f times per call", a)
	}
}

func TestUnalignedBlock(t *testing.T) {
	keys := testkeys.Random(5000, 16, 8)
	block := Build(keys, Options{})
	for shift := 1; shift < 8; shift++ {
		buf := make([]byte, len(block)+shift)
		moved := buf[shift:]
		copy(moved, block)
		for _, k := range keys {
			if !MayContain(moved, k) {
				t.Fatalf("shifted by %d: false negative", shift)
			}
		}
	}
}

// splitKeys turns fuzz bytes into keys: a 0x00 byte ends a key, so keys of
// any length, the empty key and repeats all occur.
func splitKeys(data []byte) [][]byte {
	return bytes.Split(data, []byte{0})
}

func FuzzBuildNoFalseNegatives(f *testing.F) {
	f.Add([]byte("a\x00b\x00c"), uint8(10), uint32(0))
	f.Add([]byte("\x00\x00\x00same\x00same\x00same"), uint8(5), uint32(3))
	f.Add(bytes.Repeat([]byte("k\x00"), 500), uint8(16), uint32(9))
	f.Add([]byte{}, uint8(0), uint32(0))
	f.Fuzz(func(t *testing.T, data []byte, bpk uint8, seed uint32) {
		keys := splitKeys(data)
		block := Build(keys, Options{BitsPerKey: float64(bpk%24) + 0.5, Seed: seed})
		if _, err := Decode(block); err != nil {
			t.Fatalf("fresh block does not decode: %v", err)
		}
		for _, k := range keys {
			if !MayContain(block, k) {
				t.Fatalf("false negative for %q", k)
			}
		}
	})
}

func FuzzMayContain(f *testing.F) {
	for _, c := range goldenCases() {
		f.Add(c.build(), []byte("user0000000007"))
	}
	f.Add([]byte("LSMC\x01\x0a\x00\x00"), []byte("x"))
	f.Fuzz(func(t *testing.T, block, key []byte) {
		// Any bytes at all: no panic, and agreement with Decode.
		got := MayContain(block, key)
		MayContainHash32(block, uint32(len(key)))
		flt, err := Decode(block)
		if err != nil {
			return
		}
		if flt.MayContain(key) != got {
			t.Fatalf("Decode'd filter and raw reader disagree on %q", key)
		}
		info := flt.Info()
		if info.Keys > 4*info.Buckets || info.FingerprintBits < minFPBits || info.FingerprintBits > maxFPBits {
			t.Fatalf("decoded nonsense: %+v", info)
		}
	})
}

func FuzzDecode(f *testing.F) {
	f.Add(Build(testkeys.Sequential("d", 0, 50), Options{}))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, block []byte) {
		flt, err := Decode(block)
		if err == nil {
			flt.MayContain(block)
			flt.MayContainHash32(7)
			_ = flt.Info()
		}
	})
}

// TestConcurrentReaders probes one block from many goroutines (run with
// -race): the reader keeps no state, so every present key must be found by
// every goroutine.
func TestConcurrentReaders(t *testing.T) {
	keys := testkeys.Random(20_000, 16, 61)
	block := Build(keys, Options{BitsPerKey: 10})
	flt, err := Decode(block)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := g; i < len(keys); i += 4 {
				if !MayContain(block, keys[i]) || !flt.MayContain(keys[i]) {
					t.Errorf("goroutine %d: false negative", g)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}
