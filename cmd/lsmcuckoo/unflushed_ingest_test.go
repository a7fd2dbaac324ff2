package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

func inspectText(t *testing.T, dir string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run([]string{"inspect", "-probes", "1000", dir}, &out, &errb); code != 0 {
		t.Fatalf("inspect exit %d: %s", code, errb.String())
	}
	return out.String()
}

// An ingest that overlaps the memtable is a flushable ingest: Pebble writes
// to the log a batch of one IngestSST record per table, whose count is the
// number of tables, and keeps the tables out of the manifest until the next
// flush. The note says an ingestion waits, with its tables' own filters,
// and counts it as no write.
func TestInspectNotesAFlushableIngest(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	bloomPolicy(o)
	o.MemTableSize = 64 << 20
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		db.Set(key(i), value(i, 20), pebble.NoSync)
	}
	var ssts []string
	for n, r := range [][2]int{{0, 500}, {600, 900}} {
		path := filepath.Join(t.TempDir(), fmt.Sprintf("ext%d.sst", n))
		f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{
			TableFormat: sstable.TableFormatPebblev3, FilterPolicy: bloom.FilterPolicy(10)})
		for i := r[0]; i < r[1]; i++ {
			w.Set(key(i), []byte("ingested"))
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		ssts = append(ssts, path)
	}
	if err := db.Ingest(t.Context(), ssts); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r := inspectJSON(t, dir)
	// The ingest flushed the 1000 sets; the live log holds only the
	// ingestion's record: 2 tables, 800 keys, with bloom filters, not yet
	// in the manifest.
	if u := r.Unflushed; u == nil || u.Ingests != 1 || u.Writes != 0 || u.Batches != 0 {
		t.Fatalf("unflushed %+v, want one ingestion and no writes", u)
	}
	text := inspectText(t, dir)
	if want := "1 ingestion whose tables overlapped the memtable: the tables, with their own filters, wait"; !strings.Contains(text, want) ||
		strings.Contains(text, "no filter yet") {
		t.Errorf("the note misses %q or calls the tables unfiltered:\n%s", want, text)
	}
}

// A batch of LogData only is written to the log but is never applied or
// flushed (Pebble v2's replay skips it): no note.
func TestInspectNoNoteForLogDataOnly(t *testing.T) {
	dir := t.TempDir()
	o := testOptions()
	bloomPolicy(o)
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		b := db.NewBatch()
		b.LogData(bytes.Repeat([]byte("x"), 100000), nil)
		if err := b.Commit(pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	r := inspectJSON(t, dir)
	if text := inspectText(t, dir); strings.Contains(text, "write-ahead") {
		t.Errorf("a log of LogData only is noted:\n%s", text)
	}
	if r.Unflushed != nil {
		t.Errorf("a log of LogData only: unflushed %+v, want none (nothing to flush)", r.Unflushed)
	}
}
