package kvdemo

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// File names: every file but MANIFEST and LOCK is NNNNNN.ext, numbered
// from one counter, so a number is never reused for another file.
const (
	extLog    = "log"
	extTable  = "sst" // Badger's table.ParseFileID insists on this suffix
	extFilter = "cf"
	tmpDir    = "tmp"
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

// manifest names the live state: which tables exist (oldest first: after
// compaction, file numbers no longer tell age) and which logs still hold
// records not in any table. It is JSON because a person debugging a store
// should be able to read it; it is replaced atomically, so it is either the
// old one or the new one, never torn.
type manifest struct {
	Version     int         `json:"version"`
	Filter      FilterKind  `json:"filter"`
	Compression Compression `json:"compression,omitempty"` // empty: zstd (stores from before it was recorded)
	BitsPerKey  float64     `json:"bits_per_key,omitempty"`
	Tables      []uint64    `json:"tables"`    // oldest first
	NextFile    uint64      `json:"next_file"` // a lower bound; Open also scans the directory
	// Log is the oldest log that may hold records not yet in a table. Open
	// replays every log numbered Log or higher, in order.
	Log uint64 `json:"log"`
	// Seq is the highest sequence number in a table. Replay skips records
	// at or below it: they are in a table already (a flush during replay
	// writes tables without retiring the log it came from).
	Seq uint64 `json:"seq"`
}

const manifestVersion = 1

func readManifest(dir string) (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(dir, "MANIFEST"))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("kvdemo: corrupt MANIFEST in %s: %w", dir, err)
	}
	if m.Version != manifestVersion {
		return m, fmt.Errorf("kvdemo: MANIFEST version %d not supported (want %d)", m.Version, manifestVersion)
	}
	if m.Compression == "" {
		m.Compression = CompressionZSTD
	}
	seen := map[uint64]bool{}
	for _, id := range m.Tables {
		if seen[id] {
			return m, fmt.Errorf("kvdemo: corrupt MANIFEST in %s: table %d listed twice", dir, id)
		}
		seen[id] = true
	}
	return m, nil
}

// writeManifest replaces MANIFEST atomically and durably.
func writeManifest(dir string, m manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(dir, "MANIFEST", append(b, '\n')); err != nil {
		return fmt.Errorf("kvdemo: writing MANIFEST: %w", err)
	}
	return syncDir(dir)
}

// writeFileAtomic writes name in dir through a fsynced temporary file and
// a rename; the caller fsyncs dir (once for several files).
func writeFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, tmpDir, name)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// lockDir takes an exclusive advisory lock on dir/LOCK, so a second
// process (or a second Open in this one) cannot interleave its writes
// with ours. The kernel drops the lock when the process dies, so a crash
// never leaves the store locked.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, dir)
		}
		return nil, fmt.Errorf("kvdemo: locking %s: %w", dir, err)
	}
	return f, nil
}
