package tablefilter

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// speedPolicies are the two filters a Pebble user chooses between, at the
// same budget, in the order the benchmarks interleave them.
func speedPolicies() []pebble.FilterPolicy {
	return []pebble.FilterPolicy{NewPolicy(10), bloom.FilterPolicy(10)}
}

// BenchmarkBuildVsBloom times AddKey+Finish per key through each policy's
// writer, as a table writer drives it: 100k and 1M random 16-byte keys.
// Compare the ns/key of the two policies of one run (they are measured
// next to each other), never figures of different runs:
//
//	go test ./tablefilter -run XXX -bench BuildVsBloom -count 1
func BenchmarkBuildVsBloom(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		keys := testkeys.Random(n, 16, 21)
		for _, p := range speedPolicies() {
			b.Run(fmt.Sprintf("n=%d/%s", n, p.Name()), func(b *testing.B) {
				w := p.NewWriter(pebble.TableFilter)
				var out []byte
				for b.Loop() {
					for _, k := range keys {
						w.AddKey(k)
					}
					out = w.Finish(out[:0])
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
				b.ReportMetric(float64(len(out)*8)/float64(n), "bits/key")
			})
		}
	}
}

// BenchmarkHotVsBloom times negative lookups through each policy's
// MayContain against one filter of 100k keys (in cache).
func BenchmarkHotVsBloom(b *testing.B) {
	keys := testkeys.Random(100_000, 16, 21)
	absent := testkeys.Absent(1<<16, 22)
	for _, p := range speedPolicies() {
		w := p.NewWriter(pebble.TableFilter)
		for _, k := range keys {
			w.AddKey(k)
		}
		filter := w.Finish(nil)
		b.Run(p.Name(), func(b *testing.B) {
			i, hits := 0, 0
			for b.Loop() {
				if p.MayContain(pebble.TableFilter, filter, absent[i&(1<<16-1)]) {
					hits++
				}
				i++
			}
			b.ReportMetric(float64(hits)/float64(i), "fp/op")
		})
	}
}
