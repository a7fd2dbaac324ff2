package kvdemo

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDamageInAnyBlockFound: a table of many blocks damaged in its first
// one (not the last, which Badger reads to find the table's biggest key)
// is found damaged by Check and by Open, which verify every block's
// checksum, not only when a Get happens to need that block. The MANIFEST
// here predates table_files (whose recorded hash would tell on its own).
func TestDamageInAnyBlockFound(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{Compression: CompressionNone})
	value := bytes.Repeat([]byte("v"), 100)
	for i := 0; i < 500; i++ {
		mustPut(t, db, fmt.Appendf(nil, "key%04d", i), value)
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	man := forgetTableFiles(t, dir)
	path := fileName(dir, man.Tables[0], extTable)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 8<<10 {
		t.Fatalf("test setup: a table of %d bytes has too few blocks", len(b))
	}
	b[100] ^= 0x40 // inside the first data block
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := Check(dir, &out, nil)
	if err != nil || res.Problems != 1 || !strings.Contains(out.String(), fmt.Sprintf("BAD  %06d.sst", man.Tables[0])) {
		t.Errorf("Check on a table damaged in its first block: %+v, %v\n%s", res, err, out.String())
	}
	db = open(t, dir, Options{})
	defer db.Close()
	if n := db.Stats().DamagedTables; n != 1 {
		t.Errorf("Open found %d damaged tables, want 1", n)
	}
}
