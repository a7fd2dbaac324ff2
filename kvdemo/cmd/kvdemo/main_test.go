package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
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

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
)

// binDir holds the kvdemo binary, built once for the tests that run it as
// a separate process (crash, signals, redis-cli).
var (
	binDir   string
	binOnce  sync.Once
	binPath  string
	binError error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binError = os.MkdirTemp("", "kvdemo-bin-")
		if binError != nil {
			return
		}
		binPath = filepath.Join(binDir, "kvdemo")
		goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, err := os.Stat(goTool); err != nil {
			goTool = "go"
		}
		out, err := exec.Command(goTool, "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binError = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binError != nil {
		t.Fatal(binError)
	}
	return binPath
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

// TestUsage: misuse exits 2 with a usage message and never panics.
func TestUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{},
		{"frobnicate"},
		{"put"},
		{"put", "-dir", dir},
		{"put", "-dir", dir, "onlykey"},
		{"put", "-dir", dir, "k", "v", "extra"},
		{"put", "k", "v"}, // no -dir
		{"get", "-dir", dir},
		{"del", "-dir"},
		{"load", "-dir", dir},
		{"load", "-dir", dir, "-n", "-5"},
		{"load", "-dir", dir, "-n", "ten"},
		{"load", "-dir", dir, "-n", "10", "-value-size", "-1"},
		{"lookup", "-dir", dir, "-n", "10", "-miss", "1.5"},
		{"lookup", "-dir", dir, "-n", "10", "-gets", "0"},
		{"stats", "-dir", dir, "extra"},
		{"stats", "-dir", dir, "-filter", "cockoo"},
		{"serve", "-dir", dir, "-max-conns", "0"},
		{"demo", "-n", "0"},
		{"demo", "-bogus"},
		{"get", "-dir", dir, "-memtable", "-1", "k"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 2 || !strings.Contains(stderr, "usage") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and usage", args, code, stderr)
		}
	}
	if code, out, _ := runCLI(t, "help"); code != 0 || !strings.Contains(out, "serve") {
		t.Errorf("help: %d %q", code, out)
	}
	if code, _, _ := runCLI(t, "put", "-h"); code != 0 {
		t.Errorf("put -h: exit %d", code)
	}
}

func TestCLIRoundTrip(t *testing.T) {
	dir := t.TempDir()
	expect := func(wantCode int, wantOut string, args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, args...)
		if code != wantCode || !strings.Contains(out, wantOut) {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q; want %d and %q", args, code, out, stderr, wantCode, wantOut)
		}
		return out
	}
	expect(0, "", "put", "-dir", dir, "-filter", "bloom", "greeting", "hello world")
	expect(0, "hello world\n", "get", "-dir", dir, "greeting")
	expect(0, "", "del", "-dir", dir, "greeting")
	expect(1, "", "get", "-dir", dir, "greeting")
	expect(1, "", "get", "-dir", dir, "-filter", "cuckoo", "greeting") // the store is bloom
	expect(0, "loaded 5000 keys", "load", "-dir", dir, "-n", "5000", "-memtable", "65536")
	out := expect(0, "Gets/s", "lookup", "-dir", dir, "-n", "5000", "-gets", "2000", "-miss", "0.9")
	for _, want := range []string{"filter bloom", "tables probed per Get", "FPR", "filter false positives", "filter bytes in memory"} {
		if !strings.Contains(out, want) {
			t.Errorf("lookup output lacks %q:\n%s", want, out)
		}
	}
	expect(1, "", "lookup", "-dir", dir, "-n", "9000", "-gets", "2000", "-miss", "0") // keys it never loaded
	out = expect(0, "filter:                 bloom", "stats", "-dir", dir)
	if !strings.Contains(out, "tables:") {
		t.Errorf("stats: %s", out)
	}
}

func TestDemoCommand(t *testing.T) {
	code, out, stderr := runCLI(t, "demo", "-dir", t.TempDir(), "-n", "10000", "-memtable-keys", "1000", "-gets", "1000")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"cuckoo", "bloom", "none", "probed/Get", "FPR", "filter bytes"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
}

// serveProc is a kvdemo serve process.
type serveProc struct {
	cmd    *exec.Cmd
	addr   string
	stderr *bytes.Buffer
	exited chan error // receives Wait's result once; tests that take it put it back

	mu     sync.Mutex
	output []string // stdout lines after the first
}

func (s *serveProc) stdout() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.output, "\n")
}

func startServe(t *testing.T, dir string, extra ...string) *serveProc {
	t.Helper()
	bin := buildBinary(t)
	args := append([]string{"serve", "-dir", dir, "-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &serveProc{cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.exited
	})
	// Read stdout to its end before Wait, which closes the pipe.
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		for sc.Scan() {
			s.mu.Lock()
			s.output = append(s.output, sc.Text())
			s.mu.Unlock()
		}
		s.exited <- cmd.Wait()
	}()
	select {
	case l, ok := <-first:
		if !ok || !strings.Contains(l, " on ") {
			cmd.Process.Kill()
			t.Fatalf("serve did not start: %q", l)
		}
		s.addr = l[strings.LastIndex(l, " ")+1:]
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("serve did not start in time")
	}
	return s
}

// respConn is a tiny synchronous RESP client.
type respConn struct {
	c  net.Conn
	br *bufio.Reader
}

func dialRESP(addr string) (*respConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &respConn{c: c, br: bufio.NewReader(c)}, nil
}

func (r *respConn) do(args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	r.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(r.c, b.String()); err != nil {
		return "", err
	}
	line, err := r.br.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(line, "\r\n"), nil
}

// crashValue is the value the crash test writes under key: checkable for
// corruption, and long enough that flushes come often.
func crashValue(key string) string {
	return strings.Repeat(key+";", 1+len(key)%7)
}

// TestCrashKill9: a server writing with per-write fsync is killed with
// SIGKILL at random moments (mid-write, mid-flush, mid-compaction, with a
// small memtable and few tables allowed, all happen often); after each
// kill the store must reopen with every acknowledged write present, every
// acknowledged delete absent, and every unacknowledged write either fully
// there or not there at all. The rounds share one directory, so later
// rounds also recover from earlier recoveries.
func TestCrashKill9(t *testing.T) {
	rounds := 6
	if testing.Short() {
		rounds = 3
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	dir := t.TempDir()

	// What the store must hold. A key is put once and maybe deleted once.
	type state int
	const (
		putAcked state = iota + 1
		putUnknown
		delAcked
		delUnknown
	)
	keys := map[string]state{}
	var mu sync.Mutex
	set := func(k string, s state) { mu.Lock(); keys[k] = s; mu.Unlock() }

	for round := 0; round < rounds; round++ {
		srv := startServe(t, dir, "-memtable", "16384", "-max-tables", "3")
		var wg sync.WaitGroup
		for c := 0; c < 3; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				conn, err := dialRESP(srv.addr)
				if err != nil {
					return // killed before we connected
				}
				defer conn.c.Close()
				var mine []string
				for i := 0; i < 100_000; i++ {
					if i%5 == 4 && len(mine) > 0 {
						k := mine[0]
						mine = mine[1:]
						set(k, delUnknown)
						reply, err := conn.do("DEL", k)
						if err != nil {
							return
						}
						if reply != ":1" {
							t.Errorf("DEL %s: %q", k, reply)
							return
						}
						set(k, delAcked)
						continue
					}
					k := fmt.Sprintf("r%d-c%d-%06d", round, c, i)
					set(k, putUnknown)
					reply, err := conn.do("SET", k, crashValue(k))
					if err != nil {
						return
					}
					if reply != "+OK" {
						t.Errorf("SET %s: %q", k, reply)
						return
					}
					set(k, putAcked)
					mine = append(mine, k)
				}
			}(c)
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		srv.cmd.Process.Signal(syscall.SIGKILL)
		wg.Wait()
		<-srv.exited
		srv.exited <- nil // for the cleanup's receive

		db, err := kvdemo.Open(dir, &kvdemo.Options{Logger: log.New(io.Discard, "", 0), MaxTables: 3})
		if err != nil {
			t.Fatalf("round %d: reopen after SIGKILL: %v\nserver stderr:\n%s", round, err, srv.stderr)
		}
		counts := map[state]int{}
		for k, s := range keys {
			counts[s]++
			v, err := db.Get([]byte(k))
			present := err == nil
			if err != nil && !errors.Is(err, kvdemo.ErrNotFound) {
				t.Fatalf("round %d: Get(%s): %v", round, k, err)
			}
			if present && string(v) != crashValue(k) {
				t.Fatalf("round %d: %s holds %q: corrupt", round, k, v)
			}
			switch {
			case s == putAcked && !present:
				t.Fatalf("round %d: acknowledged SET %s lost", round, k)
			case s == delAcked && present:
				t.Fatalf("round %d: acknowledged DEL %s undone", round, k)
			}
			// What recovery found is now the store's durable state.
			if s == putUnknown || s == delUnknown {
				if present {
					keys[k] = putAcked
				} else {
					keys[k] = delAcked
				}
			}
		}
		st := db.Stats()
		t.Logf("round %d: %d keys acked, %d deletes acked, %d unacknowledged resolved; %d tables, torn tails %d",
			round, counts[putAcked], counts[delAcked], counts[putUnknown]+counts[delUnknown], st.Tables, st.TornWALTails)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if len(keys) < 100 {
		t.Errorf("only %d keys written over %d rounds: the test exercised little", len(keys), rounds)
	}
}

// TestServeSIGTERM: SIGTERM closes the store cleanly and exits 0, and the
// data is there on reopen.
func TestServeSIGTERM(t *testing.T) {
	dir := t.TempDir()
	srv := startServe(t, dir)
	c, err := dialRESP(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if r, err := c.do("SET", fmt.Sprintf("k%d", i), "v"); err != nil || r != "+OK" {
			t.Fatalf("SET: %q %v", r, err)
		}
	}
	srv.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-srv.exited:
		srv.exited <- err
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, srv.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	if !strings.Contains(srv.stdout(), "closed") {
		t.Errorf("no clean-close message: %q", srv.stdout())
	}
	db, err := kvdemo.Open(dir, &kvdemo.Options{Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if st := db.Stats(); st.TornWALTails != 0 {
		t.Errorf("clean close left a torn log")
	}
	for i := 0; i < 50; i++ {
		if _, err := db.Get([]byte(fmt.Sprintf("k%d", i))); err != nil {
			t.Fatalf("k%d after SIGTERM: %v", i, err)
		}
	}
}

// TestRedisCLI drives kvdemo serve with the real redis-cli (and
// redis-benchmark, if installed): single commands, stdin values, mass
// insertion with --pipe, and a short benchmark.
func TestRedisCLI(t *testing.T) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed: apt-get install redis-tools")
	}
	dir := t.TempDir()
	srv := startServe(t, dir)
	host, port, _ := net.SplitHostPort(srv.addr)
	redis := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(cli, append([]string{"-h", host, "-p", port}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %q: %v\n%s", args, err, out)
		}
		return strings.TrimRight(string(out), "\n")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG"},
		{[]string{"SET", "greeting", "hello world"}, "OK"},
		{[]string{"GET", "greeting"}, "hello world"},
		{[]string{"EXISTS", "greeting", "missing"}, "1"},
		{[]string{"DEL", "greeting", "missing"}, "1"},
		{[]string{"GET", "greeting"}, ""},
		{[]string{"ECHO", "tab\there"}, "tab\there"},
		{[]string{"CONFIG", "GET", "appendonly"}, "appendonly\nyes"},
		{[]string{"FLUSHALL"}, "ERR unknown command 'FLUSHALL', with args beginning with: "},
	} {
		if got := redis("", tc.args...); got != tc.want {
			t.Errorf("redis-cli %q = %q, want %q", tc.args, got, tc.want)
		}
	}
	// -x: the last argument from stdin, bytes as they are.
	if got := redis("line one\nline two\x00end", "-x", "SET", "fromstdin"); got != "OK" {
		t.Errorf("SET -x: %q", got)
	}
	if got := redis("", "GET", "fromstdin"); got != "line one\nline two\x00end" {
		t.Errorf("GET of a stdin value: %q", got)
	}
	info := redis("", "INFO")
	for _, want := range []string{"filter:cuckoo", "gets:", "tables_probed:", "filter_false_positives:", "filter_bytes:"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q", want)
		}
	}
	// Mass insertion, as the Redis docs describe it.
	var pipe strings.Builder
	const mass = 2000
	for i := 0; i < mass; i++ {
		k, v := fmt.Sprintf("mass:%d", i), fmt.Sprintf("value %d", i)
		fmt.Fprintf(&pipe, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
	}
	if out := redis(pipe.String(), "--pipe"); !strings.Contains(out, fmt.Sprintf("errors: 0, replies: %d", mass)) {
		t.Errorf("--pipe: %s", out)
	}
	if got := redis("", "GET", "mass:1234"); got != "value 1234" {
		t.Errorf("after --pipe: %q", got)
	}

	if bench, err := exec.LookPath("redis-benchmark"); err == nil {
		out, err := exec.Command(bench, "-h", host, "-p", port, "-n", "3000", "-c", "10", "-r", "1000", "-t", "set,get", "-q").CombinedOutput()
		if err != nil {
			t.Fatalf("redis-benchmark: %v\n%s", err, out)
		}
		o := string(out)
		if !strings.Contains(o, "SET: ") || !strings.Contains(o, "GET: ") || !strings.Contains(o, "requests per second") {
			t.Errorf("redis-benchmark output:\n%s", o)
		}
		if strings.Contains(o, "WARNING") || strings.Contains(o, "rror") {
			t.Errorf("redis-benchmark complained:\n%s", o)
		}
	} else {
		t.Log("redis-benchmark not installed; skipped that part")
	}

	srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-srv.exited; err != nil {
		t.Errorf("serve exit: %v\n%s", err, srv.stderr)
	}
	srv.exited <- nil
	db, err := kvdemo.Open(dir, &kvdemo.Options{Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.Get([]byte("mass:1999")); err != nil || string(v) != "value 1999" {
		t.Errorf("after restart: %q, %v", v, err)
	}
}

// TestCheckCommand: check reports a healthy store as such (exit 0) and a
// damaged table by name (exit 1), and changes nothing.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	db, err := kvdemo.Open(dir, &kvdemo.Options{MemtableBytes: 4 << 10, MaxTables: -1, Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 500; i++ {
		k := fmt.Sprintf("key%05d", i)
		if err := db.Put([]byte(k), []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	db.Flush()
	db.Close()
	code, out, errOut := runCLI(t, "check", dir)
	if code != 0 || !strings.Contains(out, "0 problems") || !strings.Contains(out, "ok   MANIFEST") {
		t.Fatalf("healthy store: exit %d\n%s%s", code, out, errOut)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	b, _ := os.ReadFile(tables[0])
	b[64] ^= 0x10
	os.WriteFile(tables[0], b, 0o644)
	code, out, errOut = runCLI(t, "check", dir)
	if code != 1 || !strings.Contains(out, "BAD  "+filepath.Base(tables[0])) {
		t.Fatalf("damaged table: exit %d\n%s%s", code, out, errOut)
	}
	if after, _ := os.ReadFile(tables[0]); !bytes.Equal(after, b) {
		t.Error("check changed the table")
	}
	if code, _, _ := runCLI(t, "check", filepath.Join(dir, "nope")); code != 1 {
		t.Errorf("check of a directory without a store: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "nope")); !errors.Is(err, os.ErrNotExist) {
		t.Error("check created a directory")
	}
}

// TestWALRecoveryFlag: a log damaged in the middle stops every command
// with the file and offset; -wal-recovery picks a recovery mode; a bad
// mode is misuse.
func TestWALRecoveryFlag(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 3; i++ {
		if code, _, e := runCLI(t, "put", "-dir", dir, fmt.Sprintf("k%d", i), strings.Repeat("v", 100)); code != 0 {
			t.Fatal(e)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	b, _ := os.ReadFile(logs[0])
	b[20] ^= 1 // inside the first record; two intact ones follow
	os.WriteFile(logs[0], b, 0o644)
	code, _, errOut := runCLI(t, "get", "-dir", dir, "k1")
	if code != 1 || !strings.Contains(errOut, filepath.Base(logs[0])) || !strings.Contains(errOut, "offset 0") {
		t.Fatalf("damaged log: exit %d, %s", code, errOut)
	}
	if code, out, errOut := runCLI(t, "get", "-dir", dir, "-wal-recovery", "skip-any", "k1"); code != 0 || strings.TrimSpace(out) != strings.Repeat("v", 100) {
		t.Fatalf("skip-any: exit %d, %q, %s", code, out, errOut)
	}
	if code, _, _ := runCLI(t, "get", "-dir", dir, "-wal-recovery", "bogus", "k1"); code != 2 {
		t.Errorf("bad mode: exit %d", code)
	}
}
