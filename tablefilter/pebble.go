package tablefilter

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/internal/pebblecore"
)

// The range of budgets NewPolicy accepts. Below MinBitsPerKey the codec
// cannot honour the budget at all, and just above it not quite: its
// smallest filter (5-bit fingerprints at the planned load) takes a little
// more than MinBitsPerKey bits per key, and a smaller budget builds that
// filter; above MaxBitsPerKey every version's fingerprints (version 3's
// remainders) are at their widest, 16 bits, in lightly loaded lines or
// buckets, and further bits buy almost nothing.
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

// Policy is a pebble.FilterPolicy that stores each table's keys in an
// lsmcuckoo filter block (see package codec). Adopting it is one line:
//
//	opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)
//
// (levels left unset inherit L0's policy).
//
// NewPolicy writes codec format version 3, the default: a negative lookup
// reads one 64-byte line of the filter in the common case, like Pebble's
// blocked bloom filter, and each line is a small quotient filter, which
// gives a lower false-positive rate than version 2 at the same bits per
// key: an absent key is compared only with the remainders of its own
// quotient, and the unary header costs about one bit per key, where version
// 2 compares with two buckets' slots and spends bits on slots left empty
// (codec/FORMAT.md derives both rates). The older
// writers stay for stores that must keep writing what an older release
// reads: NewV2Policy writes version 2 (the same one line per lookup, with
// lines of four-slot buckets), NewV1Policy the version-1 layout, whose
// lookups read an offset table and then the buckets. Every Policy reads
// blocks of all three versions, whatever its own version and budget.
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
// key, writing the default format, version 3, under the name
// "lsmcuckoo.v3.bpk=<bits>". It panics unless MinBitsPerKey <= bitsPerKey <= MaxBitsPerKey, like
// Pebble's bloom.FilterPolicy panics on a nonsensical setting: a
// configuration error should stop the process before any table is written.
func NewPolicy(bitsPerKey float64) Policy {
	pebblecore.CheckBitsPerKey("tablefilter", bitsPerKey)
	return Policy{pebblecore.New(bitsPerKey, codec.FormatVersion, false)}
}

// NewDensestPolicy is NewPolicy with version 3's densest layout
// (codec.Options.Densest), named "lsmcuckoo.v3.densest.bpk=<bits>": lines
// filled for the lowest false-positive rate the budget buys, at the price
// of more negative lookups reading a second line, so that a cold lookup
// waits for a second cache miss more often. Run it where a false positive
// costs a read from a device, which dwarfs a cache miss; keep NewPolicy
// where filters are probed from memory and most lookups are negative.
// Every Policy reads its blocks.
func NewDensestPolicy(bitsPerKey float64) Policy {
	pebblecore.CheckBitsPerKey("tablefilter", bitsPerKey)
	return Policy{pebblecore.New(bitsPerKey, codec.FormatVersion, true)}
}

// NewV4Policy is NewPolicy for codec format version 4, named
// "lsmcuckoo.v4.bpk=<bits>": the lowest false-positive rate lsmcuckoo
// writes for a budget. Each 64-byte line holds its keys as the solution
// of a linear system over GF(2) rather than as fingerprints, which spends
// about r bits per key for a rate of 2^-r where version 3's quotient lines
// spend about two more (codec/FORMAT.md). Like the densest layout, its
// lines are full, and a good share of negative lookups read a second line.
// At budgets where version 3's densest layout or version 2 filters better
// (below about 4.2 bits per key) it writes that, under the same
// name. Only a reader of this release reads version-4 blocks (an older
// one answers "maybe" for them); every Policy reads them.
func NewV4Policy(bitsPerKey float64) Policy {
	pebblecore.CheckBitsPerKey("tablefilter", bitsPerKey)
	return Policy{pebblecore.New(bitsPerKey, codec.NewestVersion, false)}
}

// NewV1Policy is NewPolicy for codec format version 1, named
// "lsmcuckoo.v1.bpk=<bits>": a layout without lines, whose lookup reads two
// dependent cache lines (an offset table, then the buckets). It is what
// every table written before version 2 carries; use it
// only for a store that older releases must still be able to read. Its blocks are built under seed 0,
// which a tenant who chooses keys can aim them at; the builder's limits
// (codec/FORMAT.md, "Keys aimed at a known seed") keep such a table's
// filter within its budget, under a random seed, or answering "maybe".
func NewV1Policy(bitsPerKey float64) Policy {
	pebblecore.CheckBitsPerKey("tablefilter", bitsPerKey)
	return Policy{pebblecore.New(bitsPerKey, 1, false)}
}

// NewV2Policy is NewPolicy for codec format version 2, named
// "lsmcuckoo.v2.bpk=<bits>": one 64-byte line per lookup like version 3,
// with lines of semi-sorted four-slot buckets (a higher false-positive
// rate than version 3 at the same budget, see NewPolicy). It
// is what every table written by the version-2 releases carries; use it
// for a store that a version-2 release must still be able to read (a
// rolling upgrade, a downgrade path), or to pin version-2 blocks.
func NewV2Policy(bitsPerKey float64) Policy {
	pebblecore.CheckBitsPerKey("tablefilter", bitsPerKey)
	return Policy{pebblecore.New(bitsPerKey, 2, false)}
}

// Version returns the codec format version the policy writes.
func (p Policy) Version() int { return p.core.Version() }

// BitsPerKey returns the policy's budget.
func (p Policy) BitsPerKey() float64 { return p.core.BitsPerKey() }

// Name returns "lsmcuckoo.v<format>.bpk=<bits>" (or, for the densest
// layout, "lsmcuckoo.v<format>.densest.bpk=<bits>"), for example
// "lsmcuckoo.v3.bpk=10" (NewPolicy), "lsmcuckoo.v2.bpk=10" (NewV2Policy)
// or "lsmcuckoo.v1.bpk=9.5" (NewV1Policy), and
// "lsmcuckoo.v3.densest.bpk=10" for NewDensestPolicy. The number is the
// shortest decimal that parses back to the same float64, so every budget,
// version and layout has exactly one name and PolicyFromName(p.Name())
// returns p.
//
// Pebble writes the name into every table (as the metaindex entry
// "fullfilter.<name>") and into the OPTIONS file, and when it opens a table
// it uses the filter only if Options.Filters holds a policy under that exact
// name; otherwise the table is read without its filter, silently. The
// format version is in the name so that a future incompatible format can
// never be handed to this reader. The budget (and the densest layout) is
// in the name so that the OPTIONS file records the setting and
// PolicyFromName can rebuild the writer; the price is that a process must register the names of every
// budget and version its tables were written with (see RegisterPolicies).
// Any lsmcuckoo policy reads any block of format version 1 to 4,
// whatever its budget: the block describes itself.
func (p Policy) Name() string { return p.core.Name() }

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
// NewWriter itself, like MayContain, is safe for concurrent use.
//
// Pebble has a single filter type; for any other value the same table
// writer is returned rather than a panic (which, inside a compaction, would
// take the whole process down), and MayContain answers true for that type,
// so such filters are never trusted to exclude anything.
func (p Policy) NewWriter(ftype pebble.FilterType) pebble.FilterWriter {
	return p.core.NewWriter()
}

// PolicyFromName returns the policy whose Name is name, or false if name is
// not a policy name this version of the package writes: version 1 to 4
// names (and version 3's densest) are all recognised. Names with a non-canonical number
// ("bpk=10.0") are rejected because no policy writes them: registering a
// policy under a name Pebble never looks up would only hide a mistake.
//
// Use it where Pebble hands you a name: to turn a list of names found in a
// store's tables into Options.Filters entries, or, through
// ParseFilterPolicy, in pebble.ParseHooks.NewFilterPolicy when parsing an
// OPTIONS file.
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
//	hooks := &pebble.ParseHooks{NewFilterPolicy: tablefilter.ParseFilterPolicy}
//	err := opts.Parse(optionsFileText, hooks)
//
// It returns the lsmcuckoo policy of that name (PolicyFromName), and
// pebble.NoFilterPolicy for "none", the name Pebble records for a level
// without a filter (L0 by default, or a level set to NoFilterPolicy).
// Any other name is an error naming it: a store that also runs another
// family, such as Pebble's bloom filter (whose name does not record its
// bits per key), wraps this function and handles those names first.
// (Pebble v2.1.7's Parse also needs ParseHooks.NewComparer when the file
// names a comparer other than Pebble's default.)
func ParseFilterPolicy(name string) (pebble.FilterPolicy, error) {
	if p, ok := PolicyFromName(name); ok {
		return p, nil
	}
	if name == pebble.NoFilterPolicy.Name() {
		return pebble.NoFilterPolicy, nil
	}
	return nil, pebblecore.ParseError("tablefilter", name, pebble.NoFilterPolicy.Name())
}

// RegisterPolicies adds to o.Filters, for each budget, a policy under each
// name a release has written for it (version 3, the default, and its
// densest layout, versions 2 and 1, and version 4), so that tables written with those budgets by any release are
// read with their filters: a store upgraded from version-2 or version-1
// filters keeps them. Pebble registers the policies of o.Levels
// itself when it opens the store; what it cannot know is which other names
// the store's existing tables carry, and a table whose filter name is not
// registered is read without its filter, silently. Call this with every
// budget the store has ever been configured with (until compactions have
// rewritten all tables written under old settings). A budget of NoFilter
// (a level LevelBudgets left without a filter) has no name and adds
// nothing. It panics on any other invalid budget, as NewPolicy does,
// before writing anything.
//
// It installs a new map in o.Filters, holding the old entries and the new
// ones, and never writes into the map o held: pebble.Open copies Options
// shallowly, so a store opened with o reads that very map whenever it
// opens a table, and a write into it while the store runs (say, to set
// budgets fitted to db.Metrics() before reopening) would race with those
// reads.
func RegisterPolicies(o *pebble.Options, bitsPerKey ...float64) {
	o.Filters = pebblecore.WithFamilies(o.Filters, "tablefilter", bitsPerKey,
		func(p pebblecore.Policy) pebble.FilterPolicy { return Policy{p} })
}
