package tablefilter

import "github.com/lsmcuckoo/lsmcuckoo/dynamic"

// MemFilter is the lock-free memtable filter, now in package dynamic.
//
// Deprecated: use dynamic.MemFilter, which a store can import without
// Pebble and Badger.
type MemFilter = dynamic.MemFilter

// MemStats describes a MemFilter.
//
// Deprecated: use dynamic.MemStats.
type MemStats = dynamic.MemStats

// NewMemFilter returns dynamic.NewMemFilter(capacityHint).
//
// Deprecated: use dynamic.NewMemFilter.
func NewMemFilter(capacityHint int) *MemFilter { return dynamic.NewMemFilter(capacityHint) }
