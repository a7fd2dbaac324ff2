package pebblestore

import (
	"fmt"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	pebble1 "github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// copyDir copies the regular files of src into a new temp dir.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		out.Close()
	}
	return dst
}

type capLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *capLogger) Infof(f string, a ...interface{}) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(f, a...))
	l.mu.Unlock()
}
func (l *capLogger) Errorf(f string, a ...interface{}) { l.Infof(f, a...) }
func (l *capLogger) Fatalf(f string, a ...interface{}) { panic(fmt.Sprintf(f, a...)) }

var replayRe = regexp.MustCompile(`WAL (.*) stopped reading at offset: .*; replayed (\d+) keys in (\d+) batches`)

// replayV2 opens a copy of dir read-write with Pebble v2 and returns what its
// WAL replay reports: keys and batches summed, and the WAL lines.
func replayV2(t *testing.T, dir string) (keys, batches int64, lines []string) {
	t.Helper()
	cp := copyDir(t, dir)
	lg := &capLogger{}
	db, err := pebble.Open(cp, &pebble.Options{Logger: lg})
	if err != nil {
		t.Fatalf("v2 reopen: %v", err)
	}
	db.Close()
	for _, l := range lg.lines {
		if m := replayRe.FindStringSubmatch(l); m != nil {
			k, _ := strconv.ParseInt(m[2], 10, 64)
			b, _ := strconv.ParseInt(m[3], 10, 64)
			keys += k
			batches += b
			lines = append(lines, l)
		}
	}
	return
}

func replayV1(t *testing.T, dir string) (keys, batches int64, lines []string) {
	t.Helper()
	cp := copyDir(t, dir)
	lg := &capLogger{}
	db, err := pebble1.Open(cp, &pebble1.Options{Logger: lg})
	if err != nil {
		t.Fatalf("v1 reopen: %v", err)
	}
	db.Close()
	re := regexp.MustCompile(`WAL file (.*) with log number .* stopped reading at offset: .*; replayed (\d+) keys in (\d+) batches`)
	for _, l := range lg.lines {
		if m := re.FindStringSubmatch(l); m != nil {
			k, _ := strconv.ParseInt(m[2], 10, 64)
			b, _ := strconv.ParseInt(m[3], 10, 64)
			keys += k
			batches += b
			lines = append(lines, l)
		}
	}
	return
}

func logsIn(dir string) string {
	ls, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var s []string
	for _, l := range ls {
		st, _ := os.Stat(l)
		s = append(s, fmt.Sprintf("%s(%d)", filepath.Base(l), st.Size()))
	}
	return strings.Join(s, " ")
}

func checkAgainstReplay(t *testing.T, dir string, v1 bool) *Unflushed {
	t.Helper()
	u, err := ReadUnflushed(dir)
	if err != nil {
		t.Fatalf("ReadUnflushed: %v", err)
	}
	var keys, batches int64
	var lines []string
	if v1 {
		keys, batches, lines = replayV1(t, dir)
	} else {
		keys, batches, lines = replayV2(t, dir)
	}
	var w, b int64
	if u != nil {
		w, b = u.Writes, u.Batches
	}
	t.Logf("logs on disk: %s", logsIn(dir))
	t.Logf("inspect: %+v", u)
	t.Logf("replay: %d keys in %d batches: %q", keys, batches, lines)
	if w != keys || b != batches {
		t.Errorf("inspect counts %d writes in %d batches; Pebble replays %d keys in %d batches", w, b, keys, batches)
	}
	return u
}

func val(n int) []byte { return []byte(strings.Repeat("v", n)) }

func openV2(t *testing.T, dir string, o *pebble.Options) *pebble.DB {
	t.Helper()
	if o == nil {
		o = &pebble.Options{}
	}
	o.Logger = &capLogger{}
	db, err := pebble.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// writer is a real Pebble v1 or v2 store as these tests write to it: the
// two modules' batches differ only in their types.
type writer struct {
	batch func() batch
	flush func() error
}

// batch is a batch of either module.
type batch struct {
	set         func(k, v []byte) error
	deleteRange func(from, to []byte) error
	logData     func(data []byte) error
	commit      func() error
}

func writerV2(db *pebble.DB) writer {
	return writer{
		batch: func() batch {
			b := db.NewBatch()
			return batch{
				set:         func(k, v []byte) error { return b.Set(k, v, nil) },
				deleteRange: func(f, t []byte) error { return b.DeleteRange(f, t, nil) },
				logData:     func(d []byte) error { return b.LogData(d, nil) },
				commit:      func() error { return b.Commit(pebble.NoSync) },
			}
		},
		flush: db.Flush,
	}
}

func writerV1(db *pebble1.DB) writer {
	return writer{
		batch: func() batch {
			b := db.NewBatch()
			return batch{
				set:         func(k, v []byte) error { return b.Set(k, v, nil) },
				deleteRange: func(f, t []byte) error { return b.DeleteRange(f, t, nil) },
				logData:     func(d []byte) error { return b.LogData(d, nil) },
				commit:      func() error { return b.Commit(pebble1.NoSync) },
			}
		},
		flush: db.Flush,
	}
}

// setN writes keys from..to-1 with values of vlen bytes, per keys a batch.
func setN(t *testing.T, w writer, from, to, per, vlen int) {
	t.Helper()
	b, pending := w.batch(), 0
	for i := from; i < to; i++ {
		if err := b.set([]byte(fmt.Sprintf("key%08d", i)), val(vlen)); err != nil {
			t.Fatal(err)
		}
		if pending++; pending == per {
			if err := b.commit(); err != nil {
				t.Fatal(err)
			}
			b, pending = w.batch(), 0
		}
	}
	if pending > 0 {
		if err := b.commit(); err != nil {
			t.Fatal(err)
		}
	}
}

// Several memtables, each its own log (small memtable, automatic flushes
// racing the writes); Close does not flush.
func TestUnflushedSeveralLiveLogsV2(t *testing.T) {
	dir := t.TempDir()
	db := openV2(t, dir, &pebble.Options{MemTableSize: 256 << 10, MemTableStopWritesThreshold: 8, L0StopWritesThreshold: 1000})
	setN(t, writerV2(db), 0, 40000, 10, 100)
	db.Close()
	checkAgainstReplay(t, dir, false)
}

// Flushes disabled: many live logs.
func TestUnflushedFlushesDisabledV2(t *testing.T) {
	dir := t.TempDir()
	o := &pebble.Options{MemTableSize: 256 << 10, MemTableStopWritesThreshold: 100, L0StopWritesThreshold: 1000}
	o.DisableAutomaticCompactions = true
	db := openV2(t, dir, o)
	// Less than the stop threshold of memtables: every one still queued.
	setN(t, writerV2(db), 0, 20000, 100, 100)
	db.Close()
	checkAgainstReplay(t, dir, false)
}

// A store reopened: its logs replayed (and flushed), then more written.
func TestUnflushedReopenedV2(t *testing.T) {
	dir := t.TempDir()
	for r := 0; r < 4; r++ {
		db := openV2(t, dir, &pebble.Options{MemTableSize: 256 << 10})
		setN(t, writerV2(db), r*5000, r*5000+5000, 7, 50)
		if r == 1 {
			db.Flush()
			setN(t, writerV2(db), 100000, 100010, 1, 50)
		}
		db.Close()
	}
	checkAgainstReplay(t, dir, false)
}

// Huge batches spanning many record blocks, bigger than the memtable
// (flushable batches), among small ones.
func TestUnflushedHugeBatchesV2(t *testing.T) {
	dir := t.TempDir()
	db := openV2(t, dir, &pebble.Options{MemTableSize: 64 << 20})
	setN(t, writerV2(db), 0, 100, 100, 10)
	setN(t, writerV2(db), 1000, 1400, 400, 10000) // 4 MB batch
	setN(t, writerV2(db), 2000, 2010, 1, 10)
	setN(t, writerV2(db), 3000, 3100, 100, 60000)
	db.Close()
	checkAgainstReplay(t, dir, false)
}

// Range deletions, range keys, deletes, merges, single deletes, LogData.
func TestUnflushedKindsV2(t *testing.T) {
	dir := t.TempDir()
	o := &pebble.Options{FormatMajorVersion: pebble.FormatNewest}
	db := openV2(t, dir, o)
	setN(t, writerV2(db), 0, 100, 10, 10)
	b := db.NewBatch()
	b.DeleteRange([]byte("key00000010"), []byte("key00000020"), nil)
	b.Delete([]byte("key00000001"), nil)
	b.SingleDelete([]byte("key00000002"), nil)
	b.RangeKeySet([]byte("a"), []byte("b"), nil, []byte("x"), nil)
	b.RangeKeyUnset([]byte("a"), []byte("b"), nil, nil)
	b.RangeKeyDelete([]byte("c"), []byte("d"), nil)
	b.LogData([]byte("hello"), nil)
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	// A batch of LogData only.
	b = db.NewBatch()
	b.LogData([]byte("only log data"), nil)
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	db.Close()
	checkAgainstReplay(t, dir, false)
}

// Ingest of a table overlapping the memtable: a flushable ingest, written
// to the log as a batch whose count is the number of tables.
func TestUnflushedIngestV2(t *testing.T) {
	dir := t.TempDir()
	db := openV2(t, dir, &pebble.Options{FormatMajorVersion: pebble.FormatNewest})
	setN(t, writerV2(db), 0, 1000, 10, 10)
	ext := filepath.Join(t.TempDir(), "ext.sst")
	writeSST(t, ext, 0, 500)
	ext2 := filepath.Join(t.TempDir(), "ext2.sst")
	writeSST(t, ext2, 600, 900)
	if err := db.Ingest(t.Context(), []string{ext, ext2}); err != nil {
		t.Fatal(err)
	}
	setN(t, writerV2(db), 5000, 5010, 10, 10)
	db.Close()
	// Pebble's replay counts the ingestion's two tables as two keys of one
	// batch; ReadUnflushed counts it as an ingestion, not as writes.
	u, err := ReadUnflushed(dir)
	keys, batches, _ := replayV2(t, dir)
	if err != nil || u == nil || u.Ingests != 1 || u.Writes != keys-2 || u.Batches != batches-1 {
		t.Errorf("unflushed %+v, %v; Pebble replays %d keys in %d batches", u, err, keys, batches)
	}
}

func writeSST(t *testing.T, path string, from, to int) {
	t.Helper()
	f, err := vfs.Default.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(f), sstable.WriterOptions{TableFormat: sstable.TableFormatPebblev4})
	for i := from; i < to; i++ {
		if err := w.Set([]byte(fmt.Sprintf("key%08d", i)), []byte("ingested")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func openV1(t *testing.T, dir string, o *pebble1.Options) *pebble1.DB {
	t.Helper()
	if o == nil {
		o = &pebble1.Options{}
	}
	o.Logger = &capLogger{}
	db, err := pebble1.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestUnflushedV1Formats(t *testing.T) {
	race.SkipLong(t)
	for _, fmv := range []pebble1.FormatMajorVersion{pebble1.FormatMostCompatible, pebble1.FormatVersioned, pebble1.FormatSetWithDelete,
		pebble1.FormatBlockPropertyCollector, pebble1.FormatSplitUserKeysMarkedCompacted, pebble1.FormatRangeKeys,
		pebble1.FormatMinTableFormatPebblev1, pebble1.FormatPrePebblev1Marked, pebble1.FormatSSTableValueBlocks,
		pebble1.FormatFlushableIngest, pebble1.FormatPrePebblev1MarkedCompacted, pebble1.FormatDeleteSizedAndObsolete, pebble1.FormatVirtualSSTables, pebble1.FormatNewest} {
		t.Run(fmt.Sprint(fmv), func(t *testing.T) {
			dir := t.TempDir()
			db := openV1(t, dir, &pebble1.Options{FormatMajorVersion: fmv, MemTableSize: 256 << 10, MemTableStopWritesThreshold: 8, L0StopWritesThreshold: 1000})
			setN(t, writerV1(db), 0, 3000, 10, 100)
			db.Flush()
			setN(t, writerV1(db), 3000, 3500, 10, 100)
			db.Flush()
			setN(t, writerV1(db), 10000, 30000, 7, 100)
			if fmv >= pebble1.FormatRangeKeys {
				b := db.NewBatch()
				b.RangeKeySet([]byte("a"), []byte("b"), nil, []byte("x"), nil)
				b.DeleteRange([]byte("key00000010"), []byte("key00000020"), nil)
				b.Commit(pebble1.NoSync)
			}
			db.Close()
			checkAgainstReplay(t, dir, true)
		})
	}
}
