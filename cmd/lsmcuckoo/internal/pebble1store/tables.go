package pebble1store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/sstable"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter/pebblev1"
)

// tables reads Pebble v1's table files (pebblestore.TableReader).
type tables struct {
	cmp    *pebble.Comparer
	merger string
}

// openTable opens a table file for reading; a test replaces it to record
// which bytes are read.
var openTable = func(path string) (vfs.File, error) { return vfs.Default.Open(path) }

// reader opens the table at path; filter, if not "", is the name of the
// filter whose block handle the reader is to find.
func (r tables) reader(path, filter string) (*sstable.Reader, vfs.File, error) {
	var filters map[string]sstable.FilterPolicy
	if filter != "" {
		// Pebble v1's reader keeps the handle of a filter block only
		// for a name in Filters; the policy itself is never asked.
		filters = map[string]sstable.FilterPolicy{filter: handleOnly(filter)}
	}
	return r.open(path, filters)
}

// open opens the table at path, finding the handle of a filter block
// under any of filters' names.
func (r tables) open(path string, filters map[string]sstable.FilterPolicy) (*sstable.Reader, vfs.File, error) {
	f, err := openTable(path)
	if err != nil {
		return nil, nil, err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	ro := sstable.ReaderOptions{Comparer: r.cmp, MergerName: r.merger, Filters: filters}
	rd, err := sstable.NewReader(readable, ro)
	if err != nil {
		// NewReader closes the file on error.
		return nil, nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return rd, f, nil
}

// ReadTable fills t from the table's properties and reads its filter block.
// sstable.NewReader reads the footer, metaindex and properties; Layout adds
// the index blocks and the filter's handle. No data block is read.
func (r tables) ReadTable(path string, t *pebblestore.Table) error {
	rd, _, err := r.reader(path, "")
	if err != nil {
		return pebblestore.MissingTable(path, err)
	}
	p := rd.Properties
	rd.Close()
	t.NumEntries, t.NumDeletions, t.NumRangeDeletions = p.NumEntries, p.NumDeletions, p.NumRangeDeletions
	t.FilterName, t.FilterSize = p.FilterPolicyName, p.FilterSize
	if t.FilterName == "" {
		return nil
	}
	rd, f, err := r.reader(path, t.FilterName)
	if err != nil {
		return pebblestore.MissingTable(path, err)
	}
	defer rd.Close()
	layout, err := rd.Layout()
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	// An empty filter block (a table of range deletions only) is still a
	// block past the first data block; no block at all is a zero handle.
	h := layout.Filter
	if h == (sstable.BlockHandle{}) && pebblestore.Kind(t.FilterName) == pebblestore.KindLsmcuckoo {
		// The block may be under another lsmcuckoo name
		// (pebblestore.SameFamilyBlock): look for any.
		if rd, f, err = r.readerAnyLsmcuckoo(path); err != nil {
			return pebblestore.MissingTable(path, err)
		}
		defer rd.Close()
		if layout, err = rd.Layout(); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		h = layout.Filter
	}
	if h == (sstable.BlockHandle{}) {
		return fmt.Errorf("%s: properties name filter %q but the metaindex has no block for it", filepath.Base(path), t.FilterName)
	}
	checksum, err := checksumType(f, layout)
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	t.Filter, err = pebblestore.ReadFilterBlock(f, path, h.Offset, h.Length, checksum)
	if err != nil {
		return err
	}
	t.FilterOffset = h.Offset
	return nil
}

// readerAnyLsmcuckoo opens the table at path with a stand-in policy under
// every lsmcuckoo name, so that the reader finds the filter block under
// whichever the metaindex holds.
func (r tables) readerAnyLsmcuckoo(path string) (*sstable.Reader, vfs.File, error) {
	o := &pebble.Options{}
	pebblev1.RegisterPolicies(o, pebblestore.HalfBitBudgets()...)
	filters := make(map[string]sstable.FilterPolicy, len(o.Filters))
	for name := range o.Filters {
		filters[name] = handleOnly(name)
	}
	return r.open(path, filters)
}

// checksumType is the block checksum kind the table's footer names: the
// first byte of a RocksDB or Pebble footer; a LevelDB table's is CRC-32C.
func checksumType(f vfs.File, layout *sstable.Layout) (uint8, error) {
	if layout.Format == sstable.TableFormatLevelDB {
		return uint8(sstable.ChecksumTypeCRC32c), nil
	}
	var b [1]byte
	if _, err := f.ReadAt(b[:], int64(layout.Footer.Offset)); err != nil {
		return 0, fmt.Errorf("footer: %w", err)
	}
	return b[0], nil
}

// ReadKeys hands add the filter keys of one table
// (pebblestore.TableReader.ReadKeys).
func (r tables) ReadKeys(path string, split func([]byte) int, add func([]byte)) (int, error) {
	rd, _, err := r.reader(path, "")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("%w: %s", pebblestore.ErrVanished, filepath.Base(path))
		}
		return 0, err
	}
	defer rd.Close()
	iter, err := rd.NewIter(nil, nil)
	if err != nil {
		return 0, err
	}
	keys := pebblestore.DistinctKeys(split, add)
	for k, _ := iter.First(); k != nil; k, _ = iter.Next() {
		keys.Add(k.UserKey)
	}
	if err := iter.Close(); err != nil {
		return 0, err
	}
	return keys.N, nil
}

// handleOnly stands for a filter policy of a given name, so that Pebble
// v1's table reader finds the block; it is never asked about a key.
type handleOnly string

func (p handleOnly) Name() string { return string(p) }

func (handleOnly) MayContain(pebble.FilterType, []byte, []byte) bool { return true }

func (handleOnly) NewWriter(pebble.FilterType) pebble.FilterWriter { return nil }
