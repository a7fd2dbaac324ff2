// Package pebblestore reads what a Pebble v2 store's table filters are, level
// by level, without writing into the store: the list of live tables comes from
// the manifest through a read-only pebble.Open over a file system that refuses
// every write, and each table is read only as far as its footer, metaindex,
// index, properties and filter block.
package pebblestore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// NumLevels is Pebble's level count, L0 to L6.
const NumLevels = tablefilter.NumLevels

// BloomName is the name Pebble's bloom filter writes into every table,
// whatever its bits per key.
const BloomName = "rocksdb.BuiltinBloomFilter"

// Table is what inspect learns about one live table.
type Table struct {
	Level   int
	FileNum uint64 // the backing file's number: NNNNNN.sst
	Size    uint64
	Virtual bool

	NumEntries        uint64
	NumDeletions      uint64
	NumRangeDeletions uint64
	FilterName        string // "" for a table written without a filter
	FilterSize        uint64 // the properties' figure
	FilterOffset      uint64 // where the filter block starts in the file
	// Filter is the table's filter block, checksum verified, without its
	// trailer; nil if the table has none.
	Filter []byte
	// MayContain, if set, probes the filter instead of the policy its
	// name selects: for stores of other engines, whose filter names are
	// not Pebble policies.
	MayContain func(key []byte) bool

	// Damaged says why the table could not be read (missing, truncated,
	// a checksum mismatch); the fields above are then partly unset.
	Damaged string
}

// Snapshot is a store's live tables, level by level, at one instant of the
// manifest.
type Snapshot struct {
	Format string // "pebble", or another engine's name
	// Module is the Pebble module whose readers took the snapshot
	// (ModuleV1 or ModuleV2; "" for another engine), and ModuleWhy how
	// it was chosen.
	Module    string
	ModuleWhy string
	// GetSkipsLast says a point lookup never consults the last level's
	// filters (Pebble's DB.Get); L0Each that it consults every L0 table
	// (Badger), where Pebble consults one per sublevel.
	GetSkipsLast  bool
	L0Each        bool
	Dir           string
	Comparer      string // the comparer name the store records
	Merger        string
	FormatVersion uint64 // Pebble's format major version
	Sublevels     int    // L0 sublevels
	Levels        [NumLevels][]Table
	// Metrics is Pebble v2's own view of the same version, for
	// cross-checks (nil for a snapshot taken with Pebble v1).
	Metrics *pebble.Metrics
	// Retries counts the snapshots taken again because a table vanished
	// (compacted away by the owner) before it was read.
	Retries int
}

// ErrNotStore marks a directory that does not hold a Pebble store.
var ErrNotStore = errors.New("not a Pebble store")

// IsStore reports whether dir looks like a Pebble store: a MANIFEST file or
// the marker naming the current one.
func IsStore(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, "MANIFEST-") || strings.HasPrefix(n, "marker.manifest.") || n == "CURRENT" {
			return true
		}
	}
	return false
}

// Names reads the comparer and merger names from the newest OPTIONS file
// ("" where there is none): a store opened under another comparer name
// refuses to open, and a table written under another merger name refuses to
// be read.
func Names(dir string) (comparer, merger string) {
	newestOptions(dir, func(line string) bool {
		if v, ok := strings.CutPrefix(line, "comparer="); ok {
			comparer = v
		} else if v, ok := strings.CutPrefix(line, "merger="); ok {
			merger = v
		}
		return true
	})
	return comparer, merger
}

// newestOptions hands each line of the newest OPTIONS file, trimmed, to
// line, a line at a time, until line returns false.
func newestOptions(dir string, line func(string) bool) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	best, bestNum := "", -1
	for _, e := range ents {
		if s, ok := strings.CutPrefix(e.Name(), "OPTIONS-"); ok {
			if n, err := strconv.Atoi(s); err == nil && n > bestNum {
				best, bestNum = e.Name(), n
			}
		}
	}
	if best == "" {
		return
	}
	f, err := os.Open(filepath.Join(dir, best))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() && line(strings.TrimSpace(sc.Text())) {
	}
}

// Comparer returns Pebble's default comparer under the given name, and
// whether the name is the default's: a store written under another comparer
// opens only under its name, and its tables' bytewise order may differ from
// the real one's. Listing tables and reading their filters does not compare
// keys across tables, so a renamed default serves.
func Comparer(name string) (*pebble.Comparer, bool) {
	return Renamed(pebble.DefaultComparer, pebble.DefaultComparer.Name, name, func(c *pebble.Comparer, n string) { c.Name = n })
}

// Merger returns Pebble's default merger under the given name.
func Merger(name string) *pebble.Merger {
	m, _ := Renamed(pebble.DefaultMerger, pebble.DefaultMerger.Name, name, func(m *pebble.Merger, n string) { m.Name = n })
	return m
}

// Renamed returns def if name is "" or defName, and reports so; else a
// copy of def that rename gives the name. Both Pebble modules' comparers
// and mergers are renamed this way.
func Renamed[T any](def *T, defName, name string, rename func(*T, string)) (*T, bool) {
	if name == "" || name == defName {
		return def, true
	}
	c := *def
	rename(&c, name)
	return &c, false
}

// ReadFilters registers in o a policy under every filter name this package
// can read: Pebble's bloom and lsmcuckoo's names at every half bit.
func ReadFilters(o *pebble.Options) {
	tablefilter.RegisterPolicies(o, HalfBitBudgets()...)
	o.Filters[BloomName] = bloom.FilterPolicy(10)
}

// HalfBitBudgets is every lsmcuckoo budget on the half-bit grid, whose
// policy names a reader registers.
func HalfBitBudgets() []float64 {
	budgets := make([]float64, 0, 2*tablefilter.MaxBitsPerKey)
	for b := float64(tablefilter.MinBitsPerKey); b <= tablefilter.MaxBitsPerKey; b += 0.5 {
		budgets = append(budgets, b)
	}
	return budgets
}

var comparerMismatch = regexp.MustCompile(`comparer name from file "([^"]*)"`)

// openReadOnly opens the store read-only over readOnlyFS.
func openReadOnly(dir string, comparer, merger string) (*pebble.DB, error) {
	cmp, _ := Comparer(comparer)
	o := &pebble.Options{
		FS:                      newReadOnlyFS(),
		ReadOnly:                true,
		Comparer:                cmp,
		Merger:                  Merger(merger),
		DisableTableStats:       true,
		DisableConsistencyCheck: true,
		ErrorIfNotExists:        true,
		Logger:                  quietLogger{},
	}
	ReadFilters(o)
	db, err := pebble.Open(dir, o)
	if err != nil {
		// The manifest's name is the truth when OPTIONS is missing or stale.
		if m := comparerMismatch.FindStringSubmatch(err.Error()); m != nil && m[1] != comparer {
			return openReadOnly(dir, m[1], merger)
		}
		return nil, err
	}
	return db, nil
}

// Open takes a snapshot of the store in dir without writing into it. If the
// owner compacts meanwhile and a table vanishes before it is read, the
// snapshot is taken again, a few times; a table that stays unreadable is
// reported in Table.Damaged.
func Open(dir string) (*Snapshot, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	if !IsStore(dir) {
		return nil, fmt.Errorf("%s: %w (no MANIFEST)", dir, ErrNotStore)
	}
	comparer, merger := Names(dir)
	return Retry(func() (*Snapshot, error) { return take(dir, comparer, merger) })
}

// Retry takes a snapshot, and takes it again, a few times, while a table the
// manifest listed could not be read, or the manifest itself has vanished:
// the store's owner compacted or rotated it away meanwhile (Badger
// truncates a table before it removes it, so a table being removed reads as
// damaged, not missing). A table that stays unreadable is reported.
func Retry(take func() (*Snapshot, error)) (*Snapshot, error) {
	const attempts = 5
	var snap *Snapshot
	var err error
	for try := 0; try < attempts; try++ {
		snap, err = take()
		var gone vanishedFile
		if errors.As(err, &gone) && try < attempts-1 {
			continue
		}
		if err != nil {
			return nil, err
		}
		snap.Retries = try
		if !snap.unreadable() {
			return snap, nil
		}
	}
	return snap, nil
}

// unreadable reports whether a table listed by the manifest was missing or
// could not be read.
func (s *Snapshot) unreadable() bool {
	for l := range s.Levels {
		for _, t := range s.Levels[l] {
			if t.Damaged != "" {
				return true
			}
		}
	}
	return false
}

func take(dir, comparer, merger string) (*Snapshot, error) {
	db, err := openReadOnly(dir, comparer, merger)
	if err != nil {
		gone := errors.Is(err, os.ErrNotExist)
		err = fmt.Errorf("open %s read-only: %w", dir, oneLine(err))
		if gone {
			// A manifest the owner removed while rotating it after the
			// marker was read: the next attempt reads the new marker.
			return nil, vanishedFile{err}
		}
		return nil, err
	}
	defer db.Close()
	m := db.Metrics()
	cmp, _ := Comparer(comparer)
	s := &Snapshot{
		Format:        "pebble",
		Module:        ModuleV2,
		GetSkipsLast:  true,
		Dir:           dir,
		Comparer:      cmp.Name,
		Merger:        Merger(merger).Name,
		FormatVersion: uint64(db.FormatMajorVersion()),
		// Metrics counts L0's sublevels only after the store's first
		// version change in this process, which a read-only open never
		// makes; the version itself has them.
		Sublevels: len(db.DebugCurrentVersion().L0SublevelFiles),
		Metrics:   m,
	}
	// The version lists the tables even when a file is missing, where
	// DB.SSTables fails as a whole: a missing table is reported, not fatal.
	v := db.DebugCurrentVersion()
	var files []TableFile
	for l := range v.Levels {
		it := v.Levels[l].Iter()
		for f := it.First(); f != nil; f = it.Next() {
			files = append(files, TableFile{Level: l, FileNum: uint64(f.TableBacking.DiskFileNum), Size: f.Size, Virtual: f.Virtual})
		}
	}
	s.Levels = ReadTables(dir, files, tables{sstable.ReaderOptions{Comparer: cmp, Merger: Merger(merger)}})
	return s, nil
}

// openTable opens a table file for reading; a test replaces it to record
// which bytes are read.
var openTable = func(path string) (vfs.File, error) { return vfs.Default.Open(path) }

// tables reads Pebble v2's table files.
type tables struct{ ro sstable.ReaderOptions }

// ReadTable fills t from the table's properties and reads its filter block.
// sstable.NewReader reads the footer, metaindex and properties; Layout adds
// the index blocks, which hold the filter's handle. No data block is read.
func (r tables) ReadTable(path string, t *Table) error {
	f, err := openTable(path)
	if err != nil {
		return MissingTable(path, err)
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		f.Close()
		return err
	}
	rd, err := sstable.NewReader(context.Background(), readable, r.ro)
	if err != nil {
		readable.Close()
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	defer rd.Close()
	p, err := rd.ReadPropertiesBlock(context.Background(), nil)
	if err != nil {
		return fmt.Errorf("%s: properties: %w", filepath.Base(path), err)
	}
	t.NumEntries, t.NumDeletions, t.NumRangeDeletions = p.NumEntries, p.NumDeletions, p.NumRangeDeletions
	t.FilterName, t.FilterSize = p.FilterPolicyName, p.FilterSize
	if t.FilterName == "" {
		return nil
	}
	layout, err := rd.Layout()
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	for _, fb := range layout.Filter {
		if fb.Name != "fullfilter."+t.FilterName && !SameFamilyBlock(t.FilterName, fb.Name, len(layout.Filter)) {
			continue
		}
		t.Filter, err = ReadFilterBlock(f, path, fb.Handle.Offset, fb.Handle.Length, uint8(rd.BlockReader().ChecksumType()))
		if err != nil {
			return err
		}
		t.FilterOffset = fb.Handle.Offset
		return nil
	}
	return fmt.Errorf("%s: properties name filter %q but the metaindex has no block for it", filepath.Base(path), t.FilterName)
}

// SameFamilyBlock reports whether a table whose properties name the
// lsmcuckoo filter property has its filter block under another lsmcuckoo
// name, metaName, its only filter block (of blocks). Pebble asks the
// policy for its name twice as it finishes a table, once for the
// metaindex key and once for the property, and a self-tuning level's name
// follows its budget, which a refit may change between the two; Pebble
// reads the block through the metaindex key, and every lsmcuckoo policy
// reads every lsmcuckoo block from the block's own header.
func SameFamilyBlock(property, metaName string, blocks int) bool {
	name, ok := strings.CutPrefix(metaName, "fullfilter.")
	return ok && blocks == 1 && Kind(property) == KindLsmcuckoo && Kind(name) == KindLsmcuckoo
}

// vanishedFile is a failed open because a file the marker named was gone.
type vanishedFile struct{ error }

func (e vanishedFile) Unwrap() error { return e.error }

// oneLine keeps the first line of an error: Pebble's errors carry stacks and
// details a terminal user does not need.
func oneLine(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return errors.New(s)
}

// quietLogger drops Pebble's informational logging, which would interleave
// with the report, and turns a fatal error into a one-line message and exit
// status 2 instead of a stack dump.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{})  {}
func (quietLogger) Errorf(string, ...interface{}) {}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	msg := fmt.Sprintf(format, args...)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	fmt.Fprintln(os.Stderr, "lsmcuckoo: pebble:", msg)
	os.Exit(2)
}

// OneLine keeps the first line of an error (oneLine), for the Pebble v1
// reader.
func OneLine(err error) error { return oneLine(err) }

// Vanished marks a failed open because a file the marker named was gone:
// Retry takes the snapshot again.
func Vanished(err error) error { return vanishedFile{err} }

// QuietLogger is quietLogger, for the Pebble v1 reader: Pebble v1's Logger
// has the same methods.
type QuietLogger = quietLogger
