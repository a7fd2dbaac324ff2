package codec

import (
	"fmt"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// BenchmarkBuildProfile times Add+Finish per key for pprof work
// (go test ./codec -run XXX -bench BuildProfile -cpuprofile cpu.out).
func BenchmarkBuildProfile(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		keys := testkeys.Random(n, 16, 11)
		for _, v := range []int{1, 2, 3} {
			b.Run(fmt.Sprintf("n=%d/v%d", n, v), func(b *testing.B) {
				bl := NewBuilder(Options{BitsPerKey: 10, Version: v})
				var out []byte
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for _, k := range keys {
						bl.Add(k)
					}
					out = bl.Finish(out[:0])
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
			})
		}
	}
}

func BenchmarkLookupProfile(b *testing.B) {
	keys := testkeys.Random(100_000, 16, 11)
	absent := testkeys.Absent(1<<16, 3)
	for _, v := range []int{1, 2, 3, 4} {
		block := Build(keys, Options{BitsPerKey: 10, Version: v})
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				MayContain(block, absent[i&(1<<16-1)])
			}
		})
	}
}
