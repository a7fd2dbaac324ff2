// Package kvdemo is a small but real key-value store that embeds
// lsmcuckoo's filters the way a home-grown LSM would: a write-ahead log, a
// concurrent memtable guarded by a lock-free MemFilter, and immutable tables
// in Badger's SST format, each with a per-table filter that lets a Get skip
// it. Options.Filter swaps the per-table filter between lsmcuckoo's cuckoo
// filter, Badger's own bloom filter and none, or replaces per-table filters
// with one store-wide dynamic.Index (global), everything else equal, so the
// four can be compared like for like.
//
// On disk (one directory; kvdemo/README.md has the byte layouts):
//
//	LOCK              flock'ed, with the directory itself, while a process
//	                  has the store open (lock.go)
//	MANIFEST          JSON and a CRC-32C line: filter kind, compression,
//	                  filter budget (bits per key),
//	                  live tables (oldest first) with each one's size
//	                  and hash, oldest needed log, highest flushed
//	                  sequence number, the last write a clean Close
//	                  acknowledged; replaced atomically
//	NNNNNN.log        write-ahead logs not yet flushed (wal.go, replay.go)
//	NNNNNN.sst        a table in Badger's format
//	NNNNNN.cf         the table's cuckoo filter, bound to the table by
//	                  number, size and content hash (files.go)
//	tmp/              files being written; emptied at Open
//	lost/             files Open will not use but must not destroy
//
// Every table, filter and manifest is written whole with write(2) to tmp/,
// fsynced, renamed into place, and the directory fsynced before anything
// refers to it (applyEdit in edit.go is the one place that orders this).
// A crash leaves the old state or the new one, plus files Open can prove
// unfinished and removes. Damage is never a reason to delete: a damaged
// manifest or a log damaged in the middle stops Open with an error naming
// the file; damaged logs and unexplained files are moved to lost/; a damaged
// table is kept and reported by the Gets that need it; a filter that does
// not match its table is not used, moved to lost/, and rebuilt.
//
// Writes: each gets the next sequence number (Badger's version), is
// appended to the log and, by default, fsynced before Put returns
// (concurrent writers share fsyncs: group commit). A failed write says
// whether it is certainly not stored (ErrNotStored) or may be
// (ErrOutcomeUnknown). A full memtable becomes immutable and a background
// goroutine writes it as a table; another merges tables when there are
// more than Options.MaxTables. Reads use a reference-counted snapshot of
// the memtables and table list, so tables a compaction replaces stay
// readable until the last Get using them ends.
package kvdemo

import (
	"bytes"
	"errors"
	"fmt"
	"log"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4/skl"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2"

	"github.com/lsmcuckoo/lsmcuckoo/dynamic"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// FilterKind selects the per-table filter.
type FilterKind string

const (
	FilterCuckoo FilterKind = "cuckoo" // lsmcuckoo's codec block beside each table
	FilterBloom  FilterKind = "bloom"  // Badger's own y.Filter inside the table
	FilterNone   FilterKind = "none"
	// FilterGlobal (filter_global.go): one store-wide index.
)

// Hard limits. Badger's table format stores key lengths in 16 bits
// (including the 8-byte version); the value cap keeps a WAL record's
// length check meaningful.
const (
	maxKeyCap   = 60_000
	maxValueCap = 64 << 20

	defaultMaxKeySize   = 1 << 10
	defaultMaxValueSize = 1 << 20
	maxMemtableBytes    = 1 << 30
)

// Options configure a store. The zero value is usable.
type Options struct {
	// Filter is the per-table filter. A new store defaults to cuckoo; an
	// existing store is opened with the kind it was created with (set it
	// only to insist: a different kind is an error).
	Filter FilterKind
	// BitsPerKey is the filter budget of a new store, in bits per key,
	// whatever its kind (for global it counts the index's table codes;
	// bloom keeps Badger's own sizing); default 10. An existing store
	// keeps the budget it was created with.
	BitsPerKey float64
	// MemtableBytes is the flush threshold, counted as key + value + a
	// per-entry estimate of skiplist overhead; default 8 MiB.
	MemtableBytes int64
	// NoSyncEachWrite batches durability: writes are acknowledged once
	// they are in the OS, and fsynced by Sync, by SyncInterval, when their
	// memtable is flushed and on Close. The default fsyncs every write
	// before acknowledging it (sharing fsyncs among concurrent writers).
	NoSyncEachWrite bool
	// SyncInterval, with NoSyncEachWrite, fsyncs the log in the
	// background this often; 0 leaves it to Sync, flushes and Close.
	SyncInterval time.Duration
	// Compression of table blocks, for a new store (default zstd); an
	// existing store keeps its own (it is in the manifest).
	Compression Compression
	// MaxTables: when there are more tables, adjacent ones are merged in
	// the background. Default 24; negative disables compaction.
	MaxTables int
	// BlockCacheBytes bounds the decoded table blocks the store keeps in
	// memory, shared by its tables (Badger's block cache, a ristretto
	// cache): a Get that reads a block again finds it decompressed and
	// checked. Default 64 MiB; negative turns it off. A store without
	// compression has none (its blocks need no decoding).
	BlockCacheBytes int64
	// MaxKeySize and MaxValueSize cap Puts; defaults 1 KiB and 1 MiB, at
	// most 60000 bytes and 64 MiB. The MANIFEST keeps the largest caps
	// the store was ever opened with: reopened with smaller ones, it
	// still replays, reads and deletes every key it holds.
	MaxKeySize   int
	MaxValueSize int
	// ReadOnly opens the store without creating, changing or removing
	// any file: logs are replayed into memory, damaged filters rebuilt
	// in memory, and writes fail with ErrReadOnly. A store whose
	// directory cannot be written (a read-only mount, no permission) is
	// opened so without it, and says why in its log and in the writes'
	// errors.
	ReadOnly bool
	// Logger receives warnings (torn WAL tail, rebuilt filters, failing
	// flushes); default: the standard logger's output, prefixed "kvdemo: ".
	Logger *log.Logger
	// WALRecovery says what Open does with a damaged log record; default
	// TolerateCorruptedTailRecords (see WALRecoveryMode).
	WALRecovery WALRecoveryMode
	// FS is the filesystem every file of the store goes through; nil is
	// the operating system's (OSFS). A wrapper of OSFS can inject faults
	// or latency.
	FS FS

	// noIdleRebuild: tests that count index rebuilds turn off the one an
	// idle store starts.
	noIdleRebuild bool
	// filterVersion: tests that write a store as an earlier release did
	// set the codec format version of its cuckoo filter files (0: the
	// codec's default). Readers take any version the codec reads.
	filterVersion int
	// pause: tests that stretch the moments between which the store may
	// change under a Get (a goroutine descheduled there) are called at
	// each pausePoint.
	pause func(at pausePoint)
}

// FS is the filesystem seam: whole files created, written, fsynced and
// renamed into place, logs opened for appending, directories listed and
// fsynced, and Lock, an exclusive lock on a directory or on a file
// (created if missing) that the operating system drops when the process
// ends. A Lock held by another holder returns an error wrapping
// ErrLocked. The interfaces are declared in an internal package that the
// store and its fault-injecting tests share; these aliases name them.
type (
	FS   = vfs.FS
	File = vfs.File
)

// OSFS is the operating system's filesystem (flock(2) for Lock).
func OSFS() FS { return vfs.Default }

var (
	ErrNotFound = errors.New("kvdemo: key not found")
	ErrClosed   = errors.New("kvdemo: store is closed")
	ErrEmptyKey = errors.New("kvdemo: empty key")
	ErrTooLarge = errors.New("kvdemo: key or value too large")
	ErrLocked   = errors.New("kvdemo: store is in use by another process")
	// ErrCorrupt: a file the answer depends on is damaged; the error
	// names it.
	ErrCorrupt = errors.New("kvdemo: corruption")
	// ErrReadOnly: an fsync failed, or a failed write could not be undone,
	// so the store can no longer vouch for what its files hold. It refuses
	// writes until it is closed and opened again; Open then recovers from
	// what is on disk.
	ErrReadOnly = errors.New("kvdemo: store is read-only until it is closed and reopened")
	// ErrNotStored: a Put or Delete failed and is certainly not in the
	// store, now or after a restart (it was refused, or its log write
	// failed and was undone). Retrying it is safe.
	ErrNotStored = errors.New("kvdemo: write not stored")
	// ErrOutcomeUnknown: a Put or Delete failed at a point where it may
	// already be durable (an fsync failed, or a failed write could not be
	// undone): after a restart it may or may not be there.
	ErrOutcomeUnknown = errors.New("kvdemo: write outcome unknown")
)

const compactionWidth = 4 // tables merged at a time

// DB is an open store; safe for concurrent use.
//
// Lock order. A goroutine holding one of these may take only those below
// it, never one above:
//
//	manMu   table-list changes (applyEdit: flush, compaction)
//	wmu     writers: sequence numbers, log appends, memtable switches;
//	        wcond waits on it
//	mu      the current view (readers take it shared, briefly)
//	retMu   the set of retired tables not yet removed (leaf)
//	roMu    the read-only error (leaf)
//
// and, inside one log (wal), bufMu may be taken under ioMu, never the
// reverse; no DB lock is taken while holding either. A view's release can
// close tables and remove files, so it runs under mu at most (never under
// a wal lock). Long work (building a table, fsyncs) runs without wmu and
// mu: applyEdit holds manMu across the manifest write, which only flushes
// and compactions wait for.
type DB struct {
	dir    string
	opts   Options
	fs     vfs.FS
	tOpt   table.Options
	filter tableFilter
	lock   *storeLock

	// blockCache holds decoded blocks of the store's tables (nil: off).
	// Each opened table gets a number of its own as its key there
	// (tableSerial), never its file number: a number can come back (a
	// table discarded after a failed flush, say), and a cached block of
	// the old table must not answer for the new one.
	blockCache  *ristretto.Cache[[]byte, *table.Block]
	tableSerial atomic.Uint64
	// views counts the views not yet released; shut is set by Close. The
	// block cache is closed once both say no Get can read a table any
	// more (closing it under a Get's read panics inside ristretto).
	views      atomic.Int64
	shut       atomic.Bool
	cacheClose sync.Once

	// Writers. wmu serialises log appends, so that sequence numbers and
	// log order agree, and memtable switches.
	wmu      sync.Mutex
	wcond    *sync.Cond // on wmu: a flush finished or failed
	mem      *memtable
	seq      uint64        // last sequence number handed out
	acked    atomic.Uint64 // highest sequence number of a write that succeeded
	flushing bool          // the immutable memtable awaits its flush
	flushErr error         // the flush of it failed (it is being retried)
	closing  bool

	// Readers take a reference to cur under mu.
	mu     sync.RWMutex
	cur    *view
	closed bool

	// manMu serialises table-list changes (flush, compaction) and guards
	// man, the manifest as last written.
	manMu    sync.Mutex
	man      manifest
	nextFile atomic.Uint64

	retMu   sync.Mutex
	retired map[uint64]bool // compacted away, files not yet removed

	roMu     sync.Mutex
	readOnly error // wraps ErrReadOnly once set; never cleared
	// noWrites: opened read-only (Options.ReadOnly, or a directory that
	// cannot be written): Open and everything after it change no file.
	noWrites bool
	// keyCap and valueCap: the largest key and value the store may hold
	// (Options' caps, or larger ones the MANIFEST recorded).
	keyCap, valueCap int

	flushCh, compactCh chan struct{}
	// settleCh asks the flush goroutine to do now what it does when the
	// store goes idle (Settle).
	settleCh chan chan struct{}
	stop     chan struct{}
	bg       sync.WaitGroup

	stats counters
}

// view is a snapshot of what a read must consult, newest first.
type view struct {
	mem, imm *memtable
	tables   []*sstable
	refs     atomic.Int32
	db       *DB
}

func (v *view) release() {
	if v.refs.Add(-1) == 0 {
		for _, st := range v.tables {
			st.unref()
		}
		if v.db.views.Add(-1) == 0 && v.db.shut.Load() {
			v.db.closeBlockCache()
		}
	}
}

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

func (o *Options) withDefaults() (Options, error) {
	c := *o
	if c.BitsPerKey == 0 {
		c.BitsPerKey = 10
	}
	if c.MemtableBytes == 0 {
		c.MemtableBytes = 8 << 20
	}
	if c.MaxTables == 0 {
		c.MaxTables = 24
	}
	if c.MaxKeySize == 0 {
		c.MaxKeySize = defaultMaxKeySize
	}
	if c.BlockCacheBytes == 0 {
		c.BlockCacheBytes = 64 << 20
	}
	if c.MaxValueSize == 0 {
		c.MaxValueSize = defaultMaxValueSize
	}
	if c.Logger == nil {
		c.Logger = log.New(log.Writer(), "kvdemo: ", log.LstdFlags)
	}
	if c.Filter != "" {
		if _, err := newTableFilter(c.Filter, nil); err != nil {
			return c, err
		}
	}
	switch {
	case c.BitsPerKey < 4 || c.BitsPerKey > 32:
		return c, fmt.Errorf("kvdemo: BitsPerKey %g outside 4..32", c.BitsPerKey)
	case c.MemtableBytes < 1<<10 || c.MemtableBytes > maxMemtableBytes:
		return c, fmt.Errorf("kvdemo: MemtableBytes %d outside 1 KiB..1 GiB", c.MemtableBytes)
	case c.MaxKeySize < 0 || c.MaxKeySize > maxKeyCap:
		return c, fmt.Errorf("kvdemo: MaxKeySize %d outside 1..%d", c.MaxKeySize, maxKeyCap)
	case c.MaxValueSize < 0 || c.MaxValueSize > maxValueCap:
		return c, fmt.Errorf("kvdemo: MaxValueSize %d outside 1..%d", c.MaxValueSize, maxValueCap)
	case !c.WALRecovery.valid():
		return c, fmt.Errorf("kvdemo: unknown WAL recovery mode %q", c.WALRecovery)
	case c.SyncInterval < 0:
		return c, fmt.Errorf("kvdemo: negative SyncInterval")
	case c.BlockCacheBytes > 1<<40:
		return c, fmt.Errorf("kvdemo: BlockCacheBytes %d above 1 TiB", c.BlockCacheBytes)
	}
	if c.Compression != "" {
		if _, err := c.Compression.badger(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// MemtableBytesFor is the MemtableBytes that flushes a memtable after
// about keys entries of the given sizes (the threshold counts each entry
// as key + value + a fixed estimate of skiplist overhead).
func MemtableBytesFor(keys, keySize, valueSize int) int64 {
	return int64(keys) * entryEstimate(make([]byte, keySize), make([]byte, valueSize))
}

func (db *DB) allocFile() uint64 { return db.nextFile.Add(1) - 1 }

func (db *DB) newMemtable(log uint64, w *wal) *memtable {
	maxEntry := entryWorst(make([]byte, db.keyCap), make([]byte, db.valueCap))
	// Size the MemFilter for the expected number of keys: small entries
	// of ~64 bytes. It grows if more arrive, at some cost in FPR.
	keys := int(db.opts.MemtableBytes/64) + 16
	return newMemtable(db.opts.MemtableBytes, maxEntry, keys, log, w)
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// checkKey refuses a key no write may store: longer than limit (Put's
// MaxKeySize, or for Get and Delete the largest key the store may hold).
func checkKey(key []byte, limit int) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > limit:
		return fmt.Errorf("%w: key of %d bytes (max %d)", ErrTooLarge, len(key), limit)
	}
	return nil
}

// Put stores value under key. It returns once the write is durable (or,
// with NoSyncEachWrite, in the OS).
func (db *DB) Put(key, value []byte) error {
	if err := checkKey(key, db.opts.MaxKeySize); err != nil {
		return err
	}
	if len(value) > db.opts.MaxValueSize {
		return fmt.Errorf("%w: value of %d bytes (max %d)", ErrTooLarge, len(value), db.opts.MaxValueSize)
	}
	if err := db.write(kindPut, key, value); err != nil {
		return err
	}
	db.stats.puts.Add(1)
	return nil
}

// Delete removes key (by writing a tombstone). Deleting an absent key is
// not an error.
func (db *DB) Delete(key []byte) error {
	if err := checkKey(key, db.keyCap); err != nil {
		return err
	}
	if err := db.write(kindDel, key, nil); err != nil {
		return err
	}
	db.stats.dels.Add(1)
	return nil
}

// write appends one record to the log and, once it is committed, to the
// memtable. Every error it returns other than ErrClosed wraps either
// ErrNotStored (the write is not in the store and never will be) or
// ErrOutcomeUnknown (it may be there after a restart).
func (db *DB) write(kind recordKind, key, value []byte) error {
	est, worst := entryEstimate(key, value), entryWorst(key, value)
	db.wmu.Lock()
	if db.closing {
		db.wmu.Unlock()
		return ErrClosed
	}
	if err := db.writableLocked(); err != nil {
		db.wmu.Unlock()
		return notStored(err)
	}
	if !db.mem.fits(db.opts.MemtableBytes, est, worst) {
		if err := db.rotateLocked(); err != nil {
			db.wmu.Unlock()
			return notStored(err)
		}
	}
	m := db.mem
	w := m.wal()
	db.seq++
	r := walRecord{seq: db.seq, kind: kind, key: key, value: value}
	pos := w.append(r)
	m.reserve(est, worst)
	m.writers.Add(1)
	db.wmu.Unlock()

	// Outside the lock: concurrent writers share one write and fsync (see
	// wal.commit), and insert into the lock-free memtable in parallel.
	// The record goes into the memtable only once committed, so no reader
	// sees a write that a crash could still take back.
	defer m.writers.Done()
	if err := w.commit(pos, !db.opts.NoSyncEachWrite); err != nil {
		if errors.Is(err, ErrOutcomeUnknown) {
			db.setReadOnly(err)
		}
		return err
	}
	db.pauseAt(pauseWriteCommitted)
	m.apply(r)
	for {
		a := db.acked.Load()
		if a >= r.seq || db.acked.CompareAndSwap(a, r.seq) {
			break
		}
	}
	return nil
}

// writableLocked is nil if a write may be appended: the store is not
// read-only, it is still this process's alone (lockIntactLocked), and
// the memtable's log works. A log whose last write failed
// and was cleanly undone is replaced by a new one (the memtable then
// spans both), so a full disk stops writes only while it is full.
func (db *DB) writableLocked() error {
	if err := db.readOnlyErr(); err != nil {
		return err
	}
	old := db.mem.wal()
	if !old.failedCleanly() {
		return db.lockIntactLocked(false)
	}
	if err := db.lockIntactLocked(true); err != nil {
		return err
	}
	id := db.allocFile()
	w, err := createWAL(db.fs, db.dir, id)
	if err != nil {
		return errorf("starting log %06d after a failed write: %w", id, err)
	}
	w.syncs = &db.stats.walSyncs
	db.mem.wlog.Store(w)
	old.close()
	return nil
}

func notStored(err error) error {
	if errors.Is(err, ErrNotStored) || errors.Is(err, ErrOutcomeUnknown) {
		return err
	}
	return errorf("%w: %w", ErrNotStored, err)
}

// rotateLocked makes the full memtable immutable, hands it to the flusher
// and starts a new memtable and log. Only one memtable waits for its
// flush: a writer that fills the next one first waits here (backpressure),
// or fails if that flush is failing.
func (db *DB) rotateLocked() error {
	for db.flushing {
		if db.closing {
			return ErrClosed
		}
		if db.flushErr != nil {
			return errorf("memtable full and the previous one cannot be flushed: %w", db.flushErr)
		}
		db.wcond.Wait()
	}
	if db.closing {
		return ErrClosed
	}
	// The full memtable's log is made durable before any record goes to
	// the next one, so that at Open a damaged log followed by a later log
	// is known to be damage, not a torn tail.
	if err := db.mem.wal().sync(); err != nil {
		if errors.Is(err, ErrOutcomeUnknown) {
			db.setReadOnly(err)
		}
		return err
	}
	if err := db.lockIntactLocked(true); err != nil {
		return err
	}
	id := db.allocFile()
	w, err := createWAL(db.fs, db.dir, id)
	if err != nil {
		return errorf("starting log %06d: %w", id, err)
	}
	w.syncs = &db.stats.walSyncs
	nm := db.newMemtable(id, w)
	db.mu.Lock()
	db.installLocked(nm, db.mem, db.cur.tables)
	db.mu.Unlock()
	db.mem = nm
	db.flushing, db.flushErr = true, nil
	signal(db.flushCh)
	return nil
}

// installLocked publishes a new view; db.mu is held for writing.
func (db *DB) installLocked(mem, imm *memtable, tables []*sstable) {
	v := &view{mem: mem, imm: imm, tables: tables, db: db}
	for _, st := range tables {
		st.ref()
	}
	v.refs.Store(1) // the DB's own reference
	db.views.Add(1)
	old := db.cur
	db.cur = v
	old.release()
}

func (db *DB) acquire() (*view, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return nil, ErrClosed
	}
	db.cur.refs.Add(1)
	return db.cur, nil
}

// pausePoint is a moment at which Options.pause is called.
type pausePoint uint8

const (
	pauseGetView   pausePoint = iota // a Get holds its view
	pauseGetLookup                   // a Get made its table filter's lookup, has not read a table
	// A flushed table is built (global: its keys are in the index), the
	// table list does not name it yet.
	pauseFlushBuilt
	// A compaction's table took its inputs' place in the table list; its
	// filter's merged has not run (global: Replace).
	pauseMergeListed
	// global: merged is about to Replace the inputs' entries by the
	// merge's; from here a lookup may name the merge for an input's key.
	pauseReplacing
	pauseRebuildTracking // global rebuild: index changes are recorded, its view not taken yet
	pauseRebuildBuilt    // global rebuild: the new index is built, the changes not replayed yet
	// A write's record is committed to its log, not yet in its memtable:
	// a flush of that memtable must wait for it (memtable.writers).
	pauseWriteCommitted
)

func (db *DB) pauseAt(at pausePoint) {
	if db.opts.pause != nil {
		db.opts.pause(at)
	}
}

// Get returns the value of key, or ErrNotFound.
func (db *DB) Get(key []byte) ([]byte, error) {
	if err := checkKey(key, db.keyCap); err != nil {
		return nil, err
	}
	v, err := db.acquire()
	if err != nil {
		return nil, err
	}
	defer v.release()
	db.stats.gets.Add(1)
	db.pauseAt(pauseGetView)
	return db.getIn(v, key)
}

// getIn is Get on view v.
func (db *DB) getIn(v *view, key []byte) ([]byte, error) {
	// The key is hashed once for the memtables' filters and the table
	// filter, whose reads start before the memtables are probed.
	h := dynamic.KeyHash(key)
	db.filter.warm(h)
	seek := y.KeyWithTs(key, math.MaxUint64)
	for _, m := range [2]*memtable{v.mem, v.imm} {
		if m == nil {
			continue
		}
		if !m.filter.MayContainHash(h) {
			db.stats.memFilterNegatives.Add(1)
			continue
		}
		vs, ok := m.get(seek)
		if !ok {
			db.stats.memFilterFalsePositives.Add(1)
			continue
		}
		if vs.Meta&metaDelete != 0 {
			return nil, ErrNotFound
		}
		return bytes.Clone(vs.Value), nil
	}
	q := db.filter.prepare(key, h)
	db.pauseAt(pauseGetLookup)
	s := db.filter.search(v.tables, q, seek)
	if s.negatives > 0 {
		db.stats.tableFilterNegatives.Add(s.negatives)
	}
	if s.probed > 0 {
		db.stats.tablesProbed.Add(s.probed)
	}
	if s.falsePos > 0 {
		db.stats.filterFalsePositives.Add(s.falsePos)
	}
	switch {
	case s.err != nil:
		return nil, s.err
	case !s.found:
		return nil, ErrNotFound
	}
	return s.value, nil
}

// Sync makes every acknowledged write durable (for NoSyncEachWrite).
func (db *DB) Sync() error {
	v, err := db.acquire()
	if err != nil {
		return err
	}
	defer v.release()
	for _, m := range [2]*memtable{v.imm, v.mem} {
		if m != nil && m.wal() != nil { // none: opened read-only
			if err := m.wal().sync(); err != nil {
				if errors.Is(err, ErrOutcomeUnknown) {
					// As for a write's own fsync: what the log holds is
					// no longer known, so no write may follow it.
					db.setReadOnly(err)
				}
				return err
			}
		}
	}
	return nil
}

func (db *DB) syncLoop() {
	defer db.bg.Done()
	t := time.NewTicker(db.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-db.stop:
			return
		case <-t.C:
			if err := db.Sync(); err != nil && !errors.Is(err, ErrClosed) {
				db.opts.Logger.Printf("background sync: %s", quote(err))
			}
		}
	}
}

// Flush writes the memtable out as a table and returns once it is in the
// manifest.
func (db *DB) Flush() error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	if db.closing {
		return ErrClosed
	}
	if db.noWrites {
		return db.readOnlyErr()
	}
	if db.mem.entries > 0 {
		if err := db.rotateLocked(); err != nil {
			return err
		}
	}
	for db.flushing {
		if db.closing {
			return ErrClosed
		}
		if db.flushErr != nil {
			return db.flushErr
		}
		db.wcond.Wait()
	}
	// The flush may have turned the store read-only (its manifest could
	// not be made durable): then it is not known to be durable either.
	return db.readOnlyErr()
}

// Settle does now what the store does once no flush has come for a
// while, and returns when that is done: a global index that grew by
// segments is rebuilt in one (Stats.IndexRebuilding), so a bulk load can
// be served, or measured, as the store settles. Other kinds have nothing
// to do. While a flush is failing (and being retried), or once the store
// is read-only, nothing is done and Settle returns that error at once.
func (db *DB) Settle() error {
	done := make(chan struct{})
	select {
	case db.settleCh <- done:
	case <-db.stop:
		return ErrClosed
	}
	select {
	case <-done:
	case <-db.stop:
		return ErrClosed
	}
	for db.filter.upkeepRunning() {
		select {
		case <-db.stop:
			return ErrClosed
		case <-time.After(5 * time.Millisecond):
		}
	}
	// A flush that keeps failing, or a read-only store, settles nothing:
	// say why.
	db.wmu.Lock()
	err := db.flushErr
	db.wmu.Unlock()
	if err != nil {
		return err
	}
	return db.readOnlyErr()
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

// Close stops background work, makes every acknowledged write durable and
// closes the store; tables stay open until Gets in progress finish.
// Further calls return ErrClosed.
func (db *DB) Close() error {
	db.wmu.Lock()
	if db.closing {
		db.wmu.Unlock()
		return ErrClosed
	}
	db.closing = true
	db.wcond.Broadcast()
	db.wmu.Unlock()
	close(db.stop)
	db.bg.Wait() // a flush in progress completes; a compaction is abandoned

	db.mu.Lock()
	v := db.cur
	db.closed = true
	db.shut.Store(true)
	db.mu.Unlock()
	var err error
	for _, m := range [2]*memtable{v.imm, v.mem} {
		if m == nil || m.wal() == nil { // no log: opened read-only
			continue
		}
		m.writers.Wait() // writes that got their log position before closing
		if e := m.wal().sync(); e != nil && err == nil {
			err = e
		}
		if e := m.wal().close(); e != nil && err == nil {
			err = e
		}
	}
	if err == nil && db.readOnlyErr() == nil {
		db.recordCleanClose()
	}
	v.release()     // the last view's release closes the block cache
	db.lock.Close() // releases the flocks
	return err
}

// recordCleanClose writes ClosedSeq into the MANIFEST once every write is
// durable in the logs, so that the next Open can tell logs that lost
// acknowledged records at rest from a crash's torn tail (see
// manifest.ClosedSeq). Nothing is written when the tables hold every
// write or the MANIFEST already says so. A failure costs only that
// check: the logs hold every write.
func (db *DB) recordCleanClose() {
	db.manMu.Lock()
	defer db.manMu.Unlock()
	seq := db.acked.Load()
	if seq <= db.man.Seq || seq == db.man.ClosedSeq {
		return
	}
	man := db.man
	man.ClosedSeq = seq
	if err := db.writeManifest(man); err != nil && !errorsIsRenamed(err) {
		db.opts.Logger.Printf("recording the clean close in the MANIFEST: %s (the logs hold every write; the next Open cannot check that they still do)", quote(err))
		return
	}
	db.man = man
}

// removeLogsBelow deletes logs the manifest no longer needs.
func (db *DB) removeLogsBelow(id uint64) {
	entries, err := db.fs.ReadDir(db.dir)
	if err != nil {
		db.opts.Logger.Printf("listing flushed logs: %v", err)
		return
	}
	for _, e := range entries {
		if lid, ext, ok := parseFileName(e.Name()); ok && ext == extLog && lid < id {
			db.removeFile(lid, extLog)
		}
	}
}

// setReadOnly turns the store read-only (see ErrReadOnly); the first
// cause is kept.
func (db *DB) setReadOnly(cause error) {
	db.roMu.Lock()
	defer db.roMu.Unlock()
	if db.readOnly == nil {
		// The cause as text only: a refused write's error must not also
		// match the ErrOutcomeUnknown of the write that caused it.
		db.readOnly = errorf("%w (since: %v)", ErrReadOnly, cause)
		db.opts.Logger.Printf("%s", quote(db.readOnly))
	}
}

func (db *DB) readOnlyErr() error {
	db.roMu.Lock()
	defer db.roMu.Unlock()
	return db.readOnly
}

// sklSource adapts Badger's skiplist iterator to entrySource.
type sklSource struct{ *skl.Iterator }

func (s sklSource) Rewind() { s.SeekToFirst() }
