package badgerfilter_test

import (
	"bytes"
	"fmt"
	"log"
	"math"
	"os"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/badgerfilter"
)

// A store built on Badger's table format: while its table builder adds
// entries, collect the hash Badger's own builder collects for its bloom
// filter, write the table without Badger's bloom (BloomFalsePositive 0),
// and keep a Filter beside it. A Get asks the filter before it
// seeks in the table.
func ExampleFilter_MayContainKey() {
	dir, err := os.MkdirTemp("", "lsmcuckoo-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	builder := table.NewTableBuilder(table.Options{
		BlockSize:          4 << 10,
		TableSize:          1 << 20,
		BloomFalsePositive: 0, // no bloom filter in the table: ours is beside it
		Compression:        options.None,
	})
	defer builder.Close()
	var hashes []uint32
	for i := 0; i < 5000; i++ {
		for version := uint64(3); version >= 1; version-- { // newest version first, as Badger sorts
			key := y.KeyWithTs(fmt.Appendf(nil, "user:%05d", 2*i), version)
			hashes = append(hashes, y.Hash(y.ParseKey(key))) // what Badger's builder collects
			builder.Add(key, y.ValueStruct{Value: []byte("value")}, 0)
		}
	}
	tbl, err := table.CreateTable(table.NewFilename(1, dir), builder)
	if err != nil {
		log.Fatal(err)
	}
	defer tbl.DecrRef()
	filter := badgerfilter.New(hashes, 10) // store it with the table

	// get reads the newest version of userKey, unless the filter rules the
	// table out.
	seeks := 0
	get := func(userKey []byte) (string, bool) {
		if !filter.MayContainKey(userKey) {
			return "", false
		}
		seeks++
		it := tbl.NewIterator(0)
		defer it.Close()
		it.Seek(y.KeyWithTs(userKey, math.MaxUint64))
		if !it.Valid() || !bytes.Equal(y.ParseKey(it.Key()), userKey) {
			return "", false
		}
		return string(it.Value().Value), true
	}

	v, ok := get([]byte("user:04242"))
	fmt.Println("user:04242:", v, ok)
	for i := 0; i < 5000; i++ {
		if _, ok := get(fmt.Appendf(nil, "user:%05d", 2*i+1)); ok {
			log.Fatal("an absent key was found")
		}
	}
	fmt.Println("5000 absent keys, table seeks under 100:", seeks-1 < 100)
	// Output:
	// user:04242: value true
	// 5000 absent keys, table seeks under 100: true
}
