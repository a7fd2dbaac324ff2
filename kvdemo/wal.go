package kvdemo

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// The write-ahead log is a sequence of records, each
//
//	crc32c u32 | length u32 | seq u64 | kind u8 | keyLen u32 | key | value
//
// where length counts the bytes after the length field and the CRC-32C
// covers them too. A record is acknowledged only after it is written (and,
// with Options.SyncEachWrite, fsynced). On open, replay stops at the first
// record that is short or fails its checksum: everything before it was
// acknowledged and is intact, everything from it on never was, and the file
// is truncated there.

const (
	walHeader = 8          // crc + length
	walFixed  = 8 + 1 + 4  // seq + kind + keyLen
	walMaxRec = 64<<20 + 1 // larger lengths are corruption, not records
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

type wal struct {
	f    *os.File
	buf  []byte
	size int64
}

func openWAL(path string) (*wal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &wal{f: f, size: st.Size()}, nil
}

// append writes one record; with sync it returns only once the record is
// on stable storage.
func (w *wal) append(r walRecord, sync bool) error {
	n := walFixed + len(r.key) + len(r.value)
	w.buf = w.buf[:0]
	w.buf = binary.LittleEndian.AppendUint32(w.buf, 0) // crc, filled below
	w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(n))
	w.buf = binary.LittleEndian.AppendUint64(w.buf, r.seq)
	w.buf = append(w.buf, byte(r.kind))
	w.buf = binary.LittleEndian.AppendUint32(w.buf, uint32(len(r.key)))
	w.buf = append(w.buf, r.key...)
	w.buf = append(w.buf, r.value...)
	binary.LittleEndian.PutUint32(w.buf, crc32.Checksum(w.buf[4:], crcTable))
	if _, err := w.f.Write(w.buf); err != nil {
		return err
	}
	w.size += int64(len(w.buf))
	if sync {
		return w.f.Sync()
	}
	return nil
}

func (w *wal) sync() error  { return w.f.Sync() }
func (w *wal) close() error { return w.f.Close() }

// replayWAL calls fn for every intact record of the log at path and
// truncates the log after the last one. It reports how many bytes of torn
// or corrupt tail it cut off.
func replayWAL(path string, fn func(walRecord)) (cut int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	r := bufio.NewReaderSize(f, 1<<20)
	var good int64
	var hdr [walHeader]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break
		}
		n := binary.LittleEndian.Uint32(hdr[4:])
		if n < walFixed || n > walMaxRec {
			break
		}
		body := make([]byte, n)
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
		fn(rec)
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
