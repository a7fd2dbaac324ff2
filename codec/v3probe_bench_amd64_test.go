package codec

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/lsmcuckoo/lsmcuckoo/codec/internal/linev3"
	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// BenchmarkV3ProbeBMI2 times MayContain on a version-3 block with the
// assembly probe and without it (linev3.UseBMI2 switched within one process,
// the two interleaved round by round), each beside Pebble's bloom filter
// at the same bits/key timed right after it, and reports for each the
// median over rounds of that round's ratio to the bloom filter: hot (one
// filter in a loop), cold (copies over 256 MiB, a random copy per lookup,
// a loop of independent lookups) and latency (the same, one lookup at a
// time, a clock read after each).
//
//	go test ./codec -run X -bench V3ProbeBMI2 -benchtime 8x
func BenchmarkV3ProbeBMI2(b *testing.B) {
	if !linev3.UseBMI2 {
		b.Skip("this processor does not run the assembly probe")
	}
	defer func(v bool) { linev3.UseBMI2 = v }(linev3.UseBMI2)
	absent := testkeys.Absent(1<<20, 200)
	for _, n := range []int{100_000, 1_000_000} {
		keys := testkeys.Random(n, 16, 100)
		bw := bloom.FilterPolicy(10).NewWriter(pebble.TableFilter)
		for _, k := range keys {
			bw.AddKey(k)
		}
		bp := bloom.FilterPolicy(10)
		bloomMayContain := func(f, k []byte) bool { return bp.MayContain(pebble.TableFilter, f, k) }
		v3Copies, v3Order := coldCopies(Build(keys, Options{BitsPerKey: 10}), len(absent))
		bloomCopies, bloomOrder := coldCopies(bw.Finish(nil), len(absent))
		for _, mode := range []string{"hot", "cold", "latency"} {
			b.Run(fmt.Sprintf("keys=%d/%s", n, mode), func(b *testing.B) {
				run := func(f func(block, key []byte) bool, copies [][]byte, order []uint32) float64 {
					return probeLoopNs(f, copies, order, absent, mode)
				}
				var asm, goOnly []float64
				for b.Loop() {
					linev3.UseBMI2 = true
					a := run(MayContain, v3Copies, v3Order) / run(bloomMayContain, bloomCopies, bloomOrder)
					linev3.UseBMI2 = false
					g := run(MayContain, v3Copies, v3Order) / run(bloomMayContain, bloomCopies, bloomOrder)
					asm, goOnly = append(asm, a), append(goOnly, g)
				}
				b.ReportMetric(medianRatio(asm), "asm×bloom")
				b.ReportMetric(medianRatio(goOnly), "go×bloom")
			})
		}
	}
}

// coldCopies copies block over 256 MiB (each copy at a random multiple of
// 64 bytes past a fresh allocation's start) and draws a copy per lookup.
func coldCopies(block []byte, lookups int) ([][]byte, []uint32) {
	r := rand.New(rand.NewPCG(7, 1))
	copies := make([][]byte, (256<<20+len(block)-1)/len(block))
	for i := range copies {
		skew := 64 * r.IntN(64)
		copies[i] = append(make([]byte, skew, skew+len(block)), block...)[skew:]
	}
	order := make([]uint32, lookups)
	for i := range order {
		order[i] = uint32(r.IntN(len(copies)))
	}
	return copies, order
}

var probeSink int

// probeLoopNs is the time per lookup of absent keys: all on copies[0]
// (hot), or each on its copy of order, independent (cold) or each
// finished, by a clock read, before the next starts (latency).
func probeLoopNs(f func(block, key []byte) bool, copies [][]byte, order []uint32, absent [][]byte, mode string) float64 {
	start := time.Now()
	end := start
	for i, c := range order {
		block := copies[c]
		if mode == "hot" {
			block = copies[0]
		}
		if f(block, absent[i%len(absent)]) {
			probeSink++
		}
		if mode == "latency" {
			end = time.Now()
		}
	}
	if mode != "latency" {
		end = time.Now()
	}
	return float64(end.Sub(start).Nanoseconds()) / float64(len(order))
}

func medianRatio(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	return s[len(s)/2]
}
