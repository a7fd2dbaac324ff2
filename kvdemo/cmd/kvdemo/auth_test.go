package main

import (
	"errors"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/netnstest"
)

// redisCLI runs the real redis-cli against host:port and returns what it
// printed. redis-cli exits 0 after an error reply, so tests read the
// output, not the exit status.
type redisCLI struct {
	t          *testing.T
	path       string
	host, port string
}

func newRedisCLI(t *testing.T, addr string) *redisCLI {
	t.Helper()
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli not installed: apt-get install redis-tools")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return &redisCLI{t: t, path: path, host: host, port: port}
}

func (r *redisCLI) run(env []string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command(r.path, append([]string{"-h", r.host, "-p", r.port}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		r.t.Fatalf("redis-cli %q: %v", args, err)
	}
	return strings.TrimRight(string(out), "\n")
}

func writePasswordFile(t *testing.T, pass string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(p, []byte(pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRedisCLIAuth: serve -requirepass-file driven by the real redis-cli
// and redis-benchmark: -a, --user default -a, REDISCLI_AUTH, a wrong
// password, no password, and a password that never comes back.
func TestRedisCLIAuth(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed: apt-get install redis-tools")
	}
	const pass = "two words and 5ymbols!"
	dir := t.TempDir()
	srv := startServe(t, dir, "-requirepass-file", writePasswordFile(t, pass))
	cli := newRedisCLI(t, srv.addr)
	quiet := "--no-auth-warning"
	for _, tc := range []struct {
		env  []string
		args []string
		want string // the whole output, or "~x": output containing x
	}{
		{nil, []string{"PING"}, "NOAUTH Authentication required."},
		{nil, []string{"SET", "k", "stolen"}, "NOAUTH Authentication required."},
		{nil, []string{"-a", "wrong", quiet, "SET", "k", "stolen"}, "~WRONGPASS invalid username-password pair or user is disabled."},
		{nil, []string{"--user", "default", "-a", "wrong", quiet, "GET", "k"}, "~WRONGPASS"},
		{nil, []string{"--user", "admin", "-a", pass, quiet, "GET", "k"}, "~WRONGPASS"},
		{nil, []string{"-a", pass, quiet, "SET", "k", "v"}, "OK"},
		{nil, []string{"-a", pass, quiet, "GET", "k"}, "v"},
		{nil, []string{"--user", "default", "-a", pass, quiet, "GET", "k"}, "v"},
		{[]string{"REDISCLI_AUTH=" + pass}, []string{"GET", "k"}, "v"},
		{nil, []string{"-a", pass, quiet, "CONFIG", "GET", "requirepass"}, ""},
		{nil, []string{"-a", pass, quiet, "CONFIG", "GET", "protected-mode"}, "protected-mode\nyes"},
	} {
		got := cli.run(tc.env, tc.args...)
		if want, ok := strings.CutPrefix(tc.want, "~"); ok && !strings.Contains(got, want) || !ok && got != tc.want {
			t.Errorf("redis-cli %q = %q, want %q", tc.args, got, tc.want)
		}
		if strings.Contains(got, "WRONGPASS") && !strings.Contains(got, "NOAUTH") {
			t.Errorf("redis-cli %q: after a refused AUTH the command was served: %q", tc.args, got)
		}
	}
	// -3 asks for RESP3 with HELLO 3, which is refused as Redis refuses an
	// unsupported version; redis-cli carries on in RESP2.
	if got := cli.run(nil, "-3", "-a", pass, quiet, "GET", "k"); !strings.Contains(got, "NOPROTO") || !strings.HasSuffix(got, "\nv") {
		t.Errorf("redis-cli -3: %q", got)
	}
	info := cli.run(nil, "-a", pass, quiet, "INFO")
	if strings.Contains(info, pass) || !strings.Contains(info, "requirepass_set:yes") {
		t.Errorf("INFO reveals the password or lacks requirepass_set:\n%s", info)
	}

	if bench, err := exec.LookPath("redis-benchmark"); err == nil {
		host, port, _ := net.SplitHostPort(srv.addr)
		out, err := exec.Command(bench, "-h", host, "-p", port, "-a", pass, "-n", "2000", "-c", "10", "-r", "1000", "-t", "set,get", "-q").CombinedOutput()
		if o := string(out); err != nil || !strings.Contains(o, "SET: ") || !strings.Contains(o, "GET: ") || strings.Contains(o, "rror") {
			t.Errorf("redis-benchmark -a: %v\n%s", err, o)
		}
		out, _ = exec.Command(bench, "-h", host, "-p", port, "-n", "100", "-t", "get", "-q").CombinedOutput()
		if !strings.Contains(string(out), "NOAUTH") {
			t.Errorf("redis-benchmark without a password was not refused:\n%s", out)
		}
	} else {
		t.Log("redis-benchmark not installed; skipped that part")
	}

	srv.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-srv.exited; err != nil {
		t.Errorf("serve exit: %v\n%s", err, srv.stderr)
	}
	srv.exited <- nil
	if strings.Contains(srv.stderr.String(), pass) || strings.Contains(srv.stdout(), pass) {
		t.Errorf("serve printed the password:\n%s\n%s", srv.stdout(), srv.stderr)
	}
	db, err := kvdemo.Open(dir, &kvdemo.Options{Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Errorf("k after restart: %q, %v (a refused SET must not have landed)", v, err)
	}
}

// TestRedisCLIProtectedMode: serve on all interfaces with no password
// serves redis-cli on loopback and refuses it, saying why, from a
// non-loopback address; -protected-mode=false or a password let it in.
// The test runs in a private network namespace where that address lives on
// loopback, so no traffic reaches this machine's real interfaces; serve and
// redis-cli both run inside it.
func TestRedisCLIProtectedMode(t *testing.T) {
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("redis-cli not installed: apt-get install redis-tools")
	}
	// The child in the namespace runs the binary built here, which it
	// would otherwise build again.
	if !netnstest.Enter(t, prebuiltBinEnv+"="+buildBinary(t)) {
		return
	}
	ip := netnstest.Outsider.String()
	port := func(s *serveProc) string { _, p, _ := net.SplitHostPort(s.addr); return p }
	// stopped stops s and returns what it wrote to stderr, which is
	// safe to read only once the process has exited.
	stopped := func(s *serveProc) string {
		t.Helper()
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-s.exited:
			s.exited <- err
		case <-time.After(20 * time.Second):
			t.Fatal("no exit after SIGTERM")
		}
		return s.stderr.String()
	}

	protected := startServe(t, t.TempDir(), "-addr", "0.0.0.0:0")
	if got := newRedisCLI(t, "127.0.0.1:"+port(protected)).run(nil, "PING"); got != "PONG" {
		t.Errorf("loopback client: %q", got)
	}
	got := newRedisCLI(t, net.JoinHostPort(ip, port(protected))).run(nil, "PING")
	if !strings.HasPrefix(got, "DENIED kvdemo is running in protected mode") || !strings.Contains(got, "-requirepass-file") || !strings.Contains(got, "-protected-mode=false") {
		t.Errorf("client from %s: %q, want the DENIED explanation", ip, got)
	}
	if stderr := stopped(protected); !strings.Contains(stderr, "clients from other hosts will be refused") {
		t.Errorf("serve did not say at start that it refuses other hosts:\n%s", stderr)
	}

	open := startServe(t, t.TempDir(), "-addr", "0.0.0.0:0", "-protected-mode=false")
	if got := newRedisCLI(t, net.JoinHostPort(ip, port(open))).run(nil, "PING"); got != "PONG" {
		t.Errorf("-protected-mode=false, client from %s: %q", ip, got)
	}
	if stderr := stopped(open); !strings.Contains(stderr, "anyone who can reach") {
		t.Errorf("serve did not warn that it is open to all:\n%s", stderr)
	}

	const pass = "s3cret"
	locked := startServe(t, t.TempDir(), "-addr", "0.0.0.0:0", "-requirepass-file", writePasswordFile(t, pass))
	cli := newRedisCLI(t, net.JoinHostPort(ip, port(locked)))
	if got := cli.run(nil, "PING"); got != "NOAUTH Authentication required." {
		t.Errorf("password set, client from %s without it: %q", ip, got)
	}
	if got := cli.run(nil, "-a", pass, "--no-auth-warning", "PING"); got != "PONG" {
		t.Errorf("password set, client from %s with it: %q", ip, got)
	}
}

// TestServeTimeouts: serve's -auth-timeout and -idle-timeout reach the
// server: a connection that never authenticates is told why and closed,
// and an authenticated one that goes quiet is closed later.
func TestServeTimeouts(t *testing.T) {
	// The idle timeout is long enough that a loaded machine does not let
	// it pass between the authenticated client's two commands.
	srv := startServe(t, t.TempDir(), "-requirepass-file", writePasswordFile(t, "pw"), "-auth-timeout", "150ms", "-idle-timeout", "2s")
	loiterer, err := dialRESP(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer loiterer.c.Close()
	authed, err := dialRESP(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer authed.c.Close()
	if got, err := authed.do("AUTH", "pw"); got != "+OK" {
		t.Fatalf("AUTH: %q, %v", got, err)
	}
	loiterer.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := loiterer.br.ReadString('\n'); !strings.Contains(line, "no AUTH within 150ms") {
		t.Errorf("unauthenticated client: %q, %v", line, err)
	}
	if got, err := authed.do("PING"); got != "+PONG" {
		t.Errorf("authenticated client before its idle timeout: %q, %v", got, err)
	}
	authed.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	if _, err := authed.br.ReadByte(); err == nil {
		t.Error("the server sent something to an idle client")
	} else if el := time.Since(start); el < 1500*time.Millisecond {
		t.Errorf("an idle client was closed after %v, before -idle-timeout 2s", el)
	}
}
