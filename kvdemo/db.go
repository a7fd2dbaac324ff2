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
//	LOCK              flock'ed while a process has the store open, as is
//	                  the directory itself (lock.go)
//	MANIFEST          JSON and a CRC-32C line: filter kind, compression,
//	                  filter budget (bits per key), the largest key
//	                  and value caps it was opened with,
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
// readable until the last Get using them ends. A store whose directory
// cannot be written is opened read-only (Options.ReadOnly): reads are
// served, writes refused with ErrReadOnly, no file changed.
package kvdemo

import (
	"bytes"
	"errors"
	"fmt"
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
//	pending.mu  outputs allocated and not yet named (leaf)
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
	pending  pendingOutputs // outputs not yet named (see outputs.go)

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
	s := db.filter.search(v.tables, q)
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
