package kvdemo

import (
	"fmt"
	"log"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// FilterKind selects the per-table filter.
type FilterKind string

const (
	FilterCuckoo FilterKind = "cuckoo" // lsmcuckoo's codec block beside each table
	FilterBloom  FilterKind = "bloom"  // Badger's own y.Filter inside the table
	FilterNone   FilterKind = "none"
	// FilterGlobal (filter_global.go): one store-wide index.
)

// Hard limits. Badger's table format stores key lengths in 16 bits
// (including the 8-byte version); the value cap keeps a WAL record's
// length check meaningful.
const (
	maxKeyCap   = 60_000
	maxValueCap = 64 << 20

	defaultMaxKeySize   = 1 << 10
	defaultMaxValueSize = 1 << 20
	maxMemtableBytes    = 1 << 30
)

// Options configure a store. The zero value is usable.
type Options struct {
	// Filter is the per-table filter. A new store defaults to cuckoo; an
	// existing store is opened with the kind it was created with (set it
	// only to insist: a different kind is an error).
	Filter FilterKind
	// BitsPerKey is the filter budget of a new store, in bits per key,
	// whatever its kind (for global it counts the index's table codes;
	// bloom keeps Badger's own sizing); default 10. An existing store
	// keeps the budget it was created with.
	BitsPerKey float64
	// MemtableBytes is the flush threshold, counted as key + value + a
	// per-entry estimate of skiplist overhead; default 8 MiB.
	MemtableBytes int64
	// NoSyncEachWrite batches durability: writes are acknowledged once
	// they are in the OS, and fsynced by Sync, by SyncInterval, when their
	// memtable is flushed and on Close. The default fsyncs every write
	// before acknowledging it (sharing fsyncs among concurrent writers).
	NoSyncEachWrite bool
	// SyncInterval, with NoSyncEachWrite, fsyncs the log in the
	// background this often; 0 leaves it to Sync, flushes and Close.
	SyncInterval time.Duration
	// Compression of table blocks, for a new store (default zstd); an
	// existing store keeps its own (it is in the manifest).
	Compression Compression
	// MaxTables: when there are more tables, adjacent ones are merged in
	// the background. Default 24; negative disables compaction.
	MaxTables int
	// BlockCacheBytes bounds the decoded table blocks the store keeps in
	// memory, shared by its tables (Badger's block cache, a ristretto
	// cache): a Get that reads a block again finds it decompressed and
	// checked. Default 64 MiB; negative turns it off. A store without
	// compression has none (its blocks need no decoding).
	BlockCacheBytes int64
	// MaxKeySize and MaxValueSize cap Puts; defaults 1 KiB and 1 MiB, at
	// most 60000 bytes and 64 MiB. The MANIFEST keeps the largest caps
	// the store was ever opened with: reopened with smaller ones, it
	// still replays, reads and deletes every key it holds.
	MaxKeySize   int
	MaxValueSize int
	// ReadOnly opens the store without creating, changing or removing
	// any file: logs are replayed into memory, damaged filters rebuilt
	// in memory, and writes fail with ErrReadOnly. A store whose
	// directory cannot be written (a read-only mount, no permission) is
	// opened so without it, and says why in its log and in the writes'
	// errors.
	ReadOnly bool
	// Logger receives warnings (torn WAL tail, rebuilt filters, failing
	// flushes); default: the standard logger's output, prefixed "kvdemo: ".
	Logger *log.Logger
	// WALRecovery says what Open does with a damaged log record; default
	// TolerateCorruptedTailRecords (see WALRecoveryMode).
	WALRecovery WALRecoveryMode
	// FS is the filesystem every file of the store goes through; nil is
	// the operating system's (OSFS). A wrapper of OSFS can inject faults
	// or latency.
	FS FS

	// noIdleRebuild: tests that count index rebuilds turn off the one an
	// idle store starts.
	noIdleRebuild bool
	// filterVersion: tests that write a store as an earlier release did
	// set the codec format version of its cuckoo filter files (0: the
	// codec's default). Readers take any version the codec reads.
	filterVersion int
	// pause: tests that stretch the moments between which the store may
	// change under a Get (a goroutine descheduled there) are called at
	// each pausePoint.
	pause func(at pausePoint)
}

// FS is the filesystem seam: whole files created, written, fsynced and
// renamed into place, logs opened for appending, directories listed and
// fsynced, and Lock, an exclusive lock on a directory or on a file
// (created if missing) that the operating system drops when the process
// ends. A Lock held by another holder returns an error wrapping
// ErrLocked. The interfaces are declared in an internal package that the
// store and its fault-injecting tests share; these aliases name them.
type (
	FS   = vfs.FS
	File = vfs.File
)

// OSFS is the operating system's filesystem (flock(2) for Lock).
func OSFS() FS { return vfs.Default }

func (o *Options) withDefaults() (Options, error) {
	c := *o
	if c.BitsPerKey == 0 {
		c.BitsPerKey = 10
	}
	if c.MemtableBytes == 0 {
		c.MemtableBytes = 8 << 20
	}
	if c.MaxTables == 0 {
		c.MaxTables = 24
	}
	if c.MaxKeySize == 0 {
		c.MaxKeySize = defaultMaxKeySize
	}
	if c.BlockCacheBytes == 0 {
		c.BlockCacheBytes = 64 << 20
	}
	if c.MaxValueSize == 0 {
		c.MaxValueSize = defaultMaxValueSize
	}
	if c.Logger == nil {
		c.Logger = log.New(log.Writer(), "kvdemo: ", log.LstdFlags)
	}
	if c.Filter != "" {
		if _, err := newTableFilter(c.Filter, nil); err != nil {
			return c, err
		}
	}
	switch {
	case c.BitsPerKey < 4 || c.BitsPerKey > 32:
		return c, fmt.Errorf("kvdemo: BitsPerKey %g outside 4..32", c.BitsPerKey)
	case c.MemtableBytes < 1<<10 || c.MemtableBytes > maxMemtableBytes:
		return c, fmt.Errorf("kvdemo: MemtableBytes %d outside 1 KiB..1 GiB", c.MemtableBytes)
	case c.MaxKeySize < 0 || c.MaxKeySize > maxKeyCap:
		return c, fmt.Errorf("kvdemo: MaxKeySize %d outside 1..%d", c.MaxKeySize, maxKeyCap)
	case c.MaxValueSize < 0 || c.MaxValueSize > maxValueCap:
		return c, fmt.Errorf("kvdemo: MaxValueSize %d outside 1..%d", c.MaxValueSize, maxValueCap)
	case !c.WALRecovery.valid():
		return c, fmt.Errorf("kvdemo: unknown WAL recovery mode %q", c.WALRecovery)
	case c.SyncInterval < 0:
		return c, fmt.Errorf("kvdemo: negative SyncInterval")
	case c.BlockCacheBytes > 1<<40:
		return c, fmt.Errorf("kvdemo: BlockCacheBytes %d above 1 TiB", c.BlockCacheBytes)
	}
	if c.Compression != "" {
		if _, err := c.Compression.badger(); err != nil {
			return c, err
		}
	}
	return c, nil
}

// MemtableBytesFor is the MemtableBytes that flushes a memtable after
// about keys entries of the given sizes (the threshold counts each entry
// as key + value + a fixed estimate of skiplist overhead).
func MemtableBytesFor(keys, keySize, valueSize int) int64 {
	return int64(keys) * entryEstimate(make([]byte, keySize), make([]byte, valueSize))
}
