package kvdemo

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

var updateGolden = flag.Bool("update", false, "rewrite kvdemo's golden format files in testdata/")

// TestFormatGolden freezes the bytes of kvdemo's own files (MANIFEST
// version 2, the filter file header version 1, a log record) against
// files in testdata/, and reads them back. Changing a format means a new
// version that still reads the old files, not an edit of these.
func TestFormatGolden(t *testing.T) {
	dir := t.TempDir()
	db := &DB{dir: dir, fs: vfs.Default, opts: Options{Logger: quiet()}}
	if err := db.fs.MkdirAll(filepath.Join(dir, tmpDir), 0o755); err != nil {
		t.Fatal(err)
	}
	man := manifest{Filter: FilterCuckoo, Compression: CompressionZSTD, Tables: []uint64{23, 18, 20}, NextFile: 30, Retired: []uint64{19}, Log: 25, Seq: 4242}
	if err := db.writeManifest(man); err != nil {
		t.Fatal(err)
	}
	manBytes, _ := os.ReadFile(filepath.Join(dir, manifestName))

	st := &sstable{id: 23, size: 123456, sum: 0x0123456789abcdef}
	if err := db.writeFilterFile(st, []byte("codec block")); err != nil {
		t.Fatal(err)
	}
	filterBytes, _ := os.ReadFile(fileName(dir, 23, extFilter))

	logBytes := encodeRecords(
		walRecord{seq: 7, kind: kindPut, key: []byte("key"), value: []byte("value")},
		walRecord{seq: 8, kind: kindDel, key: []byte("key")},
	)

	for _, g := range []struct {
		name string
		got  []byte
	}{
		{"MANIFEST.v2", manBytes},
		{"filter-header.v1.cf", filterBytes},
		{"log-records.log", logBytes},
	} {
		path := filepath.Join("testdata", "format", g.name)
		if *updateGolden {
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, g.got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update once to create it)", err)
		}
		if !bytes.Equal(g.got, want) {
			t.Errorf("%s changed:\n got %q\nwant %q", g.name, g.got, want)
		}
	}

	// And the golden files read back.
	m, err := parseManifest(mustRead(t, "testdata/format/MANIFEST.v2"), "testdata")
	if err != nil || m.Seq != 4242 || len(m.Tables) != 3 || m.Log != 25 {
		t.Errorf("golden MANIFEST reads as %+v, %v", m, err)
	}
	block, err := checkFilterBinding(mustRead(t, "testdata/format/filter-header.v1.cf"), st)
	if err != nil || string(block) != "codec block" {
		t.Errorf("golden filter file: %q, %v", block, err)
	}
	var seqs []uint64
	sc, err := scanLog(mustRead(t, "testdata/format/log-records.log"), false, func(r walRecord) error {
		seqs = append(seqs, r.seq)
		return nil
	})
	if err != nil || sc.damageAt != -1 || len(seqs) != 2 || seqs[1] != 8 {
		t.Errorf("golden log: %v, %+v, %v", seqs, sc, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestManifestTableFiles freezes the MANIFEST's table_files field (each
// table's size and xxhash64, recorded since version 2 stores began to
// check a table is the one named), reads it back, and refuses entries
// that cannot be right.
func TestManifestTableFiles(t *testing.T) {
	dir := t.TempDir()
	db := &DB{dir: dir, fs: vfs.Default, opts: Options{Logger: quiet()}}
	if err := db.fs.MkdirAll(filepath.Join(dir, tmpDir), 0o755); err != nil {
		t.Fatal(err)
	}
	man := manifest{Filter: FilterBloom, Compression: CompressionZSTD, Tables: []uint64{23, 18}, NextFile: 30, Log: 25, Seq: 4242,
		TableFiles: map[uint64]tableFile{23: newTableFile(123456, 0x0123456789abcdef), 18: newTableFile(99, 7)}}
	if err := db.writeManifest(man); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, manifestName))
	path := filepath.Join("testdata", "format", "MANIFEST.v2-table-files")
	if *updateGolden {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want := mustRead(t, path); !bytes.Equal(got, want) {
		t.Errorf("MANIFEST with table_files changed:\n got %q\nwant %q", got, want)
	}
	m, err := parseManifest(mustRead(t, path), "testdata")
	if err != nil || m.TableFiles[23] != newTableFile(123456, 0x0123456789abcdef) || m.TableFiles[18].Size != 99 {
		t.Errorf("golden MANIFEST with table_files reads as %+v, %v", m, err)
	}
	if why := m.TableFiles[23].mismatch(&sstable{size: 123456, sum: 0x0123456789abcdef}); why != "" {
		t.Errorf("the recorded table does not match itself: %s", why)
	}
	if why := m.TableFiles[23].mismatch(&sstable{size: 123456, sum: 0x0123456789abcdee}); why == "" {
		t.Error("a table with another hash matches")
	}
	// An entry for a table the manifest does not list (left by a hand
	// edit) says nothing about the listed ones: dropped.
	man.TableFiles = map[uint64]tableFile{23: newTableFile(1, 1), 7: newTableFile(1, 1)}
	if err := db.writeManifest(man); err != nil {
		t.Fatal(err)
	}
	if m, err := db.readManifest(); err != nil || len(m.TableFiles) != 1 {
		t.Errorf("table_files with an unlisted table: %v, %v", m.TableFiles, err)
	}

	for name, bad := range map[string]map[uint64]tableFile{
		"short hash":    {23: {Size: 1, Hash: "abc"}},
		"not hex":       {23: {Size: 1, Hash: "0123456789abcdeg"}},
		"negative size": {23: {Size: -1, Hash: "0123456789abcdef"}},
	} {
		man.TableFiles = bad
		if err := db.writeManifest(man); err != nil {
			t.Fatal(err)
		}
		if _, err := db.readManifest(); err == nil || !strings.Contains(err.Error(), "table_files") {
			t.Errorf("%s: %v, want an error about table_files", name, err)
		}
	}
}
