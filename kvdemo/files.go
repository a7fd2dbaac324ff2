package kvdemo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// File names: every file but MANIFEST and LOCK is NNNNNN.ext, numbered
// from one counter, so a number is never reused for another file.
const (
	extLog       = "log"
	extTable     = "sst" // Badger's table.ParseFileID insists on this suffix
	extFilter    = "cf"
	tmpDir       = "tmp"
	lostDir      = "lost"
	manifestName = "MANIFEST"
)

func fileName(dir string, id uint64, ext string) string {
	return filepath.Join(dir, fmt.Sprintf("%06d.%s", id, ext))
}

// parseFileName splits NNNNNN.ext; ok is false for any other name.
func parseFileName(name string) (id uint64, ext string, ok bool) {
	base, ext, found := strings.Cut(name, ".")
	if !found || len(base) < 6 {
		return 0, "", false
	}
	id, err := strconv.ParseUint(base, 10, 64)
	return id, ext, err == nil
}

func (db *DB) syncDir() error { return db.fs.SyncDir(db.dir) }

// removeFile removes NNNNNN.ext; a file already gone is not an error.
func (db *DB) removeFile(id uint64, ext string) {
	if db.noWrites {
		return
	}
	if err := db.fs.Remove(fileName(db.dir, id, ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
		db.opts.Logger.Printf("removing %06d.%s: %v", id, ext, err)
	}
}

// writeFileAtomic writes name in the store's directory through a fsynced
// temporary file and a rename; a failed write leaves nothing behind. The
// caller fsyncs the directory (once for several files).
func (db *DB) writeFileAtomic(name string, data []byte) error {
	tmp := filepath.Join(db.dir, tmpDir, name)
	db.fs.Remove(tmp) // left over from an earlier failure
	if err := vfs.WriteFile(db.fs, tmp, data); err != nil {
		return err
	}
	if err := db.fs.Rename(tmp, filepath.Join(db.dir, name)); err != nil {
		db.fs.Remove(tmp)
		return err
	}
	return nil
}

// lostPath is a name in lost/ for name that no file there has yet: an
// earlier recovery's evidence is never replaced.
func (db *DB) lostPath(name string) (string, error) {
	lost := filepath.Join(db.dir, lostDir)
	if err := db.fs.MkdirAll(lost, 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(lost, name)
	for i := 1; ; i++ {
		if _, err := db.fs.Stat(dst); errors.Is(err, os.ErrNotExist) {
			return dst, nil
		} else if err != nil {
			return "", err
		}
		dst = filepath.Join(lost, fmt.Sprintf("%s.%d", name, i))
	}
}

// syncLost makes what was put in lost/ durable: lost/ itself, and the
// store directory (which lost/ may be new in, and files may have left).
func (db *DB) syncLost() error {
	if err := db.fs.SyncDir(filepath.Join(db.dir, lostDir)); err != nil {
		return err
	}
	return db.syncDir()
}

// moveAside moves a file Open will not use, but must not destroy, into
// lost/ (durably), and says so: a file no manifest names. The operator
// decides what to do with it.
func (db *DB) moveAside(name, why string) error {
	dst, err := db.lostPath(name)
	if err == nil {
		err = db.fs.Rename(filepath.Join(db.dir, name), dst)
	}
	if err == nil {
		err = db.syncLost()
	}
	if err != nil {
		return errorf("moving %s to lost/: %w", name, err)
	}
	db.opts.Logger.Printf("%s: %s; moved to %s", name, why, dst)
	db.stats.movedAside.Add(1)
	return nil
}

// keepCopy copies file name into lost/ durably, leaving the original in
// place: for a file that the store still needs until a manifest change
// (a damaged log, until the manifest no longer names it), so that a crash
// on either side of that change leaves the file in one of the two places.
func (db *DB) keepCopy(name string) (string, error) {
	dst, err := db.lostPath(name)
	if err == nil {
		_, err = copyFileSparse(db.fs, filepath.Join(db.dir, name), 0, dst)
	}
	if err == nil {
		err = db.syncLost()
	}
	if err != nil {
		return "", errorf("keeping a copy of %s in lost/: %w", name, err)
	}
	return dst, nil
}

// A filter file binds its filter block to one table:
//
//	magic "KVCF" | version u8 (1) | 3 zero bytes | table number u64 |
//	table size u64 | xxhash64 of the table file u64 |
//	CRC-32C of the 32 bytes before it u32 | codec filter block
//
// little-endian. A filter is used only for the table it names, with that
// exact size and content hash: a filter copied over another table's, or a
// table rewritten under the same number, fails the check, and the table is
// read unfiltered until its filter is rebuilt. (The codec block carries
// its own CRC-32C.)
const (
	filterMagic   = "KVCF"
	filterVersion = 1
	filterHeader  = 4 + 4 + 8 + 8 + 8 + 4
)

func (db *DB) writeFilterFile(st *sstable, block []byte) error {
	b := make([]byte, filterHeader, filterHeader+len(block))
	copy(b, filterMagic)
	b[4] = filterVersion
	binary.LittleEndian.PutUint64(b[8:], st.id)
	binary.LittleEndian.PutUint64(b[16:], uint64(st.size))
	binary.LittleEndian.PutUint64(b[24:], st.sum)
	binary.LittleEndian.PutUint32(b[32:], crc32.Checksum(b[:32], crcTable))
	b = append(b, block...)
	return db.writeFileAtomic(fmt.Sprintf("%06d.%s", st.id, extFilter), b)
}

func checkFilterBinding(b []byte, st *sstable) ([]byte, error) {
	switch {
	case len(b) < filterHeader || string(b[:4]) != filterMagic:
		return nil, errors.New("not a bound filter file (no KVCF header)")
	case binary.LittleEndian.Uint32(b[32:]) != crc32.Checksum(b[:32], crcTable):
		return nil, errors.New("filter file header fails its checksum")
	case b[4] != filterVersion:
		return nil, fmt.Errorf("filter file version %d not supported", b[4])
	}
	id := binary.LittleEndian.Uint64(b[8:])
	size := binary.LittleEndian.Uint64(b[16:])
	sum := binary.LittleEndian.Uint64(b[24:])
	// A damaged table's content hash cannot match any more; its filter
	// still describes the keys it was built with, so it may rule keys out
	// if it is bound to the table the manifest recorded (openTables sets
	// size and hash from the record), or, with no record (st.sum 0), to
	// the same number and size.
	if id != st.id || size != uint64(st.size) || ((st.damaged == nil || st.sum != 0) && sum != st.sum) {
		return nil, fmt.Errorf("filter belongs to table %06d of %d bytes (hash %016x), not this one (%d bytes, hash %016x)",
			id, size, sum, st.size, st.sum)
	}
	return b[filterHeader:], nil
}
