package tablefilter_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"log"
	"os"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// mvccComparer orders keys bytewise and splits each into an 8-byte user
// key, the prefix Pebble hands the filters, and the version after it (as
// CockroachDB's comparer splits off its timestamps). Bytewise order is
// prefix order then version order because every prefix has the same
// length; a shorter key (a separator Pebble derives) is all prefix.
var mvccComparer = func() *pebble.Comparer {
	c := *pebble.DefaultComparer
	c.Name = "example.user8.version8"
	c.Split = func(k []byte) int { return min(len(k), 8) }
	return &c
}()

func mvccKey(user, version uint64) []byte {
	k := binary.BigEndian.AppendUint64(nil, user)
	return binary.BigEndian.AppendUint64(k, version)
}

func policyNames(db *pebble.DB) map[int]string {
	levels, err := db.SSTables(pebble.WithProperties())
	if err != nil {
		log.Fatal(err)
	}
	names := map[int]string{}
	for level, tables := range levels {
		for _, t := range tables {
			names[level] = t.Properties.FilterPolicyName
		}
	}
	return names
}

// Per-level budgets for MVCC point reads: SeekPrefixGE with UseL6Filters
// consults a filter on every level, L6 included, so an absent key reads no
// block when every filter rules it out. SetLevelPolicies gives the small
// upper levels more bits per key and L6 a little less than the average.
func ExampleSetLevelPolicies() {
	dir, err := os.MkdirTemp("", "lsmcuckoo-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	opts := &pebble.Options{Comparer: mvccComparer}
	tablefilter.SetLevelPolicies(opts, 10) // on every Open: Pebble does not restore it from OPTIONS
	db, err := pebble.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	for version := uint64(1); version <= 3; version++ { // three versions of the even user keys
		for user := uint64(0); user < 2000; user += 2 {
			if err := db.Set(mvccKey(user, version), []byte("v"), pebble.NoSync); err != nil {
				log.Fatal(err)
			}
		}
		if err := db.Flush(); err != nil { // an L0 table per version
			log.Fatal(err)
		}
	}
	// A manual compaction merges the L0 tables into the bottom level, L6,
	// with L6's policy. (A lone table that overlaps nothing would be moved
	// down instead, keeping the filter it was written with.)
	if err := db.Compact(context.Background(), mvccKey(0, 0), mvccKey(1<<62, 0), false); err != nil {
		log.Fatal(err)
	}
	fmt.Println("L6 tables carry", policyNames(db)[6], "=", opts.Levels[6].FilterPolicy.Name())

	iter, err := db.NewIter(&pebble.IterOptions{UseL6Filters: true})
	if err != nil {
		log.Fatal(err)
	}
	found := 0
	for user := uint64(1); user < 2000; user += 2 { // the odd user keys: absent
		if iter.SeekPrefixGE(mvccKey(user, 0)) {
			found++
		}
	}
	if err := iter.Close(); err != nil {
		log.Fatal(err)
	}
	m := db.Metrics()
	fmt.Println("absent prefixes found:", found)
	fmt.Println("L6 filter ruled out most of them:", m.Filter.Hits > 900)
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// L6 tables carry lsmcuckoo.v3.bpk=9.5 = lsmcuckoo.v3.bpk=9.5
	// absent prefixes found: 0
	// L6 filter ruled out most of them: true
}

// Budgets fitted to a live tree: measure the store's shape, close it, set
// the budgets and reopen. Tables written before keep their filters, which
// the new options still read, and new tables get the fitted budgets.
func ExampleLevelBudgets() {
	dir, err := os.MkdirTemp("", "lsmcuckoo-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	opts := &pebble.Options{}
	opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)
	db, err := pebble.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	put := func(from, to int) {
		for i := from; i < to; i += 2 {
			if err := db.Set(fmt.Appendf(nil, "key%06d", i), []byte("value"), pebble.NoSync); err != nil {
				log.Fatal(err)
			}
		}
	}
	put(0, 100000) // the bulk, compacted to L6
	if err := db.Compact(context.Background(), []byte("key"), []byte("kez"), false); err != nil {
		log.Fatal(err)
	}
	put(100000, 102000) // a few recent keys, flushed to L0
	if err := db.Flush(); err != nil {
		log.Fatal(err)
	}

	budgets := tablefilter.LevelBudgets(tablefilter.MeasuredLevelShape(db.Metrics()), 10)
	fmt.Println("L0 gets more bits per key than L6:", budgets[0] > budgets[6])
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}

	tablefilter.SetLevelBudgets(opts, budgets) // also registers every budget it may have chosen before
	db, err = pebble.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	// The L0 table written before the reopen (lsmcuckoo.v2.bpk=10) is
	// still read with its filter: Gets of absent keys in its range are
	// ruled out without reading a data block.
	for i := 100001; i < 102000; i += 2 {
		if _, _, err := db.Get(fmt.Appendf(nil, "key%06d", i)); err != pebble.ErrNotFound {
			log.Fatal(err)
		}
	}
	fmt.Println("old L0 table's filter used:", db.Metrics().Filter.Hits > 900)

	put(200000, 202000)
	if err := db.Flush(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("new L0 table carries the fitted budget:",
		policyNames(db)[0] == tablefilter.NewPolicy(budgets[0]).Name())
	if err := db.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// L0 gets more bits per key than L6: true
	// old L0 table's filter used: true
	// new L0 table carries the fitted budget: true
}
