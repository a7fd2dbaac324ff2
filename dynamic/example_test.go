package dynamic_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

// A MemFilter in front of a memtable: writers Add as they insert, readers
// skip the memtable search when MayContain says no. Any number of
// goroutines may do both at once.
func ExampleMemFilter() {
	f := dynamic.NewMemFilter(1 << 16) // the memtable's expected key count
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 1000; i++ {
				f.Add(fmt.Appendf(nil, "user/%d/%d", w, i))
			}
		}(w)
	}
	wg.Wait()
	fmt.Println(f.MayContain([]byte("user/3/999")))
	fmt.Println(f.Stats().Segments)
	// Output:
	// true
	// 1
}

// One index for a whole store: each flush adds its table's key hashes, a
// compaction replaces its inputs by their merge in place, and a Get reads
// only the tables Lookup names, newest first.
func ExampleIndex() {
	keys := func(prefix string, from, to int) (hs []uint64) {
		for i := from; i < to; i++ {
			hs = append(hs, dynamic.KeyHash(fmt.Appendf(nil, "%s%d", prefix, i)))
		}
		return hs
	}
	x := dynamic.NewIndex(4000, 14) // about 4000 entries at 14 bits each

	// Three flushes. Table 2 overwrites half of table 1's keys, so those
	// keys have an entry for each table.
	for _, t := range []struct {
		id     uint64
		hashes []uint64
	}{{1, keys("user:", 0, 1000)}, {2, keys("user:", 500, 1500)}, {3, keys("item:", 0, 1000)}} {
		if err := x.AddTable(t.id, t.hashes); err != nil {
			panic(err)
		}
	}
	cands := x.Lookup([]byte("user:700"), nil)
	fmt.Println("user:700 in tables 2 and 1:", slices.Contains(cands, 2), slices.Contains(cands, 1))

	// A compaction merges tables 1 and 2 into table 4. Switch the store's
	// table list to table 4 first, then tell the index.
	if err := x.Replace([]uint64{1, 2}, 4, keys("user:", 0, 1500), nil); err != nil {
		panic(err)
	}
	cands = x.Lookup([]byte("user:700"), cands[:0])
	fmt.Println("user:700 in table 4:", slices.Contains(cands, 4), "tables:", x.Tables())

	// A Get for an absent key nearly always reads no table at all.
	readNothing := 0
	for i := 0; i < 10000; i++ {
		if len(x.Lookup(fmt.Appendf(nil, "nobody:%d", i), cands[:0])) == 0 {
			readNothing++
		}
	}
	fmt.Println("absent keys that read no table > 99%:", readNothing > 9900)

	// A table that leaves the store without a merge (a range deletion
	// dropped it, say) leaves the index with RemoveTable.
	if err := x.RemoveTable(4); err != nil {
		panic(err)
	}
	err := x.RemoveTable(4)
	fmt.Println(errors.Is(err, dynamic.ErrNoTable))
	// Output:
	// user:700 in tables 2 and 1: true true
	// user:700 in table 4: true tables: 2
	// absent keys that read no table > 99%: true
	// true
}

// Sizing an index to a memory budget: IndexEntryBits says what an entry
// costs at full load, so the budget's remainder becomes headroom for the
// next flushes before the index grows.
func ExampleIndexEntryBits() {
	const entries, bitsPerKey = 100_000, 12.0
	capacity := int(entries * bitsPerKey / dynamic.IndexEntryBits(bitsPerKey))
	x := dynamic.NewIndex(capacity, bitsPerKey)
	budget := int64(entries * bitsPerKey / 8)
	fmt.Println("room for more than the entries:", capacity > entries)
	fmt.Println("within the budget plus a few KiB:", x.Stats().Bytes <= budget+8<<10)
	fmt.Println("IndexBytes agrees with Stats:", dynamic.IndexBytes(capacity, bitsPerKey) == x.Stats().Bytes)
	// Output:
	// room for more than the entries: true
	// within the budget plus a few KiB: true
	// IndexBytes agrees with Stats: true
}
