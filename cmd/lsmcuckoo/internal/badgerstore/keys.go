package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/dgraph-io/ristretto/v2/z"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
)

// TableFile names one live table whose keys are to be read: its level,
// its number (the file NNNNNN.sst) and its block compression, which
// Badger's table format does not record (the MANIFEST does).
type TableFile struct {
	Level       int
	Num         uint64
	Compression options.CompressionType
	KeyID       uint64
}

// SampleKeys reads the user keys of every live table of the Badger store
// in dir, without writing into it, and hands them to add (which must copy
// a key it keeps). Unlike Open it reads every data block: the keys are
// what a table's filter is built from.
func SampleKeys(dir string, add func(key []byte)) (*pebblestore.Sample, error) {
	tables, err := replayManifest(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return nil, err
	}
	files := make([]TableFile, 0, len(tables))
	for id, c := range tables {
		if int(c.Level) >= pebblestore.NumLevels {
			return nil, fmt.Errorf("table %d on level %d: this command models %d levels", id, c.Level, pebblestore.NumLevels)
		}
		files = append(files, TableFile{Level: int(c.Level), Num: id, Compression: options.CompressionType(c.Compression), KeyID: c.KeyId})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Num < files[j].Num })
	return SampleTables(dir, "badger", files, add)
}

// SampleTables hands add the user keys of each table in Badger's table
// format: the key without Badger's 8-byte version suffix, once per table
// (a table holds a key's versions next to each other, newest first, and
// its filter holds the user key once). A table the MANIFEST listed that is
// gone is pebblestore.ErrVanished: its owner compacted it away meanwhile,
// and the caller starts again from the new MANIFEST.
func SampleTables(dir, comparer string, files []TableFile, add func(key []byte)) (*pebblestore.Sample, error) {
	s := &pebblestore.Sample{Comparer: comparer, SplitKnown: true}
	for _, f := range files {
		path := filepath.Join(dir, fmt.Sprintf("%06d.sst", f.Num))
		n, err := readKeys(path, f, add)
		if errors.Is(err, pebblestore.ErrVanished) {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("L%d %s: %v", f.Level, filepath.Base(path), err)
		}
		s.TableKeys[f.Level] = append(s.TableKeys[f.Level], n)
	}
	for l := range s.TableKeys {
		sort.Ints(s.TableKeys[l])
	}
	return s, nil
}

// readKeys reads one table's keys and returns how many distinct user keys
// it holds. The file is mapped read-only and closed without Table.DecrRef,
// which deletes a table's file when its last reference goes.
func readKeys(path string, f TableFile, add func([]byte)) (n int, err error) {
	if f.KeyID != 0 {
		return 0, fmt.Errorf("encrypted (key %d): its keys cannot be read without the key", f.KeyID)
	}
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("%w: %s", pebblestore.ErrVanished, filepath.Base(path))
		}
		return 0, err
	}
	if st.Size() == 0 {
		return 0, errors.New("empty file")
	}
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("%w: %s", pebblestore.ErrVanished, filepath.Base(path))
		}
		return 0, err
	}
	// mapped says the file is still mapped and open: OpenTable closes it
	// on most of its failures, not when the table's first and last keys
	// cannot be read, and a mapping must not be released twice.
	mapped := true
	// Badger's table code trusts the offsets it decodes; a damaged table
	// that passed its checksums is reported, not a panic.
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("malformed table (%v)", r)
		}
		if mapped {
			mf.Close(-1)
		}
	}()
	// Every block's checksum is checked when the table opens, so the
	// iterator below reads only verified blocks.
	t, err := table.OpenTable(mf, table.Options{
		Compression: f.Compression,
		BlockSize:   4 << 10,
		ChkMode:     options.OnTableRead,
	})
	if err != nil {
		mapped = strings.Contains(err.Error(), "failed to initialize table")
		return 0, errors.New(firstLine(err))
	}
	it := t.NewIterator(table.NOCACHE)
	defer it.Close()
	var prev []byte
	entries := 0
	for it.Rewind(); it.Valid(); it.Next() {
		entries++
		k := y.ParseKey(it.Key())
		if prev != nil && string(k) == string(prev) {
			continue
		}
		prev = append(prev[:0], k...)
		n++
		add(k)
	}
	// The iterator stops on a read error as at the end: a table that
	// yields fewer entries than its index counts is damaged.
	if want := int(t.KeyCount()); entries != want {
		return 0, fmt.Errorf("read %d entries of the %d its index counts", entries, want)
	}
	return n, nil
}
