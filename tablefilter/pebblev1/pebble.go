package pebblev1

import (
	"github.com/cockroachdb/pebble"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// The range of budgets NewPolicy accepts: below MinBitsPerKey the codec
// cannot honour a budget, and above MaxBitsPerKey fingerprints are at
// their widest and further bits buy almost nothing (the same range as
// package tablefilter's).
const (
	MinBitsPerKey = 4
	MaxBitsPerKey = 64
)

// The shared core checks budgets against the same range.
var (
	_ [MinBitsPerKey - pebblecore.MinBitsPerKey]struct{}
	_ [pebblecore.MinBitsPerKey - MinBitsPerKey]struct{}
	_ [MaxBitsPerKey - pebblecore.MaxBitsPerKey]struct{}
	_ [pebblecore.MaxBitsPerKey - MaxBitsPerKey]struct{}
)

// Policy is a pebble.FilterPolicy of Pebble v1 that stores each table's
// keys in an lsmcuckoo filter block (see package codec). Its names and
// blocks are those of package tablefilter's Policy for Pebble v2: a table
// written by either is read with its filter by the other.
//
// The budget is the whole block divided by the number of distinct keys:
// the versions of an MVCC key, which Pebble hands to the filter as repeats
// of one prefix, count once.
//
// A Policy is a small comparable value, safe for concurrent use; the
// writers it returns are not (see NewWriter). The zero value is the
// version-3 policy of codec.DefaultBitsPerKey bits per key, with that name.
type Policy struct {
	core pebblecore.Policy
}

var _ pebble.FilterPolicy = Policy{}

// NewPolicy returns the policy for a budget of bitsPerKey bits per distinct
// key, writing codec format version 3 under the name
// "lsmcuckoo.v3.bpk=<bits>": a negative lookup reads one 64-byte line of
// the filter in the common case, like Pebble's blocked bloom filter. It
// panics unless MinBitsPerKey <= bitsPerKey <= MaxBitsPerKey, like Pebble's
// bloom.FilterPolicy panics on a nonsensical setting: a configuration
// error should stop the process before any table is written.
func NewPolicy(bitsPerKey float64) Policy {
	pebblecore.CheckBitsPerKey("pebblev1", bitsPerKey)
	return Policy{pebblecore.New(bitsPerKey, codec.FormatVersion, false)}
}

// NewDensestPolicy is NewPolicy with version 3's densest layout
// (codec.Options.Densest), named "lsmcuckoo.v3.densest.bpk=<bits>": lines
// filled for the lowest false-positive rate the budget buys, at the price
// of more negative lookups reading a second line. Run it where a false
// positive costs a read from a device, which dwarfs a cache miss.
func NewDensestPolicy(bitsPerKey float64) Policy {
	pebblecore.CheckBitsPerKey("pebblev1", bitsPerKey)
	return Policy{pebblecore.New(bitsPerKey, codec.FormatVersion, true)}
}

// NewV4Policy is NewPolicy for codec format version 4, named
// "lsmcuckoo.v4.bpk=<bits>", package tablefilter's NewV4Policy: the lowest
// false-positive rate lsmcuckoo writes for a budget. Each 64-byte line
// holds its keys as the solution of a linear system over GF(2) rather than
// as fingerprints (codec/FORMAT.md); its lines are full, and a good share
// of negative lookups read a second line. Only a reader of this release
// reads version-4 blocks (an older one answers "maybe" for them); every
// Policy reads them.
func NewV4Policy(bitsPerKey float64) Policy {
	pebblecore.CheckBitsPerKey("pebblev1", bitsPerKey)
	return Policy{pebblecore.New(bitsPerKey, codec.NewestVersion, false)}
}

// Version returns the codec format version the policy writes.
func (p Policy) Version() int { return p.core.Version() }

// BitsPerKey returns the policy's budget.
func (p Policy) BitsPerKey() float64 { return p.core.BitsPerKey() }

// Name returns "lsmcuckoo.v3.bpk=<bits>" (NewPolicy),
// "lsmcuckoo.v3.densest.bpk=<bits>" (NewDensestPolicy) or
// "lsmcuckoo.v4.bpk=<bits>" (NewV4Policy), the shortest
// decimal of the budget that parses back to it, so PolicyFromName(p.Name())
// returns p. Pebble writes the name into every table and the OPTIONS file
// and reads a table's filter only through a policy registered under that
// exact name.
func (p Policy) Name() string { return p.core.Name() }

// String returns the name.
func (p Policy) String() string { return p.core.Name() }

// MayContain reports whether the table whose filter block is filter may
// hold key (its Split prefix under a comparer with Split). It answers
// false only when a well-formed block proves the key absent: for a
// truncated or malformed block, a block of another format version, or a
// FilterType it does not know, it answers true. It is safe for concurrent
// use, does not allocate, and does not retain filter or key.
func (p Policy) MayContain(ftype pebble.FilterType, filter, key []byte) bool {
	if ftype != pebble.TableFilter {
		return true
	}
	return p.core.MayContain(filter, key)
}

// NewWriter returns a writer for one table's filter: it keeps 8 bytes per
// distinct key until Finish, which resets it for reuse.
//
// One writer serves one goroutine, like the codec.Builder under it: Pebble
// gives each table writer its own, and code that feeds a writer itself must
// too. AddKey calls from two goroutines race on the builder's key list, and
// the keys lost there are missing from the block, so the filter answers
// "absent" for keys the table holds: false negatives, with no error.
// NewWriter itself is safe for concurrent use. For a FilterType other than
// Pebble's single one it returns the same table writer rather than
// panicking inside a compaction; MayContain answers true for that type.
func (p Policy) NewWriter(ftype pebble.FilterType) pebble.FilterWriter {
	return p.core.NewWriter()
}

// PolicyFromName returns the policy whose Name is name, or false if name
// is not a policy name lsmcuckoo writes: the names of format versions 1
// to 4 (and version 3's densest layout) are all recognised, so tables a
// Pebble v2 store wrote with any of tablefilter's writers stay readable.
// Names with a non-canonical number ("bpk=10.0") are rejected because no
// policy writes them.
func PolicyFromName(name string) (pebble.FilterPolicy, bool) {
	p, ok := pebblecore.FromName(name)
	if !ok {
		return nil, false
	}
	return Policy{p}, true
}

// ParseFilterPolicy has the signature of pebble.ParseHooks.NewFilterPolicy,
// so that Options.Parse can turn the filter_policy lines of an OPTIONS file
// back into policies:
//
//	hooks := &pebble.ParseHooks{NewFilterPolicy: pebblev1.ParseFilterPolicy}
//	err := opts.Parse(optionsFileText, hooks)
//
// It returns the lsmcuckoo policy of that name (PolicyFromName), and a nil
// policy with a nil error for "none": Pebble v1 has no NoFilterPolicy and
// writes a level without a policy under that name. Any other name is an
// error naming it: a store that also runs another family, such as Pebble's
// bloom filter, wraps this function and handles those names first.
func ParseFilterPolicy(name string) (pebble.FilterPolicy, error) {
	if p, ok := PolicyFromName(name); ok {
		return p, nil
	}
	if name == noFilterName {
		return nil, nil
	}
	return nil, pebblecore.ParseError("pebblev1", name, noFilterName)
}

// noFilterName is what Pebble v1 writes in OPTIONS for a nil policy.
const noFilterName = "none"

// RegisterPolicies adds to o.Filters, for each budget, a policy under each
// name lsmcuckoo has written for it (version 3 and its densest layout,
// versions 2 and 1, and version 4), so that tables written with those budgets are read
// with their filters. Pebble registers the policies of o.Levels itself
// when it opens the store; what it cannot know is which other names the
// store's existing tables carry. Call this with every budget the store has
// been configured with until compactions have rewritten the tables
// written under old settings. A budget of NoFilter (a level LevelBudgets
// left without a filter) has no name and adds nothing. It panics on any
// other invalid budget, as NewPolicy does, before writing anything.
//
// It installs a new map in o.Filters and never writes into the map o held:
// pebble.Open copies Options shallowly, so a store opened with o reads that
// very map whenever it opens a table.
func RegisterPolicies(o *pebble.Options, bitsPerKey ...float64) {
	o.Filters = pebblecore.WithFamilies(o.Filters, "pebblev1", bitsPerKey,
		func(p pebblecore.Policy) pebble.FilterPolicy { return Policy{p} })
}
