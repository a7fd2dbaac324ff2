package kvdemo

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// TestLockRemovedLockFileKeepsSecondWriterOut: with the store open, its
// LOCK file removed ("cleaning up a stale lock"), a second Open is still
// refused (the directory is locked), the first process writes on, and it
// takes a new LOCK at its next log.
func TestLockRemovedLockFileKeepsSecondWriterOut(t *testing.T) {
	dir := t.TempDir()
	a := open(t, dir, Options{})
	defer a.Close()
	mustPut(t, a, []byte("k1"), []byte("from-a"))
	if err := os.Remove(filepath.Join(dir, lockName)); err != nil {
		t.Fatal(err)
	}
	if b, err := Open(dir, &Options{Logger: quiet()}); !errors.Is(err, ErrLocked) {
		if err == nil {
			b.Close()
		}
		t.Fatalf("second Open after rm LOCK: %v, want ErrLocked", err)
	}
	if _, err := Check(dir, io.Discard, nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("Check of the open store: %v, want ErrLocked", err)
	}
	mustPut(t, a, []byte("k3"), []byte("from-a"))
	if err := a.Flush(); err != nil { // a new log: the lock is checked
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, lockName)); err != nil || a.lock.replaced.Load() != 1 {
		t.Fatalf("LOCK after the first log switch: %v, taken again %d times; want it back, once", err, a.lock.replaced.Load())
	}
	mustPut(t, a, []byte("k4"), []byte("from-a"))
	if got, err := a.Get([]byte("k4")); err != nil || string(got) != "from-a" {
		t.Fatalf("k4: %q, %v", got, err)
	}
}

// TestLockTakenByAnOlderReleaseStopsWrites: a process that locks only
// the LOCK file (as earlier kvdemo releases do) takes a new one after it
// was removed: the store cannot take it back, so it stops writing at its
// next log, saying why, and keeps serving reads.
func TestLockTakenByAnOlderReleaseStopsWrites(t *testing.T) {
	dir := t.TempDir()
	db := open(t, dir, Options{})
	defer db.Close()
	mustPut(t, db, []byte("k1"), []byte("v1"))
	path := filepath.Join(dir, lockName)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	older, err := vfs.Default.Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close()
	if err := db.Flush(); !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), "another process holds the new one") {
		t.Fatalf("Flush (a new log) with LOCK held by another: %v", err)
	}
	if err := db.Put([]byte("k2"), []byte("v2")); !errors.Is(err, ErrNotStored) || !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Put: %v; want refused", err)
	}
	if got, err := db.Get([]byte("k1")); err != nil || string(got) != "v1" {
		t.Fatalf("k1: %q, %v", got, err)
	}
}

// noDirLockFS is a filesystem that cannot lock directories (flock on a
// directory fails as on some network filesystems): the lock file alone
// then keeps writers apart, checked before every write.
type noDirLockFS struct{ vfs.FS }

func (f noDirLockFS) Lock(name string) (io.Closer, error) {
	if fi, err := os.Stat(name); err == nil && fi.IsDir() {
		return nil, &os.PathError{Op: "flock", Path: name, Err: syscall.EINVAL}
	}
	return f.FS.Lock(name)
}

// TestLockLostWithoutDirectoryLockStopsWrites: where the directory
// cannot be locked, a process that finds its LOCK removed and another
// process's writes in the store (or the new LOCK held) stops writing,
// before its next record could go over the other's: every write the
// other process acknowledged survives.
func TestLockLostWithoutDirectoryLockStopsWrites(t *testing.T) {
	for _, otherCloses := range []bool{true, false} {
		t.Run(fmt.Sprintf("other closes %v", otherCloses), func(t *testing.T) {
			dir := t.TempDir()
			fsys := noDirLockFS{vfs.Default}
			a := open(t, dir, Options{FS: fsys})
			mustPut(t, a, []byte("k1"), []byte("from-a"))
			if err := os.Remove(filepath.Join(dir, lockName)); err != nil {
				t.Fatal(err)
			}
			b := open(t, dir, Options{FS: fsys})
			mustPut(t, b, []byte("k2"), []byte("from-b, longer than a's"))
			if otherCloses {
				if err := b.Close(); err != nil {
					t.Fatal(err)
				}
			}
			err := a.Put([]byte("k3"), []byte("from-a"))
			if !errors.Is(err, ErrNotStored) || !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), lockName) {
				t.Fatalf("a's write after another process wrote: %v; want it refused (not stored, read-only, naming LOCK)", err)
			}
			if got, err := a.Get([]byte("k1")); err != nil || string(got) != "from-a" {
				t.Fatalf("a's reads go on: k1 %q, %v", got, err)
			}
			a.Close()
			if !otherCloses {
				mustPut(t, b, []byte("k5"), []byte("from-b"))
				b.Close()
			}
			c := open(t, dir, Options{})
			defer c.Close()
			if got, err := c.Get([]byte("k2")); err != nil || string(got) != "from-b, longer than a's" {
				t.Fatalf("k2 acknowledged to the other process: %q, %v", got, err)
			}
			if _, err := c.Get([]byte("k3")); !errors.Is(err, ErrNotFound) {
				t.Fatalf("k3, refused: %v", err)
			}
		})
	}
}

// TestLockRemovedRealProcesses is the report's sequence with the kvdemo
// binary: serve A, SET, rm LOCK, kvdemo put from the command line, SET,
// kill A. The put (and a second serve) must be refused, never
// acknowledged and then overwritten; check then finds the store clean.
func TestLockRemovedRealProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the kvdemo binary")
	}
	bin := buildKvdemo(t)
	dir := t.TempDir()
	a, addr := startKvdemoServe(t, bin, dir)
	set := func(k, v string) {
		t.Helper()
		if got, err := respSet(addr, k, v); err != nil || got != "+OK" {
			t.Fatalf("SET %s: %q, %v", k, got, err)
		}
	}
	set("k1", "from-A")
	if err := os.Remove(filepath.Join(dir, lockName)); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "put", "-dir", dir, "k2", "from-cli").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use") {
		t.Fatalf("kvdemo put while serve has the store (LOCK removed): %v\n%s", err, out)
	}
	second := exec.Command(bin, "serve", "-dir", dir, "-addr", "127.0.0.1:0")
	if out, err := second.CombinedOutput(); err == nil || !strings.Contains(string(out), "in use") {
		t.Fatalf("a second serve: %v\n%s", err, out)
	}
	set("k3", "from-A")
	a.Process.Kill()
	a.Wait()
	for k, want := range map[string]string{"k1": "from-A", "k3": "from-A"} {
		out, err := exec.Command(bin, "get", "-dir", dir, k).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != want {
			t.Fatalf("get %s after kill: %v %q", k, err, out)
		}
	}
	if out, err := exec.Command(bin, "check", dir).CombinedOutput(); err != nil || !strings.Contains(string(out), "0 problems") {
		t.Fatalf("check: %v\n%s", err, out)
	}
}

var (
	kvdemoBinOnce sync.Once
	kvdemoBinDir  string
	kvdemoBin     string
	kvdemoBinErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if kvdemoBinDir != "" {
		os.RemoveAll(kvdemoBinDir)
	}
	os.Exit(code)
}

// buildKvdemo builds the kvdemo command once per test binary.
func buildKvdemo(t *testing.T) string {
	t.Helper()
	kvdemoBinOnce.Do(func() {
		kvdemoBinDir, kvdemoBinErr = os.MkdirTemp("", "kvdemo-bin-")
		if kvdemoBinErr != nil {
			return
		}
		kvdemoBin = filepath.Join(kvdemoBinDir, "kvdemo")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			goTool = "go"
		}
		if out, err := exec.Command(goTool, "build", "-o", kvdemoBin, "./cmd/kvdemo").CombinedOutput(); err != nil {
			kvdemoBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if kvdemoBinErr != nil {
		t.Fatal(kvdemoBinErr)
	}
	return kvdemoBin
}

// startKvdemoServe starts kvdemo serve on a loopback port and returns
// the process and its address.
func startKvdemoServe(t *testing.T, bin, dir string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "-dir", dir, "-addr", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &bytes.Buffer{}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-first:
		if !ok || !strings.Contains(l, " on ") {
			t.Fatalf("serve did not start: %q %s", l, cmd.Stderr)
		}
		return cmd, l[strings.LastIndex(l, " ")+1:]
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start in time")
	}
	return nil, ""
}

// respSet sends one SET and returns the reply line.
func respSet(addr, k, v string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(line, "\r\n"), err
}

// TestCheckFindsInterleavedWriters: records of two processes that wrote
// the same store at once (their sequence numbers overlap, within one log
// or from one log to the next) are reported, though each is intact.
func TestCheckFindsInterleavedWriters(t *testing.T) {
	for _, nextLog := range []bool{false, true} {
		t.Run(fmt.Sprintf("next log %v", nextLog), func(t *testing.T) {
			dir := t.TempDir()
			db := open(t, dir, Options{})
			for i := 0; i < 3; i++ {
				k, v := kv(i)
				mustPut(t, db, k, v)
			}
			db.Close()
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			if len(logs) != 1 {
				t.Fatalf("logs %v", logs)
			}
			// The second writer replayed seq 1 and wrote 2 and 3 again.
			other := encodeRecords(
				walRecord{seq: 2, kind: kindPut, key: []byte("other"), value: []byte("x")},
				walRecord{seq: 3, kind: kindDel, key: []byte("other")},
			)
			path := logs[0]
			if nextLog {
				id, _, _ := parseFileName(filepath.Base(logs[0]))
				path = fileName(dir, id+1, extLog)
			}
			f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(other)
			f.Close()
			var out strings.Builder
			res, err := Check(dir, &out, nil)
			if err != nil || res.Problems != 1 || !strings.Contains(out.String(), "two processes wrote the store") {
				t.Fatalf("check: %+v, %v\n%s", res, err, out.String())
			}
		})
	}
}
