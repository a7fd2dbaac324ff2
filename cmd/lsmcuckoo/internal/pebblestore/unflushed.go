package pebblestore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
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
	// Batches is the committed batches of writes the live logs hold;
	// Writes their operations (a Set, a Delete, a range deletion each
	// count one); Bytes the batches' bytes. A batch of LogData alone is
	// not counted: Pebble neither applies nor flushes it.
	Batches int64 `json:"batches"`
	Writes  int64 `json:"writes"`
	Bytes   int64 `json:"bytes"`
	// Ingests is the ingestions the logs record whose tables overlapped
	// the memtable: those tables wait, with their own filters, to be
	// placed in a level at the next flush, and are in no level yet.
	Ingests int64 `json:"ingests,omitempty"`
	// FailoverSegments is the live logs' WAL-failover segment files in
	// the directory (NNNNNN-SSS.log): a log Pebble wrote partly to a
	// secondary directory is only partly here, so the counts above are
	// then less than the logs hold.
	FailoverSegments int `json:"failover_segments,omitempty"`
}

// batchHeader is a batch's sequence number (8 bytes) and operation count
// (4 bytes, little endian), at the start of every write-ahead log record.
const batchHeader = 12

// kindIngestSST is Pebble's key kind (internal/base; 22 in v1 and v2) of
// an ingestion's log entries, which name tables rather than write keys.
const kindIngestSST = 22

// logBlock is a log's (and a manifest's) block: Pebble's record reader
// reads whole blocks.
const logBlock = 32 << 10

// ReadUnflushed reads the live write-ahead logs in dir (a Pebble v1 or v2
// store: both write the same manifest tags and log records). It only
// reads. A log that ends in a torn or recycled tail, as a log its owner is
// writing or a recycled file may, is counted up to there. Logs in another
// WALDir are not seen, nor a WAL-failover log's segments (counted in
// FailoverSegments when they are in dir). It returns nil when no live log
// in dir holds a batch of writes or an ingestion.
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
	var nums []uint64
	for _, e := range ents {
		num, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		if log, seg, ok := strings.Cut(num, "-"); ok {
			// A failover segment: NNNNNN-SSS.log.
			if n, err := strconv.ParseUint(log, 10, 64); err == nil && n >= oldest && isDigits(seg) {
				u.FailoverSegments++
			}
			continue
		}
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil || n < oldest {
			continue // not a log's plain name, or an obsolete log
		}
		path := filepath.Join(dir, e.Name())
		if info, err := os.Stat(path); err != nil || !info.Mode().IsRegular() {
			continue // a symbolic link is followed, as Pebble follows it
		}
		c := countLog(path, n)
		if c.batches == 0 && c.ingests == 0 {
			continue
		}
		nums = append(nums, n)
		u.Batches += c.batches
		u.Writes += c.writes
		u.Bytes += c.bytes
		u.Ingests += c.ingests
	}
	if u.Batches == 0 && u.Ingests == 0 {
		return nil, nil
	}
	slices.Sort(nums)
	for _, n := range nums {
		u.Logs = append(u.Logs, fmt.Sprintf("%06d.log", n))
	}
	return u, nil
}

func isDigits(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }

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
	br := &boundedRead{r: f, limit: 2 * logBlock}
	rr := record.NewReader(br, 0)
	oldest := uint64(0)
	for {
		rec, err := rr.Next()
		if err != nil {
			return oldest, nil
		}
		br.extend()
		r := extendOnRead{rec, br}
		// Pebble ignores a log number of 0, as it decodes an edit.
		if n, ok := editLogNumber(bufio.NewReaderSize(io.LimitReader(r, 1<<16), 512)); ok && n != 0 {
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

// logCount is what one log holds.
type logCount struct {
	batches, writes, bytes, ingests int64
}

// countLog counts the batches of the log file numbered num, their
// operations and bytes, up to its end or its first chunk that is not this
// log's (a torn write, or a recycled file's older contents). On such a
// chunk Pebble's reader reads on to the file's end, to tell a torn write
// from damage; boundedRead stops it two blocks past the last record, so
// that a huge or sparse file costs no more than its records.
func countLog(path string, num uint64) logCount {
	f, err := os.Open(path)
	if err != nil {
		return logCount{}
	}
	defer f.Close()
	return countRecords(f, num)
}

// countRecords is countLog over the log's bytes.
func countRecords(log io.Reader, num uint64) logCount {
	var c logCount
	br := &boundedRead{r: log, limit: 2 * logBlock}
	rr := newLogReader(record.NewReader, br, num)
	var head [batchHeader + 1]byte
	for {
		rec, err := rr.Next()
		if err != nil {
			return c
		}
		br.extend()
		r := extendOnRead{rec, br}
		n, err := io.ReadFull(r, head[:])
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return c
		}
		rest, err := io.Copy(io.Discard, r)
		if err != nil {
			return c // the record is cut: not committed
		}
		if n < batchHeader {
			continue // not a batch
		}
		count := int64(binary.LittleEndian.Uint32(head[8:]))
		switch {
		case count == 0:
			// LogData alone: neither applied nor flushed.
		case n > batchHeader && head[batchHeader] == kindIngestSST:
			c.ingests++
		default:
			c.batches++
			c.writes += count
			c.bytes += int64(n) + rest
		}
	}
}

// boundedRead reads at most limit bytes of r; extend moves the limit to
// two blocks past what has been read.
type boundedRead struct {
	r           io.Reader
	read, limit int64
}

func (b *boundedRead) extend() { b.limit = b.read + 2*logBlock }

func (b *boundedRead) Read(p []byte) (int, error) {
	if b.read >= b.limit {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), b.limit-b.read)]
	n, err := b.r.Read(p)
	b.read += int64(n)
	return n, err
}

// extendOnRead extends the bound whenever a record hands out bytes: a
// record larger than two blocks is read whole.
type extendOnRead struct {
	r io.Reader
	b *boundedRead
}

func (e extendOnRead) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if n > 0 {
		e.b.extend()
	}
	return n, err
}

// newLogReader calls record.NewReader with num as the log number type it
// takes, which Pebble keeps in an internal package: the type parameter is
// inferred from the function, never named.
func newLogReader[N ~uint64](newReader func(io.Reader, N) *record.Reader, r io.Reader, num uint64) *record.Reader {
	return newReader(r, N(num))
}
