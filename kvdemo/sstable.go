package kvdemo

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// sstable is one immutable table: a Badger SST holding the newest version
// of each of its keys (tombstones included), and whatever its table
// filter keeps beside it.
//
// Lifetime: each view (snapshot of the table list) that lists the table
// holds one reference. A Get holds its view, so a table a compaction
// retires stays readable until the last Get that could be reading it is
// done; then it is closed, and its files removed if it is obsolete.
type sstable struct {
	id   uint64
	t    *table.Table // nil when damaged
	keys int
	size int64
	sum  uint64 // xxhash64 of the table file: its identity, with id and size

	// damaged is why the table cannot be read (set at Open; t is nil):
	// a Get that reaches it returns this instead of guessing.
	damaged error

	// cf is the cuckoo filter (Filter = cuckoo); nil means "no usable
	// filter: probe". It is set once more when a missing, corrupt or
	// unbound filter has been rebuilt in the background, hence atomic.
	cf      atomic.Pointer[codec.Filter]
	cfBytes atomic.Int64
	// badFilter: Open read the table's filter file and could not use it
	// (damaged, or another table's); it is moved to lost/ before its
	// rebuild writes over it or the table's removal removes it.
	badFilter atomic.Bool
	// indexed: the table's keys are in the global index (Filter = global).
	indexed atomic.Bool
	// mergedInto: the compaction output whose Replace took this table's
	// entries (global): a Get on an older view reads this table when the
	// index names that table, or what it was merged into in turn.
	mergedInto atomic.Pointer[sstable]
	// mergedFrom: a compaction output's inputs whose entries its Replace
	// rewrites (global), set before any input's mergedInto names it and
	// never changed after. A key the merge drops has its inputs' entries
	// cleared one at a time, so a lookup meanwhile can name the input
	// holding its old value and not the newer one holding its tombstone:
	// a Get on an older view reads every input when the index names any.
	mergedFrom []uint64
	// indexedAt: the global filter's epoch when a compaction's Replace
	// (or its fallback) put the table's keys in the index, 0 for a table
	// indexed before any view listed it. A Get whose index lookup came
	// before that epoch was not told about this table (global).
	indexedAt atomic.Uint64
	// merge: a compaction output's key hashes, kept from its build until
	// merged indexes them in its inputs' place (global). Cleared under the
	// global filter's swapMu, under which a rebuild reads it.
	merge *pendingMerge

	refs     atomic.Int32
	obsolete atomic.Bool // replaced by a compaction: delete the files at the last unref
	closed   atomic.Bool
	db       *DB
}

func (st *sstable) ref() { st.refs.Add(1) }

func (st *sstable) unref() {
	if st.refs.Add(-1) != 0 {
		return
	}
	if st.obsolete.Load() {
		st.db.removeTable(st)
	} else {
		st.close()
	}
}

// close releases the table, once.
func (st *sstable) close() {
	if st.t == nil || !st.closed.CompareAndSwap(false, true) {
		return
	}
	if err := st.t.Close(-1); err != nil {
		st.db.opts.Logger.Printf("closing table %06d: %v", st.id, err)
	}
}

// get finds the newest version of key in the table.
func (st *sstable) get(seek, key []byte) (vs y.ValueStruct, found bool, err error) {
	if st.damaged != nil {
		return vs, false, st.damaged
	}
	// Outside the table's key range nothing is read, so a damaged block
	// costs only the keys in its range.
	if bytes.Compare(key, y.ParseKey(st.t.Smallest())) < 0 || bytes.Compare(key, y.ParseKey(st.t.Biggest())) > 0 {
		return vs, false, nil
	}
	it := st.t.NewIterator(0)
	defer it.Close()
	it.Seek(seek)
	if !it.Valid() {
		// Badger's iterator is not valid at the end of the table and
		// also when a block failed to load or its checksum: below the
		// table's biggest key only the second is possible.
		if y.CompareKeys(seek, st.t.Biggest()) <= 0 {
			return vs, false, fmt.Errorf("%w: table %06d: the block for this key cannot be read or fails its checksum", ErrCorrupt, st.id)
		}
		return vs, false, nil
	}
	if !bytes.Equal(y.ParseKey(it.Key()), key) {
		return vs, false, nil
	}
	return it.ValueCopy(), true, nil
}

// Compression is the block compression of a store's tables. Badger's SST
// does not record it, so the manifest does, and a store is always reopened
// with the compression it was created with.
type Compression string

const (
	CompressionZSTD   Compression = "zstd" // klauspost/compress, through Badger
	CompressionSnappy Compression = "snappy"
	CompressionNone   Compression = "none"
)

func (c Compression) badger() (options.CompressionType, error) {
	switch c {
	case CompressionZSTD:
		return options.ZSTD, nil
	case CompressionSnappy:
		return options.Snappy, nil
	case CompressionNone:
		return options.None, nil
	}
	return 0, fmt.Errorf("kvdemo: unknown compression %q (want zstd, snappy or none)", c)
}

// entrySource is what a table is written from: a memtable's skiplist or a
// merge of tables, in Badger key order (user key ascending, versions
// newest first).
type entrySource interface {
	Rewind()
	Valid() bool
	Next()
	Key() []byte
	Value() y.ValueStruct
}

// tableStats describe a written table.
type tableStats struct {
	keys, tombstones, dropped int
	maxSeq                    uint64
}

// buildTable writes the newest version of each key from src as table id
// (and its filter). The table is built in memory and written with
// write(2), never through a growing memory map: on a full disk a mapped
// write is a SIGBUS that kills the process, a write(2) is an ENOSPC that
// the flush can report and retry. Table and filter are each written
// atomically (temporary file, fsync, rename); the caller fsyncs the
// directory before naming the table in the manifest, and calls
// removeTable if it never does. With dropTombstones (nothing older than
// src exists) deleted keys are left out. It returns nil and no error when
// nothing was left to write. Closing stop abandons the build (errAborted).
func (db *DB) buildTable(id uint64, src entrySource, dropTombstones, merging bool, stop <-chan struct{}) (*sstable, tableStats, error) {
	var ts tableStats
	b := table.NewTableBuilder(db.tOpt)
	defer b.Close()
	fb := db.filter.newBuilder(merging)
	var last []byte
	n := 0
	for src.Rewind(); src.Valid(); src.Next() {
		if n++; stop != nil && n%4096 == 0 {
			select {
			case <-stop:
				return nil, ts, errAborted
			default:
			}
		}
		k := src.Key()
		user := y.ParseKey(k)
		if last != nil && bytes.Equal(user, last) {
			continue // an older version, shadowed by the one just written
		}
		last = append(last[:0], user...)
		vs := src.Value()
		ts.maxSeq = max(ts.maxSeq, y.ParseTs(k))
		if vs.Meta&metaDelete != 0 {
			if dropTombstones {
				ts.dropped++
				fb.omit(user)
				continue
			}
			ts.tombstones++
		}
		ts.keys++
		b.Add(k, vs, 0)
		fb.add(user)
	}
	if ts.keys == 0 {
		return nil, ts, nil
	}
	data := b.Finish()
	name := fmt.Sprintf("%06d.%s", id, extTable)
	if err := db.writeFileAtomic(name, data); err != nil {
		return nil, ts, errorf("writing table %06d: %w", id, err)
	}
	st, err := db.openTable(id, data)
	if err != nil {
		db.removeFile(id, extTable)
		return nil, ts, err
	}
	if err := fb.finish(st); err != nil {
		db.removeTable(st)
		return nil, ts, err
	}
	return st, ts, nil
}

// removeTable closes a table and removes its files: it was never named by
// a manifest, or a manifest has stopped naming it.
func (db *DB) removeTable(st *sstable) {
	if st == nil {
		return
	}
	st.close()
	db.removeFile(st.id, extTable)
	db.filter.drop(st)
	db.forgetRetired(st.id)
}

// openTable opens table id. data, if not nil, is the file's content
// (just written); else the file is read whole with read(2), through the
// store's filesystem, and held in memory.
//
// Tables are never memory-mapped: an I/O error on a mapped page is a
// SIGBUS that kills the process, where read(2) returns EIO that Open can
// report. Badger's table reader reads blocks only from a byte slice, so
// the whole table is held (kvdemo/README.md, "Tables in memory").
//
// A table that cannot be read is an error wrapping the read's error (a
// missing file, EIO, EMFILE: the table may be fine); one that reads but
// fails to parse or its checksums wraps errDamagedTable.
func (db *DB) openTable(id uint64, data []byte) (*sstable, error) {
	if data == nil {
		var err error
		if data, err = vfs.ReadFile(db.fs, fileName(db.dir, id, extTable)); err != nil {
			return nil, errorf("table %06d: %w", id, err)
		}
	}
	opt, cacheID := db.tOpt, id
	if db.blockCache != nil {
		// Badger keys cached blocks by a 32-bit table number: past that
		// (four billion table opens), tables go uncached.
		if serial := db.tableSerial.Add(1); serial < math.MaxUint32 {
			opt.BlockCache, cacheID = db.blockCache, serial
		}
	}
	t, err := openMemTable(data, cacheID, opt)
	if err != nil {
		return nil, errorf("table %06d: %w", id, err)
	}
	st := &sstable{id: id, t: t, db: db, keys: int(t.KeyCount()), size: t.Size(), sum: xxhash.Sum64(data)}
	return st, nil
}

// openListedTable opens table id, which the manifest lists, and checks
// that it is the table the manifest recorded (size and xxhash64): a
// valid table of another number copied in its place parses and passes
// every block checksum, and would answer for keys it never held. A
// mismatch is damage, not a reason to trust the file.
func (db *DB) openListedTable(id uint64) (*sstable, error) {
	st, err := db.openTable(id, nil)
	if err != nil {
		return nil, err
	}
	if f, ok := db.man.TableFiles[id]; ok {
		if why := f.mismatch(st); why != "" {
			st.close()
			return nil, errorf("table %06d: %w: %s", id, errDamagedTable, why)
		}
	}
	return st, nil
}

// errDamagedTable: a table's bytes were read and are not a valid table.
var errDamagedTable = errors.New("damaged table")

// openMemTable opens a table held in memory, made safe for damaged
// bytes: Badger panics when it cannot parse a table's index, and checks
// block checksums at open only for mapped tables, so both are done here.
func openMemTable(data []byte, id uint64, opt table.Options) (t *table.Table, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("%w: %v", errDamagedTable, firstLine(fmt.Sprint(r)))
		}
	}()
	if len(data) < 8 {
		return nil, fmt.Errorf("%w: %d bytes", errDamagedTable, len(data))
	}
	t, err = table.OpenInMemoryTable(data, id, &opt)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errDamagedTable, err)
	}
	if err := t.VerifyChecksum(); err != nil {
		return nil, fmt.Errorf("%w: %w", errDamagedTable, err)
	}
	return t, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
