package filterbench

import (
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// BenchmarkLookupRatio is BuildRatio's counterpart for negative lookups:
// at each budget, version 3's default layout, its densest layout and
// format version 4, each timed right before Pebble's bloom filter of the
// same bits/key in every round (hot: one filter in a loop; cold: copies over 256 MiB, a random
// copy per lookup, a loop of independent lookups; latency: the same lookups
// one at a time), through their Pebble policies; it reports the median
// over rounds of the per-round ratios, and the rate each lets through.
//
//	go test ./bench/filterbench -run X -bench LookupRatio -benchtime 7x
func BenchmarkLookupRatio(b *testing.B) {
	const lookups = 1 << 20
	absent := testkeys.Absent(lookups, 12)
	for _, n := range []int{100_000, 1_000_000} {
		keys := testkeys.Random(n, 16, 11)
		for _, bpk := range []int{8, 10, 12, 16} {
			fams := []Family{Cuckoo(float64(bpk)), CuckooDensest(float64(bpk)), CuckooV4(float64(bpk)), PebbleBloom(bpk)}
			var filters []filter
			var cold []*coldSet
			for i, fam := range fams {
				f := fam.newFilter(keys)
				filters = append(filters, f)
				cold = append(cold, newColdSet(f, 256<<20, lookups, uint64(i)+1, false))
			}
			bloom := len(fams) - 1
			b.Run(fmt.Sprintf("keys=%d/bpk=%d", n, bpk), func(b *testing.B) {
				ratios := make([]map[string][]float64, bloom)
				for i := range ratios {
					ratios[i] = map[string][]float64{}
				}
				for b.Loop() {
					for i := range bloom {
						for mode, time := range map[string]func(int) float64{
							"hot":     func(j int) float64 { return lookupNs(filters[j], absent, lookups) },
							"cold":    func(j int) float64 { return cold[j].lookupNs(absent) },
							"latency": func(j int) float64 { return cold[j].latencyNs(absent) },
						} {
							r := time(i) / time(bloom)
							ratios[i][mode] = append(ratios[i][mode], r)
						}
					}
				}
				for i, fam := range fams[:bloom] {
					kind := fam.Kind[len("lsmcuckoo"):]
					if kind == "" {
						kind = "-default"
					}
					for _, mode := range []string{"hot", "cold", "latency"} {
						b.ReportMetric(medianOf(ratios[i][mode]), mode+kind+"×bloom")
					}
					b.ReportMetric(100*falsePositiveRate(filters[i], absent[:200_000]), "fpr%"+kind)
				}
				b.ReportMetric(100*falsePositiveRate(filters[bloom], absent[:200_000]), "fpr%-bloom")
			})
			cold = nil
		}
	}
}
