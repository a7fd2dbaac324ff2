package kvdemo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// Open opens the store in dir, creating it if dir holds none.
func Open(dir string, opts *Options) (*DB, error) {
	if opts == nil {
		opts = &Options{}
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	if o.ReadOnly {
		if _, err := fs.Stat(dir); err != nil {
			return nil, fmt.Errorf("kvdemo: %s holds no store: %w", dir, err)
		}
	} else if err := makeDir(fs, dir); err != nil {
		return nil, err
	}
	lock, err := lockStore(fs, dir, o.ReadOnly)
	if err != nil {
		return nil, err
	}
	db := &DB{dir: dir, opts: o, fs: fs, lock: lock, retired: map[uint64]bool{}}
	switch {
	case o.ReadOnly:
		db.openReadOnly(nil)
	case lock.fileErr == nil:
	case notWritable(lock.fileErr):
		db.openReadOnly(lock.fileErr)
	default:
		lock.Close()
		return nil, fmt.Errorf("kvdemo: locking %s: %w", dir, lock.fileErr)
	}
	if err := db.open(); err != nil {
		db.abandonOpen()
		return nil, errorf("%w", err)
	}
	return db, nil
}

// open brings a store up in named steps; each leaves what it built in db
// for the next, and abandonOpen undoes any of them.
func (db *DB) open() error {
	files, err := db.prepareDir()
	if err != nil {
		return err
	}
	if err := db.loadManifest(files); err != nil {
		return err
	}
	if err := db.configure(); err != nil {
		return err
	}
	if err := db.openBlockCache(); err != nil {
		return err
	}
	unfiltered, err := db.openTables()
	if err != nil {
		return err
	}
	// Every refusal over a damaged log comes before any change.
	if err := db.checkLogs(files[extLog]); err != nil {
		return err
	}
	if err := db.sweepUnlisted(files); err != nil {
		return err
	}
	if db.noWrites {
		db.sizeReadOnlyMemtable(files[extLog])
	}
	mem, err := db.replayLogs(files[extLog])
	if err != nil {
		return err
	}
	if err := db.startLog(mem, files[extLog]); err != nil {
		return err
	}
	db.startBackground(unfiltered)
	return nil
}

// abandonOpen releases what a failed open acquired.
func (db *DB) abandonOpen() {
	if db.cur != nil {
		for _, st := range db.cur.tables {
			st.close()
		}
	}
	db.closeBlockCache()
	db.lock.Close()
}

// openBlockCache sizes the block cache as ristretto's users size it for
// Badger's blocks: ten counters (admission statistics) per block the cache
// can hold. Blocks it evicts are released through Badger's handler.
//
// A store without compression gets none: its blocks are the table's own
// bytes, so a cache would save nothing but the checksum check of each
// read, and a cached block is not checked again.
func (db *DB) openBlockCache() error {
	if db.opts.BlockCacheBytes <= 0 || db.tOpt.Compression == options.None {
		return nil
	}
	// Counters are allocated at once, about 5 bytes each: past a million
	// blocks (4 GiB) the admission statistics stop growing with the cache.
	blocks := min(max(db.opts.BlockCacheBytes/int64(db.tOpt.BlockSize), 1), 1<<20)
	c, err := ristretto.NewCache(&ristretto.Config[[]byte, *table.Block]{
		NumCounters: 10 * blocks,
		MaxCost:     db.opts.BlockCacheBytes,
		BufferItems: 64,
		Metrics:     true, // Stats reports the bytes held
		OnExit:      table.BlockEvictHandler,
	})
	if err != nil {
		return fmt.Errorf("kvdemo: block cache: %w", err)
	}
	db.blockCache = c
	return nil
}

// closeBlockCache stops the cache's goroutines, once; the caller knows no
// Get can read a table any more (Close's last view released, or an Open
// that failed).
func (db *DB) closeBlockCache() {
	db.cacheClose.Do(func() {
		if db.blockCache != nil {
			db.blockCache.Close()
		}
	})
}

// prepareDir empties tmp/ (files being written when a process stopped)
// and lists the store's numbered files by extension.
func (db *DB) prepareDir() (map[string][]uint64, error) {
	if !db.noWrites {
		err := db.fs.RemoveAll(filepath.Join(db.dir, tmpDir))
		if err == nil {
			err = db.fs.MkdirAll(filepath.Join(db.dir, tmpDir), 0o755)
		}
		switch {
		case notWritable(err):
			db.openReadOnly(err)
		case err != nil:
			return nil, err
		}
	}
	entries, err := db.fs.ReadDir(db.dir)
	if err != nil {
		return nil, err
	}
	files := map[string][]uint64{} // ext -> ids, ascending
	var maxID uint64
	for _, e := range entries {
		if id, ext, ok := parseFileName(e.Name()); ok && e.Type().IsRegular() {
			files[ext] = append(files[ext], id)
			maxID = max(maxID, id)
		}
	}
	for _, ids := range files {
		slices.Sort(ids)
	}
	db.nextFile.Store(maxID + 1)
	return files, nil
}

// loadManifest reads the manifest, or writes the first one of a new store.
func (db *DB) loadManifest(files map[string][]uint64) error {
	o := &db.opts
	man, err := db.readManifest()
	switch {
	case errors.Is(err, os.ErrNotExist):
		if len(files[extLog])+len(files[extTable])+len(files[extFilter]) > 0 {
			return fmt.Errorf("kvdemo: %s holds logs, tables or filters but no MANIFEST; refusing to guess", db.dir)
		}
		if db.noWrites {
			return fmt.Errorf("kvdemo: %s holds no store, and none can be created: %w", db.dir, db.readOnlyErr())
		}
		man = manifest{Filter: o.Filter, Compression: o.Compression, BitsPerKey: o.BitsPerKey, NextFile: 1}
		db.recordLimits(&man)
		if man.Filter == "" {
			man.Filter = FilterCuckoo
		}
		if man.Compression == "" {
			man.Compression = CompressionZSTD
		}
		if err := db.writeManifest(man); err != nil {
			return err
		}
	case err != nil:
		return err
	case o.Filter != "" && man.Filter != o.Filter:
		return fmt.Errorf("kvdemo: store in %s was created with filter %q, opened with %q", db.dir, man.Filter, o.Filter)
	case o.Compression != "" && man.Compression != o.Compression:
		return fmt.Errorf("kvdemo: store in %s was created with compression %q, opened with %q", db.dir, man.Compression, o.Compression)
	}
	if err == nil && !db.noWrites {
		// The MANIFEST read may be one whose rename was never made
		// durable: the last process's directory fsync failed (the store
		// turned read-only and was reopened) or it died before that
		// fsync. Open acts on it (removes the logs it says are flushed,
		// the tables it lists as retired or numbers as unfinished); a
		// power loss that then brought the previous MANIFEST back would
		// find those files gone while it still needs them. So it is made
		// durable before anything is decided from it.
		if err := db.syncDir(); err != nil {
			return errorf("making the MANIFEST read durable before acting on it (nothing was changed): %w", err)
		}
		if db.recordLimits(&man) {
			// Before any write under the larger caps.
			if err := db.writeManifest(man); err != nil {
				return err
			}
		}
	}
	db.keyCap = max(o.MaxKeySize, man.MaxKeySize)
	db.valueCap = max(o.MaxValueSize, man.MaxValueSize)
	o.Filter, o.Compression = man.Filter, man.Compression
	if man.BitsPerKey != 0 {
		// The budget a store was created with stays its own: it sizes
		// every later filter, and the global index rebuilt at Open.
		o.BitsPerKey = man.BitsPerKey
	}
	db.man = man
	db.nextFile.Store(max(man.NextFile, db.nextFile.Load()))
	return nil
}

// configure sets up what the manifest decides: Badger's table options and
// the table filter.
func (db *DB) configure() error {
	ctype, err := db.opts.Compression.badger()
	if err != nil {
		return err
	}
	db.tOpt = table.Options{
		BlockSize:            4 << 10,
		Compression:          ctype,
		ZSTDCompressionLevel: 1,
		// Every block is checked when a table is opened and again
		// each time it is read (decoded, with the block cache: the cache
		// keeps the checked copy): a block that reads back different is
		// an error, never a wrong value or a key silently missing.
		ChkMode: options.OnTableAndBlockRead,
	}
	if db.filter, err = newTableFilter(db.opts.Filter, db); err != nil {
		return err
	}
	db.filter.configure(&db.tOpt)
	return nil
}

// openTables opens every table the manifest names, and their filters, and
// publishes them as the first view (no memtable yet). A table that is
// missing is an error; one that is damaged is kept, unreadable, so that
// the rest of the store is served (Gets that reach it report it). It
// returns the tables whose filter must be rebuilt.
func (db *DB) openTables() (unfiltered []*sstable, err error) {
	db.cur = &view{db: db}
	db.cur.refs.Store(1)
	db.views.Add(1)
	for _, id := range db.man.Tables {
		path := fileName(db.dir, id, extTable)
		if _, err := db.fs.Stat(path); err != nil {
			return nil, fmt.Errorf("kvdemo: table %06d named by the MANIFEST: %w", id, err)
		}
		st, err := db.openListedTable(id)
		if err != nil && !errors.Is(err, errDamagedTable) {
			// Not damage: the file could not be read (EMFILE, ENOMEM,
			// EIO). Nothing is decided about the table; Open fails and
			// may be retried.
			return nil, errorf("%w (not known to be damaged; nothing was changed)", err)
		}
		if err != nil {
			st = &sstable{id: id, db: db, damaged: errorf("%w: %w", ErrCorrupt, err)}
			if f, ok := db.man.TableFiles[id]; ok {
				// What the filter was bound to, if it was built for the
				// table the manifest names.
				st.size = f.Size
				st.sum, _ = strconv.ParseUint(f.Hash, 16, 64)
			} else if fi, serr := db.fs.Stat(path); serr == nil {
				st.size = fi.Size()
			}
			db.opts.Logger.Printf("table %06d is damaged, serving every other table: %s", id, quote(err))
			db.stats.damagedTables.Add(1)
			// Its filter, if bound to it, still rules out the keys it
			// never held, so Gets for them need not fail.
			db.filter.attach(st)
		} else if !db.filter.attach(st) {
			unfiltered = append(unfiltered, st)
		}
		st.ref()
		db.cur.tables = append([]*sstable{st}, db.cur.tables...)
	}
	if err := db.filter.attachedAll(); err != nil {
		return nil, err
	}
	return unfiltered, nil
}

// sweepUnlisted deals with tables and filters no manifest names. Those
// numbered at or above the manifest's NextFile were allocated after it
// was written, and those it lists as Pending were being built when it
// was, so they are provably the output of a flush or compaction that did
// not finish: removed. Those the manifest lists as Retired were replaced
// by a compaction: removed. Anything else is not ours to judge: moved
// aside to lost/ and reported.
func (db *DB) sweepUnlisted(files map[string][]uint64) error {
	if db.noWrites {
		return nil // read-only: Gets read only what the manifest names
	}
	live := map[uint64]bool{}
	for _, id := range db.man.Tables {
		live[id] = true
	}
	changed := false
	for _, ext := range []string{extTable, extFilter} {
		for _, id := range files[ext] {
			switch {
			case live[id]:
			case unfinishedOutput(db.man, id):
				db.removeFile(id, ext)
				changed = true
			default:
				if err := db.moveAside(fmt.Sprintf("%06d.%s", id, ext), "not named by the MANIFEST"); err != nil {
					return err
				}
				changed = true
			}
		}
	}
	if changed {
		return db.syncDir()
	}
	return nil
}

// startLog opens the log the memtable appends to: the newest replayed
// one, or a new one.
func (db *DB) startLog(mem *memtable, logs []uint64) error {
	if mem.wal() == nil && !db.noWrites {
		var w *wal
		var err error
		if last := lastLogAtLeast(logs, db.man.Log); last != 0 {
			w, err = reopenWAL(db.fs, db.dir, last)
		} else {
			id := db.allocFile()
			mem.log = id
			w, err = createWAL(db.fs, db.dir, id)
		}
		if err != nil {
			return err
		}
		w.syncs = &db.stats.walSyncs
		mem.wlog.Store(w)
	}
	db.acked.Store(db.seq)
	db.mem = mem
	db.wcond = sync.NewCond(&db.wmu)
	db.mu.Lock()
	db.installLocked(mem, nil, db.cur.tables)
	db.mu.Unlock()
	return nil
}

func lastLogAtLeast(logs []uint64, min uint64) uint64 {
	if len(logs) > 0 && logs[len(logs)-1] >= min {
		return logs[len(logs)-1]
	}
	return 0
}

// startBackground starts the flusher, the compactor, the periodic syncer
// and the rebuild of missing filters.
func (db *DB) startBackground(unfiltered []*sstable) {
	o := &db.opts
	db.flushCh = make(chan struct{}, 1)
	db.settleCh = make(chan chan struct{})
	db.compactCh = make(chan struct{}, 1)
	db.stop = make(chan struct{})
	db.bg.Add(2)
	go db.flushLoop()
	go db.compactLoop()
	if o.NoSyncEachWrite && o.SyncInterval > 0 {
		db.bg.Add(1)
		go db.syncLoop()
	}
	if len(unfiltered) > 0 {
		db.bg.Add(1)
		go db.rebuildFilters(unfiltered)
	}
	signal(db.compactCh)
}

// makeDir creates dir and its missing parents, and fsyncs the parent of
// each directory it created, top down. A new directory's entry lives in
// its parent and is durable only once the parent is fsynced: without
// that, a crash could take a new store's directory away with the
// acknowledged writes inside it.
func makeDir(fs vfs.FS, dir string) error {
	var created []string // deepest first
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := fs.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := len(created) - 1; i >= 0; i-- {
		if err := fs.SyncDir(filepath.Dir(created[i])); err != nil {
			return fmt.Errorf("kvdemo: making directory %s durable: %w", created[i], err)
		}
	}
	return nil
}

// notWritable: err says the store's directory or files cannot be
// written (a read-only mount, or no permission).
func notWritable(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// openReadOnly makes this Open, and the store after it, change no file:
// because of cause, or (nil) because Options.ReadOnly asked. Writes fail
// with ErrReadOnly, saying why.
func (db *DB) openReadOnly(cause error) {
	db.noWrites = true
	why := "opened with Options.ReadOnly"
	if cause != nil {
		why = fmt.Sprintf("%s cannot be written (%v), so the store was opened read-only: reads are served; to write, make the directory and its files writable and open it again", db.dir, cause)
		db.opts.Logger.Printf("%s", why)
	}
	db.roMu.Lock()
	db.readOnly = errorf("%w (%s)", ErrReadOnly, why)
	db.roMu.Unlock()
}

// sizeReadOnlyMemtable lets a read-only store replay every log into one
// memtable (it cannot flush one to a table): a log record takes at least
// half the flush threshold's estimate of its entry. It stays within the
// largest MemtableBytes Options accepts; logs beyond that make Open fail
// (flushAtOpen) with an error that says to open the store writable once.
func (db *DB) sizeReadOnlyMemtable(logs []uint64) {
	var total int64
	for _, id := range logs {
		if id < db.man.Log {
			continue
		}
		if fi, err := db.fs.Stat(fileName(db.dir, id, extLog)); err == nil {
			total += fi.Size()
		}
	}
	db.opts.MemtableBytes = min(max(db.opts.MemtableBytes, 2*total), maxMemtableBytes)
}

// recordLimits raises the caps man records to Options' (those above
// the defaults), reporting whether it changed man: a store keeps every
// key and value it was given readable however it is reopened.
func (db *DB) recordLimits(man *manifest) bool {
	changed := false
	if k := db.opts.MaxKeySize; k > max(man.MaxKeySize, defaultMaxKeySize) {
		man.MaxKeySize, changed = k, true
	}
	if v := db.opts.MaxValueSize; v > max(man.MaxValueSize, defaultMaxValueSize) {
		man.MaxValueSize, changed = v, true
	}
	return changed
}
