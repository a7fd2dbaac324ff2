package kvdemo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// manifest names the live state: which tables exist (oldest first: after
// compaction, file numbers no longer tell age) and which logs still hold
// records not in any table. It is JSON because a person debugging a store
// should be able to read it, followed by a line
//
//	crc32c XXXXXXXX
//
// the CRC-32C (Castagnoli) of every byte before that line, in hex. It is
// replaced atomically (temporary file, fsync, rename, directory fsync), so
// it is either the old one or the new one, never torn; a manifest that
// fails its checksum or does not parse is an error that Open reports, and
// never a reason to delete anything. Version 1 manifests (no checksum
// line) are still read, and rewritten as version 2 by the first change
// to the table list (a flush or a compaction), not at Open.
type manifest struct {
	Version     int         `json:"version"`
	Filter      FilterKind  `json:"filter"`
	Compression Compression `json:"compression,omitempty"` // empty: zstd (stores from before it was recorded)
	BitsPerKey  float64     `json:"bits_per_key,omitempty"`
	// MaxKeySize and MaxValueSize: the largest caps (Options) the store
	// was opened with, when above the defaults (absent: the defaults).
	// A reopen with smaller caps still replays, reads and deletes every
	// key the store may hold.
	MaxKeySize   int `json:"max_key_size,omitempty"`
	MaxValueSize int `json:"max_value_size,omitempty"`

	Tables []uint64 `json:"tables"` // oldest first
	// TableFiles: each listed table's size and xxhash64, by number. Badger's
	// table format holds no table number, so without it a valid table of
	// the same store copied over another (a restore gone wrong, a file
	// swapped by hand) would be served as that table: keys silently
	// missing, older values returned. Absent in manifests written before
	// it was recorded, and for a table a damaged store could not vouch for
	// (see tableFilesFor); such a table is opened unverified, as before.
	TableFiles map[uint64]tableFile `json:"table_files,omitempty"`
	// NextFile is above every file number allocated when it was written:
	// a table or filter numbered NextFile or higher that the manifest does
	// not name is the output of a flush or compaction that did not finish.
	NextFile uint64 `json:"next_file"`
	// Pending: numbers below NextFile given to flush or compaction
	// outputs that no edit had named when this manifest was written (they
	// were being built: a flush and a compaction overlap). A table or
	// filter with such a number that the manifest does not name holds
	// nothing it needs: the output of a flush or compaction that did not
	// finish, removed like those numbered NextFile or higher. Absent in
	// manifests written before it was recorded (readers that predate it
	// ignore it, and keep such a file in lost/).
	Pending []uint64 `json:"pending,omitempty"`
	// Retired: tables a compaction replaced whose files may not be
	// removed yet (a reader was still using them). Open removes them.
	Retired []uint64 `json:"retired,omitempty"`
	// Log is the oldest log that may hold records not yet in a table; it
	// must exist (0: none yet). Open replays every log numbered Log or
	// higher, in order.
	Log uint64 `json:"log"`
	// Seq is the highest sequence number in a table. Replay skips records
	// at or below it: they are in a table already (a flush during replay
	// writes tables without retiring the log it came from).
	Seq uint64 `json:"seq"`
	// ClosedSeq is written by a Close that made every write durable: the
	// sequence number of the last write acknowledged (0: not recorded, as
	// after a crash). The tables (Seq) and the logs from Log on must reach
	// it. A crash can tear only what was never acknowledged, and after a
	// clean Close there is nothing of the kind: logs that end below it
	// were cut short or damaged at rest, and acknowledged writes are
	// missing, which a log cut at a record boundary (or emptied) would
	// otherwise hide.
	ClosedSeq uint64 `json:"closed_seq,omitempty"`
}

const manifestVersion = 2

// tableFile is a table's identity as a manifest records it: its size and
// the xxhash64 of its bytes, the same pair a filter file binds to.
type tableFile struct {
	Size int64  `json:"size"`
	Hash string `json:"xxhash64"` // 16 hex digits
}

func newTableFile(size int64, sum uint64) tableFile {
	return tableFile{Size: size, Hash: fmt.Sprintf("%016x", sum)}
}

// mismatch says how st differs from the identity the manifest recorded,
// or "" when it is that table.
func (f tableFile) mismatch(st *sstable) string {
	if f.Size == st.size && f.Hash == fmt.Sprintf("%016x", st.sum) {
		return ""
	}
	return fmt.Sprintf("it is %d bytes with xxhash64 %016x, the MANIFEST recorded %d bytes with %s: another file is in its place, or it was damaged",
		st.size, st.sum, f.Size, f.Hash)
}

const manifestSumPrefix = "crc32c "

func (db *DB) readManifest() (manifest, error) { return readManifestFS(db.fs, db.dir) }

func readManifestFS(fs vfs.FS, dir string) (manifest, error) {
	b, err := vfs.ReadFile(fs, filepath.Join(dir, manifestName))
	if err != nil {
		return manifest{}, err
	}
	return parseManifest(b, dir)
}

func parseManifest(b []byte, dir string) (manifest, error) {
	var m manifest
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("kvdemo: MANIFEST in %s is damaged (%s); nothing was changed or deleted: restore it from a backup, or move the store aside", dir, fmt.Sprintf(format, args...))
	}
	body := b
	sumAt := bytes.LastIndex(b, []byte("\n"+manifestSumPrefix))
	if sumAt >= 0 {
		body = b[:sumAt+1]
		line := strings.TrimSpace(string(b[sumAt+1+len(manifestSumPrefix):]))
		want, err := strconv.ParseUint(line, 16, 32)
		if err != nil {
			return m, corrupt("unreadable checksum line %q", line)
		}
		if got := crc32.Checksum(body, crcTable); uint32(want) != got {
			return m, corrupt("checksum %08x, content hashes to %08x", want, got)
		}
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return m, corrupt("%v", err)
	}
	switch {
	case m.Version == 1 && sumAt < 0: // from before checksums
	case m.Version == manifestVersion && sumAt >= 0:
	case m.Version == manifestVersion:
		return m, corrupt("checksum line missing")
	default:
		return m, fmt.Errorf("kvdemo: MANIFEST in %s has version %d, not supported (want %d)", dir, m.Version, manifestVersion)
	}
	m.Version = manifestVersion
	if m.Compression == "" {
		m.Compression = CompressionZSTD
	}
	seen := map[uint64]bool{}
	for _, id := range m.Tables {
		if seen[id] {
			return m, corrupt("table %d listed twice", id)
		}
		if id >= m.NextFile {
			return m, corrupt("table %d at or above next_file %d", id, m.NextFile)
		}
		seen[id] = true
	}
	for id, f := range m.TableFiles {
		if !seen[id] {
			// Says nothing about the tables listed (a manifest edited by
			// hand to drop a table, in the version-1 way, may leave it).
			delete(m.TableFiles, id)
			continue
		}
		if _, err := strconv.ParseUint(f.Hash, 16, 64); err != nil || len(f.Hash) != 16 || f.Size < 0 {
			return m, corrupt("table_files: table %d has size %d, hash %q", id, f.Size, f.Hash)
		}
	}
	return m, nil
}

// writeManifest replaces MANIFEST atomically and durably.
func (db *DB) writeManifest(m manifest) error {
	m.Version = manifestVersion
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	b = fmt.Appendf(b, "%s%08x\n", manifestSumPrefix, crc32.Checksum(b, crcTable))
	if err := db.writeFileAtomic(manifestName, b); err != nil {
		return errorf("writing MANIFEST: %w", err)
	}
	if err := db.syncDir(); err != nil {
		return errorf("%w: %w", errManifestUnsynced, err)
	}
	return nil
}

// errManifestUnsynced: the new MANIFEST was renamed into place but the
// directory fsync failed, so a crash may leave either the old or the new.
var errManifestUnsynced = errors.New("kvdemo: MANIFEST replaced but not made durable (directory fsync failed)")

func errorsIsRenamed(err error) bool { return errors.Is(err, errManifestUnsynced) }
