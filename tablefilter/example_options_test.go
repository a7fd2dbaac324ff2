package tablefilter_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// Pebble records each level's filter policy in the store's OPTIONS file
// but never restores it on Open. A tool that reads the file gets the
// policies back through ParseFilterPolicy, "none" included.
func ExampleParseFilterPolicy() {
	dir, err := os.MkdirTemp("", "lsmcuckoo-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	opts := &pebble.Options{}
	tablefilter.SetLevelPolicies(opts, 10)
	opts.Levels[6].FilterPolicy = pebble.NoFilterPolicy // a store that only ever calls Get
	db, err := pebble.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	files, err := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if err != nil || len(files) == 0 {
		log.Fatal("no OPTIONS file", err)
	}
	text, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		log.Fatal(err)
	}
	var parsed pebble.Options
	hooks := &pebble.ParseHooks{NewFilterPolicy: tablefilter.ParseFilterPolicy}
	if err := parsed.Parse(string(text), hooks); err != nil {
		log.Fatal(err)
	}
	for _, l := range []int{0, 5, 6} {
		fmt.Printf("L%d %s\n", l, parsed.Levels[l].FilterPolicy.Name())
	}
	_, err = tablefilter.ParseFilterPolicy("rocksdb.BuiltinBloomFilter")
	fmt.Println(err != nil)
	// Output:
	// L0 lsmcuckoo.v3.bpk=32
	// L5 lsmcuckoo.v3.bpk=14
	// L6 none
	// true
}
