// Package pebblecore is what the Pebble adapters (tablefilter for Pebble v2,
// tablefilter/pebblev1 for Pebble v1) share: policy names and their
// parsing, the table writer and reader over package codec, and the fitting
// of per-level budgets. It imports no Pebble: the two Pebble modules
// declare the same FilterPolicy interface over distinct FilterType types,
// so no one Go type can serve both, and each adapter is a thin translation
// of its host's types onto this package. Keeping the names and the bytes
// here is what lets a store move from one Pebble to the other and keep
// every table filtered.
package pebblecore

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// The range of budgets a policy accepts. Below MinBitsPerKey the codec
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

// ValidBitsPerKey reports whether b is a budget a policy accepts.
func ValidBitsPerKey(b float64) bool {
	// NaN fails both comparisons.
	return b >= MinBitsPerKey && b <= MaxBitsPerKey
}

// CheckBitsPerKey panics, naming the adapter pkg, unless b is a valid
// budget: a configuration error should stop the process before any table
// is written, as Pebble's bloom.FilterPolicy does on a nonsensical setting.
func CheckBitsPerKey(pkg string, b float64) {
	if !ValidBitsPerKey(b) {
		panic(fmt.Sprintf("%s: bits per key %v outside [%d, %d]", pkg, b, MinBitsPerKey, MaxBitsPerKey))
	}
}

// NamePrefix returns the start of a policy name. It carries the family,
// the codec format version the policy writes and, for the densest layout,
// that word: Pebble routes blocks to policies by name alone.
func NamePrefix(version int, densest bool) string {
	if densest {
		return fmt.Sprintf("lsmcuckoo.v%d.densest.bpk=", version)
	}
	return fmt.Sprintf("lsmcuckoo.v%d.bpk=", version)
}

// Writers are the writers a policy can be (format version, densest layout)
// and FromName parses.
var Writers = [...]struct {
	Version int
	Densest bool
}{{1, false}, {2, false}, {codec.FormatVersion, false}, {codec.FormatVersion, true}, {codec.NewestVersion, false}}

// Policy is the host-neutral policy: a budget, the format version it
// writes and its layout. It is a small comparable value; the zero value is
// the version-3 policy of codec.DefaultBitsPerKey bits per key.
type Policy struct {
	bitsPerKey float64
	version    int // 0: codec.FormatVersion
	densest    bool
}

// New returns the policy of that budget, format version (0 or
// codec.FormatVersion for the newest) and layout. It does not check the
// budget: the adapters do, with their own name in the message.
func New(bitsPerKey float64, version int, densest bool) Policy {
	if version == codec.FormatVersion {
		version = 0
	}
	return Policy{bitsPerKey: bitsPerKey, version: version, densest: densest}
}

// Version returns the codec format version the policy writes.
func (p Policy) Version() int {
	if p.version == 0 {
		return codec.FormatVersion
	}
	return p.version
}

// BitsPerKey returns the policy's budget.
func (p Policy) BitsPerKey() float64 {
	if p.bitsPerKey == 0 {
		return codec.DefaultBitsPerKey
	}
	return p.bitsPerKey
}

// Densest reports whether the policy writes version 3's densest layout.
func (p Policy) Densest() bool { return p.densest }

// Name returns "lsmcuckoo.v<format>.bpk=<bits>", or
// "lsmcuckoo.v<format>.densest.bpk=<bits>" for the densest layout. The
// number is the shortest decimal that parses back to the same float64, so
// every budget, version and layout has exactly one name and
// FromName(p.Name()) returns p.
func (p Policy) Name() string {
	return NamePrefix(p.Version(), p.densest) + strconv.FormatFloat(p.BitsPerKey(), 'g', -1, 64)
}

// MayContain reports whether the block filter may hold key: false only
// when a well-formed block proves the key absent (codec.MayContain).
func (p Policy) MayContain(filter, key []byte) bool { return codec.MayContain(filter, key) }

// NewWriter returns a writer for one table's filter. One writer serves one
// goroutine, like the codec.Builder under it.
func (p Policy) NewWriter() *Writer {
	return &Writer{b: codec.NewBuilder(codec.Options{
		BitsPerKey: p.BitsPerKey(),
		Hash:       codec.HashKey64,
		Version:    p.Version(),
		Densest:    p.densest,
	})}
}

// Writer adapts codec.Builder to Pebble's FilterWriter. All the work
// (hashing each key on arrival, dropping the consecutive repeats that MVCC
// versions produce and any other repeats at Finish, holding 8 bytes per
// key, resetting for reuse) is the builder's.
type Writer struct {
	b *codec.Builder
}

// AddKey records key; the slice is not retained.
func (w *Writer) AddKey(key []byte) { w.b.Add(key) }

// Finish appends the filter block to dst and resets the writer.
func (w *Writer) Finish(dst []byte) []byte { return w.b.Finish(dst) }

// FromName returns the policy whose Name is name, or false if name is not
// a policy name this package writes. Names with a non-canonical number
// ("bpk=10.0") are rejected because no policy writes them: registering a
// policy under a name Pebble never looks up would only hide a mistake.
func FromName(name string) (Policy, bool) {
	for _, w := range Writers {
		num, ok := strings.CutPrefix(name, NamePrefix(w.Version, w.Densest))
		if !ok {
			continue
		}
		b, err := strconv.ParseFloat(num, 64)
		if err != nil || !ValidBitsPerKey(b) || strconv.FormatFloat(b, 'g', -1, 64) != num {
			return Policy{}, false
		}
		return New(b, w.Version, w.Densest), true
	}
	return Policy{}, false
}

// ParseError is the error of an adapter's ParseFilterPolicy for a name
// that is neither a policy name this package writes nor the host's name
// for no filter, none.
func ParseError(pkg, name, none string) error {
	forms := make([]string, len(Writers))
	for i, w := range Writers {
		forms[i] = NamePrefix(w.Version, w.Densest) + "<bits>"
	}
	return fmt.Errorf("%s: %q is not a filter policy name this package writes (%s) nor %q", pkg, name, strings.Join(forms, ", "), none)
}

// Family returns, for a budget, a policy under each name a release has
// written for it, one per writer in Writers' order: versions 1 and 2, then
// version 3 (the default) and its densest layout, then version 4. Registering all of them
// is what keeps a store upgraded from earlier versions reading its tables
// with their filters. It panics on an invalid budget, naming pkg.
func Family(pkg string, bitsPerKey float64) [len(Writers)]Policy {
	CheckBitsPerKey(pkg, bitsPerKey)
	var family [len(Writers)]Policy
	for i, w := range Writers {
		family[i] = New(bitsPerKey, w.Version, w.Densest)
	}
	return family
}

// WithFamilies returns a new map holding filters' entries and, for each
// budget, its Family, each policy wrapped by the adapter's wrap under its
// name. filters itself is never written: pebble.Open copies Options
// shallowly, so a store opened with them reads that very map whenever it
// opens a table. It panics on an invalid budget, naming pkg, before
// returning anything. A budget of NoFilter is no filter and adds nothing.
func WithFamilies[P any](filters map[string]P, pkg string, bitsPerKey []float64, wrap func(Policy) P) map[string]P {
	for _, b := range bitsPerKey {
		if b != NoFilter {
			CheckBitsPerKey(pkg, b)
		}
	}
	out := make(map[string]P, len(filters)+len(Writers)*len(bitsPerKey))
	maps.Copy(out, filters)
	for _, b := range bitsPerKey {
		if b == NoFilter {
			continue
		}
		for _, p := range Family(pkg, b) {
			out[p.Name()] = wrap(p)
		}
	}
	return out
}
