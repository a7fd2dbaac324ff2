package kvdemostore

import (
	"fmt"
	"path/filepath"

	"github.com/dgraph-io/badger/v4/options"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/badgerstore"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
)

// SampleKeys reads the user keys of every live table of the kvdemo store
// in dir, without writing into it, and hands them to add (which must copy
// a key it keeps). The tables are in Badger's table format, whose block
// compression the MANIFEST records; all are reported on L0, as Open does.
func SampleKeys(dir string, add func(key []byte)) (*pebblestore.Sample, error) {
	m, err := readManifest(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return nil, err
	}
	ctype, err := compression(m.Compression)
	if err != nil {
		return nil, err
	}
	files := make([]badgerstore.TableFile, len(m.Tables))
	for i, num := range m.Tables {
		files[i] = badgerstore.TableFile{Num: num, Compression: ctype}
	}
	return badgerstore.SampleTables(dir, "kvdemo."+m.Filter, files, add)
}

// compression maps the MANIFEST's compression name to Badger's; a MANIFEST
// without one is from before kvdemo recorded it, when every store was zstd.
func compression(name string) (options.CompressionType, error) {
	switch name {
	case "", "zstd":
		return options.ZSTD, nil
	case "snappy":
		return options.Snappy, nil
	case "none":
		return options.None, nil
	}
	return 0, fmt.Errorf("MANIFEST: unknown table compression %q", name)
}
