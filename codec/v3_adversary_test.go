package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// Keys chosen by an adversary, against version 3. As in adversary_test.go
// the attacker picks key hashes directly. A key's primary line comes from a
// fixed line hash of its key hash (no seed: anyone can aim keys at a line),
// its quotient and remainder from the seeded position hash (the attacker
// knows a pinned seed), and its secondary line from the seeded hash too.
// The attacks: one line or many crowded under the fixed hash, one quotient
// of one line (runs up to and past linev3.MaxRun), neighbouring lines whose
// secondary lines are the same few, lines that are their own secondary.
// The defences: seeded lines once lines are crowded, the run and move
// limits, reseeds, growth within the size cap and the always-maybe block.
// Whatever happens, no key may be lost.

// v3Spot is where a key lands in one of its lines.
type v3Spot struct{ line, q, rem uint64 }

// v3Where is where key hash h lands in a filter of plan p built under
// seed: its primary line (from the fixed line hash, or from the seeded
// hash when seededLines), quotient and remainder, and its secondary ones.
func v3Where(h uint64, seed uint32, p linev3.Plan, seededLines bool) (prim, sec v3Spot) {
	L := uint64(p.Lines)
	x := frame.Position(h, frame.Multiplier(seed))
	z := frame.Position(h, linev3.LineMultiplier)
	if seededLines {
		z = x
	}
	prim.line = linev3.Line(z, L)
	prim.q, prim.rem = linev3.QR(x, &p.Shape)
	x2 := keyhash.Mix(x, frame.SecondarySalt)
	sec.line = linev3.Line(x2, L)
	sec.q, sec.rem = linev3.QR(x2, &p.Shape)
	return prim, sec
}

// craftV3 returns n distinct key hashes drawn from gen that satisfy want.
func craftV3(t *testing.T, n int, gen func() uint64, want func(h uint64) bool) []uint64 {
	t.Helper()
	out := make([]uint64, 0, n)
	seen := map[uint64]bool{}
	for tries := 0; len(out) < n; tries++ {
		if tries > 2000*n+100_000 {
			t.Fatalf("could not craft %d hashes", n)
		}
		if h := gen(); want(h) && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// inFixedLines returns a generator of key hashes whose primary line under
// the fixed line hash is below count, in a filter of lines lines: the line
// hash drawn from that range and inverted. It needs no seed.
func inFixedLines(rng *rand.Rand, lines, count uint32) func() uint64 {
	inv := keyhash.ModInverse(linev3.LineMultiplier)
	span := uint64(1) << 32 * uint64(count) / uint64(lines)
	return func() uint64 {
		return frame.Unposition(rng.Uint64N(span)<<32|uint64(rng.Uint32()), inv)
	}
}

// withSeededQR returns a generator of key hashes whose quotient under
// seed and plan p is q and, when rem is not negative, whose remainder is
// rem: the position hash's bits 16..31 drawn from those that give q, its
// low r bits set to rem, the rest at random, and inverted.
func withSeededQR(rng *rand.Rand, seed uint32, p linev3.Plan, q uint64, rem int64) func() uint64 {
	inv := keyhash.ModInverse(frame.Multiplier(seed))
	Q := uint64(p.Shape.Q)
	lo, hi := (q<<16+Q-1)/Q, ((q+1)<<16+Q-1)/Q
	return func() uint64 {
		x := rng.Uint64()&^(0xffff<<16) | (lo+rng.Uint64N(hi-lo))<<16
		if rem >= 0 {
			x = x&^(1<<p.Shape.R-1) | uint64(rem)
		}
		return frame.Unposition(x, inv)
	}
}

// v3PlanFor is the plan of a version-3 filter of n keys under o, checked
// to be a version-3 plan.
func v3PlanFor(t *testing.T, o Options, n int) linev3.Plan {
	t.Helper()
	p := linev3.PlanFor(sizingOf(&o), n)
	if !p.Shape.Valid() || p.Lines == 0 {
		t.Fatalf("%+v, %d keys: invalid plan %+v", o, n, p)
	}
	return p
}

// mustHoldHashesV3 checks that block is a version-3 block that decodes
// and answers "maybe" for every hash.
func mustHoldHashesV3(t *testing.T, name string, block []byte, hashes []uint64, kind HashKind) Info {
	t.Helper()
	f, err := Decode(block)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if f.Info().Version != 3 {
		t.Fatalf("%s: version %d block", name, f.Info().Version)
	}
	for _, h := range hashes {
		if maybe, ok := linev3.Lookup(block, h, uint8(kind)); !ok || !maybe {
			t.Fatalf("%s: false negative for hash %#x (v3 %v)", name, h, ok)
		}
	}
	return f.Info()
}

// checkV3Bounded fails when a block that is not the always-maybe one is
// larger than the size cap of its plan allows.
func checkV3Bounded(t *testing.T, name string, block []byte, st BuildStats, p linev3.Plan) {
	t.Helper()
	if !st.Fallback && float64(len(block)) > frame.SizeCap(p.Lines)*frame.LineBytes+frame.TrailerSize {
		t.Errorf("%s: %d bytes, past the size cap of a %d-line plan", name, len(block), p.Lines)
	}
	if st.Reseeds > frame.Attempts {
		t.Errorf("%s: %d reseeds, more than %d attempts", name, st.Reseeds, frame.Attempts)
	}
}

// hashesOf is the key hashes of keys, as Add records them.
func hashesOf(keys [][]byte) []uint64 {
	out := make([]uint64, len(keys))
	for i, k := range keys {
		out[i] = keyhash.MulHash(k)
	}
	return out
}

// TestV3AdversarialOneLine aims half of the keys at line 0 under the
// fixed line hash (which needs no seed) and the other half at line 0 and
// one quotient of it under the pinned seed: far more keys overflow than
// random ones send, so the builder must abandon the fixed line hash for
// seeded lines (reported in the block and the stats), stay within the
// size cap, and hold every key, under the pinned seed and a random one.
func TestV3AdversarialOneLine(t *testing.T) {
	const seed = 0x5eed
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1000, 20_000, 200_000} {
		for _, bpk := range []float64{6, 10, 16} {
			if n > 20_000 && bpk != 10 {
				continue
			}
			o := Options{BitsPerKey: bpk, Seed: seed, Version: 3}
			p := v3PlanFor(t, o, n)
			hashes := craftV3(t, n/2, inFixedLines(r, p.Lines, 1), func(uint64) bool { return true })
			hashes = append(hashes, craftV3(t, n/2, inFixedLines(r, p.Lines, 1), func(h uint64) bool {
				prim, _ := v3Where(h, seed, p, false)
				return prim.line == 0 && prim.q == 3
			})...)
			for _, pinned := range []bool{true, false} {
				o := o
				if !pinned {
					o.Seed = 0
				}
				block, st := buildHashes(o, hashes)
				name := fmt.Sprintf("n=%d bpk=%v pinned=%v", n, bpk, pinned)
				info := mustHoldHashesV3(t, name, block, hashes, HashKey64)
				checkV3Bounded(t, name, block, st, p)
				t.Logf("%s: %d reseeds, seeded lines %v, %.1f bits/key, fallback %v", name, st.Reseeds, st.V3.SeededLines, float64(8*len(block))/float64(n), st.Fallback)
				if st.Fallback || st.Reseeds == 0 || !st.V3.SeededLines || !info.V3.SeededLines {
					t.Errorf("%s: %d reseeds, seeded lines %v (block %v), fallback %v; want the fixed line hash abandoned for seeded lines", name, st.Reseeds, st.V3.SeededLines, info.V3.SeededLines, st.Fallback)
				}
			}
		}
	}
}

// TestV3AdversarialManyLines crowds the first tenth of the lines under
// the fixed line hash with every key (about ten times their capacity):
// the builder must move to seeded lines, within the size cap, every key
// found.
func TestV3AdversarialManyLines(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, c := range []struct {
		n       int
		densest bool
	}{{5000, false}, {100_000, false}, {5000, true}, {100_000, true}} {
		n := c.n
		o := Options{BitsPerKey: 10, Version: 3, Densest: c.densest}
		p := v3PlanFor(t, o, n)
		hashes := craftV3(t, n, inFixedLines(r, p.Lines, max(1, p.Lines/10)), func(uint64) bool { return true })
		block, st := buildHashes(o, hashes)
		name := fmt.Sprintf("n=%d densest=%v", n, c.densest)
		info := mustHoldHashesV3(t, name, block, hashes, HashKey64)
		checkV3Bounded(t, name, block, st, p)
		if st.Fallback || !info.V3.SeededLines {
			t.Errorf("%s: seeded lines %v, fallback %v", name, info.V3.SeededLines, st.Fallback)
		}
		if bits := float64(8*len(block)) / float64(n); bits > 10.5 {
			t.Errorf("%s: %.2f bits/key for a budget of 10", name, bits)
		}
	}
}

// TestV3AdversarialMildCrowding aims a third of what linev3.CrowdedShare
// tolerates at one line under the fixed line hash: the builder keeps the
// fixed line hash (whose lookups load the line before the trailer), the
// keys of that line overflow to their secondary lines, and none is lost.
func TestV3AdversarialMildCrowding(t *testing.T) {
	r := rand.New(rand.NewPCG(33, 34))
	n := 20_000
	o := Options{BitsPerKey: 10, Seed: 5, Version: 3}
	p := v3PlanFor(t, o, n)
	crowd := int(linev3.CrowdedShare * float64(n) / 3)
	hashes := hashesOf(testkeys.Random(n-crowd, 16, 35))
	hashes = append(hashes, craftV3(t, crowd, inFixedLines(r, p.Lines, 1), func(uint64) bool { return true })...)
	block, st := buildHashes(o, hashes)
	info := mustHoldHashesV3(t, "mild crowding", block, hashes, HashKey64)
	checkV3Bounded(t, "mild crowding", block, st, p)
	if st.Fallback || info.V3.SeededLines || st.Reseeds != 0 {
		t.Errorf("%d keys in one line of %d: seeded lines %v, %d reseeds, fallback %v; want the fixed line hash kept", crowd, p.Lines, info.V3.SeededLines, st.Reseeds, st.Fallback)
	}
	if st.V3.PrimaryOverflow < crowd-int(p.Shape.K) {
		t.Errorf("%d keys overflowed their primary line; the crowded line alone sends %d", st.V3.PrimaryOverflow, crowd-int(p.Shape.K))
	}
}

// TestV3AdversarialOneQuotient puts a run of keys on one quotient of a
// one-line filter, beside random keys on other quotients: linev3.MaxRun keys
// (the longest run the format allows, which the lookup reads on its
// long-run path) build under the pinned seed; one more must make that
// seed fail and a reseed hold every key; exact remainder collisions
// inside the run (distinct hashes, equal quotient and remainder) are
// separate keys that all answer "maybe".
func TestV3AdversarialOneQuotient(t *testing.T) {
	const seed = 0xabc
	r := rand.New(rand.NewPCG(13, 14))
	for _, c := range []struct {
		run          int
		sameRem      bool
		wantReseeded bool
	}{{20, true, false}, {linev3.MaxRun, false, false}, {linev3.MaxRun, true, false}, {linev3.MaxRun + 1, false, true}, {200, true, true}} {
		o := Options{BitsPerKey: 8, Seed: seed, Version: 3}
		const others = 20
		p := v3PlanFor(t, o, others+c.run)
		if !c.wantReseeded && (p.Lines != 1 || int(p.Shape.K) < others+c.run) {
			t.Fatalf("run %d: plan %+v is not one line holding every key", c.run, p)
		}
		// The random keys avoid quotient 1, so that the run is exactly
		// as long as crafted.
		var all []uint64
		for _, h := range hashesOf(testkeys.Random(10*others, 16, uint64(c.run))) {
			if prim, _ := v3Where(h, seed, p, false); prim.q != 1 && len(all) < others {
				all = append(all, h)
			}
		}
		rem := int64(-1)
		if c.sameRem {
			rem = 5 & (1<<p.Shape.R - 1)
		}
		all = append(all, craftV3(t, c.run, withSeededQR(r, seed, p, 1, rem), func(h uint64) bool {
			prim, _ := v3Where(h, seed, p, false)
			return prim.line == 0 && prim.q == 1 && (rem < 0 || prim.rem == uint64(rem))
		})...)
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		block, st := buildHashes(o, all)
		name := fmt.Sprintf("run %d same remainder %v", c.run, c.sameRem)
		info := mustHoldHashesV3(t, name, block, all, HashKey64)
		checkV3Bounded(t, name, block, st, p)
		if st.Fallback || (st.Reseeds > 0) != c.wantReseeded {
			t.Errorf("%s: plan %+v: %d reseeds, fallback %v; want reseeded %v", name, p, st.Reseeds, st.Fallback, c.wantReseeded)
		}
		if info.Keys != len(all) {
			t.Errorf("%s: %d keys stored for %d distinct hashes", name, info.Keys, len(all))
		}
		if c.wantReseeded {
			continue
		}
		// The block holds the run as crafted (FORMAT.md's reader counts
		// it), and the lookup's long-run path answers as that reader does.
		spec := newSpecV3(t, block)
		if runs, ok := spec.runs(0); !ok || runs[1] != uint64(c.run) {
			t.Fatalf("%s: line 0 holds runs %v, want %d keys on quotient 1", name, runs, c.run)
		}
		if uint64(c.run)*uint64(p.Shape.R) <= 56 {
			t.Fatalf("%s: a run of %d %d-bit remainders is read by the short path", name, c.run, p.Shape.R)
		}
		for i := range 20_000 {
			h := uint64(i)*0x9e3779b97f4a7c15 + 1
			if maybe, _ := linev3.Lookup(block, h, uint8(HashKey64)); maybe != spec.contains(h) {
				t.Fatalf("%s: code and FORMAT.md's reader disagree on %#x", name, h)
			}
		}
		for _, h := range all {
			if !spec.contains(h) {
				t.Fatalf("%s: FORMAT.md's reader misses %#x", name, h)
			}
		}
	}
}

// TestV3AdversarialNeighbours crowds eight neighbouring lines (under the
// fixed line hash) with keys whose secondary lines (under the pinned
// seed) are among the same eight, far past their capacity: the attempt
// under the pinned seed must fail, and a later one hold every key within
// the size cap.
func TestV3AdversarialNeighbours(t *testing.T) {
	for _, densest := range []bool{false, true} {
		testV3AdversarialNeighbours(t, densest)
	}
}

func testV3AdversarialNeighbours(t *testing.T, densest bool) {
	const seed = 77
	r := rand.New(rand.NewPCG(15, 16))
	n := 30_000
	o := Options{BitsPerKey: 10, Seed: seed, Version: 3, Densest: densest}
	p := v3PlanFor(t, o, n)
	hashes := craftV3(t, n, inFixedLines(r, p.Lines, 8), func(h uint64) bool {
		_, sec := v3Where(h, seed, p, false)
		return sec.line < 8
	})
	block, st := buildHashes(o, hashes)
	name := fmt.Sprintf("neighbours, densest %v", densest)
	info := mustHoldHashesV3(t, name, block, hashes, HashKey64)
	checkV3Bounded(t, name, block, st, p)
	t.Logf("%d bytes (%.1f bits/key), %d reseeds, seeded lines %v, fallback %v", len(block), float64(len(block)*8)/float64(n), st.Reseeds, info.V3.SeededLines, st.Fallback)
	if st.Reseeds == 0 || st.Fallback || !info.V3.SeededLines {
		t.Errorf("30k keys crowding 8 lines: %d reseeds, seeded lines %v, fallback %v", st.Reseeds, info.V3.SeededLines, st.Fallback)
	}
}

// TestV3AdversarialOwnSecondary aims keys at a line (under the fixed line
// hash) that is also their secondary line (under the pinned seed): once
// the line is full, a key sent on evicts a primary key of the line's
// highest quotient, which comes back to it as a secondary key, until the
// line holds only secondary keys. The random keys keep out of that line,
// as primary and as secondary, so that up to its capacity the crafted
// keys build under the pinned seed and one more makes that seed fail;
// whatever the count, no key may be lost and the block stays within the
// size cap.
func TestV3AdversarialOwnSecondary(t *testing.T) {
	for _, densest := range []bool{false, true} {
		testV3AdversarialOwnSecondary(t, densest)
	}
}

func testV3AdversarialOwnSecondary(t *testing.T, densest bool) {
	const seed, total = 4242, 2100
	r := rand.New(rand.NewPCG(17, 18))
	o := Options{BitsPerKey: 10, Seed: seed, Version: 3, Densest: densest}
	p := v3PlanFor(t, o, total)
	k := int(p.Shape.K)
	for _, extra := range []int{-k / 2, -1, 0, 1, 5, 40} {
		own := craftV3(t, k+extra, inFixedLines(r, p.Lines, 1), func(h uint64) bool {
			_, sec := v3Where(h, seed, p, false)
			return sec.line == 0
		})
		var all []uint64
		for _, h := range hashesOf(testkeys.Random(2*total, 16, uint64(100+extra))) {
			prim, sec := v3Where(h, seed, p, false)
			if prim.line != 0 && sec.line != 0 && len(all) < total-len(own) {
				all = append(all, h)
			}
		}
		all = append(all, own...)
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		block, st := buildHashes(o, all)
		name := fmt.Sprintf("own secondary, capacity%+d, densest %v", extra, densest)
		mustHoldHashesV3(t, name, block, all, HashKey64)
		checkV3Bounded(t, name, block, st, p)
		t.Logf("%s: K=%d, %d reseeds, overflowed %d, seeded lines %v, fallback %v", name, k, st.Reseeds, st.V3.Overflowed, st.V3.SeededLines, st.Fallback)
		if st.Fallback {
			t.Errorf("%s: fell back to always-maybe", name)
		}
		if extra <= 0 && st.Reseeds != 0 {
			t.Errorf("%s: %d keys that fit their line made the seed fail", name, len(own))
		}
		if extra > 0 && st.Reseeds == 0 {
			t.Errorf("%s: %d keys over a line's capacity K=%d, all with that line as secondary, placed under the crafted seed", name, len(own), k)
		}
	}
}

// TestV3ExactHashCollisions: keys whose 64-bit hashes are equal are one key
// to the filter; repeats in any order, however many, take one slot, and
// the block's keys count the distinct hashes. Version 4 the same.
func TestV3ExactHashCollisions(t *testing.T) {
	for _, v := range []int{3, 4} {
		testExactHashCollisions(t, v)
	}
}

// linedBuild and linedHold are version v's buildHashes and
// mustHoldHashes, for the tests versions 3 and 4 share.
func linedBuild(v int, o Options, hashes []uint64) ([]byte, BuildStats) {
	if v == 4 {
		return buildHashesV4(o, hashes)
	}
	o.Version = 3
	return buildHashes(o, hashes)
}

func linedHold(v int, t *testing.T, name string, block []byte, hashes []uint64, kind HashKind) Info {
	t.Helper()
	if v == 4 {
		return mustHoldHashesV4(t, name, block, hashes, kind)
	}
	return mustHoldHashesV3(t, name, block, hashes, kind)
}

func testExactHashCollisions(t *testing.T, v int) {
	r := rand.New(rand.NewPCG(23, 24))
	var hashes []uint64
	for range 20_000 {
		hashes = append(hashes, r.Uint64())
	}
	hot := []uint64{hashes[0], hashes[1], hashes[2]}
	var stream []uint64
	for i, h := range hashes {
		stream = append(stream, h, hot[i%3])
		if i%7 == 0 {
			stream = append(stream, hashes[i/2])
		}
	}
	for _, kind := range []HashKind{HashKey64, HashHost32} {
		in, want := stream, hashes
		if kind == HashHost32 {
			in, want = nil, nil
			seen := map[uint64]bool{}
			for _, h := range stream {
				in = append(in, uint64(uint32(h)))
				if !seen[uint64(uint32(h))] {
					seen[uint64(uint32(h))] = true
					want = append(want, uint64(uint32(h)))
				}
			}
		}
		block, st := linedBuild(v, Options{BitsPerKey: 10, Seed: 5, Hash: kind}, in)
		info := linedHold(v, t, fmt.Sprintf("v%d collisions kind %d", v, kind), block, want, kind)
		if st.Keys != len(want) || info.Keys != len(want) {
			t.Fatalf("kind %d: %d slots used (block says %d) for %d distinct hashes", kind, st.Keys, info.Keys, len(want))
		}
	}
}

// TestV3DuplicatesAnyOrder adds the same distinct keys in several orders,
// each key several times (consecutive, round robin, shuffled, reversed):
// every order stores exactly the distinct keys, holds every one, and is
// planned for them (the same size as the distinct keys alone). Version 4
// the same.
func TestV3DuplicatesAnyOrder(t *testing.T) {
	for _, v := range []int{3, 4} {
		testDuplicatesAnyOrder(t, v)
	}
}

func testDuplicatesAnyOrder(t *testing.T, v int) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, n := range []int{1, 2, 3, 57, 1000, 30_000} {
		distinct := make([]uint64, n)
		for i := range distinct {
			distinct[i] = r.Uint64()
		}
		base, _ := linedBuild(v, Options{BitsPerKey: 10, Seed: 8}, distinct)
		var consecutive, roundRobin []uint64
		for _, h := range distinct {
			consecutive = append(consecutive, h, h, h)
		}
		for range 3 {
			roundRobin = append(roundRobin, distinct...)
		}
		shuffled := slices.Clone(roundRobin)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		reversed := slices.Clone(consecutive)
		slices.Reverse(reversed)
		for _, c := range []struct {
			name   string
			stream []uint64
		}{{"consecutive", consecutive}, {"round robin", roundRobin}, {"shuffled", shuffled}, {"reversed", reversed}} {
			name := fmt.Sprintf("v%d n=%d %s", v, n, c.name)
			block, st := linedBuild(v, Options{BitsPerKey: 10, Seed: 8}, c.stream)
			info := linedHold(v, t, name, block, distinct, HashKey64)
			if info.Keys != n || st.Keys != n {
				t.Fatalf("%s: %d keys stored, want %d", name, info.Keys, n)
			}
			if len(block) != len(base) {
				t.Errorf("%s: %d bytes, the distinct keys alone take %d", name, len(block), len(base))
			}
		}
	}
}

// TestV3TinyTables builds 0, 1, 2 and 3 keys (and 3 keys of one quotient
// and remainder) at every kind of setting: each block decodes as version
// 3, stores exactly its keys and holds every one; an empty filter answers
// "absent" for every key (there is nothing to find), never panics.
func TestV3TinyTables(t *testing.T) {
	settings := []Options{{}, {BitsPerKey: 1}, {BitsPerKey: 4}, {BitsPerKey: 10}, {BitsPerKey: 48}, {BitsPerKey: 1e6},
		{FalsePositiveRate: 0.5}, {FalsePositiveRate: 1e-9}, {FingerprintBits: 1}, {FingerprintBits: 16}, {Hash: HashHost32}}
	r := rand.New(rand.NewPCG(27, 28))
	absent := testkeys.Absent(1000, 29)
	for _, o := range settings {
		o.Version, o.Seed = 3, 31
		for n := 0; n <= 3; n++ {
			hashes := make([]uint64, n)
			for i := range hashes {
				hashes[i] = r.Uint64()
				if o.Hash == HashHost32 {
					hashes[i] = uint64(uint32(hashes[i]))
				}
			}
			name := fmt.Sprintf("%+v n=%d", o, n)
			block, st := buildHashes(o, hashes)
			info := mustHoldHashesV3(t, name, block, hashes, o.Hash)
			if info.Keys != n || st.Fallback || info.V3.Lines < 1 {
				t.Fatalf("%s: %+v", name, info)
			}
			if n == 0 && o.Hash == HashKey64 {
				for _, k := range absent {
					if MayContain(block, k) {
						t.Fatalf("%s: an empty filter answered maybe for %q", name, k)
					}
				}
			}
		}
		if o.Hash == HashHost32 {
			continue // host hashes are 32 bits: crafted 64-bit ones do not apply
		}
		// Three keys on one quotient and remainder of one line.
		p := v3PlanFor(t, o, 3)
		hashes := craftV3(t, 3, withSeededQR(r, o.Seed, p, 0, 0), func(h uint64) bool {
			prim, _ := v3Where(h, o.Seed, p, false)
			return prim.line == 0 && prim.q == 0 && prim.rem == 0
		})
		block, _ := buildHashes(o, hashes)
		if info := mustHoldHashesV3(t, fmt.Sprintf("%+v equal quotient and remainder", o), block, hashes, o.Hash); info.Keys != 3 {
			t.Fatalf("%+v: 3 colliding keys stored as %d", o, info.Keys)
		}
	}
}

// TestV3FallbackAnswersMaybe drives every attempt to fail: the block is
// version 3's 40-byte always-maybe block, decodes and says so, and
// answers "maybe" for every key, through both lookups and both kinds.
func TestV3FallbackAnswersMaybe(t *testing.T) {
	keys := testkeys.Random(5000, 16, 41)
	for _, kind := range []HashKind{HashKey64, HashHost32} {
		b := NewBuilder(Options{BitsPerKey: 10, Seed: 3, Version: 3, Hash: kind})
		b.rejectSeeds = frame.Attempts
		for _, k := range keys {
			if kind == HashHost32 {
				b.AddHash32(uint32(keyhash.MulHash(k)))
			} else {
				b.Add(k)
			}
		}
		block := b.Finish(nil)
		if st := b.Stats(); !st.Fallback || st.Reseeds != frame.Attempts || st.Bytes != frame.TrailerSize {
			t.Fatalf("kind %d: stats %+v, want a fallback after %d attempts", kind, st, frame.Attempts)
		}
		f, err := Decode(block)
		if err != nil {
			t.Fatal(err)
		}
		if info := f.Info(); !info.AlwaysMaybe || info.Version != 3 || info.Hash != kind || len(block) != frame.TrailerSize || info.Keys != 0 {
			t.Fatalf("kind %d: info %+v, %d bytes", kind, info, len(block))
		}
		for _, k := range append(slices.Clone(keys[:100]), testkeys.Absent(1000, 1)...) {
			if !MayContain(block, k) || !f.MayContain(k) || !MayContainHash32(block, uint32(keyhash.MulHash(k))) {
				t.Fatalf("kind %d: an always-maybe block answered absent", kind)
			}
		}
		// The always-maybe block is the one FORMAT.md draws: r, K, Q, L
		// and keys zero, the flag and the kind in byte 5.
		n := len(block)
		want := []byte{'L', 'S', 'M', 'C', 3, byte(linev3.FlagAlwaysMaybe | int(kind)<<linev3.KindShift), 0, 0, 0, 0, 0, 0}
		if !bytes.Equal(block[n-36:n-24], want) || !bytes.Equal(block[0:4], []byte{0, 0, 0, 0}) {
			t.Fatalf("kind %d: always-maybe trailer % x", kind, block)
		}
	}
}

// TestV3ReseedKeepsEveryKey makes the first attempts fail: the block built
// under a later seed holds every key, records that seed, is reproducible
// for a pinned seed, and after two failures has more lines than the plan.
func TestV3ReseedKeepsEveryKey(t *testing.T) {
	keys := testkeys.Random(5000, 16, 31)
	build := func() ([]byte, BuildStats) {
		b := NewBuilder(Options{BitsPerKey: 10, Seed: 11, Version: 3})
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
	if !info.V3.SeededLines || !st.V3.SeededLines {
		t.Errorf("the third attempt did not take seeded lines: %+v", info)
	}
	if info.Seed != st.Seed || info.Version != 3 {
		t.Fatalf("block records seed %d (version %d), stats say %d", info.Seed, info.Version, st.Seed)
	}
	planned := linev3.PlanFor(sizingOf(&Options{BitsPerKey: 10}), len(keys)).Lines
	if info.V3.Lines != int(frame.AttemptLines(planned, 2)) || info.V3.Lines <= int(planned) {
		t.Fatalf("third attempt used %d lines, plan %d", info.V3.Lines, planned)
	}
}

// TestV3AdversarialPinnedSeedFallsBack: an attacker who knows a pinned
// seed also knows the seeds of the retries, so with a filter small
// enough the keys can be aimed, under every attempt, at one line as
// primary and as secondary line (under the fixed line hash, then under
// the seeded lines of the grown attempts). Every attempt must fail, the
// builder must write the always-maybe block (40 bytes, every key "maybe")
// within its bounded attempts, and the same keys under a random seed
// must build a filter that excludes absent keys.
func TestV3AdversarialPinnedSeedFallsBack(t *testing.T) {
	const seed, n = 0x1234, 100
	o := Options{BitsPerKey: 10, Seed: seed, Version: 3}
	p := v3PlanFor(t, o, n)
	seeds := []uint32{seed}
	for a := 0; a+1 < frame.Attempts; a++ {
		seeds = append(seeds, uint32(keyhash.Mix(uint64(seeds[a]), uint32(a+1)))|1)
	}
	r := rand.New(rand.NewPCG(41, 42))
	hashes := craftV3(t, n, inFixedLines(r, p.Lines, 1), func(h uint64) bool {
		for a, s := range seeds {
			pa := linev3.Plan{Shape: p.Shape, Lines: frame.AttemptLines(p.Lines, a)}
			prim, sec := v3Where(h, s, pa, a >= 2)
			if prim.line != 0 || sec.line != 0 {
				return false
			}
		}
		return true
	})
	block, st := buildHashes(o, hashes)
	if !st.Fallback || len(block) != frame.TrailerSize || st.Reseeds != frame.Attempts {
		t.Fatalf("keys aimed at every attempt: stats %+v, %d bytes; want the always-maybe block after %d attempts", st, len(block), frame.Attempts)
	}
	info := mustHoldHashesV3(t, "pinned seed", block, hashes, HashKey64)
	if !info.AlwaysMaybe {
		t.Fatalf("info %+v", info)
	}
	for i := range 1000 {
		if maybe, _ := linev3.Lookup(block, uint64(i)*0x9e3779b97f4a7c15+7, uint8(HashKey64)); !maybe {
			t.Fatal("the always-maybe block answered absent")
		}
	}
	// Under a seed the attacker cannot know, the same keys build.
	block, st = buildHashes(Options{BitsPerKey: 10, Version: 3}, hashes)
	mustHoldHashesV3(t, "random seed", block, hashes, HashKey64)
	if st.Fallback {
		t.Fatalf("random seed: %+v", st)
	}
	absent := 0
	for i := range 10_000 {
		if maybe, _ := linev3.Lookup(block, uint64(i)*0x9e3779b97f4a7c15+7, uint8(HashKey64)); !maybe {
			absent++
		}
	}
	if absent < 9000 {
		t.Errorf("random seed: only %d of 10000 absent keys excluded", absent)
	}
}

// FuzzV3BuildCraftedHashes builds version-3 blocks from key hashes the
// fuzzer shapes directly: each 8 bytes of data is a fixed line hash (mode
// 0: the fuzzer picks the keys' primary lines, as anyone can) or a seeded
// position hash under the pinned seed (mode 1: it picks quotients,
// remainders and secondary lines too, as one who knows the seed can),
// inverted to the key hash; bit 1 of mode builds the densest layout.
// Repeats and equal hashes come for free.
// Whatever the hashes: the block decodes, holds every key (through the
// lookup and FORMAT.md's reader), and is within the size cap of its plan
// or the always-maybe block.
func FuzzV3BuildCraftedHashes(f *testing.F) {
	f.Add([]byte{0, 10}, bytes.Repeat([]byte{1, 2, 3, 4, 5, 6, 7, 8}, 64))
	f.Add([]byte{1, 8}, bytes.Repeat([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2}, 100))
	f.Add([]byte{0, 3}, make([]byte, 8*300))
	f.Add([]byte{1, 16}, []byte("0123456789abcdef0123456789abcdefzzzzzzzz"))
	f.Add([]byte{2, 12}, bytes.Repeat([]byte{9, 8, 7, 6, 5, 4, 3, 2}, 400)) // densest
	f.Fuzz(func(t *testing.T, mode, data []byte) {
		if len(mode) < 2 || len(data) > 8*20_000 {
			return
		}
		const seed = 0x77
		o := Options{BitsPerKey: float64(mode[1]%48) + 1, Seed: seed, Version: 3, Densest: mode[0]&2 != 0}
		inv := keyhash.ModInverse(linev3.LineMultiplier)
		if mode[0]&1 == 1 {
			inv = keyhash.ModInverse(frame.Multiplier(seed))
		}
		var hashes []uint64
		for i := 0; i+8 <= len(data); i += 8 {
			hashes = append(hashes, frame.Unposition(binary.LittleEndian.Uint64(data[i:]), inv))
		}
		block, st := buildHashes(o, hashes)
		info := mustHoldHashesV3(t, "crafted", block, hashes, HashKey64)
		spec := newSpecV3(t, block)
		for _, h := range hashes {
			if !spec.contains(h) {
				t.Fatalf("FORMAT.md's reader misses %#x", h)
			}
		}
		distinct := map[uint64]bool{}
		for _, h := range hashes {
			distinct[h] = true
		}
		if !info.AlwaysMaybe {
			// The first plan counts every hash added (repeats that are not
			// consecutive included), and no plan is larger.
			p := linev3.PlanFor(sizingOf(&o), len(hashes))
			if float64(len(block)) > frame.SizeCap(p.Lines)*frame.LineBytes+frame.TrailerSize {
				t.Fatalf("%d distinct hashes: %d bytes, past the size cap of a %d-line plan (stats %+v)", len(distinct), len(block), p.Lines, st)
			}
			// A repeat separated from its twin in their run by another key
			// keeps a slot of its own (FORMAT.md): a slot, never a key.
			if info.Keys < len(distinct) || info.Keys > len(hashes) {
				t.Fatalf("%d keys stored for %d hashes, %d distinct", info.Keys, len(hashes), len(distinct))
			}
		}
	})
}
