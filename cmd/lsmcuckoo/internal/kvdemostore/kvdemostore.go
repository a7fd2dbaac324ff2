// Package kvdemostore reads the table filters of a kvdemo store without
// writing into it, from the formats kvdemo/README.md freezes: the MANIFEST
// (JSON and a CRC-32C line) lists the live tables, each table's index (in
// Badger's table format) gives its key count and, for a store of kind bloom,
// its bloom filter, and each NNNNNN.cf file of a store of kind cuckoo holds
// a header binding it to its table and then a codec filter block.
package kvdemostore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/badgerstore"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// manifest is the part of kvdemo's MANIFEST this package reads.
type manifest struct {
	Version     int      `json:"version"`
	Filter      string   `json:"filter"`
	Compression string   `json:"compression"`
	BitsPerKey  float64  `json:"bits_per_key"`
	Tables      []uint64 `json:"tables"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// IsStore reports whether dir holds a kvdemo MANIFEST: JSON, where Badger's
// starts with its magic.
func IsStore(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return false
	}
	defer f.Close()
	var head [512]byte
	n, _ := io.ReadFull(f, head[:])
	b := bytes.TrimSpace(head[:n])
	return len(b) > 0 && b[0] == '{'
}

// maxManifest bounds a kvdemo MANIFEST, a JSON list of table numbers.
const maxManifest = 64 << 20

func readManifest(path string) (*manifest, error) {
	b, err := pebblestore.ReadFileAtMost(path, maxManifest)
	if err != nil {
		return nil, err
	}
	body := b
	// Version 2 ends with a line "crc32c <hex>" over every byte before it.
	trimmed := bytes.TrimRight(b, "\n")
	if i := bytes.LastIndexByte(trimmed, '\n'); i >= 0 && bytes.HasPrefix(trimmed[i+1:], []byte("crc32c ")) {
		want, err := strconv.ParseUint(strings.TrimSpace(string(trimmed[i+1+len("crc32c "):])), 16, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: checksum line: %v", path, err)
		}
		body = b[:i+1]
		if got := crc32.Checksum(body, castagnoli); got != uint32(want) {
			return nil, fmt.Errorf("%s: checksum mismatch", path)
		}
	}
	var m manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return &m, nil
}

// Open takes a snapshot of the kvdemo store in dir. kvdemo has no levels:
// a Get consults every table, so all are reported on L0, each its own run.
func Open(dir string) (*pebblestore.Snapshot, error) {
	return pebblestore.Retry(func() (*pebblestore.Snapshot, error) { return take(dir) })
}

func take(dir string) (*pebblestore.Snapshot, error) {
	m, err := readManifest(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return nil, err
	}
	s := &pebblestore.Snapshot{Format: "kvdemo", L0Each: true, Dir: dir, Comparer: "kvdemo." + m.Filter}
	for _, num := range m.Tables {
		t := pebblestore.Table{FileNum: num}
		if err := badgerstore.ReadTable(filepath.Join(dir, fmt.Sprintf("%06d.sst", num)), 0, &t); err != nil {
			t.Damaged = err.Error()
		} else if m.Filter == "cuckoo" {
			if err := readFilterFile(filepath.Join(dir, fmt.Sprintf("%06d.cf", num)), num, &t); err != nil {
				t.Damaged = err.Error()
			}
		} else if m.Filter != "bloom" {
			// none, or global: the store-wide index lives in memory.
			t.Filter, t.FilterName, t.MayContain = nil, "", nil
		}
		s.Levels[0] = append(s.Levels[0], t)
	}
	s.Sublevels = len(s.Levels[0])
	return s, nil
}

// cfHeader is the size of a .cf file's header: "KVCF", version, 3 zero
// bytes, table number, table size, table hash, CRC-32C of the 32 bytes
// before it.
const cfHeader = 36

// readFilterFile reads a table's cuckoo filter, checking its header
// against the table's number and size (not its content hash, which would
// read the whole table).
func readFilterFile(path string, num uint64, t *pebblestore.Table) error {
	name := filepath.Base(path)
	// A filter of at most 64 bits per key (kvdemo writes 32 at most), with
	// room for the codec's fixed overhead on a small table.
	most := int64(cfHeader + 8*t.NumEntries + 1<<20)
	b, err := pebblestore.ReadFileAtMost(path, most)
	if err != nil {
		if os.IsNotExist(err) {
			return fmt.Errorf("missing: %s", name)
		}
		return err
	}
	if len(b) < cfHeader || string(b[:4]) != "KVCF" || b[4] != 1 {
		return fmt.Errorf("%s: not a filter file of version 1", name)
	}
	if crc32.Checksum(b[:32], castagnoli) != binary.LittleEndian.Uint32(b[32:36]) {
		return fmt.Errorf("%s: header checksum mismatch", name)
	}
	if n, size := binary.LittleEndian.Uint64(b[8:16]), binary.LittleEndian.Uint64(b[16:24]); n != num || size != t.Size {
		return fmt.Errorf("%s: bound to table %d of %d bytes, not %d of %d", name, n, size, num, t.Size)
	}
	block := b[cfHeader:]
	f, err := codec.Decode(block)
	if err != nil {
		return fmt.Errorf("%s: %v", name, err)
	}
	t.Filter = block
	t.FilterSize = uint64(len(block))
	t.FilterName = fmt.Sprintf("lsmcuckoo.v%d (.cf)", f.Info().Version)
	if f.Info().Hash != codec.HashKey64 {
		return fmt.Errorf("%s: a filter of host hashes, which kvdemo does not write", name)
	}
	t.MayContain = func(key []byte) bool { return codec.MayContain(block, key) }
	return nil
}
