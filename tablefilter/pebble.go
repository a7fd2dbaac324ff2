package tablefilter

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// pebbleNamePrefix starts every policy name. It carries the family and the
// codec format version: a reader that meets a block written under another
// version must not be handed it, and Pebble routes blocks to policies by
// name alone (see Policy.Name).
var pebbleNamePrefix = fmt.Sprintf("lsmcuckoo.v%d.bpk=", codec.FormatVersion)

// The range of budgets NewPolicy accepts. Below MinBitsPerKey the codec
// cannot honour the budget at all (5-bit fingerprints at 97% load already
// take 4.2 bits per key); above MaxBitsPerKey the filter has 16-bit
// fingerprints in buckets under a quarter full (false-positive rate about
// 3e-5) and further bits buy almost nothing.
const (
	MinBitsPerKey = 4
	MaxBitsPerKey = 64
)

// Policy is a pebble.FilterPolicy that stores each table's keys in an
// lsmcuckoo filter block (see package codec). Adopting it is one line:
//
//	opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)
//
// (levels left unset inherit L0's policy).
//
// False-positive rates measured through the policy's writer and MayContain
// on 1M random 16-byte keys and 2M absent keys, beside Pebble's bloom
// filter at the same setting (go test ./tablefilter -run XXX -bench
// PebblePolicyFPR):
//
//	bits/key  fingerprint  load   FPR       bloom.FilterPolicy FPR
//	6         6            0.83   10.1%     5.9%
//	8         8            0.88   2.7%      2.5%
//	9         9            0.89   1.4%      1.7%
//	10        10           0.90   0.70%     1.18%
//	12        12           0.92   0.175%    0.68%
//	14        14           0.93   0.045%    0.45%
//	16        16           0.94   0.013%    0.37%
//	20        16           0.75   0.0096%   0.28%
//
// The cuckoo filter wins from about 9 bits per key up, by a factor that
// grows with the budget (1.7x at 10, 28x at 16); below 8 bits per key a
// bloom filter is the better choice. Building costs about 55 ns per key
// against the bloom filter's 18-28 ns on the same machine.
//
// The budget is the whole block (header, offset table, buckets, checksum)
// divided by the number of distinct keys: the versions of an MVCC key, which
// Pebble hands to the filter as repeats of one prefix, count once.
//
// A Policy is a small comparable value. The zero value is the policy of
// codec.DefaultBitsPerKey (10) bits per key, with that name.
type Policy struct {
	bitsPerKey float64
}

var _ pebble.FilterPolicy = Policy{}

// NewPolicy returns the policy for a budget of bitsPerKey bits per distinct
// key. It panics unless MinBitsPerKey <= bitsPerKey <= MaxBitsPerKey, like
// Pebble's bloom.FilterPolicy panics on a nonsensical setting: a
// configuration error should stop the process before any table is written.
func NewPolicy(bitsPerKey float64) Policy {
	if !pebbleValidBitsPerKey(bitsPerKey) {
		panic(fmt.Sprintf("tablefilter: bits per key %v outside [%d, %d]", bitsPerKey, MinBitsPerKey, MaxBitsPerKey))
	}
	return Policy{bitsPerKey: bitsPerKey}
}

func pebbleValidBitsPerKey(b float64) bool {
	// NaN fails both comparisons.
	return b >= MinBitsPerKey && b <= MaxBitsPerKey
}

// BitsPerKey returns the policy's budget.
func (p Policy) BitsPerKey() float64 {
	if p.bitsPerKey == 0 {
		return codec.DefaultBitsPerKey
	}
	return p.bitsPerKey
}

// Name returns "lsmcuckoo.v<format>.bpk=<bits>", for example
// "lsmcuckoo.v1.bpk=10" or "lsmcuckoo.v1.bpk=9.5". The number is the
// shortest decimal that parses back to the same float64, so every budget
// has exactly one name and PolicyFromName(p.Name()) returns
// NewPolicy(p.BitsPerKey()).
//
// Pebble writes the name into every table (as the metaindex entry
// "fullfilter.<name>") and into the OPTIONS file, and when it opens a table
// it uses the filter only if Options.Filters holds a policy under that exact
// name; otherwise the table is read without its filter, silently. The
// format version is in the name so that a future incompatible format can
// never be handed to this reader. The budget is in the name so that the
// OPTIONS file records the setting and PolicyFromName can rebuild the
// writer; the price is that a process must register the names of every
// budget its tables were written with (see RegisterPolicies). Any lsmcuckoo
// policy of format version 1 reads any version-1 block, whatever its budget:
// the block describes itself.
func (p Policy) Name() string {
	return pebbleNamePrefix + strconv.FormatFloat(p.BitsPerKey(), 'g', -1, 64)
}

// String returns the name.
func (p Policy) String() string { return p.Name() }

// MayContain reports whether the table whose filter block is filter may
// hold a key with the given prefix (the whole key under a comparer without
// Split). It answers false only when a well-formed block proves the key
// absent: for a truncated or malformed block, a block of another format
// version, or a FilterType it does not know, it answers true, so a damaged
// or foreign filter costs a block read but never hides a key.
//
// It is safe for concurrent use, does not allocate, and does not retain
// filter or key (filter is a block-cache buffer Pebble reuses).
func (p Policy) MayContain(ftype pebble.FilterType, filter, key []byte) bool {
	if ftype != pebble.TableFilter {
		return true
	}
	return codec.MayContain(filter, key)
}

// NewWriter returns a writer for one table's filter. Pebble has a single
// filter type; for any other value the same table writer is returned
// rather than a panic (which, inside a compaction, would take the whole
// process down), and MayContain answers true for that type, so such
// filters are never trusted to exclude anything.
func (p Policy) NewWriter(ftype pebble.FilterType) pebble.FilterWriter {
	return &pebbleWriter{b: codec.NewBuilder(codec.Options{
		BitsPerKey: p.BitsPerKey(),
		Hash:       codec.HashKey64,
	})}
}

// pebbleWriter adapts codec.Builder to pebble.FilterWriter. All the work
// (hashing each key on arrival, dropping the consecutive repeats that MVCC
// versions produce and any other repeats at Finish, holding 8 bytes per
// key, resetting for reuse) is the builder's.
type pebbleWriter struct {
	b *codec.Builder
}

// AddKey records key; the slice is not retained.
func (w *pebbleWriter) AddKey(key []byte) { w.b.Add(key) }

// Finish appends the filter block to dst and resets the writer.
func (w *pebbleWriter) Finish(dst []byte) []byte { return w.b.Finish(dst) }

// PolicyFromName returns the policy whose Name is name, or false if name is
// not a policy name this version of the package writes. Names with a
// non-canonical number ("bpk=10.0") are rejected because no policy writes
// them: registering a policy under a name Pebble never looks up would only
// hide a mistake.
//
// Use it where Pebble hands you a name: in pebble.ParseHooks.NewFilterPolicy
// when parsing an OPTIONS file, or to turn a list of names found in a
// store's tables into Options.Filters entries.
func PolicyFromName(name string) (pebble.FilterPolicy, bool) {
	num, ok := strings.CutPrefix(name, pebbleNamePrefix)
	if !ok {
		return nil, false
	}
	b, err := strconv.ParseFloat(num, 64)
	if err != nil || !pebbleValidBitsPerKey(b) || strconv.FormatFloat(b, 'g', -1, 64) != num {
		return nil, false
	}
	return Policy{bitsPerKey: b}, true
}

// RegisterPolicies adds to o.Filters a policy for each budget, under its
// name, so that tables written with those budgets are read with their
// filters. Pebble registers the policies of o.Levels itself when it opens
// the store; what it cannot know is which other budgets the store's
// existing tables were written with. Call this with every budget the store
// has ever been configured with (until compactions have rewritten all
// tables written under old settings). It panics on an invalid budget, as
// NewPolicy does.
func RegisterPolicies(o *pebble.Options, bitsPerKey ...float64) {
	if o.Filters == nil {
		o.Filters = make(map[string]pebble.FilterPolicy, len(bitsPerKey))
	}
	for _, b := range bitsPerKey {
		p := NewPolicy(b)
		o.Filters[p.Name()] = p
	}
}
