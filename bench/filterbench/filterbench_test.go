package filterbench

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// Key sets are shared across benchmarks so every family sees the same keys.
var (
	keysOnce sync.Map // n -> [][]byte
	absent   = sync.OnceValue(func() [][]byte { return testkeys.Absent(1_000_000, 200) })
)

func keysFor(n int) [][]byte {
	if k, ok := keysOnce.Load(n); ok {
		return k.([][]byte)
	}
	k := testkeys.Random(n, 16, 100)
	keysOnce.Store(n, k)
	return k
}

var benchSizes = []int{1_000, 10_000, 100_000, 1_000_000}

// BenchmarkBuild reports build ns/key, bits/key and FPR for every family.
func BenchmarkBuild(b *testing.B) {
	for _, n := range benchSizes {
		keys := keysFor(n)
		for _, fam := range testFamilies() {
			b.Run(fmt.Sprintf("n=%d/%s", n, fam.Name), func(b *testing.B) {
				var f filter
				b.ReportAllocs()
				for b.Loop() {
					f = fam.newFilter(keys)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
				b.ReportMetric(float64(f.Bytes()*8)/float64(n), "bits/key")
				b.ReportMetric(100*falsePositiveRate(f, absent()[:200_000]), "fpr%")
			})
		}
	}
}

// BenchmarkLookupHot times negative lookups against one filter.
func BenchmarkLookupHot(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		keys := keysFor(n)
		for _, fam := range testFamilies() {
			f := fam.newFilter(keys).Copy(0) // on a 64-byte boundary, as Run times it
			b.Run(fmt.Sprintf("n=%d/%s", n, fam.Name), func(b *testing.B) {
				abs := absent()
				i, maybe := 0, 0
				for b.Loop() {
					if f.MayContain(abs[i&(1<<19-1)]) {
						maybe++
					}
					i++
				}
				sinkHole += maybe
			})
		}
	}
}

// BenchmarkLookupCold times negative lookups spread over >= 64 MiB of
// filters, one random filter per lookup.
func BenchmarkLookupCold(b *testing.B) {
	keys := keysFor(100_000)
	for _, fam := range testFamilies() {
		cs := newColdSet(fam.newFilter(keys), 64<<20, 1<<20, 1, false)
		b.Run(fam.Name, func(b *testing.B) {
			abs := absent()
			i, maybe := 0, 0
			for b.Loop() {
				j := i & (1<<20 - 1)
				if cs.copies[cs.order[j]].MayContain(abs[j%len(abs)]) {
					maybe++
				}
				i++
			}
			sinkHole += maybe
			b.ReportMetric(cs.mib(), "MiB")
		})
	}
}

// TestCuckooFamiliesNameTheirPolicy: each lsmcuckoo family's printed
// name says the policy a user would set to get what it measures: the
// densest family is version 3's densest layout (NewDensestPolicy), the v4
// family is format version 4 (NewV4Policy), and their blocks are of that
// version.
func TestCuckooFamiliesNameTheirPolicy(t *testing.T) {
	keys := keysFor(1000)
	for _, c := range []struct {
		fam        Family
		name, kind string
		policy     string
		version    int
	}{
		{Cuckoo(10), "lsmcuckoo/10", "lsmcuckoo", "lsmcuckoo.v3.bpk=10", 3},
		{CuckooDensest(10), "lsmcuckoo-densest/10", "lsmcuckoo-densest", "lsmcuckoo.v3.densest.bpk=10", 3},
		{CuckooDensest(9.6), "lsmcuckoo-densest/9.6", "lsmcuckoo-densest", "lsmcuckoo.v3.densest.bpk=9.6", 3},
		{CuckooV4(10), "lsmcuckoo-v4/10", "lsmcuckoo-v4", "lsmcuckoo.v4.bpk=10", 4},
		{CuckooV4(9.6), "lsmcuckoo-v4/9.6", "lsmcuckoo-v4", "lsmcuckoo.v4.bpk=9.6", 4},
	} {
		if c.fam.Name != c.name || c.fam.Kind != c.kind || c.fam.Policy == nil || c.fam.Policy.Name() != c.policy {
			t.Errorf("family %q (kind %q) builds through %v, want %q (kind %q) through %q", c.fam.Name, c.fam.Kind, c.fam.Policy, c.name, c.kind, c.policy)
			continue
		}
		w := c.fam.Policy.NewWriter(pebble.TableFilter)
		for _, k := range keys {
			w.AddKey(k)
		}
		d, err := codec.Decode(w.Finish(nil))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := d.Info().Version; got != c.version {
			t.Errorf("%s writes format version %d, want %d", c.name, got, c.version)
		}
	}
}

// TestFamiliesNoFalseNegatives guards the comparison itself: a family that
// drops keys would look fast and small for the wrong reason.
func TestFamiliesNoFalseNegatives(t *testing.T) {
	for _, n := range []int{1, 10, 1000, 20_000} {
		keys := keysFor(n)
		for _, fam := range testFamilies() {
			f := fam.newFilter(keys)
			if fn := falseNegatives(f, keys); fn != 0 {
				t.Errorf("%s n=%d: %d false negatives", fam.Name, n, fn)
			}
			if f.Bytes() <= 0 {
				t.Errorf("%s n=%d: %d bytes", fam.Name, n, f.Bytes())
			}
			if c := f.Copy(192); falseNegatives(c, keys) != 0 {
				t.Errorf("%s n=%d: copy loses keys", fam.Name, n)
			}
		}
	}
}

// BenchmarkHot100k is the quick side-by-side of the policies at 10 bits/key
// used while tuning lookups.
func BenchmarkHot100k(b *testing.B) {
	keys := keysFor(100_000)
	for _, fam := range []Family{Cuckoo(10), cuckooV2(10), cuckooV1(10), PebbleBloom(10)} {
		f := fam.newFilter(keys).Copy(0)
		b.Run(fam.Name, func(b *testing.B) {
			abs := absent()
			i, maybe := 0, 0
			for b.Loop() {
				if f.MayContain(abs[i&(1<<19-1)]) {
					maybe++
				}
				i++
			}
			sinkHole += maybe
		})
	}
}

// TestRepRatios checks that a ratio to the baseline is taken within each
// repetition before the median: a machine twice as slow for one family's
// turn in one repetition moves the ratio of medians, not this.
func TestRepRatios(t *testing.T) {
	res := func(hot ...float64) []Result {
		rs := make([]Result, len(hot))
		for i, h := range hot {
			rs[i] = Result{HotNs: h, BuildNsKey: 2 * h}
		}
		return rs
	}
	base := res(10, 30, 20)
	fam := res(12, 33, 40) // each repetition's ratio: 1.2, 1.1, 2.0
	got := repRatios(fam, base)
	if got.Hot != 1.2 || got.Build != 1.2 {
		t.Errorf("hot %v, build %v: want the median of the repetitions' ratios, 1.2 (the ratio of medians is 1.65)", got.Hot, got.Build)
	}
	if got.Cold != 0 || got.ColdLat != 0 {
		t.Errorf("cold %v, latency %v: a timing the baseline lacks has no ratio", got.Cold, got.ColdLat)
	}
	if r := repRatios(fam, nil); r != (Ratios{}) {
		t.Errorf("no baseline repetitions: %+v", r)
	}
}
