package kvdemo

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// A log is read through a window, never whole: a log can be of any size
// (a sparse or zero-filled tail left by a filesystem or an operator), and
// what scanning it holds in memory is bounded by one read chunk and the
// longest record the format allows (walMaxRec), whatever the log's size.

// logChunk is how much of a log one read brings in.
const logChunk = 1 << 20

// logReader reads one log through a window of its bytes.
type logReader struct {
	f     io.ReaderAt
	size  int64
	chunk int    // bytes a refill reads at least
	buf   []byte // the log's bytes from base on
	base  int64
	// nextData, if set, returns the first offset at or after off that
	// may hold data other than zeros (the file's holes skipped), and
	// false if none does: the rest of the file reads as zeros.
	nextData func(off int64) (int64, bool)
}

// openLog opens a log for scanning; the caller closes the file.
func openLog(fs vfs.FS, path string) (*logReader, io.Closer, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	r := &logReader{f: f, size: st.Size(), chunk: logChunk}
	if s, ok := f.(io.Seeker); ok {
		r.nextData = func(off int64) (int64, bool) { return seekData(s, off) }
	}
	return r, f, nil
}

// window returns the log's bytes from off on: at least n of them, unless
// the log ends first. The slice is valid until the next call.
func (r *logReader) window(off int64, n int) ([]byte, error) {
	end := min(off+int64(n), r.size)
	if off >= r.base && end <= r.base+int64(len(r.buf)) {
		return r.buf[off-r.base:], nil
	}
	want := int(min(int64(max(n, r.chunk)), r.size-off))
	keep := 0
	if off >= r.base && off < r.base+int64(len(r.buf)) {
		keep = len(r.buf) - int(off-r.base)
	}
	if cap(r.buf) < want {
		// Grows only to a chunk, or to one record no longer than
		// walMaxRec (callers ask for no more).
		nb := make([]byte, want)
		copy(nb, r.buf[len(r.buf)-keep:])
		r.buf = nb
	} else {
		copy(r.buf[:keep], r.buf[len(r.buf)-keep:])
		r.buf = r.buf[:want]
	}
	r.base = off
	got, err := r.f.ReadAt(r.buf[keep:], off+int64(keep))
	if got < want-keep {
		r.buf = r.buf[:keep+got]
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("log is %d bytes, shorter than the %d it had when the scan began", off+int64(keep+got), r.size)
		}
		return nil, err
	}
	return r.buf, nil
}

// plausibleLen is the length of the record whose first walHeader+walFixed
// bytes are hdr, avail bytes before the log's end: 0 if no intact record
// can start there. minSeq (if not 0) also requires a sequence number
// above it: used when searching for a record after damage, where a
// plausible-looking one with a sequence number from the past is a false
// match.
func plausibleLen(hdr []byte, avail int64, minSeq uint64) int64 {
	if avail < walHeader+walFixed {
		return 0
	}
	l := binary.LittleEndian.Uint32(hdr[4:])
	if l < walFixed || l > walMaxRec || int64(l) > avail-walHeader {
		return 0
	}
	body := hdr[walHeader:]
	kind := recordKind(body[8])
	keyLen := binary.LittleEndian.Uint32(body[9:])
	seq := binary.LittleEndian.Uint64(body)
	if (kind != kindPut && kind != kindDel) || uint64(keyLen) > uint64(l-walFixed) || (minSeq != 0 && seq <= minSeq) {
		return 0
	}
	return walHeader + int64(l)
}

// decodeRecord decodes rec, a whole record of plausibleLen's length, if
// its checksum holds. The record's key and value point into rec.
func decodeRecord(rec []byte) (walRecord, bool) {
	if crc32.Checksum(rec[4:], crcTable) != binary.LittleEndian.Uint32(rec) {
		return walRecord{}, false
	}
	body := rec[walHeader:]
	keyLen := binary.LittleEndian.Uint32(body[9:])
	return walRecord{seq: binary.LittleEndian.Uint64(body), kind: recordKind(body[8]),
		key: body[walFixed : walFixed+keyLen], value: body[walFixed+keyLen:]}, true
}

// parse decodes the record at off, if an intact one starts there. The
// record points into the window: valid until the next read.
func (r *logReader) parse(off int64, minSeq uint64) (rec walRecord, n int64, ok bool, err error) {
	w, err := r.window(off, walHeader+walFixed)
	if err != nil {
		return rec, 0, false, err
	}
	if n = plausibleLen(w, r.size-off, minSeq); n == 0 {
		return rec, 0, false, nil
	}
	if w, err = r.window(off, int(n)); err != nil {
		return rec, 0, false, err
	}
	rec, ok = decodeRecord(w[:n])
	return rec, n, ok, nil
}

// logScan is what scanning one log found.
type logScan struct {
	size      int64
	damageAt  int64 // offset of the first bad record; -1: none
	nextValid int64 // offset of an intact record after it; -1: none, -2: could not rule one out
	lastSeq   uint64
	// reach is the sequence number of the last intact record before the
	// first damage (of the last record, if there is none): how far a
	// replay that stops at damage gets.
	reach uint64
}

// scan calls fn for each intact record in order, up to the first bad one
// or, with skip, past bad ones to every intact record. fn must copy what
// it keeps.
func (r *logReader) scan(skip bool, fn func(walRecord) error) (logScan, error) {
	sc := logScan{size: r.size, damageAt: -1, nextValid: -1}
	off := int64(0)
	for off < sc.size {
		rec, n, ok, err := r.parse(off, 0)
		if err != nil {
			return sc, err
		}
		if ok {
			if err := fn(rec); err != nil {
				return sc, err
			}
			sc.lastSeq = rec.seq
			off += n
			continue
		}
		next, err := r.findRecord(off+1, sc.lastSeq)
		if err != nil {
			return sc, err
		}
		if sc.damageAt < 0 {
			sc.damageAt, sc.nextValid, sc.reach = off, next, sc.lastSeq
		}
		if !skip || next < 0 {
			break
		}
		off = next
	}
	if sc.damageAt < 0 {
		sc.reach = sc.lastSeq
	}
	return sc, nil
}

// findRecord searches from off for the start of an intact record with a
// sequence number above minSeq: -1 if there is none. The search is
// bounded: if the content makes it too costly (many plausible-looking
// lengths), it gives up with -2, which callers treat as "a record may
// follow", the cautious answer. The budget is charged only for lengths a
// record can have (not above walMaxRec), so random garbage before a large
// hole does not exhaust it. Zeros cannot hold a record's length, so
// runs of them (and the file's holes) are skipped without a look at
// each offset.
func (r *logReader) findRecord(off int64, minSeq uint64) (int64, error) {
	budget := 64*r.size + 1<<20 // bytes checksummed
	for off+walHeader+walFixed <= r.size {
		if r.nextData != nil {
			// A record at o has its length at o+4..o+7: one of those
			// bytes must be data.
			d, ok := r.nextData(off + 4)
			if !ok {
				return -1, nil
			}
			off = max(off, d-7)
			if off+walHeader+walFixed > r.size {
				return -1, nil
			}
		}
		w, err := r.window(off, max(r.chunk, walHeader+walFixed))
		if err != nil {
			return 0, err
		}
		i := 0
		last := len(w) - (walHeader + walFixed) // the last offset in w a record's header fits at
		for i <= last {
			nz := firstNonZero(w[i+4:])
			if nz < 0 {
				i = len(w) - 7 // no length field ending in w is nonzero
				break
			}
			i = max(i, i+4+nz-7)
			if i > last {
				break
			}
			l := int64(binary.LittleEndian.Uint32(w[i+4:]))
			if l < walFixed || l > walMaxRec || l > r.size-(off+int64(i))-walHeader {
				i++
				continue
			}
			if budget -= l; budget < 0 {
				return -2, nil
			}
			if plausibleLen(w[i:], r.size-(off+int64(i)), minSeq) == 0 {
				i++
				continue
			}
			_, _, ok, err := r.parse(off+int64(i), minSeq)
			if err != nil || ok {
				return off + int64(i), err
			}
			// parse may have moved the window: go on from the next offset.
			i++
			break
		}
		off += int64(max(i, 1))
	}
	return -1, nil
}

// firstNonZero is the index of the first nonzero byte of b, -1 if none.
func firstNonZero(b []byte) int {
	const block = 512
	var zeros [block]byte
	i := 0
	for ; i+block <= len(b); i += block {
		if !bytes.Equal(b[i:i+block], zeros[:]) {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}

// scanLogFile scans the log at path (see logReader.scan).
func scanLogFile(fs vfs.FS, path string, skip bool, fn func(walRecord) error) (logScan, error) {
	r, f, err := openLog(fs, path)
	if err != nil {
		return logScan{}, err
	}
	defer f.Close()
	return r.scan(skip, fn)
}
