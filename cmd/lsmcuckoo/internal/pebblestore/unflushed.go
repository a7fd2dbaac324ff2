package pebblestore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/record"
)

// Unflushed is what a store's live write-ahead logs hold: writes since the
// last flush, which are in no table and so in no filter. The read-only open
// hides the logs from Pebble (KeepVisible), so the report counts tables
// only; this says what that leaves out.
type Unflushed struct {
	// Logs are the live logs' file names: those numbered at or above the
	// manifest's oldest unflushed log. Older ones in the directory are
	// obsolete, kept by Pebble to recycle, and hold flushed writes.
	Logs []string `json:"logs"`
	// Batches is the committed batches the live logs hold; Writes their
	// operations (a Set, a Delete, a range deletion each count one);
	// Bytes the batches' bytes.
	Batches int64 `json:"batches"`
	Writes  int64 `json:"writes"`
	Bytes   int64 `json:"bytes"`
}

// batchHeader is a batch's sequence number (8 bytes) and operation count
// (4 bytes, little endian), at the start of every write-ahead log record.
const batchHeader = 12

// ReadUnflushed reads the live write-ahead logs in dir (a Pebble v1 or v2
// store: both write the same manifest tags and log records). It only
// reads. A log that ends in a torn or recycled tail, as a log its owner is
// writing or a recycled file may, is counted up to there; a log of another
// WALDir or a failover directory is not seen. It returns nil when no live
// log in dir holds a batch.
func ReadUnflushed(dir string) (*Unflushed, error) {
	oldest, err := oldestUnflushedLog(dir)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	u := &Unflushed{}
	for _, e := range ents {
		num, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || n < oldest {
			continue // not a log's plain name, or an obsolete log
		}
		batches, writes, bytes := countLog(filepath.Join(dir, e.Name()), n)
		if batches == 0 {
			continue
		}
		u.Logs = append(u.Logs, e.Name())
		u.Batches += batches
		u.Writes += writes
		u.Bytes += bytes
	}
	if u.Batches == 0 {
		return nil, nil
	}
	slices.Sort(u.Logs)
	return u, nil
}

// oldestUnflushedLog is the number of the store's oldest log whose writes
// no flush has put in a table, as its current manifest records it: the
// last "log number" (tag 2) of its version edits. Pebble (v1 and v2)
// writes that tag right after the optional comparator name (tag 1), so
// only each edit's first tags are read. A manifest that ends in a damaged
// record counts up to it, as Pebble reads it.
func oldestUnflushedLog(dir string) (uint64, error) {
	name, err := CurrentManifest(dir)
	if err != nil {
		return 0, err
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	rr := record.NewReader(f, 0)
	oldest := uint64(0)
	for {
		r, err := rr.Next()
		if err != nil {
			return oldest, nil
		}
		if n, ok := editLogNumber(bufio.NewReaderSize(io.LimitReader(r, 1<<16), 512)); ok {
			oldest = n
		}
		if _, err := io.Copy(io.Discard, r); err != nil {
			return oldest, nil
		}
	}
}

// editLogNumber reads a version edit's leading tags: the comparator name
// (tag 1, skipped) and the log number (tag 2). Any other tag ends the
// search: Pebble writes the log number before every other field.
func editLogNumber(r *bufio.Reader) (uint64, bool) {
	for {
		tag, err := binary.ReadUvarint(r)
		if err != nil {
			return 0, false
		}
		switch tag {
		case 1:
			n, err := binary.ReadUvarint(r)
			if err != nil || n > 1<<12 {
				return 0, false
			}
			if _, err := r.Discard(int(n)); err != nil {
				return 0, false
			}
		case 2:
			n, err := binary.ReadUvarint(r)
			return n, err == nil
		default:
			return 0, false
		}
	}
}

// countLog counts the batches of the log file numbered num, their
// operations and bytes, up to its end or its first chunk that is not this
// log's (a torn write, or a recycled file's older contents).
func countLog(path string, num uint64) (batches, writes, bytes int64) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, 0
	}
	defer f.Close()
	rr := newLogReader(record.NewReader, f, num)
	var head [batchHeader]byte
	for {
		r, err := rr.Next()
		if err != nil {
			return batches, writes, bytes
		}
		n, err := io.ReadFull(r, head[:])
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				continue // an empty or short record: no batch
			}
			return batches, writes, bytes
		}
		rest, err := io.Copy(io.Discard, r)
		if err != nil {
			return batches, writes, bytes // the record is cut: not committed
		}
		batches++
		writes += int64(binary.LittleEndian.Uint32(head[8:]))
		bytes += int64(n) + rest
	}
}

// newLogReader calls record.NewReader with num as the log number type it
// takes, which Pebble keeps in an internal package: the type parameter is
// inferred from the function, never named.
func newLogReader[N ~uint64](newReader func(io.Reader, N) *record.Reader, r io.Reader, num uint64) *record.Reader {
	return newReader(r, N(num))
}
