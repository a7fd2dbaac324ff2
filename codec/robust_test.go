package codec

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/blockv1"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev2"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

var update = flag.Bool("update", false, "rewrite the golden blocks (only together with a format version bump)")

// goldenCases are small fixed key sets whose encoded bytes are frozen, per
// format version. Any change to hashing, sizing, placement or layout that
// alters them must bump the version (and keep the older blocks readable).
// Version-2 cases pin their seeds: by default every block draws its own.
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
		b.AddHash32(h)
	}
	return b.Finish(nil)
}

func goldenCases(version int) (cases []goldenCase) {
	h32 := make([]uint32, 300)
	for i := range h32 {
		h32[i] = uint32(i) * 2654435761
	}
	if version == 1 {
		v1 := func(o Options) Options { o.Version = 1; return o }
		return []goldenCase{
			{"empty", nil, v1(Options{}), nil},
			{"one-key", [][]byte{[]byte("lsmcuckoo")}, v1(Options{}), nil},
			{"seq100-bpk10", testkeys.Sequential("user", 0, 100), v1(Options{BitsPerKey: 10}), nil},
			{"seq1000-bpk16", testkeys.Sequential("k", 0, 1000), v1(Options{BitsPerKey: 16}), nil},
			{"seq700-fpr1pct-seed7", testkeys.Sequential("v", 0, 700), v1(Options{FalsePositiveRate: 0.01, Seed: 7}), nil},
			{"host32-300", nil, v1(Options{BitsPerKey: 10, Hash: HashHost32}), h32},
		}
	}
	// Versions 2 and 3 share their corpus: the same keys under the same
	// pinned seeds, in each version's format. Version 3's are its densest
	// plan (Options.Densest), what every version-3 block was before the
	// default plan came to keep second-line reads rare; the default's own
	// follow (a writer's choice of shape, which every reader reads).
	pin := func(o Options) Options { o.Version = version; o.Densest = version == 3; return o }
	if version == 4 {
		// Version 4 shares the corpus too, and adds a block with the
		// seeded-lines flag.
		o := Options{BitsPerKey: 10, Hash: HashHost32, Seed: 9, Version: 4}
		lines := uint64(v4PlanFor(o, 300).Lines)
		var crowded []uint32
		for i := uint32(0); len(crowded) < 300; i++ {
			h := i * 2654435761
			if linev4.Line(frame.Position(uint64(h), linev4.LineMultiplier), lines) == 0 {
				crowded = append(crowded, h)
			}
		}
		defer func() { cases = append(cases, goldenCase{"host32-crowded-seed9", nil, o, crowded}) }()
	}
	cases = []goldenCase{
		{"empty-seed1", nil, pin(Options{Seed: 1}), nil},
		{"one-key-seed1", [][]byte{[]byte("lsmcuckoo")}, pin(Options{Seed: 1}), nil},
		{"seq100-bpk10-seed2", testkeys.Sequential("user", 0, 100), pin(Options{BitsPerKey: 10, Seed: 2}), nil},
		{"seq1000-bpk16-seed3", testkeys.Sequential("k", 0, 1000), pin(Options{BitsPerKey: 16, Seed: 3}), nil},
		{"seq5000-bpk10-seed4", testkeys.Sequential("s", 0, 5000), pin(Options{BitsPerKey: 10, Seed: 4}), nil},
		{"seq700-fpr1pct-seed7", testkeys.Sequential("v", 0, 700), pin(Options{FalsePositiveRate: 0.01, Seed: 7}), nil},
		{"host32-300-seed5", nil, pin(Options{BitsPerKey: 10, Hash: HashHost32, Seed: 5}), h32},
		{"seq3000-bpk15-seed6", testkeys.Sequential("w", 0, 3000), pin(Options{BitsPerKey: 15, Seed: 6}), nil},
	}
	if version == 3 {
		// And a block with the seeded-lines flag: host hashes that all
		// fall in line 0 under the fixed line hash.
		o := Options{BitsPerKey: 10, Hash: HashHost32, Seed: 9, Version: 3, Densest: true}
		lines := uint64(linev3.PlanFor(sizingOf(&o), 300).Lines)
		var crowded []uint32
		for i := uint32(0); len(crowded) < 300; i++ {
			h := i * 2654435761
			if linev3.Line(frame.Position(uint64(h), linev3.LineMultiplier), lines) == 0 {
				crowded = append(crowded, h)
			}
		}
		cases = append(cases, goldenCase{"host32-crowded-seed9", nil, o, crowded})
		def := func(o Options) Options { o.Version = 3; return o }
		cases = append(cases,
			goldenCase{"default-seq1000-bpk16-seed3", testkeys.Sequential("k", 0, 1000), def(Options{BitsPerKey: 16, Seed: 3}), nil},
			goldenCase{"default-seq5000-bpk10-seed4", testkeys.Sequential("s", 0, 5000), def(Options{BitsPerKey: 10, Seed: 4}), nil},
			goldenCase{"default-seq3000-bpk12-seed6", testkeys.Sequential("w", 0, 3000), def(Options{BitsPerKey: 12, Seed: 6}), nil},
			goldenCase{"default-host32-300-seed5", nil, def(Options{BitsPerKey: 10, Hash: HashHost32, Seed: 5}), h32})
	}
	return cases
}

func TestGoldenBlocks(t *testing.T) {
	for _, v := range []int{1, 2, 3, 4} {
		testGoldenBlocks(t, v)
	}
}

func testGoldenBlocks(t *testing.T, version int) {
	dir := filepath.Join("..", "testdata", "codec", fmt.Sprintf("v%d", version))
	for _, c := range goldenCases(version) {
		got := c.build()
		path := filepath.Join(dir, c.name+".bin")
		if *update && (version == FormatVersion || version == NewestVersion) {
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
			t.Errorf("%s: encoding changed (%d bytes, golden %d). Changing the bytes of format v%d breaks every table on disk: bump the version and keep reading v%d.",
				c.name, len(got), len(want), version, version)
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
		if f.Info().Version != version || f.Info().Keys != len(c.keys)+len(c.h32) {
			t.Fatalf("%s: %d keys recorded", c.name, f.Info().Keys)
		}
		if strings.Contains(c.name, "crowded") != (f.Info().V3.SeededLines || f.Info().V4.SeededLines) {
			t.Fatalf("%s: seeded lines %v", c.name, f.Info().V3.SeededLines)
		}
	}
}

// Version 1 sorts each block's keys, so its bytes depend on the key set
// only. Version 2 places keys in arrival order (sorting would cost more than
// the placement) and draws a fresh seed per block: with a pinned seed the
// same keys in the same order encode to the same bytes.
func TestDeterministicAcrossInputOrder(t *testing.T) {
	keys := testkeys.Random(20_000, 16, 21)
	a := Build(keys, Options{BitsPerKey: 10, Version: 1})
	rev := make([][]byte, len(keys))
	for i, k := range keys {
		rev[len(keys)-1-i] = k
	}
	if b := Build(rev, Options{BitsPerKey: 10, Version: 1}); !bytes.Equal(a, b) {
		t.Fatal("v1: the same key set in another order encoded differently")
	}
	for _, v := range []int{2, 3} {
		if !bytes.Equal(Build(keys, Options{Seed: 9, Version: v}), Build(keys, Options{Seed: 9, Version: v})) {
			t.Fatalf("v%d: the same keys and seed encoded differently", v)
		}
		x, y := Build(keys, Options{Version: v}), Build(keys, Options{Version: v})
		if mustInfo(t, x).Seed == mustInfo(t, y).Seed {
			t.Fatalf("v%d: two blocks drew the same random seed", v)
		}
	}
}

// TestReseedKeepsEveryKey drives version 1's reseed path. An unpinned
// builder (Seed 0) retries under seeds from crypto/rand, which nobody can
// aim keys at in advance; a pinned one under Seed+1, Seed+2, ...
func TestReseedKeepsEveryKey(t *testing.T) {
	for _, c := range []struct {
		kind HashKind
		seed uint32
	}{{HashKey64, 0}, {HashHost32, 0}, {HashKey64, 40}, {HashHost32, 40}} {
		kind := c.kind
		keys := testkeys.Random(5000, 16, 31)
		b := NewBuilder(Options{BitsPerKey: 10, Hash: kind, Seed: c.seed, Version: 1})
		b.rejectSeeds = 2
		hashes := make([]uint32, len(keys))
		for i, k := range keys {
			hashes[i] = uint32(keyhash.Hash(k))
			if kind == HashHost32 {
				b.AddHash32(hashes[i])
			} else {
				b.Add(k)
			}
		}
		block := b.Finish(nil)
		if st := b.Stats(); st.Reseeds != 2 {
			t.Fatalf("kind %d: %d reseeds, want 2", kind, st.Reseeds)
		}
		f, err := Decode(block)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Info().Seed; got != b.Stats().Seed || c.seed != 0 && got != c.seed+2 || c.seed == 0 && got <= 2 {
			t.Fatalf("kind %d seed %d: seed %d recorded (stats %d) after two reseeds", kind, c.seed, got, b.Stats().Seed)
		}
		for i, h := range hashes {
			ok := MayContain(block, keys[i])
			if kind == HashHost32 {
				ok = MayContainHash32(block, h)
			}
			if !ok {
				t.Fatalf("kind %d: key lost across reseed", kind)
			}
		}
	}
}

// TestEveryTruncationAnswersMaybe cuts a valid block at every length: the
// reader must say "maybe" (never "absent", never panic) and Decode must
// report corruption.
func TestEveryTruncationAnswersMaybe(t *testing.T) {
	keys := testkeys.Sequential("t", 0, 300)
	for _, v := range []int{1, 2, 3} {
		block := Build(keys, Options{BitsPerKey: 10, Version: v})
		probe := testkeys.Absent(50, 1)
		for n := 0; n < len(block); n++ {
			cut := block[:n:n]
			for _, k := range append(probe, keys[:20]...) {
				if !MayContain(cut, k) {
					t.Fatalf("v%d: block cut to %d of %d bytes answered absent", v, n, len(block))
				}
			}
			if _, err := Decode(cut); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("v%d: Decode of a block cut to %d bytes: %v", v, n, err)
			}
		}
		// Extra bytes at either end are as wrong as missing ones.
		if !MayContain(append(block[:len(block):len(block)], 0), probe[0]) {
			t.Fatalf("v%d: block with a trailing byte answered absent", v)
		}
		if !MayContain(append([]byte{0}, block...), probe[0]) {
			t.Fatalf("v%d: block with a leading byte answered absent", v)
		}
	}
}

// TestEveryByteCorruption flips each byte of a valid block in turn. Decode
// must reject every one (the checksum covers all bytes), MayContain must
// never panic, and damage to the lookup-critical header (the v1 header,
// the v2 trailer, checked on every lookup) must never turn a present key
// absent. Damage inside the buckets is Decode's to catch, and the host's
// block checksum's.
func TestEveryByteCorruption(t *testing.T) {
	keys := testkeys.Sequential("c", 0, 400)
	for _, v := range []int{1, 2, 3} {
		block := Build(keys, Options{BitsPerKey: 12, Version: v, Seed: 3})
		critical := func(i int) bool { return i < blockv1.HeaderSize }
		if v >= 2 {
			critical = func(i int) bool { return i >= len(block)-frame.TrailerSize+4 && i < len(block)-4 }
		}
		for i := range block {
			for _, flip := range []byte{0x01, 0x80, 0xff} {
				bad := bytes.Clone(block)
				bad[i] ^= flip
				if _, err := Decode(bad); err == nil {
					t.Fatalf("v%d: Decode accepted a block with byte %d flipped by %#x", v, i, flip)
				}
				for _, k := range keys {
					if !MayContain(bad, k) && critical(i) {
						t.Fatalf("v%d: flipping header byte %d by %#x lost key %q", v, i, flip, k)
					}
				}
			}
		}
	}
}

// TestEveryHeaderBitFlip flips every bit of the v2 trailer alone: the
// flip must always answer "maybe" for every key, never read as a valid
// trailer, and Decode must reject it. (TestV3EveryTrailerBitFlip is its
// version-3 twin.)
func TestEveryHeaderBitFlip(t *testing.T) {
	keys := testkeys.Random(3000, 16, 12)
	block := Build(keys, Options{BitsPerKey: 10, Seed: 77, Version: 2})
	n := len(block)
	for bit := 0; bit < 8*(frame.TrailerSize-4); bit++ {
		bad := bytes.Clone(block)
		bad[n-frame.TrailerSize+bit/8] ^= 1 << (bit % 8)
		var h linev2.Header
		id := bit/8 >= 4 // the keys field is checked by Decode only
		if id && linev2.Read(bad, &h) {
			t.Fatalf("trailer bit %d flipped alone still reads as a valid trailer", bit)
		}
		for _, k := range keys {
			if !MayContain(bad, k) {
				t.Fatalf("trailer bit %d flipped: key %q lost", bit, k)
			}
		}
		if _, err := Decode(bad); err == nil {
			t.Fatalf("trailer bit %d flipped: Decode accepted it", bit)
		}
	}
}

func TestUnknownVersionAnswersMaybe(t *testing.T) {
	keys := testkeys.Sequential("u", 0, 100)
	for _, v := range []int{1, 2, 3} {
		block := Build(keys, Options{Version: v})
		bad := bytes.Clone(block)
		if v == 1 {
			bad[4] = NewestVersion + 1
		} else {
			// A consistent trailer of a future version.
			n := len(bad)
			bad[n-32] = NewestVersion + 1
			bad[n-16] = ^bad[n-32]
		}
		for _, k := range testkeys.Absent(1000, 2) {
			if !MayContain(bad, k) {
				t.Fatalf("v%d: a block of an unknown version answered absent", v)
			}
		}
		if _, err := Decode(bad); !errors.Is(err, ErrVersion) {
			t.Fatalf("v%d: Decode of an unknown version: %v", v, err)
		}
	}
}

func TestMayContainDoesNotAllocate(t *testing.T) {
	keys := testkeys.Random(10_000, 16, 4)
	probe := append(testkeys.Absent(100, 5), keys[:100]...)
	for _, v := range []int{1, 2, 3, 4} {
		block := Build(keys, Options{Version: v})
		i := 0
		if a := testing.AllocsPerRun(1000, func() {
			MayContain(block, probe[i%len(probe)])
			MayContainHash32(block, uint32(i))
			i++
		}); a != 0 {
			t.Fatalf("v%d: MayContain allocates %.1f times per call", v, a)
		}
	}
}

func TestUnalignedBlock(t *testing.T) {
	keys := testkeys.Random(5000, 16, 8)
	absent := testkeys.Absent(2000, 9)
	for _, v := range []int{2, 3, 4} {
		block := Build(keys, Options{Version: v})
		for shift := 1; shift < 64; shift++ {
			buf := make([]byte, len(block)+shift)
			moved := buf[shift:]
			copy(moved, block)
			for _, k := range keys {
				if !MayContain(moved, k) {
					t.Fatalf("v%d shifted by %d: false negative", v, shift)
				}
			}
			for _, k := range absent {
				if MayContain(moved, k) != MayContain(block, k) {
					t.Fatalf("v%d shifted by %d: an absent key answers differently", v, shift)
				}
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
	// bpk's top two bits choose the version (1, 2, 3, 1).
	f.Add(bytes.Repeat([]byte("k\x00"), 500), uint8(64+10), uint32(9))
	f.Add([]byte("\x00\x00\x00same\x00same\x00same"), uint8(128+5), uint32(3))
	f.Add(bytes.Repeat([]byte("key\x00yek\x00"), 400), uint8(128+16), uint32(0))
	f.Fuzz(func(t *testing.T, data []byte, bpk uint8, seed uint32) {
		keys := splitKeys(data)
		block := Build(keys, Options{BitsPerKey: float64(bpk%24) + 0.5, Seed: seed, Version: 1 + int(bpk>>6)%3})
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
	for _, v := range []int{1, 2, 3, 4} {
		for _, c := range goldenCases(v) {
			f.Add(c.build(), []byte("user0000000007"))
		}
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
		switch {
		case info.AlwaysMaybe:
			if info.Keys != 0 || info.V2.Lines+info.V3.Lines != 0 || len(block) != frame.TrailerSize {
				t.Fatalf("decoded nonsense: %+v", info)
			}
		case info.Version == 4:
			s := linev4.Shape{R: uint32(info.V4.Columns), M: uint32(info.V4.Height), U: uint32(info.V4.ExtraShare)}
			if !s.Valid() || info.V4.Lines < 1 || len(block) != info.V4.Lines*frame.LineBytes+frame.TrailerSize {
				t.Fatalf("decoded nonsense: %+v", info)
			}
		case info.Version == 3:
			s := linev3.Shape{R: uint32(info.V3.RemainderBits), K: uint32(info.V3.LineCapacity), Q: uint32(info.V3.Quotients)}
			if !s.Valid() || info.V3.Lines < 1 || info.Keys > info.V3.Lines*info.V3.LineCapacity || len(block) != info.V3.Lines*frame.LineBytes+frame.TrailerSize {
				t.Fatalf("decoded nonsense: %+v", info)
			}
		default:
			if f := info.V1.FingerprintBits + info.V2.FingerprintBits; info.Keys > 4*(info.V1.Buckets+info.V2.Buckets) || f < bucket.MinFPBits || f > bucket.MaxFPBits {
				t.Fatalf("decoded nonsense: %+v", info)
			}
		}
	})
}

func FuzzDecode(f *testing.F) {
	f.Add(Build(testkeys.Sequential("d", 0, 50), Options{Version: 1}))
	for _, v := range []int{2, 3, 4} {
		f.Add(Build(testkeys.Sequential("d", 0, 50), Options{Seed: 1, Version: v}))
		f.Add(Build(testkeys.Sequential("d", 0, 5000), Options{Seed: 2, BitsPerKey: 16, Version: v}))
		f.Add(Build(testkeys.Sequential("d", 0, 3000), Options{Seed: 3, BitsPerKey: 6, Version: v}))
	}
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, block []byte) {
		flt, err := Decode(block)
		if err == nil {
			flt.MayContain(block)
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

// FuzzV2TrailerDamage damages a valid version-2 block's trailer at two
// fuzzer-chosen places. Unless the damage leaves the id bytes and their
// inverted copy consistent (which no single fault does), every present key
// must still answer "maybe"; in every case the reader must not panic and
// Decode must reject the block.
func FuzzV2TrailerDamage(f *testing.F) {
	keys := testkeys.Random(2000, 16, 5)
	block := Build(keys, Options{BitsPerKey: 10, Seed: 8, Version: 2})
	f.Add(uint8(12), uint8(1), uint8(28), uint8(1))
	f.Add(uint8(16), uint8(0x80), uint8(0), uint8(0))
	f.Add(uint8(4), uint8(0xff), uint8(20), uint8(0xff))
	f.Fuzz(func(t *testing.T, at1, x1, at2, x2 uint8) {
		bad := bytes.Clone(block)
		n := len(bad)
		bad[n-frame.TrailerSize+int(at1)%frame.TrailerSize] ^= x1
		bad[n-frame.TrailerSize+int(at2)%frame.TrailerSize] ^= x2
		if bytes.Equal(bad, block) {
			return
		}
		consistent := true
		for i := 0; i < 16; i++ {
			if bad[n-36+i] != ^bad[n-20+i] {
				consistent = false
			}
		}
		idChanged := !bytes.Equal(bad[n-36:n-20], block[n-36:n-20])
		for _, k := range keys {
			if !MayContain(bad, k) && !(consistent && idChanged) {
				t.Fatalf("trailer damaged at %d^%#x, %d^%#x: key lost", at1, x1, at2, x2)
			}
		}
		if _, err := Decode(bad); err == nil {
			t.Fatal("Decode accepted a damaged trailer")
		}
	})
}

// TestSmallBlockEveryHeaderBit flips every bit of the lookup-critical
// header of small blocks, one at a time: the version-1 header and the
// version-2 trailer, of blocks of 1, 5 and 100 keys, of both hash kinds,
// and of the always-maybe block. A lookup must never answer "absent" for a
// key added to the undamaged block, and Decode must reject every flip.
func TestSmallBlockEveryHeaderBit(t *testing.T) {
	type built struct {
		name   string
		block  []byte
		hashes []uint64
		kind   HashKind
	}
	var cases []built
	for _, n := range []int{1, 5, 100} {
		for _, kind := range []HashKind{HashKey64, HashHost32} {
			for _, v := range []int{1, 2, 3} {
				b := NewBuilder(Options{Version: v, Hash: kind, BitsPerKey: 12})
				var hs []uint64
				for i := range n {
					h := uint64(i)*0x9e3779b97f4a7c15 + 1
					if kind == HashHost32 {
						h = uint64(uint32(h))
					}
					hs = append(hs, h)
					b.addHash(h)
				}
				cases = append(cases, built{fmt.Sprintf("v%d kind %d n=%d", v, kind, n), b.Finish(nil), hs, kind})
			}
		}
	}
	for _, v := range []int{2, 3} {
		b := NewBuilder(Options{Version: v})
		b.rejectSeeds = frame.Attempts
		b.addHash(7)
		cases = append(cases, built{fmt.Sprintf("v%d always-maybe", v), b.Finish(nil), []uint64{7}, HashKey64})
	}

	for _, c := range cases {
		for _, h := range c.hashes {
			if !mayContainHash(c.block, h, c.kind) {
				t.Fatalf("%s: undamaged block misses a key", c.name)
			}
		}
		lo, hi := 0, blockv1.HeaderSize // version 1: the header
		var h linev2.Header
		var h3 linev3.Header
		if linev2.Read(c.block, &h) || linev3.Read(c.block, &h3) {
			lo, hi = len(c.block)-frame.TrailerSize+4, len(c.block)-4 // versions 2 and 3: the trailer's two id copies
		}
		for bit := 8 * lo; bit < 8*hi; bit++ {
			bad := bytes.Clone(c.block)
			bad[bit/8] ^= 1 << (bit % 8)
			for _, h := range c.hashes {
				if !mayContainHash(bad, h, c.kind) {
					t.Fatalf("%s: header bit %d flipped: a key answers absent", c.name, bit)
				}
			}
			if _, err := Decode(bad); err == nil {
				t.Fatalf("%s: header bit %d flipped: Decode accepted it", c.name, bit)
			}
		}
	}
}

// TestHugeBudgetBounded: a budget is a configuration value, and one far
// past anything useful (a mistyped 1e6, an int meant as bytes passed to
// badgerfilter.New) must not turn into unbounded memory: past
// 16-bit fingerprints at the lowest load the builder plans (bucket.MinLoad),
// further bits buy nothing, and the block stops growing there. Before the
// cap, version 2 spent whatever it was given (1e5 bits/key for 1000 keys,
// 12 MB), and at 1e12 it converted an out-of-range line count to uint32
// and allocated without bound (over 10 GB for 1000 keys when stopped).
// NaN, negative and infinite budgets take the default or the cap.
func TestHugeBudgetBounded(t *testing.T) {
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key%06d", i)
	}
	// The most a block can usefully spend, per key: version 2's widest
	// lines at bucket.MinLoad, and a 5% allowance (and the trailer) for a small
	// filter; version 1 is smaller still.
	most := float64(frame.LineBits)/(linev2.LineSlots(bucket.MaxFPBits)*bucket.MinLoad)*1.05 + float64(8*frame.TrailerSize)/float64(len(keys))
	check := func(budgets []float64) {
		for _, bpk := range budgets {
			for _, v := range []int{1, 2, 3} {
				block := Build(keys, Options{BitsPerKey: bpk, Version: v})
				bits := float64(8*len(block)) / float64(len(keys))
				if bits > most || math.IsNaN(bits) {
					t.Errorf("v%d budget %v: %.1f bits/key, more than the %.1f any budget can use", v, bpk, bits, most)
				}
				for _, k := range keys {
					if !MayContain(block, k) {
						t.Fatalf("v%d budget %v: false negative", v, bpk)
					}
				}
			}
		}
	}
	check([]float64{100, 1e3, 1e5, math.NaN(), -1, math.Inf(1), math.Inf(-1)})
	// What Options.BitsPerKey documents: NaN or a budget of 0 or less
	// means DefaultBitsPerKey, in both versions. (Version 1 used to plan
	// NaN as its smallest filter, about 4 bits per key.)
	for _, v := range []int{1, 2, 3} {
		def := len(Build(keys, Options{Version: v, Seed: 3}))
		for _, bpk := range []float64{math.NaN(), 0, -1, math.Inf(-1)} {
			if got := len(Build(keys, Options{BitsPerKey: bpk, Version: v, Seed: 3})); got != def {
				t.Errorf("v%d budget %v: %d bytes, the default budget's block is %d", v, bpk, got, def)
			}
		}
	}
	if t.Failed() {
		return // the budgets below would exhaust memory
	}
	check([]float64{1e12, 1e300, math.MaxFloat64})
}

// FuzzBuildOptions builds from fuzzer-chosen Options, any float values
// included (NaN, infinities, negative, huge budgets and targets, forced
// widths out of range, any version and seed): no panic, a block that
// decodes, no key lost, and no block larger than the lowest-rate filter
// any setting can ask for (16-bit fingerprints at bucket.MinLoad, about 80 bits
// per key, plus a header or trailer and a line of rounding).
func FuzzBuildOptions(f *testing.F) {
	f.Add([]byte("a\x00b\x00c"), 10.0, 0.0, int8(0), uint8(2), uint32(0))
	f.Add([]byte("a\x00b\x00c\x00d\x00e"), math.NaN(), 0.0, int8(0), uint8(1), uint32(0))
	f.Add(bytes.Repeat([]byte("k\x00"), 300), 1e12, 0.0, int8(0), uint8(2), uint32(5))
	f.Add(bytes.Repeat([]byte("x\x00y"), 200), 0.0, 1e-300, int8(0), uint8(2), uint32(0))
	f.Add([]byte("only"), 0.0, 0.5, int8(16), uint8(1), uint32(9))
	f.Add([]byte("p\x00q"), math.Inf(1), math.NaN(), int8(-7), uint8(7), uint32(0))
	// Version 3 (version%4 == 3): a low budget, a forced remainder width,
	// and a target.
	f.Add(bytes.Repeat([]byte("q\x00"), 400), 3.0, 0.0, int8(0), uint8(3), uint32(11))
	f.Add(bytes.Repeat([]byte("ab\x00ba\x00"), 300), 0.0, 0.0, int8(9), uint8(3), uint32(12))
	f.Add(bytes.Repeat([]byte("z\x00"), 100), 0.0, 0.02, int8(0), uint8(3), uint32(0))
	// Version 3's densest layout (bit 2 of version).
	f.Add(bytes.Repeat([]byte("d\x00e"), 500), 10.0, 0.0, int8(0), uint8(7), uint32(13))
	f.Fuzz(func(t *testing.T, data []byte, bpk, fpr float64, fbits int8, version uint8, seed uint32) {
		keys := bytes.Split(data, []byte{0})
		o := Options{BitsPerKey: bpk, FalsePositiveRate: fpr, FingerprintBits: int(fbits), Version: int(version % 4), Seed: seed, Densest: version&4 != 0}
		block := Build(keys, o)
		if _, err := Decode(block); err != nil {
			t.Fatalf("%+v: fresh block does not decode: %v", o, err)
		}
		for _, k := range keys {
			if !MayContain(block, k) {
				t.Fatalf("%+v: false negative for %q", o, k)
			}
		}
		distinct := map[string]bool{}
		for _, k := range keys {
			distinct[string(k)] = true
		}
		n := float64(len(distinct))
		most := float64(frame.LineBits)/(linev2.LineSlots(bucket.MaxFPBits)*bucket.MinLoad)*n/8 + 2*frame.LineBytes + frame.TrailerSize + blockv1.HeaderSize
		if float64(len(block)) > most*1.05 {
			t.Fatalf("%+v: %d bytes for %d distinct keys, more than the %.0f any setting needs", o, len(block), len(distinct), most)
		}
	})
}
