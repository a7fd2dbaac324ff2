// Package pebblev1 plugs lsmcuckoo's per-table filter into Pebble v1
// (github.com/cockroachdb/pebble v1.1.x): the same policies as package
// tablefilter, which serves Pebble v2, with the same names and the same
// bytes, so a store that moves from Pebble v1 to v2 keeps every table
// filtered. The two Pebble modules declare the same FilterPolicy interface
// over distinct FilterType types, so one Go type cannot satisfy both; both
// packages are thin adapters over one shared core, and neither links the
// other's Pebble. (The v3 in a policy's name, "lsmcuckoo.v3.bpk=10", is the
// codec format version, unrelated to Pebble's.)
//
// # Adopting it
//
// In Pebble v1, Options.Levels is a slice: levels past its end copy its
// last entry, and a level whose FilterPolicy is nil has no filter (in v2 a
// nil policy on L1 and below inherits the level above). So with Levels
// unset,
//
//	opts.Levels = []pebble.LevelOptions{{FilterPolicy: pebblev1.NewPolicy(10)}}
//
// filters every level; with levels already listed, set each entry's
// FilterPolicy. SetLevelPolicies and SetLevelBudgets set all seven levels,
// extending a shorter slice with the entries Pebble would have derived
// from its last one.
//
// Pebble stores the policy's name in every table and uses a table's filter
// only if Options.Filters holds a policy of that exact name; a table
// whose name is not registered is read without its filter, silently.
// Pebble registers the policies of Options.Levels when it opens a store.
// A store switched from another filter must keep the old policy
// registered until compactions have rewritten its tables: for Pebble's
// bloom filter, opts.Filters[bloom.FilterPolicy(10).Name()] =
// bloom.FilterPolicy(10) (any bits per key reads any bloom block). Budgets
// used before are registered with RegisterPolicies.
//
// Pebble v1 writes a level without a policy as filter_policy=none in the
// OPTIONS file; ParseFilterPolicy, as pebble.ParseHooks.NewFilterPolicy,
// returns a nil policy for it, which is what Pebble v1 means by none.
//
// Lookups consult table filters as in v2: DB.Get on L0 to L5, never L6; an
// iterator's SeekPrefixGE on L6 too only with IterOptions.UseL6Filters.
// Pebble v1's default comparer has no Split, so the filter sees whole
// keys; a comparer with Split hands it prefixes, and the versions of an
// MVCC key count once against the bits-per-key budget.
//
// # Moving the store to Pebble v2
//
// Pebble v2 opens only stores at FormatMajorVersion FormatFlushableIngest
// or above, while Pebble v1's default is FormatMostCompatible: set
// Options.FormatMajorVersion (or call DB.RatchetFormatMajorVersion) to at
// least pebble.FormatFlushableIngest under v1 before the move. Then open
// the store in v2 with package tablefilter's policy of the same budgets;
// every table keeps its filter.
//
// # Concurrency
//
// A Policy is safe for concurrent use, and so is MayContain. A writer is
// not: one writer serves one goroutine (Pebble gives each table its own),
// and keys added from two goroutines at once can be lost from the block,
// which then answers "absent" for them.
package pebblev1
