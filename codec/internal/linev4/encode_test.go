package linev4

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEncodeAnyShapeHoldsItsKeys drives the encoder with shapes and line
// capacities the planner never picks: columns of 1 to 128 rows (a few rows
// make coefficient vectors repeat and equations contradict each other in
// almost every line), capacities up to a column's full height, the extra
// column's share at 0, 255 and between, key counts past the lines'
// capacity, and keys drawn from small pools so that repeats abound. A
// placement may fail; one that succeeds must hold every key, through the
// lookup, and decode.
func TestEncodeAnyShapeHoldsItsKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	var e Encoder
	var hd Header
	for it := range 2000 {
		c, ok := drawAnyShapeCase(rng, it)
		if !ok {
			continue
		}
		s, k, lines, hashes, n := c.s, c.k, c.lines, c.hashes, len(c.hashes)
		kind, seeded := uint8(rng.IntN(2)), rng.IntN(2) == 0
		block, st, ok := e.Encode(nil, [][]uint64{hashes}, n, kind, rng.Uint32(), seeded, Plan{Shape: s, Lines: lines, K: k}, lines)
		if !ok {
			continue
		}
		for _, h := range hashes {
			if maybe, v4 := Lookup(block, h, kind); !maybe || !v4 {
				t.Fatalf("shape %+v, capacity %d, %d lines, %d keys, seeded %v: hash %#x lost (stats %+v)", s, k, lines, n, seeded, h, st)
			}
		}
		if !Read(block, &hd) {
			t.Fatalf("shape %+v: trailer rejected", s)
		}
		if _, err := Decode(block, &hd); err != nil {
			t.Fatalf("shape %+v: %v", s, err)
		}
	}
}

// anyShapeCase is one encoder case of TestEncodeAnyShapeHoldsItsKeys and
// the any-shape digest: a shape, a line capacity and a line count the
// planner may never pick, and key hashes.
type anyShapeCase struct {
	s        Shape
	k, lines uint32
	hashes   []uint64
}

// drawAnyShapeCase draws case it: columns of 1 to 128 rows, the extra
// column's share at 0, 255 or between, a capacity up to a column's full
// height, key counts up to past the lines' capacity, drawn half the time
// from a pool small enough that repeats abound. ok is false for a shape
// that is not Valid. The draws' order is the digest's: keep it.
func drawAnyShapeCase(rng *rand.Rand, it int) (c anyShapeCase, ok bool) {
	s := Shape{R: 1 + rng.Uint32N(MaxColumns), M: 1 + rng.Uint32N(MaxHeight)}
	switch rng.IntN(4) {
	case 0:
		s.U = 255
	case 1:
		s.U = rng.Uint32N(256)
	}
	if !s.Valid() {
		return c, false
	}
	k := 1 + rng.Uint32N(s.M)
	if rng.IntN(3) == 0 {
		k = Capacity(s)
	}
	lines := 1 + rng.Uint32N(40)
	n := rng.IntN(int(lines*k) + 2)
	pool := n + 1
	if rng.IntN(2) == 0 {
		pool = 1 + rng.IntN(n+1)
	}
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = uint64(rng.IntN(pool))*0x9e3779b97f4a7c15 + uint64(it)
	}
	return anyShapeCase{s: s, k: k, lines: lines, hashes: hashes}, true
}

// TestSortKeys checks sortKeys against the comparison sort on lines of
// every length up to past its buckets' bound, of keys at random, from
// small pools (repeats) and crowding one bucket.
func TestSortKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 13))
	var e Encoder
	for it := range 20000 {
		n := rng.IntN(1<<sortBucketBits + 40)
		seg := make([]uint64, n)
		pool := 1 + rng.IntN(n+1)
		for i := range seg {
			switch it % 3 {
			case 0:
				seg[i] = rng.Uint64()
			case 1:
				seg[i] = uint64(rng.IntN(pool)) * 0x9e3779b97f4a7c15
			case 2:
				seg[i] = rng.Uint64() >> (8 + rng.IntN(8))
			}
		}
		want := slices.Clone(seg)
		slices.Sort(want)
		e.sortKeys(seg)
		if !slices.Equal(seg, want) {
			t.Fatalf("it %d: %d keys out of order", it, n)
		}
	}
}
