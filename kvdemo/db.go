// Package kvdemo is a small but real key-value store that embeds
// lsmcuckoo's filters the way a home-grown LSM would: a write-ahead log, a
// concurrent memtable guarded by a lock-free MemFilter, and immutable tables
// in Badger's SST format, each with a per-table filter that lets a Get skip
// it. Options.Filter swaps the per-table filter between lsmcuckoo's cuckoo
// filter, Badger's own bloom filter and none, everything else equal, so the
// three can be compared like for like.
//
// On disk (one directory):
//
//	MANIFEST          JSON: live tables, filter kind, next ids; replaced atomically
//	NNNNNN.log        write-ahead log of the memtable (see wal.go)
//	NNNNNN.sst        a table, written by Badger's table package
//	NNNNNN.cf         the table's cuckoo filter block (Filter = cuckoo)
//
// Every file is written to a temporary name, fsynced, renamed into place,
// and the directory fsynced, so a crash leaves either the old file or the
// new one. A missing or corrupt filter file is never trusted: the table is
// read without a filter and the filter rebuilt.
//
// Not built yet (see the project's issues): compaction of tables, the CLI
// and the RESP server.
package kvdemo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/skl"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// FilterKind selects the per-table filter.
type FilterKind string

const (
	FilterCuckoo FilterKind = "cuckoo" // lsmcuckoo's codec block beside each table
	FilterBloom  FilterKind = "bloom"  // Badger's own y.Filter inside the table
	FilterNone   FilterKind = "none"
)

// Options configure a store. The zero value is usable.
type Options struct {
	Filter        FilterKind // default cuckoo
	BitsPerKey    float64    // cuckoo budget; default 10
	MemtableBytes int64      // flush threshold; default 8 MiB
	// NoSyncEachWrite batches durability: writes are acknowledged once in
	// the OS, and fsynced on Sync, on flush and on Close. The default
	// fsyncs every write before acknowledging it.
	NoSyncEachWrite bool
	MaxKeySize      int         // default 1 KiB
	MaxValueSize    int         // default 1 MiB
	Logger          *log.Logger // warnings (torn WAL tail, rebuilt filters); default stderr
}

var (
	ErrNotFound = errors.New("kvdemo: key not found")
	ErrClosed   = errors.New("kvdemo: store is closed")
	ErrEmptyKey = errors.New("kvdemo: empty key")
	ErrTooLarge = errors.New("kvdemo: key or value too large")
)

const metaDelete = 1 << 0 // ValueStruct.Meta bit of a tombstone

// DB is an open store; safe for concurrent use.
type DB struct {
	dir  string
	opts Options
	tOpt table.Options

	wmu sync.Mutex // serialises writes, flushes and Close
	wal *wal

	mu     sync.RWMutex // guards the fields below for readers
	mem    *memtable
	imm    *memtable // being flushed; still read
	tables []*sstable
	man    manifest
	closed bool

	seq   atomic.Uint64
	stats counters
}

type memtable struct {
	sl     *skl.Skiplist
	filter *tablefilter.MemFilter
}

type sstable struct {
	id     uint64
	t      *table.Table
	filter *codec.Filter // Filter = cuckoo; nil means "no filter: probe"
	fbytes int
}

type manifest struct {
	Version  int        `json:"version"`
	Filter   FilterKind `json:"filter"`
	Tables   []uint64   `json:"tables"` // oldest first
	NextFile uint64     `json:"next_file"`
	Log      uint64     `json:"log"` // the live WAL's file number
	Seq      uint64     `json:"seq"` // highest sequence number in a table
}

type counters struct {
	gets, puts, dels       atomic.Int64
	memFilterNegatives     atomic.Int64
	tableFilterNegatives   atomic.Int64
	tablesProbed           atomic.Int64
	filterFalsePositives   atomic.Int64
	rebuiltFilters, tornWA atomic.Int64
}

// Stats are the store's counters since Open.
type Stats struct {
	Gets, Puts, Deletes  int64
	MemFilterNegatives   int64 // Gets the memtable filter answered without a search
	TableFilterNegatives int64 // tables skipped because their filter said absent
	TablesProbed         int64 // tables actually searched
	FilterFalsePositives int64 // filter said maybe, the table did not have the key
	Tables               int
	FilterBytes          int64 // table filters plus memtable filters, in memory
	RebuiltFilters       int64 // missing or corrupt filter files rebuilt at open
}

func (o *Options) withDefaults() Options {
	c := *o
	if c.Filter == "" {
		c.Filter = FilterCuckoo
	}
	if c.BitsPerKey == 0 {
		c.BitsPerKey = 10
	}
	if c.MemtableBytes == 0 {
		c.MemtableBytes = 8 << 20
	}
	if c.MaxKeySize == 0 {
		c.MaxKeySize = 1 << 10
	}
	if c.MaxValueSize == 0 {
		c.MaxValueSize = 1 << 20
	}
	if c.Logger == nil {
		c.Logger = log.New(os.Stderr, "kvdemo: ", log.LstdFlags)
	}
	return c
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts *Options) (*DB, error) {
	if opts == nil {
		opts = &Options{}
	}
	o := opts.withDefaults()
	switch o.Filter {
	case FilterCuckoo, FilterBloom, FilterNone:
	default:
		return nil, fmt.Errorf("kvdemo: unknown filter %q (want cuckoo, bloom or none)", o.Filter)
	}
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	db := &DB{dir: dir, opts: o}
	man, err := readManifest(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		man = manifest{Version: 1, Filter: o.Filter, NextFile: 2, Log: 1}
		if err := writeManifest(dir, man); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	case man.Filter != o.Filter:
		return nil, fmt.Errorf("kvdemo: store in %s was created with filter %q, opened with %q", dir, man.Filter, o.Filter)
	}
	db.man = man
	db.tOpt = table.Options{
		BlockSize:            4 << 10,
		Compression:          options.ZSTD, // klauspost/compress, through Badger
		ZSTDCompressionLevel: 1,
		ChkMode:              options.OnTableRead,
	}
	if o.Filter == FilterBloom {
		db.tOpt.BloomFalsePositive = 0.01 // Badger's default
	}
	for _, id := range man.Tables {
		st, err := db.openTable(id)
		if err != nil {
			db.closeTables()
			return nil, err
		}
		db.tables = append([]*sstable{st}, db.tables...) // newest first
	}
	db.seq.Store(man.Seq)
	db.mem = db.newMemtable()
	cut, err := replayWAL(db.path(man.Log, "log"), func(r walRecord) {
		db.applyToMem(db.mem, r)
		if r.seq > db.seq.Load() {
			db.seq.Store(r.seq)
		}
	})
	if err != nil {
		db.closeTables()
		return nil, err
	}
	if cut > 0 {
		db.stats.tornWA.Add(1)
		o.Logger.Printf("WAL %s: cut %d bytes of torn or corrupt tail after the last intact record", db.path(man.Log, "log"), cut)
	}
	if db.wal, err = openWAL(db.path(man.Log, "log")); err != nil {
		db.closeTables()
		return nil, err
	}
	return db, nil
}

func (db *DB) path(id uint64, ext string) string {
	return filepath.Join(db.dir, fmt.Sprintf("%06d.%s", id, ext))
}

func (db *DB) newMemtable() *memtable {
	arena := db.opts.MemtableBytes + 4*int64(db.opts.MaxKeySize+db.opts.MaxValueSize) + 1<<20
	return &memtable{sl: skl.NewSkiplist(arena), filter: tablefilter.NewMemFilter(int(db.opts.MemtableBytes / 32))}
}

func (db *DB) applyToMem(m *memtable, r walRecord) {
	vs := y.ValueStruct{Value: r.value}
	if r.kind == kindDel {
		vs = y.ValueStruct{Meta: metaDelete}
	}
	m.sl.Put(y.KeyWithTs(r.key, r.seq), vs)
	m.filter.Add(r.key)
}

func (db *DB) check(key, value []byte) error {
	switch {
	case len(key) == 0:
		return ErrEmptyKey
	case len(key) > db.opts.MaxKeySize || len(value) > db.opts.MaxValueSize:
		return fmt.Errorf("%w: key %d bytes (max %d), value %d bytes (max %d)", ErrTooLarge, len(key), db.opts.MaxKeySize, len(value), db.opts.MaxValueSize)
	}
	return nil
}

// Put stores value under key. It returns once the write is durable (or,
// with NoSyncEachWrite, in the OS).
func (db *DB) Put(key, value []byte) error {
	if err := db.check(key, value); err != nil {
		return err
	}
	db.stats.puts.Add(1)
	return db.write(walRecord{kind: kindPut, key: key, value: value})
}

// Delete removes key (writing a tombstone).
func (db *DB) Delete(key []byte) error {
	if err := db.check(key, nil); err != nil {
		return err
	}
	db.stats.dels.Add(1)
	return db.write(walRecord{kind: kindDel, key: key})
}

func (db *DB) write(r walRecord) error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	db.mu.RLock()
	closed := db.closed
	db.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	r.seq = db.seq.Load() + 1
	if err := db.wal.append(r, !db.opts.NoSyncEachWrite); err != nil {
		return err
	}
	db.seq.Store(r.seq)
	// The WAL record is the acknowledgement's basis; the memtable and its
	// filter are updated before the write returns, so a Get after Put
	// sees it.
	db.applyToMem(db.mem, r)
	if db.mem.sl.MemSize() >= db.opts.MemtableBytes {
		// The write is already durable in the log; a failed flush leaves
		// the store as it was (see flushLocked) and is retried by the next
		// write, so it is reported, not returned as this write's failure.
		if err := db.flushLocked(); err != nil {
			db.opts.Logger.Printf("%v (will retry)", err)
		}
	}
	return nil
}

// Get returns the value of key, or ErrNotFound.
func (db *DB) Get(key []byte) ([]byte, error) {
	if len(key) == 0 {
		return nil, ErrEmptyKey
	}
	db.stats.gets.Add(1)
	db.mu.RLock()
	if db.closed {
		db.mu.RUnlock()
		return nil, ErrClosed
	}
	mems := []*memtable{db.mem, db.imm}
	tables := db.tables
	db.mu.RUnlock()

	seek := y.KeyWithTs(key, math.MaxUint64)
	for _, m := range mems {
		if m == nil {
			continue
		}
		if !m.filter.MayContain(key) {
			db.stats.memFilterNegatives.Add(1)
			continue
		}
		// Sequence numbers start at 1, so a found entry has Version >= 1.
		if vs := m.sl.Get(seek); vs.Version != 0 {
			if vs.Meta&metaDelete != 0 {
				return nil, ErrNotFound
			}
			return bytes.Clone(vs.Value), nil
		}
	}
	for _, st := range tables {
		if !db.tableMayContain(st, key) {
			db.stats.tableFilterNegatives.Add(1)
			continue
		}
		db.stats.tablesProbed.Add(1)
		vs, ok := st.get(seek, key)
		if !ok {
			if db.opts.Filter != FilterNone {
				db.stats.filterFalsePositives.Add(1)
			}
			continue
		}
		if vs.Meta&metaDelete != 0 {
			return nil, ErrNotFound
		}
		return vs.Value, nil
	}
	return nil, ErrNotFound
}

func (db *DB) tableMayContain(st *sstable, key []byte) bool {
	switch db.opts.Filter {
	case FilterCuckoo:
		return st.filter == nil || st.filter.MayContain(key)
	case FilterBloom:
		return !st.t.DoesNotHave(y.Hash(key))
	default:
		return true
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

// Sync makes every acknowledged write durable (for NoSyncEachWrite).
func (db *DB) Sync() error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	return db.wal.sync()
}

// Flush writes the memtable out as a table now.
func (db *DB) Flush() error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	return db.flushLocked()
}

// flushLocked turns the memtable into a table. Order matters for crash
// safety: the table and its filter are durable before the manifest names
// them, and the manifest names the new WAL before the old one is removed.
func (db *DB) flushLocked() error {
	if db.mem.sl.Empty() {
		return nil
	}
	if err := db.wal.sync(); err != nil {
		return err
	}
	id := db.man.NextFile
	newLog := id + 1
	// A log of this number can only be left over from a flush that crashed
	// before its manifest named it; nothing in it was ever acknowledged.
	os.Remove(db.path(newLog, "log"))
	nextWAL, err := openWAL(db.path(newLog, "log"))
	if err != nil {
		return err
	}
	db.mu.Lock()
	db.imm, db.mem = db.mem, db.newMemtable()
	db.mu.Unlock()
	oldWAL, oldLog := db.wal, db.man.Log
	db.wal = nextWAL

	// If the table or the manifest cannot be written, undo the switch: the
	// memtable's records are still in the old log, which the manifest still
	// names, and later writes must go there too or a restart would not
	// replay them. (No write ran meanwhile: wmu is held.)
	undo := func(err error) error {
		nextWAL.close()
		os.Remove(db.path(newLog, "log"))
		db.wal = oldWAL
		db.mu.Lock()
		db.mem, db.imm = db.imm, nil
		db.mu.Unlock()
		return fmt.Errorf("kvdemo: flush: %w", err)
	}
	st, maxSeq, err := db.writeTable(id, db.imm)
	if err != nil {
		return undo(err)
	}
	man := db.man
	man.Tables = append(append([]uint64(nil), man.Tables...), id)
	man.NextFile, man.Log, man.Seq = newLog+1, newLog, max(man.Seq, maxSeq)
	if err := writeManifest(db.dir, man); err != nil {
		st.t.Close(-1)
		return undo(err)
	}
	db.mu.Lock()
	db.man = man
	db.tables = append([]*sstable{st}, db.tables...)
	db.imm = nil
	db.mu.Unlock()
	oldWAL.close()
	os.Remove(db.path(oldLog, "log"))
	return nil
}

// writeTable writes a memtable's newest version of each key as table id,
// with its filter, both atomically.
func (db *DB) writeTable(id uint64, m *memtable) (*sstable, uint64, error) {
	b := table.NewTableBuilder(db.tOpt)
	defer b.Close()
	fb := codec.NewBuilder(codec.Options{BitsPerKey: db.opts.BitsPerKey})
	it := m.sl.NewIterator()
	defer it.Close()
	var last []byte
	var maxSeq uint64
	for it.SeekToFirst(); it.Valid(); it.Next() {
		k := it.Key()
		user := y.ParseKey(k)
		if last != nil && bytes.Equal(user, last) {
			continue // an older version, shadowed
		}
		last = append(last[:0], user...)
		maxSeq = max(maxSeq, y.ParseTs(k))
		b.Add(k, it.Value(), 0)
		fb.Add(user)
	}
	tmp := filepath.Join(db.dir, "tmp", fmt.Sprintf("%06d.sst", id))
	os.Remove(tmp)
	t, err := table.CreateTable(tmp, b)
	if err != nil {
		return nil, 0, err
	}
	if err := os.Rename(tmp, db.path(id, "sst")); err != nil {
		t.Close(-1)
		return nil, 0, err
	}
	st := &sstable{id: id, t: t}
	if db.opts.Filter == FilterCuckoo {
		block := fb.Finish(nil)
		if err := writeFileAtomic(db.dir, fmt.Sprintf("%06d.cf", id), block); err != nil {
			t.Close(-1)
			return nil, 0, err
		}
		if st.filter, err = codec.Decode(block); err != nil {
			t.Close(-1)
			return nil, 0, err
		}
		st.fbytes = len(block)
	}
	if err := syncDir(db.dir); err != nil {
		t.Close(-1)
		return nil, 0, err
	}
	return st, maxSeq, nil
}

// openTable opens table id and its filter; a missing or corrupt filter is
// rebuilt from the table's keys (never trusted, never a false negative).
func (db *DB) openTable(id uint64) (*sstable, error) {
	mf, err := z.OpenMmapFile(db.path(id, "sst"), os.O_RDWR, 0)
	if err != nil && !errors.Is(err, z.NewFile) {
		return nil, fmt.Errorf("kvdemo: opening table %d: %w", id, err)
	}
	t, err := table.OpenTable(mf, db.tOpt)
	if err != nil {
		return nil, fmt.Errorf("kvdemo: opening table %d: %w", id, err)
	}
	st := &sstable{id: id, t: t}
	if db.opts.Filter != FilterCuckoo {
		return st, nil
	}
	block, err := os.ReadFile(db.path(id, "cf"))
	if err == nil {
		if st.filter, err = codec.Decode(block); err == nil {
			st.fbytes = len(block)
			return st, nil
		}
	}
	db.opts.Logger.Printf("table %d: filter unusable (%v); reading the table without it and rebuilding it", id, err)
	db.stats.rebuiltFilters.Add(1)
	fb := codec.NewBuilder(codec.Options{BitsPerKey: db.opts.BitsPerKey})
	it := t.NewIterator(0)
	for it.Rewind(); it.Valid(); it.Next() {
		fb.Add(y.ParseKey(it.Key()))
	}
	it.Close()
	block = fb.Finish(nil)
	if err := writeFileAtomic(db.dir, fmt.Sprintf("%06d.cf", id), block); err != nil {
		return st, nil // still correct without a filter
	}
	if f, err := codec.Decode(block); err == nil {
		st.filter, st.fbytes = f, len(block)
	}
	return st, nil
}

// Stats returns the counters.
func (db *DB) Stats() Stats {
	s := Stats{
		Gets:                 db.stats.gets.Load(),
		Puts:                 db.stats.puts.Load(),
		Deletes:              db.stats.dels.Load(),
		MemFilterNegatives:   db.stats.memFilterNegatives.Load(),
		TableFilterNegatives: db.stats.tableFilterNegatives.Load(),
		TablesProbed:         db.stats.tablesProbed.Load(),
		FilterFalsePositives: db.stats.filterFalsePositives.Load(),
		RebuiltFilters:       db.stats.rebuiltFilters.Load(),
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	s.Tables = len(db.tables)
	for _, st := range db.tables {
		s.FilterBytes += int64(st.fbytes)
		if db.opts.Filter == FilterBloom {
			s.FilterBytes += int64(st.t.BloomFilterSize())
		}
	}
	for _, m := range []*memtable{db.mem, db.imm} {
		if m != nil {
			s.FilterBytes += int64(m.filter.Stats().Bytes)
		}
	}
	return s
}

// Close syncs the WAL and closes the store. Further calls return ErrClosed.
func (db *DB) Close() error {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return ErrClosed
	}
	db.closed = true
	db.mu.Unlock()
	err := db.wal.sync()
	if cerr := db.wal.close(); err == nil {
		err = cerr
	}
	db.closeTables()
	return err
}

func (db *DB) closeTables() {
	for _, st := range db.tables {
		st.t.Close(-1)
	}
}

func readManifest(dir string) (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("kvdemo: corrupt MANIFEST: %w", err)
	}
	if m.Version != 1 {
		return m, fmt.Errorf("kvdemo: MANIFEST version %d not supported", m.Version)
	}
	sort.Slice(m.Tables, func(i, j int) bool { return m.Tables[i] < m.Tables[j] })
	return m, nil
}

func writeManifest(dir string, m manifest) error {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(dir, "MANIFEST", b); err != nil {
		return err
	}
	return syncDir(dir)
}

// writeFileAtomic writes name in dir via a fsynced temporary file and a
// rename; the caller fsyncs the directory.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, "tmp", name)
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
