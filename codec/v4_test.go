package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev4"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// Version 4 against every key shape, size and adversary the version-3
// tests use. The attacker picks key hashes directly: a key's primary line
// comes from the fixed line hash (anyone can aim keys at a line), and
// everything else from the seeded position hash (which a pinned seed
// gives away). Whatever happens, no key may be lost.

// buildExactV4 builds a version-4 block at any budget, even one at which
// the builder writes version 3's densest layout instead.
func buildExactV4(keys [][]byte, o Options) ([]byte, BuildStats) {
	return buildV4(o, func(b *Builder) {
		for _, k := range keys {
			b.Add(k)
		}
	})
}

// buildHashesV4 is buildHashes for an exact version-4 build.
func buildHashesV4(o Options, hashes []uint64) ([]byte, BuildStats) {
	return buildV4(o, func(b *Builder) {
		for _, h := range hashes {
			b.addHash(h)
		}
	})
}

// buildV4 builds an exact version-4 block of what add adds.
func buildV4(o Options, add func(b *Builder)) ([]byte, BuildStats) {
	o.Version = NewestVersion
	b := NewBuilder(o)
	b.exactVersion = true
	add(b)
	block := b.Finish(nil)
	return block, b.Stats()
}

// mustHoldHashesV4 checks that block is a version-4 block that decodes
// and answers "maybe" for every hash, through the package's lookup and
// FORMAT.md's reader.
func mustHoldHashesV4(t *testing.T, name string, block []byte, hashes []uint64, kind HashKind) Info {
	t.Helper()
	f, err := Decode(block)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if f.Info().Version != 4 {
		t.Fatalf("%s: version %d block", name, f.Info().Version)
	}
	spec := newSpecV4(t, block)
	for _, h := range hashes {
		if maybe, ok := linev4.Lookup(block, h, uint8(kind)); !ok || !maybe {
			t.Fatalf("%s: false negative for hash %#x (v4 %v)", name, h, ok)
		}
		if !spec.contains(h) {
			t.Fatalf("%s: FORMAT.md's reader misses hash %#x", name, h)
		}
	}
	return f.Info()
}

// v4PlanFor is the plan of a version-4 filter of n keys under o.
func v4PlanFor(o Options, n int) linev4.Plan {
	p, _ := linev4.PlanFor(sizingOf(&o), n)
	return p
}

func TestV4NoFalseNegatives(t *testing.T) {
	testV4NoFalseNegatives(t, []int{0, 1, 2, 3, 10, 57, 63, 64, 100, 1000})
}

// TestV4NoFalseNegativesLarge is TestV4NoFalseNegatives at 10k and 100k
// keys, where it also holds each rate to its model.
func TestV4NoFalseNegativesLarge(t *testing.T) {
	race.SkipLong(t)
	testV4NoFalseNegatives(t, []int{10_000, 100_000})
}

func testV4NoFalseNegatives(t *testing.T, sizes []int) {
	absent := testkeys.Absent(100_000, 5)
	for _, n := range sizes {
		for _, bpk := range []float64{4, 8, 9.5, 10, 12, 14.26, 16, 19.67, 30, 48} {
			keys := testkeys.Random(n, 16, uint64(n)+7)
			block, st := buildExactV4(keys, Options{BitsPerKey: bpk, Seed: 99})
			name := fmt.Sprintf("n=%d bpk=%v", n, bpk)
			mustNotMiss(t, name, block, keys)
			info := mustInfo(t, block)
			if info.Version != 4 || info.Keys != n || st.Fallback {
				t.Fatalf("%s: info %+v stats %+v", name, info, st)
			}
			if n >= 10_000 && bpk >= 9.5 && bpk <= 30 {
				fp := 0
				for _, k := range absent {
					if MayContain(block, k) {
						fp++
					}
				}
				rate := float64(fp) / float64(len(absent))
				t.Logf("%s: %.2f bits/key FPR %.4f%% (modelled %.4f%%) %+v", name, info.BitsPerKey, 100*rate, 100*info.ExpectedFPR, st.V4)
				if rate > 2*info.ExpectedFPR+3e-5 {
					t.Errorf("%s: FPR %.5f, twice the model's %.5f", name, rate, info.ExpectedFPR)
				}
			}
		}
	}
}

// TestV4NoFalseNegativesMillion builds a million keys at three budgets.
func TestV4NoFalseNegativesMillion(t *testing.T) {
	race.SkipLong(t)
	keys := testkeys.Random(1_000_000, 16, 77)
	for _, bpk := range []float64{9.5, 12, 16} {
		block, st := buildExactV4(keys, Options{BitsPerKey: bpk})
		mustNotMiss(t, fmt.Sprintf("1M bpk=%v", bpk), block, keys)
		if st.Version != 4 || st.Keys != len(keys) {
			t.Fatalf("bpk %v: %+v", bpk, st)
		}
	}
}

func TestV4KeyShapes(t *testing.T) {
	testV4KeyShapes(t, []int{1, 2, 3, 7, 100, 1000})
}

// TestV4KeyShapesLarge is TestV4KeyShapes at 10k keys.
func TestV4KeyShapesLarge(t *testing.T) {
	race.SkipLong(t)
	testV4KeyShapes(t, []int{10_000})
}

func testV4KeyShapes(t *testing.T, sizes []int) {
	for _, n := range sizes {
		for _, set := range testkeys.Shapes(n) {
			for _, o := range []Options{{BitsPerKey: 9.6}, {BitsPerKey: 12}, {BitsPerKey: 16}, {FalsePositiveRate: 0.001}, {FingerprintBits: 9}} {
				name := fmt.Sprintf("n=%d/%s/%+v", n, set.Name, o)
				block, _ := buildExactV4(set.Keys, o)
				mustNotMiss(t, name, block, set.Keys)
				if info := mustInfo(t, block); info.Keys != set.Distinct || info.Version != 4 {
					t.Fatalf("%s: %d distinct keys recorded (version %d), want %d", name, info.Keys, info.Version, set.Distinct)
				}
			}
		}
	}
}

// TestV4VersionChoice: Options.Version 4 writes version 4 where its
// modelled rate is lower than version 3's densest plan's (from about 4.2
// bits per key up), and version 2 where it is not; every block holds its
// keys.
func TestV4VersionChoice(t *testing.T) {
	keys := testkeys.Random(5_000, 16, 3)
	for _, c := range []struct {
		bpk  float64
		want int
	}{{4, 2}, {5, 4}, {7, 4}, {8, 4}, {9.5, 4}, {10, 4}, {12, 4}, {16, 4}, {19.67, 4}, {40, 4}} {
		b := NewBuilder(Options{BitsPerKey: c.bpk, Version: NewestVersion})
		for _, k := range keys {
			b.Add(k)
		}
		block := b.Finish(nil)
		mustNotMiss(t, fmt.Sprint(c.bpk), block, keys)
		if v := mustInfo(t, block).Version; v != c.want {
			t.Errorf("Version 4 at %v bits/key wrote version %d, want %d", c.bpk, v, c.want)
		}
		p := PlannedFPR(Options{BitsPerKey: c.bpk, Version: NewestVersion}, len(keys))
		// (A third attempt grows the lines, and the rate with them.)
		if c.want == 4 && b.Stats().Reseeds < 2 && p != mustInfo(t, block).ExpectedFPR {
			t.Errorf("%v bits/key: PlannedFPR %v, the block's %v", c.bpk, p, mustInfo(t, block).ExpectedFPR)
		}
	}
}

// TestV4AdversarialOneLine aims every key at line 0 under the fixed line
// hash: far more keys overflow than random ones send, so the builder must
// take seeded lines, stay within the size cap, and hold every key.
func TestV4AdversarialOneLine(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1000, 20_000} {
		for _, bpk := range []float64{10, 16} {
			o := Options{BitsPerKey: bpk, Seed: 0x5eed}
			p := v4PlanFor(o, n)
			hashes := craftV3(t, n, inFixedLines(r, p.Lines, 1), func(uint64) bool { return true })
			name := fmt.Sprintf("n=%d bpk=%v", n, bpk)
			block, st := buildHashesV4(o, hashes)
			info := mustHoldHashesV4(t, name, block, hashes, HashKey64)
			if !info.V4.SeededLines || !st.V4.SeededLines || st.Fallback {
				t.Fatalf("%s: lines crowded under the fixed hash, yet %+v", name, st)
			}
			if float64(len(block)) > frame.SizeCap(p.Lines)*frame.LineBytes+frame.TrailerSize {
				t.Errorf("%s: %d bytes, past the size cap of a %d-line plan", name, len(block), p.Lines)
			}
		}
	}
}

// TestV4AdversarialPinnedSeedFallsBack: keys aimed, under every attempt's
// seed and line count, at line 0 as primary and as secondary line. No
// line holds them all: every attempt must fail and the builder write the
// always-maybe block; under a random seed the same keys build.
func TestV4AdversarialPinnedSeedFallsBack(t *testing.T) {
	const seed, n = 0x1234, 100
	o := Options{BitsPerKey: 10, Seed: seed}
	p := v4PlanFor(o, n)
	seeds := []uint32{seed}
	for a := 0; a+1 < frame.Attempts; a++ {
		seeds = append(seeds, uint32(keyhash.Mix(uint64(seeds[a]), uint32(a+1)))|1)
	}
	r := rand.New(rand.NewPCG(41, 42))
	hashes := craftV3(t, n, inFixedLines(r, p.Lines, 1), func(h uint64) bool {
		for a, s := range seeds {
			L := uint64(frame.AttemptLines(p.Lines, a))
			x := frame.Position(h, frame.Multiplier(s))
			z := frame.Position(h, linev4.LineMultiplier)
			if a >= 2 {
				z = x
			}
			if linev4.Line(z, L) != 0 || linev4.Line(linev4.Secondary(x), L) != 0 {
				return false
			}
		}
		return true
	})
	block, st := buildHashesV4(o, hashes)
	if !st.Fallback || len(block) != frame.TrailerSize || st.Reseeds != frame.Attempts {
		t.Fatalf("keys aimed at every attempt: stats %+v, %d bytes", st, len(block))
	}
	if info := mustHoldHashesV4(t, "pinned seed", block, hashes, HashKey64); !info.AlwaysMaybe {
		t.Fatalf("info %+v", info)
	}
	block, st = buildHashesV4(Options{BitsPerKey: 10}, hashes)
	mustHoldHashesV4(t, "random seed", block, hashes, HashKey64)
	if st.Fallback {
		t.Fatalf("random seed: %+v", st)
	}
}

// TestV4NeighboursShareSecondaries aims the keys of a few neighbouring
// lines (fixed hash) at the same secondary lines under the pinned seed:
// the secondary lines fill with keys they must hold, evict their own, and
// every key stays.
func TestV4NeighboursShareSecondaries(t *testing.T) {
	const seed = 0x99
	r := rand.New(rand.NewPCG(13, 14))
	o := Options{BitsPerKey: 10, Seed: seed}
	n := 5000
	p := v4PlanFor(o, n)
	random := make([]uint64, 0, n)
	for range n - 400 {
		random = append(random, r.Uint64())
	}
	aimed := craftV3(t, 400, inFixedLines(r, p.Lines, 4), func(h uint64) bool {
		x := frame.Position(h, frame.Multiplier(seed))
		return linev4.Line(linev4.Secondary(x), uint64(p.Lines)) < 4
	})
	hashes := append(random, aimed...)
	block, st := buildHashesV4(o, hashes)
	mustHoldHashesV4(t, "neighbours", block, hashes, HashKey64)
	t.Logf("stats %+v", st)
}

// TestV4TinyTables builds 0 to 3 keys, and a one-line filter's worth of
// keys all in that line, at every kind of setting: each block decodes as
// version 4, stores exactly its keys and holds every one. An empty
// filter's line is all zeros, which an absent key solves when its
// fingerprint's checked bits are zero: it answers "maybe" at the rate of
// its columns, 2^-r, and no more.
func TestV4TinyTables(t *testing.T) {
	settings := []Options{{}, {BitsPerKey: 1}, {BitsPerKey: 4}, {BitsPerKey: 10}, {BitsPerKey: 48}, {BitsPerKey: 1e6},
		{FalsePositiveRate: 0.5}, {FalsePositiveRate: 1e-9}, {FingerprintBits: 5}, {FingerprintBits: 16}, {Hash: HashHost32}}
	r := rand.New(rand.NewPCG(27, 28))
	absent := testkeys.Absent(1000, 29)
	for _, o := range settings {
		o.Seed = 31
		for _, n := range []int{0, 1, 2, 3, 40, 61} {
			hashes := make([]uint64, n)
			for i := range hashes {
				hashes[i] = r.Uint64()
				if o.Hash == HashHost32 {
					hashes[i] = uint64(uint32(hashes[i]))
				}
			}
			name := fmt.Sprintf("%+v n=%d", o, n)
			block, st := buildHashesV4(o, hashes)
			info := mustHoldHashesV4(t, name, block, hashes, o.Hash)
			if info.Keys != n || st.Fallback || info.V4.Lines < 1 {
				t.Fatalf("%s: %+v", name, info)
			}
			if n == 0 && o.Hash == HashKey64 {
				fp := 0
				for _, k := range absent {
					if MayContain(block, k) {
						fp++
					}
				}
				if limit := 2*float64(len(absent))/float64(uint64(1)<<info.V4.Columns) + 3; float64(fp) > limit {
					t.Fatalf("%s: an empty filter of %d columns answered maybe for %d of %d keys", name, info.V4.Columns, fp, len(absent))
				}
			}
		}
	}
}

// TestV4FallbackAnswersMaybe drives every attempt to fail: the block is
// version 4's 40-byte always-maybe block, which decodes, says so, and
// answers "maybe" for every key.
func TestV4FallbackAnswersMaybe(t *testing.T) {
	keys := testkeys.Random(5000, 16, 41)
	for _, kind := range []HashKind{HashKey64, HashHost32} {
		b := NewBuilder(Options{BitsPerKey: 10, Seed: 3, Version: NewestVersion, Hash: kind})
		b.rejectSeeds = frame.Attempts
		for _, k := range keys {
			if kind == HashHost32 {
				b.AddHash32(uint32(keyhash.MulHash(k)))
			} else {
				b.Add(k)
			}
		}
		block := b.Finish(nil)
		if st := b.Stats(); !st.Fallback || st.Reseeds != frame.Attempts || st.Bytes != frame.TrailerSize || st.Version != 4 {
			t.Fatalf("kind %d: stats %+v, want a fallback after %d attempts", kind, st, frame.Attempts)
		}
		f, err := Decode(block)
		if err != nil {
			t.Fatal(err)
		}
		if info := f.Info(); !info.AlwaysMaybe || info.Version != 4 || info.Hash != kind || info.Keys != 0 {
			t.Fatalf("kind %d: info %+v", kind, info)
		}
		for _, k := range append(slices.Clone(keys[:100]), testkeys.Absent(1000, 1)...) {
			if !MayContain(block, k) || !f.MayContain(k) || !MayContainHash32(block, uint32(keyhash.MulHash(k))) {
				t.Fatalf("kind %d: an always-maybe block answered absent", kind)
			}
		}
		n := len(block)
		want := []byte{'L', 'S', 'M', 'C', 4, byte(linev4.FlagAlwaysMaybe | int(kind)<<linev4.KindShift), 0, 0, 0, 0, 0, 0}
		if !bytes.Equal(block[n-36:n-24], want) {
			t.Fatalf("kind %d: always-maybe trailer % x", kind, block)
		}
	}
}

// TestV4ReseedKeepsEveryKey makes the first two attempts fail: the third
// takes seeded lines in more lines, holds every key, and is reproducible.
func TestV4ReseedKeepsEveryKey(t *testing.T) {
	keys := testkeys.Random(5000, 16, 31)
	build := func() ([]byte, BuildStats) {
		b := NewBuilder(Options{BitsPerKey: 10, Seed: 11, Version: NewestVersion})
		b.rejectSeeds = 2
		for _, k := range keys {
			b.Add(k)
		}
		return b.Finish(nil), b.Stats()
	}
	block, st := build()
	again, _ := build()
	if st.Reseeds != 2 || st.Seed == 11 || !bytes.Equal(block, again) {
		t.Fatalf("stats %+v", st)
	}
	mustNotMiss(t, "reseeded", block, keys)
	info := mustInfo(t, block)
	if !info.V4.SeededLines || info.Seed != st.Seed || info.Version != 4 {
		t.Fatalf("info %+v, stats %+v", info, st)
	}
	planned := v4PlanFor(Options{BitsPerKey: 10}, len(keys)).Lines
	if info.V4.Lines != int(frame.AttemptLines(planned, 2)) {
		t.Fatalf("third attempt used %d lines, plan %d", info.V4.Lines, planned)
	}
}

// TestV4AdversarialOwnSecondary aims keys, under the pinned seed, at line
// 0 as both their primary line (fixed hash) and their secondary line,
// among random keys: far more than a line holds, with no other line to go
// to under this seed. The build must move on (fresh seeds, seeded lines,
// more lines) and hold every key, within the size cap, or answer "maybe".
func TestV4AdversarialOwnSecondary(t *testing.T) {
	const seed = 0x77
	r := rand.New(rand.NewPCG(15, 16))
	for _, aimedN := range []int{60, 300} {
		o := Options{BitsPerKey: 10, Seed: seed}
		n := 5000
		p := v4PlanFor(o, n)
		hashes := make([]uint64, 0, n)
		for range n - aimedN {
			hashes = append(hashes, r.Uint64())
		}
		hashes = append(hashes, craftV3(t, aimedN, inFixedLines(r, p.Lines, 1), func(h uint64) bool {
			x := frame.Position(h, frame.Multiplier(seed))
			return linev4.Line(linev4.Secondary(x), uint64(p.Lines)) == 0
		})...)
		name := fmt.Sprintf("%d aimed", aimedN)
		block, st := buildHashesV4(o, hashes)
		mustHoldHashesV4(t, name, block, hashes, HashKey64)
		if !st.Fallback && float64(len(block)) > frame.SizeCap(p.Lines)*frame.LineBytes+frame.TrailerSize {
			t.Errorf("%s: %d bytes, past the size cap of a %d-line plan", name, len(block), p.Lines)
		}
		if st.Reseeds > frame.Attempts {
			t.Errorf("%s: %d reseeds", name, st.Reseeds)
		}
	}
}

// FuzzV4BuildCraftedHashes builds version-4 blocks from key hashes the
// fuzzer shapes directly: each 8 bytes of data is a fixed line hash (mode
// bit 0 clear: the fuzzer picks the keys' primary lines, as anyone can) or
// a seeded position hash under the pinned seed (set: it picks secondary
// lines, priorities, share bytes and fingerprint bits too, as one who knows
// the seed can), inverted to the key hash. Repeats and equal hashes come
// for free. Whatever the hashes: the block decodes, holds every key
// (through the lookup and FORMAT.md's reader), and is within the size cap
// of its plan or the always-maybe block.
func FuzzV4BuildCraftedHashes(f *testing.F) {
	f.Add([]byte{0, 10}, bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 64))
	f.Add([]byte{1, 12}, bytes.Repeat([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2}, 100))
	f.Add([]byte{0, 16}, make([]byte, 8*300))
	f.Add([]byte{1, 30}, []byte("0123456789abcdef0123456789abcdefzzzzzzzz"))
	f.Fuzz(func(t *testing.T, mode, data []byte) {
		if len(mode) < 2 || len(data) > 8*20_000 {
			return
		}
		const seed = 0x77
		o := Options{BitsPerKey: float64(mode[1]%48) + 1, Seed: seed}
		inv := keyhash.ModInverse(linev4.LineMultiplier)
		if mode[0]&1 == 1 {
			inv = keyhash.ModInverse(frame.Multiplier(seed))
		}
		var hashes []uint64
		for i := 0; i+8 <= len(data); i += 8 {
			hashes = append(hashes, frame.Unposition(binary.LittleEndian.Uint64(data[i:]), inv))
		}
		block, st := buildHashesV4(o, hashes)
		info := mustHoldHashesV4(t, "crafted", block, hashes, HashKey64)
		distinct := map[uint64]bool{}
		for _, h := range hashes {
			distinct[h] = true
		}
		if !info.AlwaysMaybe {
			p := v4PlanFor(o, len(hashes))
			if float64(len(block)) > frame.SizeCap(p.Lines)*frame.LineBytes+frame.TrailerSize {
				t.Fatalf("%d distinct hashes: %d bytes, past the size cap of a %d-line plan (stats %+v)", len(distinct), len(block), p.Lines, st)
			}
			if info.Keys != len(distinct) {
				t.Fatalf("%d keys stored for %d distinct hashes", info.Keys, len(distinct))
			}
		}
	})
}
