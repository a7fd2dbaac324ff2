package pebblestore

import (
	"math/rand/v2"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// Family kinds of a table's filter name.
const (
	KindNone      = "none"      // written without a filter
	KindBloom     = "bloom"     // Pebble's bloom filter
	KindLsmcuckoo = "lsmcuckoo" // a name tablefilter.PolicyFromName knows
	KindUnknown   = "unknown"   // a name neither knows: Pebble reads such a table unfiltered unless the application registers it
	KindBadger    = "badger"    // Badger's bloom filter, in a Badger store
	KindKvdemo    = "kvdemo"    // a kvdemo table's cuckoo filter file
)

// BadgerBloomName is the family name of Badger's bloom filter (y.Filter).
const BadgerBloomName = "badger.bloom"

// NoneName is the family name reported for tables without a filter, the
// name Pebble writes into OPTIONS for such a level.
const NoneName = "none"

// Kind classifies a filter name.
func Kind(name string) string {
	switch {
	case name == "":
		return KindNone
	case name == BloomName:
		return KindBloom
	case name == BadgerBloomName:
		return KindBadger
	case strings.HasSuffix(name, " (.cf)"):
		return KindKvdemo
	}
	if _, ok := tablefilter.PolicyFromName(name); ok {
		return KindLsmcuckoo
	}
	return KindUnknown
}

// FamilyName is the name under which a table's filter is counted: its
// policy name, or "none".
func (t *Table) FamilyName() string {
	if t.FilterName == "" {
		return NoneName
	}
	return t.FilterName
}

// policy returns a reader for the table's filter block, or false if this
// package cannot read blocks of that name.
func policy(name string) (pebble.FilterPolicy, bool) {
	switch Kind(name) {
	case KindBloom:
		// A bloom block records its own probe count; the bits per key
		// of the reading policy play no part in MayContain.
		return bloom.FilterPolicy(10), true
	case KindLsmcuckoo:
		return tablefilter.PolicyFromName(name)
	}
	return nil, false
}

// Probe asks the table's real filter block about n random keys of 16 bytes,
// absent from the table with overwhelming probability, and returns how many
// it could not exclude. The keys stand for what the filter sees: a key's
// Split prefix, or the whole key under a comparer without Split. ok is false
// for a table whose filter cannot be probed (none, an unknown name, damaged).
func (t *Table) Probe(n int, rng *rand.Rand) (falsePositives int, ok bool) {
	if t.Damaged != "" || t.Filter == nil {
		return 0, false
	}
	mayContain := t.MayContain
	if mayContain == nil {
		p, ok := policy(t.FilterName)
		if !ok {
			return 0, false
		}
		mayContain = func(key []byte) bool { return p.MayContain(pebble.TableFilter, t.Filter, key) }
	}
	var key [16]byte
	for i := 0; i < n; i++ {
		for j := 0; j < len(key); j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8; k++ {
				key[j+k] = byte(v >> (8 * k))
			}
		}
		if mayContain(key[:]) {
			falsePositives++
		}
	}
	return falsePositives, true
}

// LsmcuckooBudget returns the bits per key in an lsmcuckoo policy name.
func LsmcuckooBudget(name string) (float64, bool) {
	p, ok := tablefilter.PolicyFromName(name)
	if !ok {
		return 0, false
	}
	if b, ok := p.(tablefilter.Policy); ok {
		return b.BitsPerKey(), true
	}
	return 0, false
}

// IsLsmcuckooName reports whether name looks like an lsmcuckoo policy name,
// known or not (a future format version).
func IsLsmcuckooName(name string) bool { return strings.HasPrefix(name, "lsmcuckoo.") }
