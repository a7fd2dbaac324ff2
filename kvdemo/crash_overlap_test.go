package kvdemo

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/errorfs"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// gateFS holds the first Create whose path matches until the test lets it
// go: a way to stop a background flush or compaction at a chosen step.
type gateFS struct {
	vfs.FS
	mu      sync.Mutex
	match   func(path string) bool
	reached chan string
	release chan struct{}
}

func (g *gateFS) Create(name string) (vfs.File, error) {
	g.mu.Lock()
	hit := g.match != nil && g.match(name)
	if hit {
		g.match = nil
	}
	g.mu.Unlock()
	if hit {
		g.reached <- name
		<-g.release
	}
	return g.FS.Create(name)
}

// mustCheckClean runs Check and fails the test unless it found no problem.
func mustCheckClean(t *testing.T, dir, when string) {
	t.Helper()
	var out bytes.Buffer
	res, err := Check(dir, &out, nil)
	if err != nil || res.Problems != 0 {
		t.Fatalf("%s: check: %d problems, %v:\n%s", when, res.Problems, err, out.String())
	}
}

// noTablesInLost fails the test if lost/ holds a table or a filter.
func noTablesInLost(t *testing.T, dir, when string) {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(dir, lostDir))
	for _, e := range entries {
		if strings.Contains(e.Name(), "."+extTable) || strings.Contains(e.Name(), "."+extFilter) {
			t.Fatalf("%s: lost/ holds %s: crash garbage kept as evidence", when, e.Name())
		}
	}
}

// TestCrashDuringOverlappingFlushAndCompaction: a compaction has written
// its table (number C) and is writing its filter when a flush (number
// F > C) finishes and records next_file F+1; then the power goes. C is
// below next_file and named by no manifest, yet it is the leftover of an
// unfinished compaction, not evidence: check must pass, and Open must
// remove it rather than keep it in lost/. Every acknowledged write stays.
func TestCrashDuringOverlappingFlushAndCompaction(t *testing.T) {
	dir := t.TempDir()
	acked := map[string]string{}
	put := func(db *DB, k string) {
		t.Helper()
		v := crashValue(k)
		if err := db.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		acked[k] = v
	}
	db, err := Open(dir, &Options{Filter: FilterCuckoo, MaxTables: 100, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for tbl := 0; tbl < 3; tbl++ {
		for i := 0; i < 200; i++ {
			put(db, fmt.Sprintf("t%d-%04d", tbl, i))
		}
		if err := db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened with MaxTables 2, the store compacts its three tables at
	// once; the compaction stops before writing its filter.
	efs := errorfs.New(vfs.Default)
	gate := &gateFS{FS: efs, reached: make(chan string, 1), release: make(chan struct{}),
		match: func(p string) bool {
			return filepath.Base(filepath.Dir(p)) == tmpDir && strings.HasSuffix(p, "."+extFilter)
		}}
	db, err = Open(dir, &Options{FS: gate, Filter: FilterCuckoo, MaxTables: 2, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	var compaction string
	select {
	case compaction = <-gate.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the compaction never wrote its filter")
	}
	// Meanwhile a flush runs to its end: its edit records a next_file
	// above the compaction's number.
	for i := 0; i < 100; i++ {
		put(db, fmt.Sprintf("f-%04d", i))
	}
	flushed := make(chan error, 1)
	go func() { flushed <- db.Flush() }()
	select {
	case err := <-flushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the flush did not finish while the compaction waited")
	}
	man, err := readManifestFS(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	id, _, _ := parseFileName(filepath.Base(compaction))
	if id >= man.NextFile {
		t.Fatalf("setup: compaction output %06d is not below next_file %d", id, man.NextFile)
	}
	if err := efs.Crash(); err != nil {
		t.Fatal(err)
	}
	close(gate.release)
	db.Close() // fails: the filesystem crashed

	if _, err := os.Stat(fileName(dir, id, extTable)); err != nil {
		t.Fatalf("setup: the compaction's table did not survive the crash: %v", err)
	}
	mustCheckClean(t, dir, "after the crash")
	db, err = Open(dir, &Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range acked {
		if got, err := db.Get([]byte(k)); err != nil || string(got) != v {
			t.Fatalf("acknowledged %s: %q, %v", k, got, err)
		}
	}
	if st := db.Stats(); st.MovedAside != 0 {
		t.Errorf("Open moved %d files to lost/", st.MovedAside)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	noTablesInLost(t, dir, "after reopening")
	if _, err := os.Stat(fileName(dir, id, extTable)); err == nil {
		t.Errorf("the unfinished compaction's table %06d is still there", id)
	}
	mustCheckClean(t, dir, "after reopening")
}

// The kill -9 rounds run a writer in a child process (this test binary
// again, selected by these variables).
const (
	envOverlapDir   = "KVDEMO_OVERLAP_CHILD_DIR"
	envOverlapRound = "KVDEMO_OVERLAP_CHILD_ROUND"
)

// overlapValue is a value of about 3 KB: tables grow fast, so flushes
// and compactions of sizeable tables overlap.
func overlapValue(key string) string { return strings.Repeat(key+";", 3000/(len(key)+1)) }

// TestKill9OverlapChild is the child's side; it does nothing in a normal
// run. Eight goroutines write fresh keys to a store with a small memtable
// and at most two tables, so that flushes and compactions run all the
// time and overlap, and report each acknowledged key on stdout.
func TestKill9OverlapChild(t *testing.T) {
	dir := os.Getenv(envOverlapDir)
	if dir == "" {
		t.Skip("only run as the kill -9 overlap test's child")
	}
	round := os.Getenv(envOverlapRound)
	// Writes are not fsynced one by one: a SIGKILL keeps what reached the
	// kernel, so every acknowledged write must still be there, and far
	// more flushes and compactions happen in a round.
	db, err := Open(dir, &Options{MemtableBytes: 256 << 10, MaxTables: 2, NoSyncEachWrite: true, Logger: quiet()})
	if err != nil {
		fmt.Printf("OPENFAIL %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return
	}
	var outMu sync.Mutex
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; ; i++ {
				k := fmt.Sprintf("o%s-c%d-%06d", round, c, i)
				if err := db.Put([]byte(k), []byte(overlapValue(k))); err != nil {
					fmt.Printf("X %s %v\n", k, err)
					return
				}
				outMu.Lock()
				fmt.Printf("A %s\n", k)
				outMu.Unlock()
			}
		}(c)
	}
	wg.Wait()
}

// TestKill9DuringFlushesAndCompactions: rounds of a child writing to a
// store whose flushes and compactions overlap all the time, killed with
// SIGKILL after one to two seconds. After each round check must find
// nothing wrong (no crash leftover taken for damage), Open must move no
// table to lost/, and every acknowledged write must be there.
func TestKill9DuringFlushesAndCompactions(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes for about ten seconds")
	}
	dir := t.TempDir()
	acked := map[string]bool{}
	for round := 0; round < 5; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKill9OverlapChild$", "-test.v=false")
		cmd.Env = append(os.Environ(), envOverlapDir+"="+dir, envOverlapRound+"="+strconv.Itoa(round))
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		deadline := time.After(time.Duration(1000+rand.IntN(1000)) * time.Millisecond)
		n := 0
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				switch kind, rest, _ := strings.Cut(l, " "); kind {
				case "A":
					acked[rest] = true
					n++
				case "PASS":
				default:
					t.Errorf("round %d: child: %s", round, l)
				}
			case <-deadline:
				break read
			}
		}
		cmd.Process.Signal(syscall.SIGKILL)
		for l := range lines {
			if k, ok := strings.CutPrefix(l, "A "); ok {
				acked[k] = true
				n++
			}
		}
		cmd.Wait()

		mustCheckClean(t, dir, fmt.Sprintf("round %d, after SIGKILL", round))
		db, err := Open(dir, &Options{MemtableBytes: 256 << 10, MaxTables: 2, Logger: quiet()})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v", round, err)
		}
		for k := range acked {
			if v, err := db.Get([]byte(k)); err != nil || string(v) != overlapValue(k) {
				t.Fatalf("round %d: acknowledged %s: %d bytes, %v", round, k, len(v), err)
			}
		}
		st := db.Stats()
		if st.MovedAside != 0 {
			t.Errorf("round %d: Open moved %d files to lost/", round, st.MovedAside)
		}
		t.Logf("round %d: %d acknowledged (%d in all), %d tables, %d torn log tails", round, n, len(acked), st.Tables, st.TornWALTails)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		noTablesInLost(t, dir, fmt.Sprintf("round %d", round))
	}
	if len(acked) < 100 {
		t.Errorf("only %d acknowledged writes in five rounds: the test exercised little", len(acked))
	}
}

// TestManifestPendingCompatible: pending outputs round-trip through the
// MANIFEST; a manifest with none is written as before (no "pending" key),
// and a manifest from before the field reads with none, so a file below
// its next_file that it does not name stays evidence.
func TestManifestPendingCompatible(t *testing.T) {
	dir := t.TempDir()
	db := &DB{dir: dir, fs: vfs.Default, opts: Options{Logger: quiet()}}
	if err := os.MkdirAll(filepath.Join(dir, tmpDir), 0o755); err != nil {
		t.Fatal(err)
	}
	man := manifest{Filter: FilterCuckoo, Compression: CompressionZSTD, Tables: []uint64{3, 5}, NextFile: 9, Pending: []uint64{4, 7}, Log: 8, Seq: 10}
	if err := db.writeManifest(man); err != nil {
		t.Fatal(err)
	}
	got, err := readManifestFS(vfs.Default, dir)
	if err != nil || !slicesEqual(got.Pending, []uint64{4, 7}) {
		t.Fatalf("pending read back as %v, %v", got.Pending, err)
	}
	for id, garbage := range map[uint64]bool{4: true, 6: false, 7: true, 9: true} {
		if unfinishedOutput(got, id) != garbage {
			t.Errorf("file %d unnamed by the manifest: taken for an unfinished output: %v, want %v", id, !garbage, garbage)
		}
	}
	man.Pending = nil
	if err := db.writeManifest(man); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, manifestName))
	if bytes.Contains(b, []byte("pending")) {
		t.Errorf("a manifest with no pending output names the field:\n%s", b)
	}
	old, err := parseManifest(mustRead(t, "testdata/format/MANIFEST.v2"), "testdata")
	if err != nil || old.Pending != nil || unfinishedOutput(old, 21) {
		t.Errorf("a manifest from before pending outputs: %v, %v", old.Pending, err)
	}
}
