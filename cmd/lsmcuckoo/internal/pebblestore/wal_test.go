package pebblestore

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/lsmcuckoo/lsmcuckoo/tablefilter"
)

// While the owner rotates its write-ahead log, the directory holds a new,
// empty log beside an older one whose last write is not on disk yet. Pebble
// treats a torn older log as corruption and refuses to open; the logs' keys
// are in no table and have no filter, so the snapshot does not read them and
// the tables are still reported.
func TestOpenWhileOwnerRotatesLog(t *testing.T) {
	dir := t.TempDir()
	o := &pebble.Options{}
	o.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		_ = db.Set([]byte(fmt.Sprintf("k%06d", i)), []byte("v"), pebble.NoSync)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		_ = db.Set([]byte(fmt.Sprintf("w%06d", i)), []byte("in the log only"), pebble.Sync)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no write-ahead log left")
	}
	last := logs[len(logs)-1]
	st, err := os.Stat(last)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(last, st.Size()-7); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "999999.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("snapshot during a log rotation: %v", err)
	}
	tables := 0
	for l := range s.Levels {
		for _, tb := range s.Levels[l] {
			tables++
			if tb.Damaged != "" || !strings.HasPrefix(tb.FilterName, "lsmcuckoo.") {
				t.Errorf("L%d %06d: damaged %q, filter %q", l, tb.FileNum, tb.Damaged, tb.FilterName)
			}
		}
	}
	if tables == 0 {
		t.Fatal("no table reported")
	}
}

// A damaged OPTIONS file of any size (here a 3 GiB hole) is not read into
// memory: the snapshot needs only the names in it, read a line at a time.
func TestOpenHugeOptions(t *testing.T) {
	dir := t.TempDir()
	o := &pebble.Options{}
	o.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		_ = db.Set([]byte(fmt.Sprintf("k%06d", i)), []byte("v"), pebble.NoSync)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	opts, _ := filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if len(opts) == 0 {
		t.Fatal("no OPTIONS file")
	}
	if err := os.Truncate(opts[len(opts)-1], 3<<30); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Open(dir)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Errorf("allocated %d bytes", grew)
	}
}

// vanishingManifestFS fails the first open of a manifest as if the owner had
// just rotated it: the marker named a file the owner has since removed.
type vanishingManifestFS struct {
	vfs.FS
	failed *bool
}

func (fs vanishingManifestFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if strings.HasPrefix(filepath.Base(name), "MANIFEST-") && !*fs.failed {
		*fs.failed = true
		return nil, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	return fs.FS.Open(name, opts...)
}

// A manifest rotated away by the owner between reading the marker and
// opening the file is read again from the new marker, not reported as an
// unreadable store.
func TestOpenWhileOwnerRotatesManifest(t *testing.T) {
	dir := t.TempDir()
	o := &pebble.Options{}
	o.Levels[0].FilterPolicy = tablefilter.NewPolicy(10)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		_ = db.Set([]byte(fmt.Sprintf("k%06d", i)), []byte("v"), pebble.NoSync)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	failed := false
	defer func(f func() vfs.FS) { newReadOnlyFS = f }(newReadOnlyFS)
	newReadOnlyFS = func() vfs.FS { return readOnlyFS{FS: vanishingManifestFS{FS: vfs.Default, failed: &failed}} }
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("snapshot during a manifest rotation: %v", err)
	}
	if !failed || len(s.Levels[0]) == 0 {
		t.Fatalf("manifest failed once: %v; %d L0 tables", failed, len(s.Levels[0]))
	}
}
