// Package tablefilter plugs lsmcuckoo's per-table filter into Pebble v2
// (github.com/cockroachdb/pebble/v2): a pebble.FilterPolicy, a thin
// adapter over package codec, which builds, encodes and reads the blocks;
// nothing here changes what a block means. Its subpackage pebblev1 is the
// same surface for Pebble v1 (github.com/cockroachdb/pebble v1.1.x), with
// the same names and bytes, so a store moving from v1 to v2 keeps its
// filters; badgerfilter does the same for Badger's table format.
//
// # Pebble
//
// NewPolicy returns a pebble.FilterPolicy:
//
//	opts.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)
//
// NewPolicy writes codec format version 3 with lines planned so that few
// negative lookups read a second line; NewDensestPolicy writes the same
// format with fuller lines, for a lower false-positive rate where a false
// positive costs a device read; NewV2Policy and NewV1Policy write the
// formats of earlier releases, for stores that older releases must still
// read. Every policy reads blocks of all three versions.
//
// Pebble stores the policy's name in every table and uses a table's filter
// only if Options.Filters holds a policy of that exact name. Pebble adds
// the policies of Options.Levels itself when it opens a store; a store
// whose tables were written with other budgets must have them registered
// too (RegisterPolicies, which also registers the names of the earlier
// format versions, so a store upgraded from them keeps its filters), or
// those tables are read without filters, which is correct but slower. PolicyFromName turns a name back into its policy;
// ParseFilterPolicy, with the signature of pebble.ParseHooks.NewFilterPolicy,
// does the same for the names in an OPTIONS file, "none" included.
//
// SetLevelPolicies spends a bits-per-key average unevenly over the levels,
// more on the small upper ones, to minimise the tables read in vain per
// lookup; LevelBudgets and MeasuredLevelShape fit the budgets to a live
// tree. LevelBudgetsV4 and SetLevelBudgetsV4 do the same for format
// version 4 (NewV4Policy), whose planned rate is lower at every budget.
//
// Remember which lookups consult table filters: DB.Get on L0 to L5, never
// L6; an iterator's SeekPrefixGE on L6 too only with
// IterOptions.UseL6Filters. The filter sees the comparer's Split prefix of
// each key (the whole key without Split); the versions of an MVCC key count
// once against the bits-per-key budget.
//
// # Badger
//
// The filter for stores built on Badger's table format is package
// tablefilter/badgerfilter, so that a Pebble store does not link Badger
// and a Badger store does not link Pebble.
//
// # Memtables
//
// The lock-free memtable filter is package dynamic's MemFilter, so that a
// store wanting only it does not link Pebble or Badger.
//
// # Robustness
//
// The readers answer "maybe" for anything they cannot trust: a truncated or
// malformed block, a damaged header, a block of another format version or
// hash kind, a filter type they do not know. They never allocate, never
// retain the block, and are safe for concurrent use. The writers are not:
// one writer serves one goroutine (Pebble gives each table its own), and
// keys added from two goroutines at once can be lost from the block, which
// then answers "absent" for them. A bit flipped inside a
// block's buckets is not visible to a lookup (it would take a checksum pass
// over the block per probe) and can turn a present key absent; Pebble's
// block checksum catches it when the block is read from disk.
package tablefilter
