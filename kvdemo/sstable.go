package kvdemo

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// sstable is one immutable table: a Badger SST holding the newest version
// of each of its keys (tombstones included), and for Filter = cuckoo its
// codec filter block, kept in memory.
//
// Lifetime: each view (snapshot of the table list) that lists the table
// holds one reference. A Get holds its view, so a table a compaction
// retires stays mapped until the last Get that could be reading it is
// done; then it is closed, and its files removed if it is obsolete.
type sstable struct {
	id   uint64
	t    *table.Table
	keys int
	size int64

	// filter is the cuckoo filter (Filter = cuckoo); nil means "no usable
	// filter: probe". It is set once more when a missing or corrupt
	// filter has been rebuilt in the background, hence atomic.
	filter atomic.Pointer[codec.Filter]
	fbytes atomic.Int64 // bytes of filter held in memory

	refs     atomic.Int32
	obsolete atomic.Bool // replaced by a compaction: delete the files at the last unref
	dir      string
	logf     func(string, ...any)
}

func (st *sstable) ref() { st.refs.Add(1) }

func (st *sstable) unref() {
	if st.refs.Add(-1) != 0 {
		return
	}
	if err := st.t.Close(-1); err != nil {
		st.logf("closing table %06d: %v", st.id, err)
	}
	if st.obsolete.Load() {
		for _, ext := range []string{extTable, extFilter} {
			if err := os.Remove(fileName(st.dir, st.id, ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
				st.logf("removing compacted table %06d: %v", st.id, err)
			}
		}
	}
}

// get finds the newest version of key in the table.
func (st *sstable) get(seek, key []byte) (y.ValueStruct, bool) {
	it := st.t.NewIterator(0)
	defer it.Close()
	it.Seek(seek)
	if !it.Valid() || !bytes.Equal(y.ParseKey(it.Key()), key) {
		return y.ValueStruct{}, false
	}
	return it.ValueCopy(), true
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
// (and its filter), each atomically: temporary file, fsync, rename. The
// caller fsyncs the directory before naming the table in the manifest.
// With dropTombstones (nothing older than src exists) deleted keys are
// left out. It returns nil and no error when nothing was left to write.
// Closing stop abandons the build (errAborted).
func (db *DB) buildTable(id uint64, src entrySource, dropTombstones bool, stop <-chan struct{}) (*sstable, tableStats, error) {
	var ts tableStats
	b := table.NewTableBuilder(db.tOpt)
	defer b.Close()
	var fb *codec.Builder
	if db.opts.Filter == FilterCuckoo {
		fb = codec.NewBuilder(codec.Options{BitsPerKey: db.opts.BitsPerKey})
	}
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
				continue
			}
			ts.tombstones++
		}
		ts.keys++
		b.Add(k, vs, 0)
		if fb != nil {
			fb.Add(user)
		}
	}
	if ts.keys == 0 {
		return nil, ts, nil
	}
	tmp := filepath.Join(db.dir, tmpDir, fmt.Sprintf("%06d.%s", id, extTable))
	os.Remove(tmp) // left over from a crash: CreateTable refuses to overwrite
	t, err := table.CreateTable(tmp, b)
	if err != nil {
		return nil, ts, fmt.Errorf("kvdemo: writing table %06d: %w", id, err)
	}
	// CreateTable msyncs the mapping; fsync the file too, for its size.
	if err := t.Fd.Sync(); err != nil {
		t.Close(-1)
		return nil, ts, err
	}
	if err := os.Rename(tmp, fileName(db.dir, id, extTable)); err != nil {
		t.Close(-1)
		return nil, ts, err
	}
	st := db.newSSTable(id, t)
	if fb != nil {
		block := fb.Finish(nil)
		if err := writeFileAtomic(db.dir, fmt.Sprintf("%06d.%s", id, extFilter), block); err != nil {
			t.Close(-1)
			return nil, ts, fmt.Errorf("kvdemo: writing filter %06d: %w", id, err)
		}
		f, err := codec.Decode(block)
		if err != nil {
			t.Close(-1)
			return nil, ts, fmt.Errorf("kvdemo: filter %06d does not decode: %w", id, err)
		}
		st.setFilter(f, len(block))
	}
	return st, ts, nil
}

func (db *DB) newSSTable(id uint64, t *table.Table) *sstable {
	st := &sstable{id: id, t: t, dir: db.dir, logf: db.opts.Logger.Printf, keys: int(t.KeyCount()), size: t.Size()}
	if db.opts.Filter == FilterBloom {
		st.fbytes.Store(int64(t.BloomFilterSize()))
	}
	return st
}

func (st *sstable) setFilter(f *codec.Filter, bytes int) {
	st.fbytes.Store(int64(bytes))
	st.filter.Store(f)
}

// openTable opens table id and its filter. A missing or corrupt filter is
// never trusted: the table is opened without one (every Get probes it) and
// needsFilter is set, for rebuildFilters.
func (db *DB) openTable(id uint64) (st *sstable, needsFilter bool, err error) {
	path := fileName(db.dir, id, extTable)
	mf, err := z.OpenMmapFile(path, os.O_RDWR, 0)
	if err != nil && !errors.Is(err, z.NewFile) {
		return nil, false, fmt.Errorf("kvdemo: opening table %06d: %w", id, err)
	}
	t, err := openBadgerTable(mf, db.tOpt)
	if err != nil {
		return nil, false, fmt.Errorf("kvdemo: opening table %06d: %w", id, err)
	}
	st = db.newSSTable(id, t)
	if db.opts.Filter != FilterCuckoo {
		return st, false, nil
	}
	block, err := os.ReadFile(fileName(db.dir, id, extFilter))
	if err == nil {
		var f *codec.Filter
		if f, err = codec.Decode(block); err == nil {
			st.setFilter(f, len(block))
			return st, false, nil
		}
	}
	db.opts.Logger.Printf("table %06d: filter unusable (%v); reading the table without it until it is rebuilt", id, err)
	return st, true, nil
}

// rebuildFilters rebuilds, in the background, the filters of tables opened
// without one, and installs each as it is done. Until then Gets probe
// those tables: slower, never wrong. A table a compaction retires first is
// skipped (its replacement has its own filter).
func (db *DB) rebuildFilters(tables []*sstable) {
	defer db.bg.Done()
	for _, st := range tables {
		select {
		case <-db.stop:
			return
		default:
		}
		v, err := db.acquire()
		if err != nil {
			return
		}
		if slices.Contains(v.tables, st) {
			db.rebuildFilter(st)
		}
		v.release()
	}
}

func (db *DB) rebuildFilter(st *sstable) {
	fb := codec.NewBuilder(codec.Options{BitsPerKey: db.opts.BitsPerKey})
	it := st.t.NewIterator(table.NOCACHE)
	for it.Rewind(); it.Valid(); it.Next() {
		fb.Add(y.ParseKey(it.Key()))
	}
	it.Close()
	block := fb.Finish(nil)
	f, err := codec.Decode(block)
	if err != nil {
		// Our own builder's output always decodes; if it ever did not,
		// the table stays correct, only unfiltered.
		db.opts.Logger.Printf("table %06d: rebuilt filter does not decode: %v", st.id, err)
		return
	}
	if err := writeFileAtomic(db.dir, fmt.Sprintf("%06d.%s", st.id, extFilter), block); err != nil {
		db.opts.Logger.Printf("table %06d: saving rebuilt filter: %v (using it from memory)", st.id, err)
	} else if err := syncDir(db.dir); err != nil {
		db.opts.Logger.Printf("table %06d: saving rebuilt filter: %v", st.id, err)
	}
	st.setFilter(f, len(block))
	db.stats.rebuiltFilters.Add(1)
}

// openBadgerTable is table.OpenTable, made safe for damaged files: Badger
// re-panics when it cannot parse a table's index. (On some of its error
// returns Badger has closed the mapping and on others not; a store that
// fails to open over a damaged table may leak that one mapping, which is
// better than unmapping it twice.)
func openBadgerTable(mf *z.MmapFile, opt table.Options) (t *table.Table, err error) {
	defer func() {
		if r := recover(); r != nil {
			mf.Close(-1)
			t, err = nil, fmt.Errorf("damaged table: %v", firstLine(fmt.Sprint(r)))
		}
	}()
	return table.OpenTable(mf, opt)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
