package kvdemo

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
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
// Options.NoSyncEachWrite, fsynced). On open, replay stops at the first
// record that is short, implausibly long or fails its checksum: everything
// before it was written whole, everything from it on was never
// acknowledged (a crash tore it), and the file is truncated there.

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
// with durable, on stable storage. A failure is sticky: after a failed
// write part of a record may be in the file, and after a failed fsync the
// kernel may have dropped the dirty pages, so nothing appended later could
// be vouched for.
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
	if w.err != nil {
		return w.err
	}
	if done.Load() >= pos {
		return nil // the batch we queued behind covered us
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
		if _, err := w.f.Write(batch); err != nil {
			w.err = fmt.Errorf("kvdemo: write to log %06d failed, store is read-only until reopened: %w", w.id, err)
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
			w.err = fmt.Errorf("kvdemo: fsync of log %06d failed, store is read-only until reopened: %w", w.id, err)
			return w.err
		}
		w.synced.Store(end)
		if w.syncs != nil {
			w.syncs.Add(1)
		}
	}
	return nil
}

// sync makes everything appended so far durable.
func (w *wal) sync() error {
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

// replayWAL calls fn for every intact record of the log at path, in order,
// and truncates the log after the last one. It reports how many bytes of
// torn or corrupt tail it cut off. fn must copy what it keeps.
func replayWAL(fs vfs.FS, path string, fn func(walRecord) error) (cut int64, err error) {
	f, err := fs.OpenAppend(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rf, err := fs.Open(path)
	if err != nil {
		return 0, err
	}
	defer rf.Close()
	st, err := rf.Stat()
	if err != nil {
		return 0, err
	}
	r := bufio.NewReaderSize(rf, 1<<20)
	var good int64
	var hdr [walHeader]byte
	var body []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		n := binary.LittleEndian.Uint32(hdr[4:])
		if n < walFixed || n > walMaxRec || int64(n) > st.Size()-good-walHeader {
			break // a length no record has, or longer than the file: never allocate it
		}
		if cap(body) < int(n) {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			break
		}
		crc := crc32.Update(crc32.Checksum(hdr[4:], crcTable), crcTable, body)
		if crc != binary.LittleEndian.Uint32(hdr[:]) {
			break
		}
		keyLen := binary.LittleEndian.Uint32(body[9:])
		if uint64(keyLen) > uint64(n-walFixed) {
			break
		}
		rec := walRecord{
			seq:   binary.LittleEndian.Uint64(body),
			kind:  recordKind(body[8]),
			key:   body[walFixed : walFixed+keyLen],
			value: body[walFixed+keyLen:],
		}
		if rec.kind != kindPut && rec.kind != kindDel {
			break
		}
		if err := fn(rec); err != nil {
			return 0, err
		}
		good += int64(walHeader) + int64(n)
	}
	if cut = st.Size() - good; cut > 0 {
		if err := f.Truncate(good); err != nil {
			return cut, fmt.Errorf("truncating torn WAL tail: %w", err)
		}
		if err := f.Sync(); err != nil {
			return cut, err
		}
	}
	return cut, nil
}
