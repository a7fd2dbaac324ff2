package pebblestore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/cockroachdb/pebble/v2/sstable/block"
)

// TableReader reads the table files of one Pebble module. Pebble v1 and v2
// write the same table formats (v2 adds newer ones), but each module's
// readers take its own option types; the snapshot and the key sample are
// built the same way over either.
type TableReader interface {
	// ReadTable fills t from the table's properties and its filter block,
	// reading no data block.
	ReadTable(path string, t *Table) error
	// ReadKeys hands add the filter keys of the table, each cut to
	// split(key) if split is set, and returns how many distinct ones it
	// holds (consecutive equal keys are one filter key, as Pebble's filter
	// writer adds them). add must copy a key it keeps.
	ReadKeys(path string, split func([]byte) int, add func([]byte)) (int, error)
}

// TableFile is one live table a store's manifest lists.
type TableFile struct {
	Level   int
	FileNum uint64 // the backing file's number: NNNNNN.sst
	Size    uint64
	Virtual bool
}

// TablePath is the path of table number n in dir.
func TablePath(dir string, n uint64) string { return filepath.Join(dir, fmt.Sprintf("%06d.sst", n)) }

// ReadTables reads each listed table with r, level by level and in file
// number order; a table that cannot be read is kept with Table.Damaged set.
func ReadTables(dir string, files []TableFile, r TableReader) (levels [NumLevels][]Table) {
	for _, f := range files {
		t := Table{Level: f.Level, FileNum: f.FileNum, Size: f.Size, Virtual: f.Virtual}
		if err := r.ReadTable(TablePath(dir, t.FileNum), &t); err != nil {
			t.Damaged = oneLine(err).Error()
		}
		levels[f.Level] = append(levels[f.Level], t)
	}
	for l := range levels {
		sort.SliceStable(levels[l], func(i, j int) bool { return levels[l][i].FileNum < levels[l][j].FileNum })
	}
	return levels
}

// ReadFilterBlock reads the filter block at [offset, offset+length) of the
// table file f and checks its trailer: the compression byte (a filter block
// is stored uncompressed) and the checksum of the kind the table's footer
// names (both Pebble modules number the kinds alike).
func ReadFilterBlock(f io.ReaderAt, path string, offset, length uint64, checksum uint8) ([]byte, error) {
	name := filepath.Base(path)
	if length > 1<<32 {
		return nil, fmt.Errorf("%s: filter block of %d bytes", name, length)
	}
	buf := make([]byte, length+block.TrailerLen)
	if _, err := f.ReadAt(buf, int64(offset)); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%s: truncated filter block", name)
		}
		return nil, err
	}
	h := block.Handle{Offset: offset, Length: length}
	if err := block.ValidateChecksum(block.ChecksumType(checksum), buf, h); err != nil {
		return nil, fmt.Errorf("%s: filter block: %w", name, err)
	}
	if buf[length] != 0 {
		return nil, fmt.Errorf("%s: filter block compressed (type %d)", name, buf[length])
	}
	return buf[:length:length], nil
}

// MissingTable is the error for a table file that does not exist.
func MissingTable(path string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("missing: %s", filepath.Base(path))
	}
	return err
}
