package errorfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// TestCrashDropsWhatIsNotDurable: data written after the last fsync is
// cut, a file created without a directory fsync vanishes, a rename without
// one is undone (the replaced file's old content comes back), and what was
// made durable stays.
func TestCrashDropsWhatIsNotDurable(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default)
	p := func(n string) string { return filepath.Join(dir, n) }

	os.WriteFile(p("target"), []byte("old"), 0o644)
	f, _ := fs.Create(p("log"))
	f.Write([]byte("durable"))
	f.Sync()
	fs.SyncDir(dir)
	f.Write([]byte("-lost"))

	g, _ := fs.Create(p("new"))
	g.Write([]byte("x"))
	g.Sync() // data synced, directory entry not

	h, _ := fs.Create(p("tmp"))
	h.Write([]byte("replacement"))
	h.Sync()
	fs.Rename(p("tmp"), p("target")) // not made durable

	if err := fs.Crash(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p("log")); string(b) != "durable" {
		t.Errorf("log after crash: %q", b)
	}
	if _, err := os.Stat(p("new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file whose directory entry was never synced survived: %v", err)
	}
	if b, _ := os.ReadFile(p("target")); string(b) != "old" {
		t.Errorf("an unsynced rename survived: %q", b)
	}
	if _, err := fs.Create(p("after")); !errors.Is(err, ErrCrashed) {
		t.Errorf("operation after a crash: %v", err)
	}
}

// TestRulesAndSpace: a rule fails the chosen operation once after Skip;
// a short failing write leaves half its buffer; a space limit writes what
// fits and returns ENOSPC; a read rule flips one bit at its offset.
func TestRulesAndSpace(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default)
	name := filepath.Join(dir, "f")
	f, _ := fs.Create(name)
	fs.Add(&Rule{Op: OpWrite, Skip: 1, Times: 1, Short: true, Err: ENOSPC})
	if _, err := f.Write([]byte("aaaa")); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Write([]byte("bbbb")); n != 2 || !errors.Is(err, ENOSPC) {
		t.Fatalf("short failing write: %d, %v", n, err)
	}
	if _, err := f.Write([]byte("cc")); err != nil {
		t.Fatalf("the rule fired twice: %v", err)
	}
	fs.SetSpace(3)
	if n, err := f.Write([]byte("dddd")); n != 3 || !errors.Is(err, ENOSPC) {
		t.Fatalf("write past the space limit: %d, %v", n, err)
	}
	if _, err := f.Write([]byte("e")); !errors.Is(err, ENOSPC) {
		t.Fatalf("write on a full disk: %v", err)
	}
	fs.SetSpace(-1)
	f.Close()
	want := []byte("aaaabbccddd")
	if b, _ := os.ReadFile(name); !bytes.Equal(b, want) {
		t.Fatalf("file %q, want %q", b, want)
	}
	fs.Add(&Rule{Op: OpRead, FlipAt: 5})
	got, err := vfs.ReadFile(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	want[5] ^= 1
	if !bytes.Equal(got, want) {
		t.Errorf("read %q, want %q", got, want)
	}
}

// TestCrashRule: a rule can crash the FS just before the Nth operation of
// a kind; OnFire sees what was durable then; reads can fail too.
func TestCrashRule(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default)
	name := filepath.Join(dir, "f")
	f, _ := fs.Create(name)
	if err := fs.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("durable"))
	f.Sync()
	var sawDurable int64 = -1
	fs.Add(&Rule{Op: OpSync, Crash: true, OnFire: func(durable func(string) (int64, bool)) {
		n, ok := durable(name)
		if !ok {
			t.Errorf("a file whose creation was fsynced is reported not durable")
		}
		sawDurable = n
	}})
	if _, err := f.Write([]byte(" lost")); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); !errors.Is(err, ErrCrashed) {
		t.Fatalf("the fsync the rule crashes at: %v", err)
	}
	if !fs.Crashed() || sawDurable != int64(len("durable")) {
		t.Fatalf("crashed %v, durable length seen %d", fs.Crashed(), sawDurable)
	}
	if b, _ := os.ReadFile(name); string(b) != "durable" {
		t.Fatalf("after the crash the file holds %q", b)
	}

	fs = New(vfs.Default)
	fs.Add(&Rule{Op: OpRead, Err: EIO})
	if _, err := vfs.ReadFile(fs, name); !errors.Is(err, EIO) {
		t.Fatalf("a failing read rule: %v", err)
	}
}

// TestDeferRemoves: a removal not made durable by a directory fsync is
// undone by a crash, with the file's durable content; one that was made
// durable is not.
func TestDeferRemoves(t *testing.T) {
	dir := t.TempDir()
	fs := New(vfs.Default)
	fs.DeferRemoves()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, name := range []string{a, b} {
		f, _ := fs.Create(name)
		f.Write([]byte("durable"))
		f.Sync()
		f.Write([]byte(" not"))
		f.Close()
	}
	fs.SyncDir(dir)
	if err := fs.Remove(a); err != nil {
		t.Fatal(err)
	}
	fs.SyncDir(dir)
	if err := fs.Remove(b); err != nil {
		t.Fatal(err)
	}
	fs.Crash()
	if _, err := os.Stat(a); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a removal made durable was undone: %v", err)
	}
	if got, _ := os.ReadFile(b); string(got) != "durable" {
		t.Errorf("a removal not made durable: after the crash the file holds %q, want %q", got, "durable")
	}
}

// TestCrashUndoesUnsyncedTruncate: a truncation is durable only once the
// file is fsynced after it. A crash before that brings the cut bytes back,
// then treats them like any unsynced data (dropped past the last fsync's
// length, or half kept by a torn crash); after the fsync, the cut stays.
func TestCrashUndoesUnsyncedTruncate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		syncAfter bool
		torn      bool
		want      string
	}{
		{"synced", true, true, "durable"},
		{"plain crash", false, false, "durable"},   // the cut bytes were never synced
		{"torn crash", false, true, "durable-uns"}, // half of "-unsynced" comes back
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := New(vfs.Default)
			path := filepath.Join(dir, "log")
			f, _ := fs.Create(path)
			f.Write([]byte("durable"))
			f.Sync()
			fs.SyncDir(dir)
			f.Write([]byte("-unsynced"))
			if err := f.Truncate(int64(len("durable"))); err != nil {
				t.Fatal(err)
			}
			if tc.syncAfter {
				f.Sync()
			}
			crash := fs.Crash
			if tc.torn {
				crash = fs.CrashTorn
			}
			if err := crash(); err != nil {
				t.Fatal(err)
			}
			if b, _ := os.ReadFile(path); string(b) != tc.want {
				t.Errorf("after the crash: %q, want %q", b, tc.want)
			}
		})
	}
	// A cut into what was durable comes back whole without an fsync.
	dir := t.TempDir()
	fs := New(vfs.Default)
	path := filepath.Join(dir, "log")
	f, _ := fs.Create(path)
	f.Write([]byte("all-durable"))
	f.Sync()
	fs.SyncDir(dir)
	f.Truncate(3)
	fs.Crash()
	if b, _ := os.ReadFile(path); string(b) != "all-durable" {
		t.Errorf("an unsynced cut into durable data survived the crash: %q", b)
	}
}

// TestCrashUndoesUnsyncedMkdir: a directory MkdirAll created vanishes in
// a crash, with what it holds, unless its parent was fsynced; one that
// was there before stays.
func TestCrashUndoesUnsyncedMkdir(t *testing.T) {
	for _, syncParent := range []bool{false, true} {
		dir := t.TempDir()
		fs := New(vfs.Default)
		sub := filepath.Join(dir, "lost")
		if err := fs.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		f, _ := fs.Create(filepath.Join(sub, "kept"))
		f.Write([]byte("x"))
		f.Sync()
		fs.SyncDir(sub)
		if syncParent {
			fs.SyncDir(dir)
		}
		fs.MkdirAll(dir, 0o755) // there already: nothing to undo
		if err := fs.Crash(); err != nil {
			t.Fatal(err)
		}
		_, err := os.Stat(filepath.Join(sub, "kept"))
		if syncParent && err != nil {
			t.Errorf("a file in a directory made durable vanished: %v", err)
		}
		if !syncParent && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a directory whose parent was never fsynced survived the crash: %v", err)
		}
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("a directory that was there before vanished: %v", err)
		}
	}
}
