// Package badgerstore reads the table filters of a Badger v4 directory
// without writing into it: the live tables and their levels from the
// MANIFEST, and from each table only its index (at the end of the file,
// checksum verified), which holds the bloom filter. No data block is read.
package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/dgraph-io/badger/v4/fb"
	"github.com/dgraph-io/badger/v4/pb"
	"github.com/dgraph-io/badger/v4/y"
	"github.com/lsmcuckoo/lsmcuckoo/cmd/lsmcuckoo/internal/pebblestore"
	"google.golang.org/protobuf/proto"
)

// FilterName is the family name of Badger's bloom filter (y.Filter).
const FilterName = pebblestore.BadgerBloomName

// magic opens every Badger MANIFEST.
var magic = []byte("Bdgr")

// IsStore reports whether dir holds a Badger MANIFEST.
func IsStore(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return false
	}
	defer f.Close()
	var b [4]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return false
	}
	return bytes.Equal(b[:], magic)
}

// Open takes a snapshot of the Badger store in dir. Badger's levels are
// L0..L6 by default; a store with more levels is refused.
func Open(dir string) (*pebblestore.Snapshot, error) {
	return pebblestore.Retry(func() (*pebblestore.Snapshot, error) { return take(dir) })
}

func take(dir string) (*pebblestore.Snapshot, error) {
	tables, err := replayManifest(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return nil, err
	}
	s := &pebblestore.Snapshot{Format: "badger", L0Each: true, Dir: dir, Comparer: "badger"}
	ids := make([]uint64, 0, len(tables))
	for id := range tables {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		tm := tables[id]
		l := int(tm.Level)
		if l >= pebblestore.NumLevels {
			return nil, fmt.Errorf("table %d on level %d: this command models %d levels", id, l, pebblestore.NumLevels)
		}
		t := pebblestore.Table{Level: l, FileNum: id}
		if err := ReadTable(filepath.Join(dir, fmt.Sprintf("%06d.sst", id)), tm.KeyId, &t); err != nil {
			t.Damaged = err.Error()
		}
		s.Levels[l] = append(s.Levels[l], t)
	}
	// A Badger lookup consults every L0 table: each is its own run.
	s.Sublevels = len(s.Levels[0])
	return s, nil
}

// replayManifest reads Badger's MANIFEST: 8 bytes of magic ("Bdgr", the
// external and the format version), then change sets, each a 4-byte length,
// a CRC-32C (Castagnoli) and a pb.ManifestChangeSet. A partial last record
// is what a crash mid-append leaves, and Badger ignores it too.
func replayManifest(path string) (map[uint64]*pb.ManifestChange, error) {
	b, err := pebblestore.ReadFileAtMost(path, maxManifest)
	if err != nil {
		return nil, err
	}
	if len(b) < 8 || !bytes.Equal(b[:4], magic) {
		return nil, fmt.Errorf("%s: not a Badger MANIFEST", path)
	}
	if v := y.BytesToU16(b[6:8]); v != badgerManifestVersion {
		return nil, fmt.Errorf("%s: Badger MANIFEST version %d, this command reads %d", path, v, badgerManifestVersion)
	}
	tables := map[uint64]*pb.ManifestChange{}
	crc := crc32.MakeTable(crc32.Castagnoli)
	for rest := b[8:]; len(rest) >= 8; {
		n := uint64(y.BytesToU32(rest[:4]))
		if uint64(len(rest)-8) < n {
			break
		}
		rec := rest[8 : 8+n]
		if crc32.Checksum(rec, crc) != y.BytesToU32(rest[4:8]) {
			return nil, fmt.Errorf("%s: checksum mismatch", path)
		}
		var cs pb.ManifestChangeSet
		if err := proto.Unmarshal(rec, &cs); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		for _, c := range cs.Changes {
			switch c.Op {
			case pb.ManifestChange_CREATE:
				tables[c.Id] = c
			case pb.ManifestChange_DELETE:
				delete(tables, c.Id)
			}
		}
		rest = rest[8+n:]
	}
	return tables, nil
}

// maxManifest bounds a Badger MANIFEST: Badger rewrites it once deletions
// dominate, so it stays a small multiple of the live tables' changes.
const maxManifest = 1 << 30

// badgerManifestVersion is the MANIFEST format Badger v4 writes
// (badgerMagicVersion in its manifest.go).
const badgerManifestVersion = 8

// openTable opens a table file; a test replaces it to make a table vanish
// as the owner's compaction would.
var openTable = os.Open

// ReadTable reads a table's index from the end of its file: the last 4
// bytes give the checksum's length, the checksum precedes them, the index's
// length precedes that, and the index precedes its length.
func ReadTable(path string, keyID uint64, t *pebblestore.Table) error {
	f, err := openTable(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("missing: %s", filepath.Base(path))
		}
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	t.Size = uint64(st.Size())
	name := filepath.Base(path)
	if keyID != 0 {
		return fmt.Errorf("%s: encrypted (key %d): its index cannot be read without the key", name, keyID)
	}
	pos := st.Size()
	read := func(n, most int64) ([]byte, error) {
		if n < 0 || n > pos || n > most {
			return nil, fmt.Errorf("%s: truncated or damaged footer", name)
		}
		pos -= n
		b := make([]byte, n)
		if _, err := f.ReadAt(b, pos); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		return b, nil
	}
	b, err := read(4, 4)
	if err != nil {
		return err
	}
	chkBytes, err := read(int64(y.BytesToU32(b)), maxChecksumLen)
	if err != nil {
		return err
	}
	var chk pb.Checksum
	if err := proto.Unmarshal(chkBytes, &chk); err != nil {
		return fmt.Errorf("%s: index checksum: %v", name, err)
	}
	if b, err = read(4, 4); err != nil {
		return err
	}
	index, err := read(int64(y.BytesToU32(b)), maxIndexLen)
	if err != nil {
		return err
	}
	// A zeroed tail passes the checksum of an empty index; the smallest
	// flatbuffer holds a root offset and a vtable.
	if len(index) < minIndexLen {
		return fmt.Errorf("%s: truncated or damaged footer", name)
	}
	if err := y.VerifyChecksum(index, &chk); err != nil {
		return fmt.Errorf("%s: index: %v", name, firstLine(err))
	}
	bf, keys, err := readIndex(index)
	if err != nil {
		return fmt.Errorf("%s: index: %v", name, err)
	}
	t.NumEntries = keys
	if len(bf) > 0 {
		t.FilterName = FilterName
		t.FilterSize = uint64(len(bf))
		t.Filter = bf
		filter := y.Filter(bf)
		t.MayContain = func(key []byte) bool { return filter.MayContain(y.Hash(key)) }
	}
	return nil
}

// Bounds on a table's footer fields: a Checksum message is a few bytes, and
// an index (block offsets and the bloom filter) a small part of its table.
// A damaged length must not make the reader allocate, or read through a
// sparse file, what it claims.
const (
	maxChecksumLen = 1 << 10
	maxIndexLen    = 1 << 30
	minIndexLen    = 8
)

// readIndex reads the key count and the bloom filter from a table index.
// Flatbuffers accessors trust their offsets and panic on bad ones; an index
// that passed its checksum but is malformed is reported as damaged.
func readIndex(index []byte) (bloom []byte, keys uint64, err error) {
	defer func() {
		if r := recover(); r != nil {
			bloom, keys, err = nil, 0, fmt.Errorf("malformed (%v)", r)
		}
	}()
	ti := fb.GetRootAsTableIndex(index, 0)
	return ti.BloomFilterBytes(), uint64(ti.KeyCount()), nil
}

func firstLine(err error) string {
	s := err.Error()
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
