package badgerfilter_test

import (
	"fmt"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/badgerfilter"
)

// Badger: build the filter from the hashes Badger's table builder collects
// (y.Hash of each key without its version suffix, one per entry, so repeated
// for every version) and probe it the way Badger's read path does.
func ExampleNew() {
	var hashes []uint32
	for i := 0; i < 10000; i++ {
		key := fmt.Appendf(nil, "user:%d", i)
		for version := 0; version < 3; version++ {
			hashes = append(hashes, badgerfilter.Hash(key)) // = y.Hash(y.ParseKey(y.KeyWithTs(key, ts)))
		}
	}
	f := badgerfilter.New(hashes, 10)

	found, rejected := 0, 0
	for i := 0; i < 10000; i++ {
		if f.MayContainKey(fmt.Appendf(nil, "user:%d", i)) {
			found++
		}
		if !f.MayContainKey(fmt.Appendf(nil, "user:%d", 10000+i)) {
			rejected++
		}
	}
	fmt.Printf("%d bytes for 10000 keys (%d entries)\n", len(f), len(hashes))
	fmt.Println("present keys found:", found)
	fmt.Println("absent keys rejected > 98%:", rejected > 9800)
	// Output:
	// 12584 bytes for 10000 keys (30000 entries)
	// present keys found: 10000
	// absent keys rejected > 98%: true
}
