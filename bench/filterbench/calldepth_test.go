package filterbench

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// BenchmarkColdCallDepth times the cold lookup loop of the filter level
// (ColdSet.LookupNs: 256 MiB of copies, a random copy per lookup) on the
// same 100k-key, 10 bits/key blocks reached by three call paths: the
// pebble.FilterPolicy interface (as the filter level and Pebble probe),
// tablefilter.Policy as a typed value (one call level less), and
// codec.MayContain itself: in a loop of cold lookups, the instructions
// above the lookup are paid for too (README, "Which version to run").
//
//	go test ./bench/filterbench -run X -bench ColdCallDepth -benchtime 5x
func BenchmarkColdCallDepth(b *testing.B) {
	absent := testkeys.Absent(1<<20, 200)
	keys := testkeys.Random(100_000, 16, 100)
	for _, fam := range []Family{Cuckoo(10), cuckooV2(10)} {
		pf := fam.newFilter(keys).(pebbleFilter)
		typed := pf.p.(tablefilter.Policy)
		for _, path := range []struct {
			name string
			f    filter
		}{
			{"interface", pf},
			{"typed", typedPolicyFilter{typed, pf.data}},
			{"codec", codecFilter{pf.data}},
		} {
			b.Run(fam.Kind+"/"+path.name, func(b *testing.B) {
				cs := newColdSet(path.f, 256<<20, len(absent), 7, false)
				cs.lookupNs(absent) // fault the pages in
				ns := 0.0
				for b.Loop() {
					ns += cs.lookupNs(absent)
				}
				b.ReportMetric(ns/float64(b.N), "ns/lookup")
			})
		}
	}
}

// typedPolicyFilter probes through tablefilter.Policy without the
// pebble.FilterPolicy interface.
type typedPolicyFilter struct {
	p    tablefilter.Policy
	data []byte
}

func (f typedPolicyFilter) MayContain(key []byte) bool {
	return f.p.MayContain(pebble.TableFilter, f.data, key)
}
func (f typedPolicyFilter) Bytes() int { return len(f.data) }
func (f typedPolicyFilter) Copy(skew int) filter {
	return typedPolicyFilter{f.p, skewed(f.data, skew)}
}

// codecFilter probes through codec.MayContain.
type codecFilter struct{ data []byte }

func (f codecFilter) MayContain(key []byte) bool { return codec.MayContain(f.data, key) }
func (f codecFilter) Bytes() int                 { return len(f.data) }
func (f codecFilter) Copy(skew int) filter       { return codecFilter{skewed(f.data, skew)} }
