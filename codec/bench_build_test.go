package codec

import (
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

func BenchmarkBuildProfile(b *testing.B) {
	keys := testkeys.Random(1_000_000, 16, 11)
	bl := NewBuilder(Options{BitsPerKey: 9.6})
	var out []byte
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, k := range keys {
			bl.Add(k)
		}
		out = bl.Finish(out[:0])
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(keys)), "ns/key")
}

func BenchmarkLookupProfile(b *testing.B) {
	keys := testkeys.Random(1_000_000, 16, 11)
	block := Build(keys, Options{BitsPerKey: 9.6})
	absent := testkeys.Absent(1<<16, 3)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		MayContain(block, absent[i&(1<<16-1)])
	}
}
