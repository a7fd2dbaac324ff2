package tablefilter_test

import (
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// Pebble: one line of configuration. Every table Pebble writes from then on
// carries a cuckoo filter, which Get consults on L0-L5.
func ExampleNewPolicy() {
	dir, err := os.MkdirTemp("", "lsmcuckoo-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	opts := &pebble.Options{}
	opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(10) // the other levels inherit it

	db, err := pebble.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	for _, k := range []string{"apple", "hello", "zebra"} {
		if err := db.Set([]byte(k), []byte("world"), pebble.Sync); err != nil {
			log.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil { // write the memtable out as a table, with its filter
		log.Fatal(err)
	}

	value, closer, err := db.Get([]byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("hello=%s\n", value)
	closer.Close()

	// Absent keys inside the table's key range: its filter rules them out
	// without reading a data block (all but a rare false positive: the
	// filter's seed is random, so print a bound, not a count).
	for _, k := range []string{"goodbye", "kiwi", "lemon", "mango", "pear", "plum", "quince", "rhubarb", "salt", "tea"} {
		if _, _, err := db.Get([]byte(k)); !errors.Is(err, pebble.ErrNotFound) {
			log.Fatal(k, err)
		}
	}
	fmt.Println("filter rejections >= 9 of 10:", db.Metrics().Filter.Hits >= 9)

	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// hello=world
	// filter rejections >= 9 of 10: true
}

// A store whose tables were written with 10 bits per key, now configured
// with 12: register the old setting too, or Pebble reads those tables
// without their filters until compactions rewrite them.
func ExampleRegisterPolicies() {
	opts := &pebble.Options{}
	opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(12)
	tablefilter.RegisterPolicies(opts, 10)
	for _, bpk := range []float64{10, 12} {
		_, ok := opts.Filters[tablefilter.NewPolicy(bpk).Name()]
		fmt.Println(tablefilter.NewPolicy(bpk).Name(), ok)
	}
	// Tables written before the upgrade to format version 3 carry the
	// version-2 name, and older ones the version-1 name; RegisterPolicies
	// covers them too.
	for _, old := range []string{"lsmcuckoo.v2.bpk=10", "lsmcuckoo.v1.bpk=10"} {
		_, ok := opts.Filters[old]
		fmt.Println(old, ok)
	}
	// Output:
	// lsmcuckoo.v3.bpk=10 true
	// lsmcuckoo.v3.bpk=12 false
	// lsmcuckoo.v2.bpk=10 true
	// lsmcuckoo.v1.bpk=10 true
}

// Policy names parse back, for pebble.ParseHooks.NewFilterPolicy or for
// names found in a store's tables.
func ExamplePolicyFromName() {
	for _, name := range []string{"lsmcuckoo.v3.bpk=9.5", "lsmcuckoo.v2.bpk=9.5", "lsmcuckoo.v1.bpk=9.5"} {
		p, ok := tablefilter.PolicyFromName(name)
		fmt.Println(p.Name(), p.(tablefilter.Policy).Version(), ok)
	}
	_, ok := tablefilter.PolicyFromName("rocksdb.BuiltinBloomFilter")
	fmt.Println(ok)
	// Output:
	// lsmcuckoo.v3.bpk=9.5 3 true
	// lsmcuckoo.v2.bpk=9.5 2 true
	// lsmcuckoo.v1.bpk=9.5 1 true
	// false
}
