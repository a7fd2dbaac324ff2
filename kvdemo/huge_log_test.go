package kvdemo

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The huge-log tests run Check and Open+Get in a child process (this test
// binary again, selected by these variables), which reports its own peak
// resident memory (VmHWM of its address space). The rusage of a waited
// child is no measure: Linux carries the peak of the address space the
// child was forked from into it at exec, so it reports the parent's peak
// if that is higher.
const (
	envHugeLogDir = "KVDEMO_HUGELOG_CHILD_DIR"
	envHugeLogOp  = "KVDEMO_HUGELOG_CHILD_OP" // "check" or "get"
	hugeLogKeys   = 300
	// hugeLogRSS bounds the child's peak resident memory: the runtime,
	// the race detector's shadow memory when on, a memtable and a log
	// window, far below the size of the logs.
	hugeLogRSS = 300 << 20
)

func hugeLogKey(i int) string { return fmt.Sprintf("huge-%04d", i) }

// TestHugeLogChild is the child's side; it does nothing in a normal run.
func TestHugeLogChild(t *testing.T) {
	dir := os.Getenv(envHugeLogDir)
	if dir == "" {
		t.Skip("only run as the huge-log test's child")
	}
	defer func() {
		status, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				fmt.Printf("PEAK %s\n", strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			}
		}
	}()
	switch os.Getenv(envHugeLogOp) {
	case "check":
		res, err := Check(dir, os.Stdout, nil)
		fmt.Printf("RESULT problems=%d err=%v\n", res.Problems, err)
	case "get":
		db, err := Open(dir, &Options{Logger: quiet()})
		if err != nil {
			fmt.Printf("RESULT open: %v\n", err)
			return
		}
		missing := 0
		for i := range hugeLogKeys {
			if v, err := db.Get([]byte(hugeLogKey(i))); err != nil || string(v) != crashValue(hugeLogKey(i)) {
				missing++
			}
		}
		fmt.Printf("RESULT missing=%d close=%v\n", missing, db.Close())
	}
}

// runHugeLogChild runs op on the store in dir in a child process and
// returns its RESULT line and its peak resident memory in bytes.
func runHugeLogChild(t *testing.T, dir, op string) (string, int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHugeLogChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), envHugeLogDir+"="+dir, envHugeLogOp+"="+op)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("child %s: %v\n%s", op, err, out.String())
	}
	var res string
	peak := int64(-1)
	for _, l := range strings.Split(out.String(), "\n") {
		if r, ok := strings.CutPrefix(l, "RESULT "); ok {
			res = r
		}
		if p, ok := strings.CutPrefix(l, "PEAK "); ok {
			kb, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				t.Fatalf("child %s: peak %q: %v", op, p, err)
			}
			peak = kb << 10
		}
	}
	if res == "" {
		t.Fatalf("child %s said no RESULT:\n%s", op, out.String())
	}
	if peak < 0 {
		t.Skip("the child cannot read its peak resident memory on this system (no /proc/self/status)")
	}
	return res, peak
}

// storeWithAckedLog makes a store whose newest log holds hugeLogKeys
// acknowledged writes (closed cleanly, nothing flushed) and returns the
// log's path and length.
func storeWithAckedLog(t *testing.T) (dir, log string, size int64) {
	t.Helper()
	dir = t.TempDir()
	db, err := Open(dir, &Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range hugeLogKeys {
		if err := db.Put([]byte(hugeLogKey(i)), []byte(crashValue(hugeLogKey(i)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*."+extLog))
	if len(logs) == 0 {
		t.Fatal("setup: no log")
	}
	log = logs[len(logs)-1]
	st, err := os.Stat(log)
	if err != nil || st.Size() == 0 {
		t.Fatalf("setup: log %s: %v, %v", log, st, err)
	}
	return dir, log, st.Size()
}

// diskBytes is the disk space a file takes (its allocated blocks).
func diskBytes(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Blocks * 512
}

// keptTail is the one torn tail Open kept in lost/.
func keptTail(t *testing.T, dir string) string {
	t.Helper()
	kept, _ := filepath.Glob(filepath.Join(dir, lostDir, "*.tail-at-*"))
	if len(kept) != 1 {
		t.Fatalf("lost/ holds %d torn tails, want 1: %v", len(kept), kept)
	}
	return kept[0]
}

// TestHugeSparseLogBoundedMemory: a log grown to 3 GiB by a sparse tail
// of zeros (truncate -s), as an operator or a filesystem may leave it.
// Check and Open+Get each run in a few hundred MiB at most, not the log's
// size; check reports the torn tail without calling it damage; Open keeps
// the tail in lost/ byte for byte, yet as a hole, not 3 GiB of disk, cuts
// it off, and serves every acknowledged write.
func TestHugeSparseLogBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir, log, size := storeWithAckedLog(t)
	const huge = 3 << 30
	if err := os.Truncate(log, huge); err != nil {
		t.Fatal(err)
	}
	if used := diskBytes(t, log); used > 16<<20 {
		t.Skipf("the filesystem of %s made the 3 GiB log take %d bytes: no sparse files here", dir, used)
	}

	res, rss := runHugeLogChild(t, dir, "check")
	t.Logf("check: %s, peak RSS %d MiB", res, rss>>20)
	if res != "problems=0 err=<nil>" {
		t.Fatalf("check of a log with a sparse torn tail: %s", res)
	}
	if rss > hugeLogRSS {
		t.Errorf("check of a 3 GiB log peaked at %d MiB of memory", rss>>20)
	}

	res, rss = runHugeLogChild(t, dir, "get")
	t.Logf("open+get: %s, peak RSS %d MiB", res, rss>>20)
	if res != "missing=0 close=<nil>" {
		t.Fatalf("open and get over a log with a sparse torn tail: %s", res)
	}
	if rss > hugeLogRSS {
		t.Errorf("open and get over a 3 GiB log peaked at %d MiB of memory", rss>>20)
	}

	tail := keptTail(t, dir)
	if st, err := os.Stat(tail); err != nil || st.Size() != huge-size {
		t.Fatalf("kept tail %s: %v, %v; want %d bytes", tail, st, err, huge-size)
	}
	if used := diskBytes(t, tail); used > 1<<20 {
		t.Errorf("the kept tail of zeros takes %d bytes of disk", used)
	}
	if st, err := os.Stat(log); err != nil || st.Size() != size {
		t.Errorf("log after Open: %v, %v; want it cut back to %d bytes", st, err, size)
	}
	mustCheckClean(t, dir, "after Open cut the tail")
}

// TestTornTailGarbageKeptExactly: a torn tail of nonzero garbage, and one
// of garbage around a 1 GiB hole, are kept in lost/ byte for byte (the
// hole as a hole), and the log is cut where the garbage began.
func TestTornTailGarbageKeptExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 27))
	garbage := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32() | 1) // never zero: nothing to leave as a hole
		}
		return b
	}
	for _, hole := range []int64{0, 1 << 30} {
		t.Run(fmt.Sprintf("hole=%d", hole), func(t *testing.T) {
			dir, log, size := storeWithAckedLog(t)
			head, end := garbage(10_000), garbage(5_000)
			f, err := os.OpenFile(log, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(head)
			if hole > 0 {
				if err := f.Truncate(size + int64(len(head)) + hole); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := f.Write(end); err != nil { // O_APPEND: after the hole
				t.Fatal(err)
			}
			f.Close()
			tailLen := int64(len(head)) + hole + int64(len(end))

			var out bytes.Buffer
			if res, err := Check(dir, &out, nil); err != nil || res.Problems != 0 || !strings.Contains(out.String(), "torn tail") {
				t.Fatalf("check: %+v, %v:\n%s", res, err, out.String())
			}
			db, err := Open(dir, &Options{Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			for i := range hugeLogKeys {
				if v, err := db.Get([]byte(hugeLogKey(i))); err != nil || string(v) != crashValue(hugeLogKey(i)) {
					t.Fatalf("acknowledged %s: %q, %v", hugeLogKey(i), v, err)
				}
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			tail := keptTail(t, dir)
			kf, err := os.Open(tail)
			if err != nil {
				t.Fatal(err)
			}
			defer kf.Close()
			if st, _ := kf.Stat(); st.Size() != tailLen {
				t.Fatalf("kept tail is %d bytes, want %d", st.Size(), tailLen)
			}
			gotHead := make([]byte, len(head))
			gotEnd := make([]byte, len(end))
			kf.ReadAt(gotHead, 0)
			kf.ReadAt(gotEnd, tailLen-int64(len(end)))
			if !bytes.Equal(gotHead, head) || !bytes.Equal(gotEnd, end) {
				t.Fatal("the kept tail's garbage differs from the log's")
			}
			// Every byte between reads as the zeros the log held there
			// (holes are zeros: only what is not a hole is read).
			buf := make([]byte, 1<<20)
			for off, stop := int64(len(head)), tailLen-int64(len(end)); off < stop; {
				d, ok := seekData(kf, off)
				if !ok || d >= stop {
					break
				}
				n, err := kf.ReadAt(buf[:min(int64(len(buf)), stop-d)], d)
				if err != nil && err != io.EOF {
					t.Fatal(err)
				}
				if firstNonZero(buf[:n]) >= 0 {
					t.Fatalf("kept tail holds data at %d where the log held zeros", d)
				}
				off = d + int64(n)
			}
			if used := diskBytes(t, tail); used > 1<<20 {
				t.Errorf("the kept tail of %d bytes with a %d-byte hole takes %d bytes of disk", tailLen, hole, used)
			}
			if st, err := os.Stat(log); err != nil || st.Size() != size {
				t.Errorf("log after Open: %v, %v; want it cut back to %d bytes", st, err, size)
			}
			mustCheckClean(t, dir, "after Open cut the tail")
		})
	}
}
