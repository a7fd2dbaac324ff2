package kvdemo

import (
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
)

type counters struct {
	gets, puts, dels atomic.Int64
	// Filter maintenance cost at flush and compaction: the global index's
	// AddTable, the cuckoo kind's block build.
	indexUpdateNanos, indexUpdateKeys atomic.Int64
	filterBuildNanos, filterBuildKeys atomic.Int64
	filterWriteNanos                  atomic.Int64 // build and file write
	memFilterNegatives                atomic.Int64
	memFilterFalsePositives           atomic.Int64
	tableFilterNegatives              atomic.Int64
	tablesProbed                      atomic.Int64
	filterFalsePositives              atomic.Int64
	flushes, compactions              atomic.Int64
	rebuiltFilters, tornWAL           atomic.Int64
	walSyncs                          atomic.Int64
	damagedTables                     atomic.Int64
	movedAside                        atomic.Int64
}

// Stats are the store's counters since Open, and its current shape.
type Stats struct {
	Gets, Puts, Deletes int64
	// FilterNegatives: lookups a filter answered "absent" for, sparing a
	// search (MemFilterNegatives + TableFilterNegatives).
	FilterNegatives      int64
	MemFilterNegatives   int64 // memtable searches skipped by the MemFilter
	TableFilterNegatives int64 // tables skipped because their filter said absent
	TablesProbed         int64 // tables actually searched
	// FilterFalsePositives: a table's filter said "maybe", the table did
	// not have the key. (Not counted for Filter = none, or for a table
	// read without its filter.)
	FilterFalsePositives    int64
	MemFilterFalsePositives int64
	Flushes, Compactions    int64
	RebuiltFilters          int64 // missing or corrupt filter files rebuilt since Open
	UnfilteredTables        int   // tables read without a filter until theirs is rebuilt
	TornWALTails            int64 // logs whose tail Open cut off
	DamagedTables           int64 // tables Open found unreadable (Gets that need them fail)
	MovedAside              int64 // files Open moved to lost/
	// WALSyncs counts log fsyncs; below Puts+Deletes when concurrent
	// writers shared them (group commit).
	WALSyncs   int64
	Tables     int
	TableKeys  int64 // entries in tables (tombstones included)
	TableBytes int64 // table files
	// BlockCacheBytes: the block cache's bound, and BlockCacheUsedBytes
	// the decoded blocks it holds (Options.BlockCacheBytes; 0: off).
	BlockCacheBytes, BlockCacheUsedBytes int64
	// FilterBytes: filters held in memory, tables' and memtables'.
	FilterBytes      int64
	TableFilterBytes int64
	MemFilterBytes   int64
	// Filter upkeep per key flushed or compacted since Open: the global
	// index's update, or the cuckoo filter's block build.
	IndexUpdateNsPerKey float64
	FilterBuildNsPerKey float64
	// FilterWriteNsPerKey: the cuckoo filter's build and its file written
	// and fsynced beside the table, per key.
	FilterWriteNsPerKey float64
	// Index describes the store-wide index (Filter = global; zero
	// otherwise). Its bytes are TableFilterBytes.
	Index dynamic.IndexStats
	// IndexRebuilding: the index, grown by segments, is being rebuilt in
	// one in the background; until it is swapped in, Gets use the grown one.
	IndexRebuilding bool
	MemtableEntries int    // entries in the mutable memtable (writes that succeeded)
	Seq             uint64 // sequence number of the newest write that succeeded
	Filter          FilterKind
	Compression     Compression
}

// Stats returns the counters.
func (db *DB) Stats() Stats {
	s := Stats{
		Gets:                    db.stats.gets.Load(),
		Puts:                    db.stats.puts.Load(),
		Deletes:                 db.stats.dels.Load(),
		MemFilterNegatives:      db.stats.memFilterNegatives.Load(),
		MemFilterFalsePositives: db.stats.memFilterFalsePositives.Load(),
		TableFilterNegatives:    db.stats.tableFilterNegatives.Load(),
		TablesProbed:            db.stats.tablesProbed.Load(),
		FilterFalsePositives:    db.stats.filterFalsePositives.Load(),
		Flushes:                 db.stats.flushes.Load(),
		Compactions:             db.stats.compactions.Load(),
		RebuiltFilters:          db.stats.rebuiltFilters.Load(),
		TornWALTails:            db.stats.tornWAL.Load(),
		WALSyncs:                db.stats.walSyncs.Load(),
		DamagedTables:           db.stats.damagedTables.Load(),
		MovedAside:              db.stats.movedAside.Load(),
		Filter:                  db.opts.Filter,
		Compression:             db.opts.Compression,
	}
	if db.blockCache != nil {
		m := db.blockCache.Metrics
		s.BlockCacheBytes, s.BlockCacheUsedBytes = db.blockCache.MaxCost(), max(int64(m.CostAdded())-int64(m.CostEvicted()), 0)
	}
	s.FilterNegatives = s.MemFilterNegatives + s.TableFilterNegatives
	db.wmu.Lock()
	s.Seq = db.acked.Load()
	s.MemtableEntries = int(db.mem.applied.Load())
	db.wmu.Unlock()
	v, err := db.acquire()
	if err != nil {
		return s
	}
	defer v.release()
	s.Tables = len(v.tables)
	for _, st := range v.tables {
		if st.damaged == nil {
			s.TableKeys += int64(st.keys)
			s.TableBytes += st.size
		}
	}
	f := db.filter.describe(v.tables)
	s.TableFilterBytes, s.UnfilteredTables = f.bytes, f.unfiltered
	s.Index, s.IndexRebuilding = f.index, f.rebuilding
	for _, m := range [2]*memtable{v.mem, v.imm} {
		if m != nil {
			s.MemFilterBytes += int64(m.filter.Stats().Bytes)
		}
	}
	s.FilterBytes = s.TableFilterBytes + s.MemFilterBytes
	if n := db.stats.indexUpdateKeys.Load(); n > 0 {
		s.IndexUpdateNsPerKey = float64(db.stats.indexUpdateNanos.Load()) / float64(n)
	}
	if n := db.stats.filterBuildKeys.Load(); n > 0 {
		s.FilterBuildNsPerKey = float64(db.stats.filterBuildNanos.Load()) / float64(n)
		s.FilterWriteNsPerKey = float64(db.stats.filterWriteNanos.Load()) / float64(n)
	}
	return s
}
