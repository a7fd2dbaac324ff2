package filterbench

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// BenchmarkBuildRatio times the build of a table's filter through each
// Pebble policy, this project's default (format version 3) and its
// densest layout, each against Pebble's bloom filter at the same bits/key
// built right after it in every round (a fresh writer each, as Pebble gives each table
// its own), and reports the median over the rounds of the per-round
// ratio: on a shared machine whose speed drifts between runs, a ratio
// taken within a round is steadier than a ratio of two medians.
//
//	go test ./bench/filterbench -run X -bench BuildRatio -benchtime 21x
func BenchmarkBuildRatio(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		keys := testkeys.Random(n, 16, 11)
		for _, bpk := range []int{8, 10, 12, 16} {
			cuckoo, densest, bloom := Cuckoo(float64(bpk)), CuckooDensest(float64(bpk)), PebbleBloom(bpk)
			b.Run(fmt.Sprintf("keys=%d/bpk=%d", n, bpk), func(b *testing.B) {
				buildTimed(cuckoo, keys) // warm the writers' pools
				buildTimed(densest, keys)
				buildTimed(bloom, keys)
				var ratios, densestRatios, ns, bloomNs []float64
				for b.Loop() {
					_, c := buildTimed(cuckoo, keys)
					_, f := buildTimed(bloom, keys)
					_, d := buildTimed(densest, keys)
					_, g := buildTimed(bloom, keys)
					ratios, ns, bloomNs = append(ratios, c/f), append(ns, c), append(bloomNs, f)
					densestRatios = append(densestRatios, d/g)
				}
				b.ReportMetric(medianOf(ratios), "×bloom")
				b.ReportMetric(medianOf(densestRatios), "densest×bloom")
				b.ReportMetric(medianOf(ns), "ns/key")
				b.ReportMetric(medianOf(bloomNs), "bloom-ns/key")
			})
		}
	}
}

func medianOf(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}

// BenchmarkBuildRatioFuse times the build of a table's filter through this
// project's default policy (format version 3) and its version-4 policy
// (NewV4Policy) at a binary fuse filter's bits/key (rounded down to a
// hundredth), each against that fuse filter built right after it in every
// round, at each of Pebble master's fuse widths but 4, and reports the
// median per-round ratio, as BuildRatio does.
//
//	go test ./bench/filterbench -run X -bench BuildRatioFuse -benchtime 21x
func BenchmarkBuildRatioFuse(b *testing.B) {
	for _, n := range []int{30_000, 100_000} {
		keys := testkeys.Random(n, 16, 11)
		for _, w := range []int{8, 10, 12, 16} {
			fuse := BinaryFuse(w)
			f, _ := buildTimed(fuse, keys)
			bpk := math.Floor(float64(8*f.Bytes())/float64(n)*100) / 100
			cuckoo, v4 := Cuckoo(bpk), CuckooV4(bpk)
			b.Run(fmt.Sprintf("keys=%d/width=%d/bpk=%g", n, w, bpk), func(b *testing.B) {
				buildTimed(cuckoo, keys) // warm the writers' pools
				buildTimed(v4, keys)
				var ratios, v4Ratios, ns, v4Ns, fuseNs []float64
				for b.Loop() {
					_, c := buildTimed(cuckoo, keys)
					_, f := buildTimed(fuse, keys)
					_, d := buildTimed(v4, keys)
					_, g := buildTimed(fuse, keys)
					ratios, ns, fuseNs = append(ratios, c/f), append(ns, c), append(fuseNs, f, g)
					v4Ratios, v4Ns = append(v4Ratios, d/g), append(v4Ns, d)
				}
				b.ReportMetric(medianOf(ratios), "×fuse")
				b.ReportMetric(medianOf(v4Ratios), "v4×fuse")
				b.ReportMetric(medianOf(ns), "ns/key")
				b.ReportMetric(medianOf(v4Ns), "v4-ns/key")
				b.ReportMetric(medianOf(fuseNs), "fuse-ns/key")
			})
		}
	}
}
