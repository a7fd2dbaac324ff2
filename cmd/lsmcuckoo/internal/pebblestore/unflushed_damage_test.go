package pebblestore

import (
	"bytes"
	"github.com/lsmcuckoo/lsmcuckoo/internal/race"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
)

// A huge log (here a sparse file numbered above the live one, or a live
// log followed by a terabyte of zeros): Pebble's record reader reads to
// the end of a file on a zeroed chunk, to tell damage from a torn write;
// the count reads at most a few blocks past its last record, so that
// inspect's time does not grow with the file.
func TestUnflushedHugeLogReadBounded(t *testing.T) {
	dir := t.TempDir()
	unflushedStore(t, dir, func(db *pebble.DB, write func(int, int)) { write(0, 200) })
	u, err := ReadUnflushed(dir)
	if err != nil || u == nil || u.Writes != 200 {
		t.Fatalf("%+v, %v", u, err)
	}
	live, err := os.ReadFile(filepath.Join(dir, u.Logs[0]))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.ParseUint(strings.TrimSuffix(u.Logs[0], ".log"), 10, 64)
	r := &countingReader{r: io.MultiReader(bytes.NewReader(live), zeros{})}
	c := countRecords(r, n)
	if c.writes != 200 || r.n > int64(len(live))+3*logBlock {
		t.Errorf("%+v after reading %d bytes of a %d-byte log and zeros", c, r.n, len(live))
	}
	f, err := os.Create(filepath.Join(dir, "999999.log"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 30); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	f.Close()
	if v, err := ReadUnflushed(dir); err != nil || v == nil || v.Writes != 200 {
		t.Errorf("beside a 64 GiB sparse log: %+v, %v", v, err)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Random damage to the manifest and the logs: never a panic, never an
// error; and a damaged manifest is read as Pebble reads it.
func TestUnflushedDamageNoPanic(t *testing.T) {
	race.SkipLong(t)
	dir := t.TempDir()
	unflushedStore(t, dir, func(db *pebble.DB, write func(int, int)) {
		for r := 0; r < 5; r++ {
			write(r*1000, r*1000+1000)
			db.Flush()
		}
		write(9000, 9500)
	})
	name, _ := CurrentManifest(dir)
	ents, _ := os.ReadDir(dir)
	var files []string
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".log" || e.Name() == name {
			files = append(files, e.Name())
		}
	}
	orig := map[string][]byte{}
	for _, f := range files {
		orig[f], _ = os.ReadFile(filepath.Join(dir, f))
	}
	rng := uint64(12345)
	next := func(n int) int {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return int(rng % uint64(n))
	}
	for iter := 0; iter < 3000; iter++ {
		f := files[next(len(files))]
		b := append([]byte(nil), orig[f]...)
		switch next(3) {
		case 0:
			if len(b) > 0 {
				b = b[:next(len(b))]
			}
		case 1:
			for k := 0; k < 1+next(4); k++ {
				if len(b) > 0 {
					b[next(len(b))] ^= byte(1 + next(255))
				}
			}
		case 2:
			if len(b) > 0 {
				i := next(len(b))
				for j := i; j < len(b) && j < i+100; j++ {
					b[j] = byte(next(256))
				}
			}
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("panic on damaged %s: %v", f, p)
				}
			}()
			if _, err := ReadUnflushed(dir); err != nil {
				t.Errorf("damaged %s: %v", f, err)
			}
		}()
		os.WriteFile(filepath.Join(dir, f), orig[f], 0o644)
	}
}

// A live log that is a symlink (an operator moved it to another disk):
// Pebble follows it and replays its writes, and ReadUnflushed counts them.
func TestUnflushedSymlinkedLog(t *testing.T) {
	dir := t.TempDir()
	unflushedStore(t, dir, func(db *pebble.DB, write func(int, int)) { write(0, 500) })
	u, err := ReadUnflushed(dir)
	if err != nil || u == nil {
		t.Fatalf("%+v %v", u, err)
	}
	live := filepath.Join(dir, u.Logs[0])
	elsewhere := filepath.Join(t.TempDir(), u.Logs[0])
	b, _ := os.ReadFile(live)
	os.WriteFile(elsewhere, b, 0o644)
	os.Remove(live)
	if err := os.Symlink(elsewhere, live); err != nil {
		t.Fatal(err)
	}
	v, err := ReadUnflushed(dir)
	db, err2 := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: &capLogger{}})
	var n int
	if err2 == nil {
		it, _ := db.NewIter(nil)
		for it.First(); it.Valid(); it.Next() {
			n++
		}
		it.Close()
		db.Close()
	}
	t.Logf("inspect %+v %v; Pebble read-only open sees %d keys (%v)", v, err, n, err2)
	if v == nil || v.Writes != 500 {
		t.Errorf("symlinked live log: inspect counts %+v; Pebble replays its %d keys", v, n)
	}
}

// appendEdit rewrites the store's manifest with one more record, edit.
func appendEdit(t *testing.T, dir string, edit []byte) {
	t.Helper()
	name, err := CurrentManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs [][]byte
	rr := record.NewReader(f, 0)
	for {
		r, err := rr.Next()
		if err != nil {
			break
		}
		b, err := io.ReadAll(r)
		if err != nil {
			break
		}
		recs = append(recs, b)
	}
	f.Close()
	var buf bytes.Buffer
	w := record.NewWriter(&buf)
	for _, b := range append(recs, edit) {
		ww, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		ww.Write(b)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A version edit whose log number is 0 (Pebble never writes one; its
// decoder ignores it: "if ve.MinUnflushedLogNum != 0"): taken for the
// oldest unflushed log, it would count every obsolete log kept to recycle,
// whose writes are in tables. It is ignored, as Pebble ignores it.
func TestUnflushedManifestLogNumberZero(t *testing.T) {
	dir := t.TempDir()
	unflushedStore(t, dir, func(db *pebble.DB, write func(int, int)) {
		for r := 0; r < 3; r++ {
			write(r*1000, r*1000+1000)
			db.Flush()
		}
		write(9000, 9100)
	})
	before, _ := ReadUnflushed(dir)
	appendEdit(t, dir, []byte{2, 0}) // tag 2 (log number) = 0
	after, err := ReadUnflushed(dir)
	keys, batches, _ := replayV2(t, dir)
	t.Logf("logs %s; before %+v; after %+v %v; Pebble replays %d keys in %d batches", logsIn(dir), before, after, err, keys, batches)
	if after == nil || after.Writes != keys {
		t.Errorf("log number 0 in the manifest: inspect counts %+v, Pebble replays %d keys", after, keys)
	}
}

// Garbage log numbers Pebble accepts: a huge one (Pebble replays no log).
func TestUnflushedManifestLogNumberHuge(t *testing.T) {
	dir := t.TempDir()
	unflushedStore(t, dir, func(db *pebble.DB, write func(int, int)) { write(0, 100) })
	appendEdit(t, dir, []byte{2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	after, err := ReadUnflushed(dir)
	keys, batches, _ := replayV2(t, dir)
	t.Logf("after %+v %v; Pebble replays %d keys in %d batches", after, err, keys, batches)
	if err != nil || after != nil || keys != 0 {
		t.Errorf("a log number past every log: %+v, %v; Pebble replays %d keys", after, err, keys)
	}
}
