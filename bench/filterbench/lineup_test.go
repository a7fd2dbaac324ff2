package filterbench

import (
	"fmt"

	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// The tests' line-up: every family constructor, and lsmcuckoo's older
// format versions through their Pebble policies, at a low and a high
// budget.

func cuckooV2(bitsPerKey float64) Family {
	return Family{Name: fmt.Sprintf("lsmcuckoo-v2/%g", bitsPerKey), Kind: "lsmcuckoo-v2", Param: bitsPerKey,
		Policy: tablefilter.NewV2Policy(bitsPerKey)}
}

func cuckooV1(bitsPerKey float64) Family {
	return Family{Name: fmt.Sprintf("lsmcuckoo-v1/%g", bitsPerKey), Kind: "lsmcuckoo-v1", Param: bitsPerKey,
		Policy: tablefilter.NewV1Policy(bitsPerKey)}
}

func testFamilies() []Family {
	var fams []Family
	for _, b := range []int{10, 16} {
		fams = append(fams, Cuckoo(float64(b)), CuckooDensest(float64(b)), CuckooV4(float64(b)), cuckooV2(float64(b)), cuckooV1(float64(b)),
			PebbleBloom(b), BadgerBloom(b))
	}
	return append(fams, Cuckoo(9.6), CuckooDensest(15.9), CuckooV4(9.6), PebbleBloom(6), BadgerBloom(0), BinaryFuse(4), BinaryFuse(8), BinaryFuse(10), BinaryFuse(12), BinaryFuse(16))
}
