package linev4

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/frame"
)

// BenchmarkEncode times the encoder alone (no key hashing, no planning)
// at binary fuse's bits/key on tables of 100k keys, the budgets
// BuildRatioFuse compares at.
//
//	go test ./codec/internal/linev4 -run X -bench Encode
func BenchmarkEncode(b *testing.B) {
	const n = 100_000
	rng := rand.New(rand.NewPCG(1, 2))
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = rng.Uint64()
	}
	for _, bpk := range []float64{9.5, 11.87, 14.25, 19} {
		p, _ := PlanFor(&frame.Sizing{BitsPerKey: bpk, Densest: true}, n)
		b.Run(fmt.Sprintf("bpk=%g", bpk), func(b *testing.B) {
			var e Encoder
			var dst []byte
			for b.Loop() {
				e.Start()
				out, _, ok := e.Encode(dst[:0], [][]uint64{hashes}, n, 0, 1, false, p, p.Lines)
				if !ok {
					b.Fatal("placement failed")
				}
				dst = out
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}
