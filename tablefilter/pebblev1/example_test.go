package pebblev1_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// gethStyleLevels is the level layout go-ethereum gives Pebble v1: target
// file sizes doubling from 2 MiB, the given filter on L0 to L5, none on L6
// (Get never reads L6's filters, and L6 holds most of the keys).
func gethStyleLevels(filter pebble.FilterPolicy) []pebble.LevelOptions {
	levels := make([]pebble.LevelOptions, pebblev1.NumLevels)
	for l := range levels {
		levels[l].TargetFileSize = 2 << 20 << l
		if l < len(levels)-1 {
			levels[l].FilterPolicy = filter
		}
	}
	return levels
}

// A Pebble v1 store configured as go-ethereum configures it, bloom(10) on
// L0 to L5, switched to lsmcuckoo: the same layout with the policy in
// bloom's place, and bloom's name kept registered so that the tables
// written before the switch keep their filters until compactions rewrite
// them. Pebble reads a table whose filter name is not registered without
// its filter, silently.
func Example_fromBloom() {
	dir, err := os.MkdirTemp("", "lsmcuckoo-pebblev1-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	// Keys in go-ethereum's shape: a one-byte prefix and a 32-byte hash.
	key := func(i int) []byte {
		h := sha256.Sum256(fmt.Appendf(nil, "account %d", i))
		return append([]byte("a"), h[:]...)
	}
	session := func(opts *pebble.Options, from, to int) *pebble.DB {
		db, err := pebble.Open(dir, opts)
		if err != nil {
			log.Fatal(err)
		}
		for i := from; i < to; i++ {
			if err := db.Set(key(i), []byte("account"), pebble.NoSync); err != nil {
				log.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil { // one L0 table per session
			log.Fatal(err)
		}
		return db
	}
	options := func(filter pebble.FilterPolicy) *pebble.Options {
		return &pebble.Options{
			Levels: gethStyleLevels(filter),
			// Pebble v2 opens nothing older: set it before a move to v2.
			FormatMajorVersion:          pebble.FormatFlushableIngest,
			DisableAutomaticCompactions: true, // keep the two tables apart for the example
		}
	}

	// Before: the bloom store.
	if err := session(options(bloom.FilterPolicy(10)), 0, 1000).Close(); err != nil {
		log.Fatal(err)
	}

	// After: lsmcuckoo where bloom was, bloom's name still registered.
	opts := options(pebblev1.NewPolicy(10))
	opts.Filters = map[string]pebble.FilterPolicy{bloom.FilterPolicy(10).Name(): bloom.FilterPolicy(10)}
	db := session(opts, 1000, 2000)
	defer db.Close()

	tables, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range tables[0] {
		fmt.Println("L0 table filtered by", t.Properties.FilterPolicyName)
	}
	// Absent keys: each Get meets both tables, and each table's filter is
	// consulted.
	before := db.Metrics().Filter
	for i := 2000; i < 2100; i++ {
		if _, _, err := db.Get(key(i)); !errors.Is(err, pebble.ErrNotFound) {
			log.Fatal(err)
		}
	}
	after := db.Metrics().Filter
	fmt.Println("filter checks for 100 absent Gets:", after.Hits+after.Misses-before.Hits-before.Misses)
	v, closer, err := db.Get(key(7))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a key from before the switch:", string(v))
	if err := closer.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// L0 table filtered by rocksdb.BuiltinBloomFilter
	// L0 table filtered by lsmcuckoo.v3.bpk=10
	// filter checks for 100 absent Gets: 200
	// a key from before the switch: account
}
