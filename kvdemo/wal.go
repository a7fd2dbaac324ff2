package kvdemo

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"sync/atomic"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// The write-ahead log is a sequence of records, each
//
//	crc32c u32 | length u32 | seq u64 | kind u8 | keyLen u32 | key | value
//
// little-endian, where length counts the bytes after the length field and
// the CRC-32C (Castagnoli) covers the length field and those bytes. A
// record is acknowledged only after it is written (and, unless
// Options.NoSyncEachWrite, fsynced). Sequence numbers rise within a log
// and from one log to the next. What Open does with a record that is
// short, implausibly long or fails its checksum is in replay.go.

const (
	walHeader = 4 + 4     // crc + length
	walFixed  = 8 + 1 + 4 // seq + kind + keyLen
	// walMaxRec bounds a record's length field: anything longer is
	// corruption, and replay must not allocate it. It is fixed (not taken
	// from Options) so that a store reopened with smaller limits still
	// replays the records it acknowledged before.
	walMaxRec = walFixed + maxKeyCap + maxValueCap
)

type recordKind uint8

const (
	kindPut recordKind = 1
	kindDel recordKind = 2
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

type walRecord struct {
	seq   uint64
	kind  recordKind
	key   []byte
	value []byte
}

// wal is one log file, with group commit. Appending a record only encodes
// it into a memory buffer (under bufMu, briefly); making it reach the file
// is commit's job, done by whichever writer gets ioMu first, for every
// record buffered so far: one write(2) and, for durable writes, one fsync
// for the whole batch. Appenders never make system calls under a lock
// other writers need: on Linux a write to a page under writeback waits for
// it, so an append that wrote to the file would stall behind every fsync
// and serialise the writers.
type wal struct {
	id uint64
	f  vfs.File

	bufMu    sync.Mutex
	pend     []byte // encoded records not yet written to the file
	appended int64  // log length including pend

	ioMu    sync.Mutex // one write+fsync at a time
	spare   []byte     // the previous batch's buffer, reused
	written atomic.Int64
	synced  atomic.Int64
	err     error // first write or fsync failure; sticky (guarded by ioMu)
	closed  bool  // (ioMu)
	// clean: the failure was a write that was undone (the file cut back
	// to its last whole batch and fsynced), so the file holds exactly the
	// records acknowledged before it; the DB moves on to a new log.
	clean atomic.Bool

	syncs *atomic.Int64 // the DB's fsync counter, if any
}

// createWAL makes a new, empty log and makes its directory entry durable,
// so that records acknowledged in it cannot vanish with the file.
func createWAL(fs vfs.FS, dir string, id uint64) (*wal, error) {
	path := fileName(dir, id, extLog)
	f, err := fs.Create(path)
	if err != nil {
		return nil, err
	}
	if err := fs.SyncDir(dir); err != nil {
		f.Close()
		fs.Remove(path)
		return nil, err
	}
	return &wal{id: id, f: f}, nil
}

// reopenWAL opens an existing log (already replayed and truncated) to
// append to it.
func reopenWAL(fs vfs.FS, dir string, id uint64) (*wal, error) {
	f, err := fs.OpenAppend(fileName(dir, id, extLog))
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	w := &wal{id: id, f: f, appended: st.Size()}
	w.written.Store(st.Size())
	w.synced.Store(st.Size())
	return w, nil
}

// append encodes one record into the batch and returns the log's length
// after it: the position commit must reach for the record to be in the
// file. Callers append in sequence-number order (the DB's write lock).
func (w *wal) append(r walRecord) int64 {
	n := walFixed + len(r.key) + len(r.value)
	w.bufMu.Lock()
	defer w.bufMu.Unlock()
	b := w.pend
	at := len(b)
	b = binary.LittleEndian.AppendUint32(b, 0) // crc, filled below
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint64(b, r.seq)
	b = append(b, byte(r.kind))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(r.key)))
	b = append(b, r.key...)
	b = append(b, r.value...)
	binary.LittleEndian.PutUint32(b[at:], crc32.Checksum(b[at+4:], crcTable))
	w.pend = b
	w.appended += int64(walHeader + n)
	return w.appended
}

// commit returns once the first pos bytes of the log are in the file and,
// with durable, on stable storage. A failure is sticky. A failed write
// (ENOSPC, say) may have put part of the batch in the file: it is undone
// (truncate to the last whole batch, fsync), and every record of the batch
// and after it is reported ErrNotStored. If that undo fails, or an fsync
// fails (the kernel may have dropped the dirty pages, so what the file
// holds is unknown), the records are reported ErrOutcomeUnknown.
func (w *wal) commit(pos int64, durable bool) error {
	done := &w.written
	if durable {
		done = &w.synced
	}
	if done.Load() >= pos {
		return nil
	}
	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	// Covered first: a batch that made this record durable may have been
	// followed by one that failed; the failure is not this record's.
	if done.Load() >= pos {
		return nil // the batch we queued behind covered us
	}
	if w.err != nil {
		return w.err
	}
	if w.closed {
		// A log is closed only once its records are durable elsewhere (in
		// a flushed table) or were synced by Close.
		return nil
	}
	w.bufMu.Lock()
	batch, end := w.pend, w.appended
	w.pend = w.spare[:0]
	w.bufMu.Unlock()
	if len(batch) > 0 {
		if n, err := w.f.Write(batch); err != nil {
			w.err = w.undo(n, err)
			return w.err
		}
		w.written.Store(end)
	}
	if cap(batch) <= 1<<20 {
		w.spare = batch[:0] // keep ordinary buffers, not one that held a 64 MiB value
	} else {
		w.spare = nil
	}
	if durable {
		if err := w.f.Sync(); err != nil {
			w.err = fmt.Errorf("%w: fsync of log %06d failed: %w", ErrOutcomeUnknown, w.id, err)
			return w.err
		}
		w.synced.Store(end)
		if w.syncs != nil {
			w.syncs.Add(1)
		}
	}
	return nil
}

// undo cuts the log back to its length before a failed write of which n
// bytes reached the file, and makes that durable, so that no part of the
// failed batch can be replayed after a crash.
func (w *wal) undo(n int, cause error) error {
	good := w.written.Load()
	if err := w.f.Truncate(good); err != nil {
		return fmt.Errorf("%w: write to log %06d failed (%w) and %d written bytes could not be cut off: %w", ErrOutcomeUnknown, w.id, cause, n, err)
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("%w: write to log %06d failed (%w) and cutting it back could not be made durable: %w", ErrOutcomeUnknown, w.id, cause, err)
	}
	w.synced.Store(good)
	w.clean.Store(true)
	return fmt.Errorf("%w: write to log %06d failed: %w", ErrNotStored, w.id, cause)
}

// failedCleanly says the log stopped at a write that was undone: every
// record in it is intact and durable, and no more go into it.
func (w *wal) failedCleanly() bool { return w.clean.Load() }

// sync makes everything appended so far durable.
func (w *wal) sync() error {
	if w.failedCleanly() {
		return nil // what it holds is durable; the rest was reported not stored
	}
	w.bufMu.Lock()
	end := w.appended
	w.bufMu.Unlock()
	return w.commit(end, true)
}

// close closes the file; the caller has synced what it needs. Idempotent.
func (w *wal) close() error {
	w.ioMu.Lock()
	defer w.ioMu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	return w.f.Close()
}
