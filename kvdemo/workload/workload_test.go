package workload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"strings"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
)

func quiet() *log.Logger { return log.New(io.Discard, "", 0) }

func TestLookupWorkload(t *testing.T) {
	for _, f := range []kvdemo.FilterKind{kvdemo.FilterCuckoo, kvdemo.FilterGlobal, kvdemo.FilterBloom, kvdemo.FilterNone} {
		db, err := kvdemo.Open(t.TempDir(), &kvdemo.Options{Filter: f, MemtableBytes: 64 << 10, NoSyncEachWrite: true, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if err := Load(db, 10_000, 32); err != nil {
			t.Fatal(err)
		}
		res, err := Lookups(db, 10_000, 2_000, 0.9, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%+v", res)
		switch f {
		case kvdemo.FilterNone:
			if res.ProbedPerGet < float64(res.Tables)/2 {
				t.Errorf("none: %.2f tables probed per Get of %d tables", res.ProbedPerGet, res.Tables)
			}
		default:
			// Badger's default bloom (BloomFalsePositive 0.01) spends 7
			// bits/key for about 4-5%; the cuckoo filter 10 bits/key for
			// about 0.7%.
			// The global index pays each entry's table code out of its
			// fingerprint: with ~14 equal tables, 4-5 of its ~10 bits
			// per slot, so 5-6 fingerprint bits.
			maxFPR := map[kvdemo.FilterKind]float64{kvdemo.FilterCuckoo: 0.015, kvdemo.FilterGlobal: 0.06, kvdemo.FilterBloom: 0.08}[f]
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
	for _, f := range []kvdemo.FilterKind{kvdemo.FilterCuckoo, kvdemo.FilterGlobal, kvdemo.FilterBloom, kvdemo.FilterNone} {
		db, err := kvdemo.Open(b.TempDir(), &kvdemo.Options{Filter: f, MemtableBytes: n * 100 / 16, NoSyncEachWrite: true, Logger: quiet()})
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

// TestRunDemo runs the demo small: same table layout in every store,
// the filters ordered as expected, and the printed table complete.
func TestRunDemo(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	res, err := RunDemo(context.Background(), &out, DemoConfig{Dir: dir, Keys: 20_000, MemtableKeys: 2_000, Gets: 2_000})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if len(res) != 4 {
		t.Fatalf("%d results", len(res))
	}
	byKind := map[kvdemo.FilterKind]DemoResult{}
	for _, r := range res {
		byKind[r.Filter] = r
		if r.Tables != res[0].Tables || r.Tables < 9 || r.Tables > 11 {
			t.Errorf("%s: %d tables (cuckoo %d), want the same ~10 everywhere", r.Filter, r.Tables, res[0].Tables)
		}
	}
	c, b, n := byKind[kvdemo.FilterCuckoo], byKind[kvdemo.FilterBloom], byKind[kvdemo.FilterNone]
	if !(c.ProbedPerGet < b.ProbedPerGet && b.ProbedPerGet < n.ProbedPerGet) {
		t.Errorf("tables probed per Get: cuckoo %.3f, bloom %.3f, none %.3f", c.ProbedPerGet, b.ProbedPerGet, n.ProbedPerGet)
	}
	if c.BitsPerKey < 9 || c.BitsPerKey > 11 || n.BitsPerKey != 0 {
		t.Errorf("bits/key: cuckoo %.2f, none %.2f", c.BitsPerKey, n.BitsPerKey)
	}
	// The demo's legend says Badger's default bloom spends about 7.
	if b.BitsPerKey < 6.5 || b.BitsPerKey > 7.5 || !strings.Contains(out.String(), "about 7 bits/key") {
		t.Errorf("bloom: %.2f bits/key; the legend says about 7", b.BitsPerKey)
	}
	if g := byKind[kvdemo.FilterGlobal]; g.ProbedPerGet >= n.ProbedPerGet/4 || g.BitsPerKey == 0 {
		t.Errorf("global: %.3f tables probed per Get (none %.3f), %.2f bits/key", g.ProbedPerGet, n.ProbedPerGet, g.BitsPerKey)
	}
	for _, want := range []string{"filter", "Gets/s", "probed/Get", "FPR", "cuckoo", "global", "bloom", "none"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if _, err := RunDemo(context.Background(), io.Discard, DemoConfig{Dir: dir, Keys: 100}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a second demo into the same directory: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := RunDemo(ctx, &out, DemoConfig{Keys: 100}); err == nil {
		t.Error("a cancelled demo ran")
	}
}
