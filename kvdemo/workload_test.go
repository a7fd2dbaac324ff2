package kvdemo

import (
	"fmt"
	"testing"
)

func TestLookupWorkload(t *testing.T) {
	for _, f := range []FilterKind{FilterCuckoo, FilterBloom, FilterNone} {
		db := open(t, t.TempDir(), Options{Filter: f, MemtableBytes: 64 << 10, NoSyncEachWrite: true})
		if err := Load(db, 10_000, 32); err != nil {
			t.Fatal(err)
		}
		res, err := Lookups(db, 10_000, 5_000, 0.9, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", res)
		switch f {
		case FilterNone:
			if res.ProbedPerGet < float64(res.Tables)/2 {
				t.Errorf("none: %.2f tables probed per Get of %d tables", res.ProbedPerGet, res.Tables)
			}
		default:
			// Badger's default bloom (BloomFalsePositive 0.01) spends 7
			// bits/key for about 4-5%; the cuckoo filter 10 bits/key for
			// about 0.7%.
			maxFPR := map[FilterKind]float64{FilterCuckoo: 0.015, FilterBloom: 0.08}[f]
			if res.FPR > maxFPR || res.ProbedPerGet > 0.1+float64(res.Tables)*maxFPR || res.FilterBytes == 0 {
				t.Errorf("%s: %.2f tables probed per Get, FPR %.3f, %d filter bytes", f, res.ProbedPerGet, res.FPR, res.FilterBytes)
			}
		}
		db.Close()
	}
}

// BenchmarkLookups: the report's kvdemo level as a testing.B benchmark, for
// benchstat. ns/get is the Get loop alone; ns/op also counts key generation.
func BenchmarkLookups(b *testing.B) {
	const n = 100_000
	for _, f := range []FilterKind{FilterCuckoo, FilterBloom, FilterNone} {
		db, err := Open(b.TempDir(), &Options{Filter: f, MemtableBytes: n * 100 / 16, NoSyncEachWrite: true, Logger: quiet()})
		if err != nil {
			b.Fatal(err)
		}
		if err := Load(db, n, 64); err != nil {
			b.Fatal(err)
		}
		for _, miss := range []float64{1, 0.5} {
			b.Run(fmt.Sprintf("%s/miss=%g", f, miss), func(b *testing.B) {
				res, err := Lookups(db, n, b.N, miss, 1)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(1e9/res.GetsPerSec, "ns/get")
				b.ReportMetric(res.ProbedPerGet, "probed/get")
				b.ReportMetric(100*res.FPR, "fpr%")
			})
		}
		db.Close()
	}
}
