package codec

import (
	"fmt"
	"math"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/bucket"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestFalsePositiveTargetMonotone: asking for a lower false-positive rate
// never yields a higher one. A target below what any filter reaches gets
// the lowest rate there is (16-bit fingerprints at bucket.MinLoad), as version 1
// does. Version 2 used to fall back to 16-bit fingerprints at its highest
// load instead: a target of 2e-5 planned 1.1e-4, while 2.5e-5 planned
// 2.5e-5.
func TestFalsePositiveTargetMonotone(t *testing.T) {
	keys := make([][]byte, 20_000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user%08d", i)
	}
	floor := bucket.ExpectedFPR(bucket.MaxFPBits, bucket.MinLoad)
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
		if v == 3 {
			// A budget of 1 bit per key builds version 2, whose smallest
			// filter filters; a target of 1 asks for no rate at all, and
			// the smallest block is version 3's.
			smallest = len(buildExactV3(keys, Options{Seed: 3, BitsPerKey: 1}))
		}
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
		if info.Keys != 2000 || info.BitsPerKey > 1.05*10+float64(8*frame.TrailerSize)/2000 {
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
			if most := 1.05*bpk + float64(8*frame.TrailerSize)/float64(len(distinct)); info.BitsPerKey > most {
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
	if info := mustInfo(t, block); info.Keys != 2000 || info.BitsPerKey > 1.05*10+float64(8*frame.TrailerSize)/2000 {
		t.Errorf("host32: %d keys at %.1f bits/key", info.Keys, info.BitsPerKey)
	}
}

// TestSmallBudgetsWriteVersion2: at a budget of a few bits per key a
// version-3 line's header leaves its remainders one or two bits (at 3 bits
// per key or less, none at all: such a filter answered "maybe" for
// 99.6% of absent keys), and the default writer builds version 2 there.
// It must do so at one setting for tables of every size, report the
// version it wrote, keep every key, and plan what it builds; and the rate
// planned for the default writer must not rise with the budget across
// the switch, which the per-level budget search relies on. (Past about 30
// bits per key version 3's plan wobbles by a few percent between
// neighbouring budgets, far from the switch.)
func TestSmallBudgetsWriteVersion2(t *testing.T) {
	keys := testkeys.Random(50_000, 16, 11)
	probes := testkeys.Absent(200_000, 12)
	measured := func(block []byte) float64 {
		fp := 0
		for _, k := range probes {
			if MayContain(block, k) {
				fp++
			}
		}
		return float64(fp) / float64(len(probes))
	}
	for _, c := range []struct {
		bpk  float64
		want int
	}{{0.5, 2}, {1, 2}, {3, 2}, {4, 2}, {4.5, 2}, {6, 3}, {8, 3}, {10, 3}, {16, 3}} {
		b := NewBuilder(Options{BitsPerKey: c.bpk})
		for _, k := range keys {
			b.Add(k)
		}
		block := b.Finish(nil)
		info := mustInfo(t, block)
		if info.Version != c.want || b.Stats().Version != c.want {
			t.Fatalf("budget %v: wrote version %d (stats say %d), want %d", c.bpk, info.Version, b.Stats().Version, c.want)
		}
		for _, k := range keys {
			if !MayContain(block, k) {
				t.Fatalf("budget %v: false negative on %x", c.bpk, k)
			}
		}
		got := measured(block)
		planned := PlannedFPR(Options{BitsPerKey: c.bpk}, len(keys))
		if math.Abs(planned-info.ExpectedFPR) > 1e-12 {
			t.Errorf("budget %v: planned %.4g, the block expects %.4g", c.bpk, planned, info.ExpectedFPR)
		}
		if got > 1.15*planned+0.002 {
			t.Errorf("budget %v: measured %.4g, planned %.4g", c.bpk, got, planned)
		}
		if c.want == 2 {
			// The version-3 block this budget would have written instead.
			v3 := measured(buildExactV3(keys, Options{BitsPerKey: c.bpk}))
			if got >= v3 {
				t.Errorf("budget %v: version 2 measured %.4g, version 3 %.4g", c.bpk, got, v3)
			}
		}
		for _, n := range []int{1, 10, 300, 5000} {
			small := Build(keys[:n], Options{BitsPerKey: c.bpk, Seed: 4})
			if v := mustInfo(t, small).Version; v != c.want {
				t.Errorf("budget %v, %d keys: version %d, want %d", c.bpk, n, v, c.want)
			}
			for _, k := range keys[:n] {
				if !MayContain(small, k) {
					t.Fatalf("budget %v, %d keys: false negative", c.bpk, n)
				}
			}
		}
	}
	for _, n := range []int{10_000, 1_000_000} {
		prev := 1.0
		for bpk := 0.5; bpk <= 24; bpk += 0.125 {
			f := PlannedFPR(Options{BitsPerKey: bpk}, n)
			if f > prev*1.001 {
				t.Errorf("%d keys: %v bits/key plans %.4g, more than %.4g one step below", n, bpk, f, prev)
			}
			prev = f
		}
	}
	// A loose target: the smaller block that meets it.
	loose := Build(keys, Options{FalsePositiveRate: 0.3, Seed: 5})
	if v := mustInfo(t, loose).Version; v != 2 {
		t.Errorf("target 30%%: version %d, want version 2's smaller block", v)
	}
	if got := measured(loose); got > 0.3 {
		t.Errorf("target 30%%: measured %.3g", got)
	}
}
