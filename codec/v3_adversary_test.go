package codec

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/keyhash"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// Keys chosen by an adversary, against version 3. As in adversary_test.go
// the attacker picks key hashes directly, knows the pinned seed, and
// inverts the position hash to aim keys at one line, one quotient of one
// line (runs past v3MaxRun), neighbouring lines whose secondary lines are
// the same few, and lines that are their own secondary. The defences: the
// builder's run and move limits, reseeds, growth within the size cap and
// the always-maybe block. Whatever happens, no key may be lost.

// v3PlanFor is the plan of a version-3 filter of n keys under o, checked
// to be a version-3 plan.
func v3PlanFor(t *testing.T, o Options, n int) v3Plan {
	t.Helper()
	p := planV3(&o, n)
	if !p.shape.valid() || p.lines == 0 {
		t.Fatalf("%+v, %d keys: invalid plan %+v", o, n, p)
	}
	return p
}

// v3Place is where a position hash lands in a filter of that plan, for
// its primary (secondary false) or secondary line.
func v3Place(x uint64, p v3Plan, secondary bool) (line, q, r uint64) {
	if secondary {
		x = keyhash.Mix(x, secondarySalt)
	}
	return v3Split(x, uint64(p.lines), &p.shape)
}

// inQuotient returns a generator of positions whose primary line, quotient
// and (when rem is not negative) remainder under plan p are the given
// ones: the high 32 bits drawn from those that choose the line and
// quotient, the low r bits set to rem.
func inQuotient(rng *rand.Rand, p v3Plan, line, q uint64, rem int64) func() uint64 {
	L, Q := uint64(p.lines), uint64(p.shape.q)
	// The 64-bit product (x>>32)·L is line<<32 + a low half whose top
	// bits, times Q, give the quotient: aim the product at that range
	// and divide back.
	lo := line<<32 + (q<<32+Q-1)/Q
	hi := line<<32 + ((q+1)<<32+Q-1)/Q
	return func() uint64 {
		x := (lo+rng.Uint64N(hi-lo)+L-1)/L<<32 | uint64(rng.Uint32())
		if rem >= 0 {
			x = x&^(1<<p.shape.r-1) | uint64(rem)
		}
		return x
	}
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
		if maybe, ok := v3Lookup(block, h, kind); !ok || !maybe {
			t.Fatalf("%s: false negative for hash %#x (v3 %v)", name, h, ok)
		}
	}
	return f.Info()
}

// checkV3Bounded fails when a block that is not the always-maybe one is
// larger than the size cap of its plan allows.
func checkV3Bounded(t *testing.T, name string, block []byte, st BuildStats, p v3Plan) {
	t.Helper()
	if !st.Fallback && float64(len(block)) > v2SizeCap(p.lines)*lineBytes+v2TrailerSize {
		t.Errorf("%s: %d bytes, past the size cap of a %d-line plan", name, len(block), p.lines)
	}
	if st.Reseeds > v2Attempts {
		t.Errorf("%s: %d reseeds, more than %d attempts", name, st.Reseeds, v2Attempts)
	}
}

// TestV3AdversarialOneLine aims every key at line 0 under the pinned
// seed, half of them at one quotient of it (a run far past v3MaxRun):
// the first attempt must fail and a reseed succeed, every key found.
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
			hashes := craft(t, n/2, seed, inLines(r, p.lines, 1), func(x uint64) bool {
				l, _, _ := v3Place(x, p, false)
				return l == 0
			})
			hashes = append(hashes, craft(t, n/2, seed, inLines(r, p.lines, 1), func(x uint64) bool {
				l, q, _ := v3Place(x, p, false)
				return l == 0 && q == 3
			})...)
			block, st := buildHashes(o, hashes)
			name := fmt.Sprintf("n=%d bpk=%v", n, bpk)
			mustHoldHashesV3(t, name, block, hashes, HashKey64)
			checkV3Bounded(t, name, block, st, p)
			t.Logf("%s: %d reseeds, %.1f bits/key, fallback %v", name, st.Reseeds, float64(8*len(block))/float64(n), st.Fallback)
			if st.Fallback || st.Reseeds == 0 {
				t.Errorf("%s: %d reseeds, fallback %v; want the crafted seed to fail and the next to succeed", name, st.Reseeds, st.Fallback)
			}
		}
	}
}

// TestV3AdversarialOneQuotient puts a run of keys on one quotient of a
// one-line filter, beside random keys on other quotients: v3MaxRun keys
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
	}{{20, true, false}, {v3MaxRun, false, false}, {v3MaxRun, true, false}, {v3MaxRun + 1, false, true}, {200, true, true}} {
		o := Options{BitsPerKey: 8, Seed: seed, Version: 3}
		const others = 20
		p := v3PlanFor(t, o, others+c.run)
		if !c.wantReseeded && (p.lines != 1 || int(p.shape.k) < others+c.run) {
			t.Fatalf("run %d: plan %+v is not one line holding every key", c.run, p)
		}
		// The random keys avoid quotient 1 of line 0, so that the run is
		// exactly as long as crafted.
		var all []uint64
		for _, k := range testkeys.Random(10*others, 16, uint64(c.run)) {
			h := keyhash.MulHash(k)
			if l, q, _ := v3Place(v2Position(h, v2Multiplier(seed)), p, false); l != 0 || q != 1 {
				all = append(all, h)
			}
			if len(all) == others {
				break
			}
		}
		rem := 5 & (uint64(1)<<p.shape.r - 1)
		want := int64(-1)
		if c.sameRem {
			want = int64(rem)
		}
		all = append(all, craft(t, c.run, seed, inQuotient(r, p, 0, 1, want), func(x uint64) bool {
			l, q, rr := v3Place(x, p, false)
			return l == 0 && q == 1 && (!c.sameRem || rr == rem)
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
		if uint64(c.run)*uint64(p.shape.r) <= 56 {
			t.Fatalf("%s: a run of %d %d-bit remainders is read by the short path", name, c.run, p.shape.r)
		}
		for i := range 20_000 {
			h := uint64(i)*0x9e3779b97f4a7c15 + 1
			if maybe, _ := v3Lookup(block, h, HashKey64); maybe != spec.contains(h) {
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

// TestV3AdversarialNeighbours crowds eight neighbouring lines whose keys'
// secondary lines are among the same eight, far past their capacity: the
// pinned seed must fail (the secondary placement runs out of room or of
// moves), and a reseed hold every key within the size cap.
func TestV3AdversarialNeighbours(t *testing.T) {
	const seed = 77
	r := rand.New(rand.NewPCG(15, 16))
	n := 30_000
	o := Options{BitsPerKey: 10, Seed: seed, Version: 3}
	p := v3PlanFor(t, o, n)
	hashes := craft(t, n, seed, inLines(r, p.lines, 8), func(x uint64) bool {
		l1, _, _ := v3Place(x, p, false)
		l2, _, _ := v3Place(x, p, true)
		return l1 < 8 && l2 < 8
	})
	block, st := buildHashes(o, hashes)
	mustHoldHashesV3(t, "neighbours", block, hashes, HashKey64)
	checkV3Bounded(t, "neighbours", block, st, p)
	t.Logf("%d bytes (%.1f bits/key), %d reseeds, fallback %v", len(block), float64(len(block)*8)/float64(n), st.Reseeds, st.Fallback)
	if st.Reseeds == 0 {
		t.Error("a placement of 30k keys into 8 lines succeeded: the test does not test what it says")
	}
}

// TestV3AdversarialOwnSecondary aims keys at a line that is also their
// secondary line, among random keys: once the line is full, a key sent on
// evicts a primary key of the line's highest quotient, which may come
// back to it as a secondary key, until the line holds only secondary keys.
// The random keys keep out of that line, as primary and as secondary, so
// that up to its capacity the crafted keys build under the pinned seed and
// one more makes every slot a secondary one and the seed fail; whatever
// the count, no key may be lost and the block stays within the size cap.
func TestV3AdversarialOwnSecondary(t *testing.T) {
	const seed, total = 4242, 2100
	r := rand.New(rand.NewPCG(17, 18))
	o := Options{BitsPerKey: 10, Seed: seed, Version: 3}
	p := v3PlanFor(t, o, total)
	k := int(p.shape.k)
	for _, extra := range []int{-k / 2, -1, 0, 1, 5, 40} {
		own := craft(t, k+extra, seed, inLines(r, p.lines, 1), func(x uint64) bool {
			l1, _, _ := v3Place(x, p, false)
			l2, _, _ := v3Place(x, p, true)
			return l1 == 0 && l2 == 0
		})
		var all []uint64
		for _, key := range testkeys.Random(2*total, 16, uint64(100+extra)) {
			h := keyhash.MulHash(key)
			x := v2Position(h, v2Multiplier(seed))
			l1, _, _ := v3Place(x, p, false)
			l2, _, _ := v3Place(x, p, true)
			if l1 != 0 && l2 != 0 && len(all) < total-len(own) {
				all = append(all, h)
			}
		}
		all = append(all, own...)
		r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
		block, st := buildHashes(o, all)
		name := fmt.Sprintf("own secondary, capacity%+d", extra)
		mustHoldHashesV3(t, name, block, all, HashKey64)
		checkV3Bounded(t, name, block, st, p)
		t.Logf("%s: K=%d, %d reseeds, overflowed %d, fallback %v", name, k, st.Reseeds, st.Overflowed, st.Fallback)
		if st.Fallback {
			t.Errorf("%s: fell back to always-maybe", name)
		}
		if extra < 0 && st.Reseeds != 0 {
			t.Errorf("%s: %d keys that fit their line made the seed fail", name, len(own))
		}
		if extra > 0 && st.Reseeds == 0 {
			t.Errorf("%s: %d keys over a line's capacity K=%d, all with that line as secondary, placed under the crafted seed", name, len(own), k)
		}
	}
}

// TestV3AdversarialRandomSeedDefeatsCrafting: keys crafted into one line
// against seed 99 build at once under the default random seed, within
// the budget.
func TestV3AdversarialRandomSeedDefeatsCrafting(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	n := 20_000
	p := v3PlanFor(t, Options{BitsPerKey: 10, Seed: 99, Version: 3}, n)
	hashes := craft(t, n, 99, inLines(r, p.lines, 1), func(x uint64) bool {
		l, q, _ := v3Place(x, p, false)
		return l == 0 && q < 2
	})
	block, st := buildHashes(Options{BitsPerKey: 10, Version: 3}, hashes)
	mustHoldHashesV3(t, "random seed", block, hashes, HashKey64)
	if st.Reseeds != 0 || st.Fallback || st.Seed == 99 {
		t.Errorf("random seed: %+v", st)
	}
	if bits := float64(len(block)*8) / float64(n); bits > 10.5 {
		t.Errorf("random seed: %.2f bits/key for a budget of 10", bits)
	}
}

// TestV3ExactHashCollisions: keys whose 64-bit hashes are equal are one key
// to the filter; repeats in any order, however many, take one slot, and
// the block's keys count the distinct hashes.
func TestV3ExactHashCollisions(t *testing.T) {
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
		block, st := buildHashes(Options{BitsPerKey: 10, Seed: 5, Version: 3, Hash: kind}, in)
		info := mustHoldHashesV3(t, fmt.Sprintf("collisions kind %d", kind), block, want, kind)
		if st.Keys != len(want) || info.Keys != len(want) {
			t.Fatalf("kind %d: %d slots used (block says %d) for %d distinct hashes", kind, st.Keys, info.Keys, len(want))
		}
	}
}

// TestV3DuplicatesAnyOrder adds the same distinct keys in several orders,
// each key several times (consecutive, round robin, shuffled, reversed):
// every order stores exactly the distinct keys, holds every one, and is
// planned for them (the same size as the distinct keys alone).
func TestV3DuplicatesAnyOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	for _, n := range []int{1, 2, 3, 57, 1000, 30_000} {
		distinct := make([]uint64, n)
		for i := range distinct {
			distinct[i] = r.Uint64()
		}
		base, _ := buildHashes(Options{BitsPerKey: 10, Seed: 8, Version: 3}, distinct)
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
			name := fmt.Sprintf("n=%d %s", n, c.name)
			block, st := buildHashes(Options{BitsPerKey: 10, Seed: 8, Version: 3}, c.stream)
			info := mustHoldHashesV3(t, name, block, distinct, HashKey64)
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
			if info.Keys != n || st.Fallback || info.Lines < 1 {
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
		hashes := craft(t, 3, o.Seed, inQuotient(r, p, 0, 0, 0), func(x uint64) bool {
			l, q, rr := v3Place(x, p, false)
			return l == 0 && q == 0 && rr == 0
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
		b.rejectSeeds = v2Attempts
		for _, k := range keys {
			if kind == HashHost32 {
				b.AddHash32(uint32(keyhash.MulHash(k)))
			} else {
				b.Add(k)
			}
		}
		block := b.Finish(nil)
		if st := b.Stats(); !st.Fallback || st.Reseeds != v2Attempts || st.Bytes != v2TrailerSize {
			t.Fatalf("kind %d: stats %+v, want a fallback after %d attempts", kind, st, v2Attempts)
		}
		f, err := Decode(block)
		if err != nil {
			t.Fatal(err)
		}
		if info := f.Info(); !info.AlwaysMaybe || info.Version != 3 || info.Hash != kind || len(block) != v2TrailerSize || info.Keys != 0 {
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
		want := []byte{'L', 'S', 'M', 'C', 3, byte(v3FlagAlwaysIn | int(kind)<<v3KindShift), 0, 0, 0, 0, 0, 0}
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
	if info.Seed != st.Seed || info.Version != 3 {
		t.Fatalf("block records seed %d (version %d), stats say %d", info.Seed, info.Version, st.Seed)
	}
	planned := planV3(&Options{BitsPerKey: 10}, len(keys)).lines
	if info.Lines != int(v3AttemptLines(planned, 2)) || info.Lines <= int(planned) {
		t.Fatalf("third attempt used %d lines, plan %d", info.Lines, planned)
	}
}
