package dynamic

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// BenchmarkIndexLookup: one lookup in an index of 1M entries over 22
// equal tables (kvdemo's shape after size-tiered compaction), for absent
// and present keys. candidates/op is the number of tables named.
func BenchmarkIndexLookup(b *testing.B) {
	const n, tables = 1 << 20, 22
	keys := testkeys.Random(n, 16, 61)
	absent := testkeys.Absent(1<<16, 62)
	for _, bits := range []float64{10, 14} {
		x := NewIndex(n, bits)
		per := n / tables
		for t := 0; t < tables; t++ {
			to := (t + 1) * per
			if t == tables-1 {
				to = n
			}
			if err := x.AddTable(uint64(t+1), hashesOf(keys[t*per:to])); err != nil {
				b.Fatal(err)
			}
		}
		for _, kind := range []string{"absent", "present"} {
			set := absent
			if kind == "present" {
				set = keys
			}
			b.Run(fmt.Sprintf("bits=%v/%s", bits, kind), func(b *testing.B) {
				buf := make([]uint64, 0, 8)
				cands := 0
				for i := 0; i < b.N; i++ {
					buf = x.Lookup(set[i&(len(set)-1)], buf[:0])
					cands += len(buf)
				}
				b.ReportMetric(float64(cands)/float64(b.N), "candidates/op")
				b.ReportMetric(x.Stats().BitsPerKey, "bits/entry")
			})
		}
	}
}

// BenchmarkIndexAddTable: the cost per key of adding a table to an index
// that already holds 21 tables (a flush into kvdemo's shape).
func BenchmarkIndexAddTable(b *testing.B) {
	const n, tables = 1 << 20, 22
	keys := testkeys.Random(n, 16, 63)
	per := n / tables
	hashes := hashesOf(keys)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		x := NewIndex(n, 10)
		for t := 0; t < tables-1; t++ {
			if err := x.AddTable(uint64(t+1), hashes[t*per:(t+1)*per]); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		if err := x.AddTable(tables, hashes[(tables-1)*per:]); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := x.RemoveTable(tables); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(n-(tables-1)*per)), "ns/key")
}

// BenchmarkIndexLookupManyTables: lookups in an index of more tables than
// its code tree has leaves (the rest are named by every lookup), as a
// store that keeps many small tables has: the answer's sort is the cost.
func BenchmarkIndexLookupManyTables(b *testing.B) {
	for _, tables := range []int{40, 300} {
		x := NewIndex(tables*200, 10)
		for t := 0; t < tables; t++ {
			if err := x.AddTable(uint64(t+1), hashesOf(testkeys.Random(200, 16, uint64(t)+1000))); err != nil {
				b.Fatal(err)
			}
		}
		absent := testkeys.Absent(1<<12, 64)
		b.Run(fmt.Sprintf("tables=%d", tables), func(b *testing.B) {
			buf := make([]uint64, 0, tables)
			cands := 0
			for i := 0; i < b.N; i++ {
				buf = x.Lookup(absent[i&(len(absent)-1)], buf[:0])
				cands += len(buf)
			}
			b.ReportMetric(float64(cands)/float64(b.N), "candidates/op")
		})
	}
}

// BenchmarkIndexReplaceAcrossGrowth: a merge of two flushes of the same
// keys (versions), the first added just before the index grew, so that it
// sits in a large older segment beside a large table, the second after.
// Each key's search stops at its newer version; the older one is cleared
// by the key's hash or by a pass over the older segment, whichever reads
// fewer buckets (idxProbeCost). ns/key is per key merged.
func BenchmarkIndexReplaceAcrossGrowth(b *testing.B) {
	const big = 1 << 21
	bigKeys := hashesOf(testkeys.Random(big, 16, 65))
	fresh := hashesOf(testkeys.Random(big, 16, 66))
	for _, hot := range []int{1 << 12, 1 << 14, 1 << 16} {
		hotKeys := hashesOf(testkeys.Random(hot, 16, 67))
		b.Run(fmt.Sprintf("keys=%d", hot), func(b *testing.B) {
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				x := NewIndex(big+hot, 10)
				if err := x.AddTable(1, bigKeys); err != nil {
					b.Fatal(err)
				}
				if err := x.AddTable(2, hotKeys); err != nil {
					b.Fatal(err)
				}
				// Few tables grow it, so that the merge's code needs no
				// other table's code lengthened (a pass of its own).
				for id, at := uint64(3), 0; len(*x.segs.Load()) == 1; id, at = id+1, at+big/16 {
					if err := x.AddTable(id, fresh[at:at+big/16]); err != nil {
						b.Fatal(err)
					}
				}
				if err := x.AddTable(100, hotKeys); err != nil {
					b.Fatal(err)
				}
				runtime.GC() // the set-up's garbage, not the Replace's
				b.StartTimer()
				if err := x.Replace([]uint64{2, 100}, 101, hotKeys, nil); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*hot), "ns/key")
		})
	}
}

// BenchmarkIndexOverwrites replays a store whose keys are overwritten:
// 115 flushes of 8,738 keys (kvdemo load's shape) drawn from a universe of
// u keys, so that most keys have versions in several tables, with
// kvdemo's size-tiered compaction (the four adjacent tables holding the
// fewest keys merged whenever there are more than 24). add-ns/key and
// replace-ns/key are per key flushed and per key merged; worst-ms is the
// slowest Replace.
func BenchmarkIndexOverwrites(b *testing.B) {
	const perFlush, flushes, maxTables, width = 8738, 115, 24, 4
	for _, u := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("universe=%d", u), func(b *testing.B) {
			var add, repl, worst time.Duration
			var added, merged int
			for i := 0; i < b.N; i++ {
				rng := rand.New(rand.NewPCG(uint64(u), uint64(i)))
				universe := make([]uint64, u)
				for k := range universe {
					universe[k] = rng.Uint64()
				}
				x := NewIndex(4*perFlush, 10)
				var tables [][]uint64 // newest first
				ids := []uint64{}
				next := uint64(0)
				for f := 0; f < flushes; f++ {
					seen := map[uint64]bool{}
					var ks []uint64
					for len(ks) < perFlush {
						if h := universe[rng.IntN(u)]; !seen[h] {
							seen[h] = true
							ks = append(ks, h)
						}
					}
					next++
					start := time.Now()
					if err := x.AddTable(next, ks); err != nil {
						b.Fatal(err)
					}
					add += time.Since(start)
					added += len(ks)
					tables = append([][]uint64{ks}, tables...)
					ids = append([]uint64{next}, ids...)
					for len(tables) > maxTables {
						best, at := -1, 0
						for k := 0; k+width <= len(tables); k++ {
							n := 0
							for _, t := range tables[k : k+width] {
								n += len(t)
							}
							if best < 0 || n < best {
								best, at = n, k
							}
						}
						in := map[uint64]bool{}
						var hs []uint64
						for _, t := range tables[at : at+width] {
							for _, h := range t {
								if !in[h] {
									in[h] = true
									hs = append(hs, h)
								}
							}
						}
						next++
						start := time.Now()
						if err := x.Replace(slices.Clone(ids[at:at+width]), next, hs, nil); err != nil {
							b.Fatal(err)
						}
						d := time.Since(start)
						repl += d
						worst = max(worst, d)
						merged += len(hs)
						tables = append(append(append([][]uint64(nil), tables[:at]...), hs), tables[at+width:]...)
						ids = append(append(append([]uint64(nil), ids[:at]...), next), ids[at+width:]...)
					}
				}
			}
			b.ReportMetric(float64(add.Nanoseconds())/float64(added), "add-ns/key")
			b.ReportMetric(float64(repl.Nanoseconds())/float64(merged), "replace-ns/key")
			b.ReportMetric(float64(worst.Microseconds())/1000, "worst-ms")
		})
	}
}

// BenchmarkIndexAddTableLarge: a flush's 8,738 keys added to an index of
// 1M or 4M entries in one segment at 60% load (an index built at once, a
// flush later), with and without the prefetch of the buckets a few keys
// ahead: a segment larger than the processor's caches makes every insert
// a cache miss, which the prefetch overlaps. ns/key is per key added.
func BenchmarkIndexAddTableLarge(b *testing.B) {
	for _, size := range []int{1_000_000, 4_000_000} {
		rng := rand.New(rand.NewPCG(1, uint64(size)))
		fill := make([]uint64, size*6/10)
		for i := range fill {
			fill[i] = rng.Uint64()
		}
		batch := make([]uint64, 8738)
		for _, prefetch := range []bool{false, true} {
			b.Run(fmt.Sprintf("entries=%dM/prefetch=%v", size/1_000_000, prefetch), func(b *testing.B) {
				defer func(v uint64) { idxPrefetchBytes = v }(idxPrefetchBytes)
				if !prefetch {
					idxPrefetchBytes = 1 << 62
				}
				x := NewIndex(size, 10)
				if err := x.AddTable(1, fill); err != nil {
					b.Fatal(err)
				}
				var spent time.Duration
				for i := 0; i < b.N; i++ {
					for j := range batch {
						batch[j] = rng.Uint64()
					}
					start := time.Now()
					if err := x.AddTable(uint64(i+2), batch); err != nil {
						b.Fatal(err)
					}
					spent += time.Since(start)
					if err := x.RemoveTable(uint64(i + 2)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(spent.Nanoseconds())/float64(b.N*len(batch)), "ns/key")
			})
		}
	}
}
