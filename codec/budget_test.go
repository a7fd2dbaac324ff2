package codec

import (
	"fmt"
	"math"
	"testing"
)

// TestFalsePositiveTargetMonotone: asking for a lower false-positive rate
// never yields a higher one. A target below what any filter reaches gets
// the lowest rate there is (16-bit fingerprints at minLoad), as version 1
// does. Version 2 used to fall back to 16-bit fingerprints at its highest
// load instead: a target of 2e-5 planned 1.1e-4, while 2.5e-5 planned
// 2.5e-5.
func TestFalsePositiveTargetMonotone(t *testing.T) {
	keys := make([][]byte, 20_000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user%08d", i)
	}
	floor := expectedFPR(maxFPBits, minLoad)
	for _, v := range []int{1, 2, 3} {
		prev := 1.0
		for _, p := range []float64{1e-2, 1e-3, 1e-4, 5e-5, 3e-5, 2.5e-5, 2e-5, 1e-5, 1e-7, 1e-300} {
			f, err := Decode(Build(keys, Options{FalsePositiveRate: p, Version: v, Seed: 1}))
			if err != nil {
				t.Fatal(err)
			}
			got := f.Info().ExpectedFPR
			if got > prev*1.02 {
				t.Errorf("v%d: target %g plans %.3g, more than the %.3g of a looser target", v, p, got, prev)
			}
			if p < floor && got > floor*1.05 {
				t.Errorf("v%d: unattainable target %g plans %.3g; the lowest attainable is %.3g", v, p, got, floor)
			}
			prev = got
		}
	}
}

// TestFalsePositiveTargetOutsideRange: Options documents that a target of
// 0, a negative one or NaN counts as not set (the default budget), and one
// of 1 or more gets the smallest filter. Both versions, every key found.
func TestFalsePositiveTargetOutsideRange(t *testing.T) {
	keys := make([][]byte, 5_000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "order/%d", i)
	}
	for _, v := range []int{1, 2, 3} {
		unset := len(Build(keys, Options{Version: v, Seed: 3}))
		smallest := len(Build(keys, Options{Version: v, Seed: 3, BitsPerKey: 1}))
		for _, c := range []struct {
			p    float64
			want int
		}{{0, unset}, {-0.5, unset}, {math.NaN(), unset}, {1, smallest}, {2, smallest}, {math.Inf(1), smallest}} {
			block := Build(keys, Options{Version: v, Seed: 3, FalsePositiveRate: c.p})
			if len(block) != c.want {
				t.Errorf("v%d: target %v built %d bytes, want %d", v, c.p, len(block), c.want)
			}
			for _, k := range keys {
				if !MayContain(block, k) {
					t.Fatalf("v%d: target %v: false negative", v, c.p)
				}
			}
		}
	}
}

// TestRepeatsAnyOrderKeepBudget: README's own example feeds a Builder
// "tableKeys" and says repeats are fine; a store that builds a filter from
// a log, or from keys in hash order, repeats keys out of order. The budget
// is per distinct key whatever the order. Version 2 used to plan its lines
// for every hash added, repeats included: 1000 keys added 100 times each,
// round robin, took 1000 bits per distinct key at a budget of 10 (version
// 1, which plans after removing repeats, took 10.2).
// TestOutOfOrderRepeatsPlacedAfterRemoval: 2000 distinct host hashes,
// each added 50 times round robin. The first placement, planned for all
// 100k hashes, finds the 2000 distinct keys; the smaller plan for those
// used to place all 100k hashes again, and a repeat whose first copy had
// been pushed to its secondary line was not recognised and crowded lines
// planned without it: under about 0.7% of seeds (these three among them)
// that placement failed, and the builder kept the first block, 500 bits
// per distinct key. The repeats are now removed before the keys are placed
// again.
func TestOutOfOrderRepeatsPlacedAfterRemoval(t *testing.T) {
	for _, seed := range []uint32{322, 450, 614} {
		b := NewBuilder(Options{Hash: HashHost32, BitsPerKey: 10, Seed: seed})
		for r := range 50 {
			for i := range 2000 {
				b.AddHash32(uint32((i*7919 + r) % 2000))
			}
		}
		block := b.Finish(nil)
		info := mustInfo(t, block)
		if info.Keys != 2000 || info.BitsPerKey > 1.05*10+float64(8*v2TrailerSize)/2000 {
			t.Errorf("seed %d: %d keys at %.1f bits/key", seed, info.Keys, info.BitsPerKey)
		}
		for i := range 2000 {
			if !MayContainHash32(block, uint32(i)) {
				t.Fatalf("seed %d: false negative for hash %d", seed, i)
			}
		}
	}
}

func TestRepeatsAnyOrderKeepBudget(t *testing.T) {
	var distinct, stream [][]byte
	for i := range 1000 {
		distinct = append(distinct, fmt.Appendf(nil, "key%d", i))
	}
	for range 100 {
		stream = append(stream, distinct...)
	}
	for _, v := range []int{1, 2, 3} {
		for _, bpk := range []float64{10, 16} {
			block := Build(stream, Options{BitsPerKey: bpk, Version: v})
			f, err := Decode(block)
			if err != nil {
				t.Fatal(err)
			}
			info := f.Info()
			if info.Keys != len(distinct) {
				t.Fatalf("v%d: %d keys stored, want %d", v, info.Keys, len(distinct))
			}
			// Small filters may take 5% and their trailer over the budget.
			if most := 1.05*bpk + float64(8*v2TrailerSize)/float64(len(distinct)); info.BitsPerKey > most {
				t.Errorf("v%d budget %v: %.1f bits per distinct key", v, bpk, info.BitsPerKey)
			}
			for _, k := range distinct {
				if !f.MayContain(k) {
					t.Fatalf("v%d: false negative", v)
				}
			}
		}
	}
	// The same through 32-bit host hashes (a badgerfilter.Filter built from hashes
	// collected in another order than the table's).
	b := NewBuilder(Options{Hash: HashHost32, BitsPerKey: 10})
	for r := range 50 {
		for i := range 2000 {
			b.AddHash32(uint32((i*7919 + r) % 2000))
		}
	}
	block := b.Finish(nil)
	if info := mustInfo(t, block); info.Keys != 2000 || info.BitsPerKey > 1.05*10+float64(8*v2TrailerSize)/2000 {
		t.Errorf("host32: %d keys at %.1f bits/key", info.Keys, info.BitsPerKey)
	}
}
