package kvdemo

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// TestFilterBoundToTableContent: a filter file names its table by number,
// size and content hash. A table rewritten under the same number with the
// same size, in a store whose MANIFEST predates table identities (so only
// the filter can tell), must not be read through the old table's filter:
// it would rule out keys the table in its place holds.
func TestFilterBoundToTableContent(t *testing.T) {
	o := Options{Filter: FilterCuckoo, Compression: CompressionNone}
	build := func(prefix string) (string, manifest) {
		dir := t.TempDir()
		db := open(t, dir, o)
		for i := 0; i < 100; i++ {
			mustPut(t, db, fmt.Appendf(nil, "%s%03d", prefix, i), []byte("value"))
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
		db.Close()
		man, err := readManifestFS(vfs.Default, dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(man.Tables) != 1 {
			t.Fatalf("test setup: %d tables, want 1", len(man.Tables))
		}
		return dir, man
	}
	dirA, manA := build("a")
	id := manA.Tables[0]
	tableA, err := os.ReadFile(fileName(dirA, id, extTable))
	if err != nil {
		t.Fatal(err)
	}
	// Badger's table ends with varint-encoded checksums, so two tables of
	// the same shape may differ in size by a byte: find one that does not.
	var tableB []byte
	prefix := ""
	for _, p := range "bcdefghijklmnopqrstuvwxyz" {
		dirB, manB := build(string(p))
		b, err := os.ReadFile(fileName(dirB, manB.Tables[0], extTable))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == len(tableA) && !bytes.Equal(b, tableA) {
			tableB, prefix = b, string(p)
			break
		}
	}
	if tableB == nil {
		t.Fatal("test setup: no table of the same size as the first")
	}
	if err := os.WriteFile(fileName(dirA, id, extTable), tableB, 0o644); err != nil {
		t.Fatal(err)
	}
	forgetTableFiles(t, dirA)
	db := open(t, dirA, o)
	defer db.Close()
	for i := 0; i < 100; i++ {
		k := fmt.Appendf(nil, "%s%03d", prefix, i)
		if got, err := db.Get(k); err != nil || string(got) != "value" {
			t.Fatalf("Get(%s) from the table in place: %q, %v (read through the filter of the table it replaced?)", k, got, err)
		}
	}
}
