package main

import (
	"fmt"
	"math"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/bench/binaryfuse"
	"github.com/lsmcuckoo/lsmcuckoo/bench/filterbench"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// The report's line-ups of the filter level.

// cuckooV2 is lsmcuckoo in codec format version 2 (tablefilter.NewV2Policy):
// one line per lookup like version 3, with lines of four-slot buckets.
func cuckooV2(bitsPerKey float64) filterbench.Family {
	return filterbench.Family{Name: fmt.Sprintf("lsmcuckoo-v2/%g", bitsPerKey), Kind: "lsmcuckoo-v2", Param: bitsPerKey,
		Policy: tablefilter.NewV2Policy(bitsPerKey)}
}

// cuckooV1 is lsmcuckoo in codec format version 1 (tablefilter.NewV1Policy):
// the denser layout whose lookups read an offset table, then the buckets.
func cuckooV1(bitsPerKey float64) filterbench.Family {
	return filterbench.Family{Name: fmt.Sprintf("lsmcuckoo-v1/%g", bitsPerKey), Kind: "lsmcuckoo-v1", Param: bitsPerKey,
		Policy: tablefilter.NewV1Policy(bitsPerKey)}
}

// families is the standard line-up.
func families() []filterbench.Family {
	return []filterbench.Family{
		filterbench.Cuckoo(10), filterbench.CuckooDensest(10), filterbench.CuckooV4(10), cuckooV2(10), cuckooV1(10), filterbench.PebbleBloom(10),
		filterbench.Cuckoo(16), filterbench.CuckooDensest(16), filterbench.CuckooV4(16), cuckooV2(16), cuckooV1(16), filterbench.PebbleBloom(16),
		filterbench.Cuckoo(9.6), filterbench.Cuckoo(10.6), filterbench.Cuckoo(12), filterbench.Cuckoo(15.9),
		filterbench.CuckooDensest(9.6), filterbench.CuckooDensest(10.6), filterbench.CuckooDensest(12), filterbench.CuckooDensest(15.9),
		filterbench.CuckooV4(9.6), filterbench.CuckooV4(10.6), filterbench.CuckooV4(12), filterbench.CuckooV4(15.9),
		cuckooV2(9.6), cuckooV2(10.6), cuckooV2(12), cuckooV2(15.9),
		cuckooV1(9.6), cuckooV1(10.6), cuckooV1(15.9),
		filterbench.PebbleBloom(6),
		filterbench.BadgerBloom(0), filterbench.BadgerBloom(10), filterbench.BadgerBloom(16),
		filterbench.BinaryFuse(4), filterbench.BinaryFuse(8), filterbench.BinaryFuse(10), filterbench.BinaryFuse(12), filterbench.BinaryFuse(16),
	}
}

// coreFamilies is the side-by-side of the format versions: lsmcuckoo
// version 3 (the default, and its densest layout), version 4, version 2 and version 1
// beside Pebble's bloom filter at each budget (every whole budget from 8
// to 16 bits per key when none is given).
func coreFamilies(bitsPerKey ...int) []filterbench.Family {
	if len(bitsPerKey) == 0 {
		bitsPerKey = []int{8, 9, 10, 11, 12, 13, 14, 15, 16}
	}
	var fams []filterbench.Family
	for _, bpk := range bitsPerKey {
		fams = append(fams, filterbench.Cuckoo(float64(bpk)), filterbench.CuckooDensest(float64(bpk)), filterbench.CuckooV4(float64(bpk)), cuckooV2(float64(bpk)), cuckooV1(float64(bpk)), filterbench.PebbleBloom(bpk))
	}
	return fams
}

// plotFamilies is the line-up with enough settings per family to draw the
// FPR-vs-space curves of the full report.
func plotFamilies() []filterbench.Family {
	return []filterbench.Family{
		filterbench.Cuckoo(7), filterbench.Cuckoo(8), filterbench.Cuckoo(9), filterbench.Cuckoo(9.6), filterbench.Cuckoo(10), filterbench.Cuckoo(10.6), filterbench.Cuckoo(11), filterbench.Cuckoo(12), filterbench.Cuckoo(13), filterbench.Cuckoo(14), filterbench.Cuckoo(15), filterbench.Cuckoo(15.9), filterbench.Cuckoo(16), filterbench.Cuckoo(18),
		filterbench.CuckooDensest(8), filterbench.CuckooDensest(9), filterbench.CuckooDensest(9.6), filterbench.CuckooDensest(10), filterbench.CuckooDensest(10.6), filterbench.CuckooDensest(11), filterbench.CuckooDensest(12), filterbench.CuckooDensest(13), filterbench.CuckooDensest(14), filterbench.CuckooDensest(15.9), filterbench.CuckooDensest(16),
		filterbench.CuckooV4(4), filterbench.CuckooV4(5), filterbench.CuckooV4(6), filterbench.CuckooV4(7), filterbench.CuckooV4(8), filterbench.CuckooV4(9), filterbench.CuckooV4(9.6), filterbench.CuckooV4(10), filterbench.CuckooV4(10.6), filterbench.CuckooV4(11), filterbench.CuckooV4(12), filterbench.CuckooV4(13), filterbench.CuckooV4(14), filterbench.CuckooV4(15.9), filterbench.CuckooV4(16),
		cuckooV2(8), cuckooV2(9), cuckooV2(9.6), cuckooV2(10), cuckooV2(10.6), cuckooV2(11), cuckooV2(12), cuckooV2(14), cuckooV2(15.9), cuckooV2(16),
		cuckooV1(8), cuckooV1(9.6), cuckooV1(10), cuckooV1(10.6), cuckooV1(12), cuckooV1(14), cuckooV1(15.9), cuckooV1(16),
		filterbench.PebbleBloom(6), filterbench.PebbleBloom(8), filterbench.PebbleBloom(9), filterbench.PebbleBloom(10), filterbench.PebbleBloom(11), filterbench.PebbleBloom(12), filterbench.PebbleBloom(13), filterbench.PebbleBloom(14), filterbench.PebbleBloom(15), filterbench.PebbleBloom(16), filterbench.PebbleBloom(20),
		filterbench.BadgerBloom(0), filterbench.BadgerBloom(10), filterbench.BadgerBloom(16),
		filterbench.BinaryFuse(4), filterbench.BinaryFuse(8), filterbench.BinaryFuse(10), filterbench.BinaryFuse(12), filterbench.BinaryFuse(16),
	}
}

// fuseWidths are the binary fuse widths the fuse line-up compares: those
// whose rates the budgets of table filters span.
var fuseWidths = []int{8, 10, 12, 16}

// fuseFamilies is the line-up against binary fuse at one table size: each
// fuse width beside lsmcuckoo's version 4 (the layout to hold against
// fuse) and version 3's default and densest layouts at that fuse's
// bytes on these keys (a fuse filter's overhead depends on the table's
// size), and Pebble's bloom at the nearest whole budget; then bloom/10,
// the report's baseline, and Badger's y.Filter at its default sizing and
// at 10 bits/key.
func fuseFamilies(keys [][]byte) []filterbench.Family {
	fams := []filterbench.Family{filterbench.PebbleBloom(10), filterbench.BadgerBloom(0), filterbench.BadgerBloom(10)}
	for _, w := range fuseWidths {
		size := filterBytes(binaryfuse.NewPolicy(w), keys)
		fams = append(fams, filterbench.BinaryFuse(w),
			filterbench.Cuckoo(budgetWithin(func(b float64) pebble.FilterPolicy { return tablefilter.NewPolicy(b) }, keys, size)),
			filterbench.CuckooDensest(budgetWithin(func(b float64) pebble.FilterPolicy { return tablefilter.NewDensestPolicy(b) }, keys, size)),
			filterbench.CuckooV4(budgetWithin(func(b float64) pebble.FilterPolicy { return tablefilter.NewV4Policy(b) }, keys, size)))
		if b := int(math.Round(float64(8*size) / float64(len(keys)))); b != 10 {
			fams = append(fams, filterbench.PebbleBloom(b))
		}
	}
	return fams
}

// budgetWithin is the largest budget, in hundredths of a bit per key, at
// which the policy's filter over keys takes at most size bytes: the
// budget counts the fingerprints' lines, not the block's header and
// trailer, so it starts at size's bits per key and steps down by the
// excess.
func budgetWithin(policy func(bitsPerKey float64) pebble.FilterPolicy, keys [][]byte, size int) float64 {
	perKey := func(bytes int) float64 { return float64(8*bytes) / float64(max(1, len(keys))) }
	b := math.Floor(perKey(size)*100) / 100
	for range 8 {
		got := filterBytes(policy(b), keys)
		if got <= size {
			break
		}
		b -= math.Ceil(perKey(got-size)*100)/100 + 0.01
	}
	return b
}

func filterBytes(p pebble.FilterPolicy, keys [][]byte) int {
	w := p.NewWriter(pebble.TableFilter)
	for _, k := range keys {
		w.AddKey(k)
	}
	return len(w.Finish(nil))
}
