package kvdemo

import (
	"fmt"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

// BenchmarkFilterUpkeep replays the flushes and size-tiered compactions of
// `kvdemo load -n 1000000 -memtable 1048576`, and of the same load of 4M
// keys, whose index outgrows the processor's cache (8,738 keys per flush, runs of
// compactionWidth merged whenever there are more than 24 tables, chosen by
// pickRun) in one goroutine, and times only the filter work of each table
// built: for cuckoo, adding its keys to a codec.Builder and Finish; for
// global, hashing its keys and AddTable (flush) or Replace (compaction),
// into an index created at the first flush as kvdemo creates it. ns/key is
// per key flushed or compacted, the figure `kvdemo load` prints, without
// the other goroutines' interference that load's figure includes.
func BenchmarkFilterUpkeep(b *testing.B) {
	const perFlush, maxTables = 8738, 24
	keys := make([][]byte, 4_000_000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user%012d", i)
	}
	for _, n := range []int{1_000_000, 4_000_000} {
		for _, bits := range []float64{10, 14} {
			for _, kind := range []FilterKind{FilterCuckoo, FilterGlobal} {
				benchUpkeep(b, keys[:n], perFlush, maxTables, bits, kind)
			}
		}
	}
}

func benchUpkeep(b *testing.B, keys [][]byte, perFlush, maxTables int, bits float64, kind FilterKind) {
	n := len(keys)
	b.Run(fmt.Sprintf("keys=%dM/bits=%v/%s", n/1_000_000, bits, kind), func(b *testing.B) {
		var spent time.Duration
		var built int64
		var st dynamic.IndexStats
		for i := 0; i < b.N; i++ {
			d, k, s := replayUpkeep(keys, perFlush, maxTables, bits, kind)
			spent += d
			built += k
			st = s
		}
		b.ReportMetric(float64(spent.Nanoseconds())/float64(built), "ns/key")
		b.ReportMetric(float64(built)/float64(b.N)/float64(n), "builds/key")
		if kind == FilterGlobal {
			b.ReportMetric(float64(st.Segments), "segments")
			b.ReportMetric(st.BitsPerKey, "bits/entry")
		}
	})
}

// replayUpkeep runs the schedule once and returns the time spent in filter
// work and the keys it covered.
func replayUpkeep(keys [][]byte, perFlush, maxTables int, bits float64, kind FilterKind) (time.Duration, int64, dynamic.IndexStats) {
	type tbl struct {
		id   uint64
		keys [][]byte
	}
	var tables []*tbl // newest first, as a view lists them
	var idx *dynamic.Index
	var spent time.Duration
	var built int64
	nextID := uint64(0)
	build := func(t *tbl, inputs []*tbl) {
		start := time.Now()
		switch kind {
		case FilterCuckoo:
			cb := codec.NewBuilder(codec.Options{BitsPerKey: bits})
			for _, k := range t.keys {
				cb.Add(k)
			}
			cb.Finish(nil)
		case FilterGlobal:
			hs := make([]uint64, len(t.keys))
			for i, k := range t.keys {
				hs[i] = dynamic.KeyHash(k)
			}
			if idx == nil {
				idx = dynamic.NewIndex(max(4*len(hs), 1024), bits)
			}
			var err error
			if inputs == nil {
				err = idx.AddTable(t.id, hs)
			} else {
				ids := make([]uint64, len(inputs))
				for i, in := range inputs {
					ids[i] = in.id
				}
				err = idx.Replace(ids, t.id, hs, nil)
			}
			if err != nil {
				panic(err)
			}
		}
		spent += time.Since(start)
		built += int64(len(t.keys))
	}
	sized := func(ts []*tbl) []*sstable {
		out := make([]*sstable, len(ts))
		for i, t := range ts {
			out[i] = &sstable{size: int64(len(t.keys))}
		}
		return out
	}
	for from := 0; from < len(keys); from += perFlush {
		nextID++
		t := &tbl{id: nextID, keys: keys[from:min(from+perFlush, len(keys))]}
		build(t, nil)
		tables = append([]*tbl{t}, tables...)
		for {
			start, width, ok := pickRun(sized(tables), maxTables)
			if !ok {
				break
			}
			run := tables[start : start+width]
			nextID++
			m := &tbl{id: nextID}
			for i := len(run) - 1; i >= 0; i-- { // oldest first: key order does not matter here
				m.keys = append(m.keys, run[i].keys...)
			}
			build(m, run)
			next := append(append(append([]*tbl(nil), tables[:start]...), m), tables[start+width:]...)
			tables = next
		}
	}
	var st dynamic.IndexStats
	if idx != nil {
		st = idx.Stats()
	}
	return spent, built, st
}
