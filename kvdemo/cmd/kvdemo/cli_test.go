package main

import (
	"flag"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
)

func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		dir        string
		verbose    bool
		positional []string
	}{
		{[]string{"-dir", "d", "k", "v"}, "d", false, []string{"k", "v"}},
		{[]string{"k", "v", "-dir", "d"}, "d", false, []string{"k", "v"}},
		{[]string{"k", "-dir", "d", "v"}, "d", false, []string{"k", "v"}},
		{[]string{"k", "-dir=d", "-v", "v"}, "d", true, []string{"k", "v"}},
		{[]string{"k", "--dir", "d", "v", "-v"}, "d", true, []string{"k", "v"}},
		{[]string{"-dir", "d", "--", "-k", "-v"}, "d", false, []string{"-k", "-v"}},
		{[]string{"k", "--", "-dir", "x"}, "", false, []string{"k", "-dir", "x"}},
		{[]string{"-dir", "--", "k", "-v"}, "--", true, []string{"k"}}, // a directory named "--"
		{[]string{"-v", "--", "k", "-dir"}, "", true, []string{"k", "-dir"}},
		{[]string{"-", "k"}, "", false, []string{"-", "k"}}, // "-" alone is an argument
		{[]string{"k", "v", "--"}, "", false, []string{"k", "v"}},
		{[]string{"a", "", "b"}, "", false, []string{"a", "", "b"}},
		{nil, "", false, nil},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		dir := fs.String("dir", "", "")
		verbose := fs.Bool("v", false, "")
		positional, err := parseInterspersed(fs, tc.args)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		if *dir != tc.dir || *verbose != tc.verbose || !reflect.DeepEqual(positional, tc.positional) {
			t.Errorf("%q: dir %q, v %v, positional %q; want %q, %v, %q", tc.args, *dir, *verbose, positional, tc.dir, tc.verbose, tc.positional)
		}
	}
	for _, args := range [][]string{{"k", "-nope"}, {"k", "-dir"}, {"k", "-v=maybe"}} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.String("dir", "", "")
		fs.Bool("v", false, "")
		if _, err := parseInterspersed(fs, args); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}

// TestFlagsAfterArguments: the commands accept their flags after the
// positional arguments, and "--" protects a key that starts with "-".
func TestFlagsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		code int
		out  string
		args []string
	}{
		{0, "", []string{"put", "greeting", "hello", "-dir", dir}},
		{0, "hello\n", []string{"get", "greeting", "-dir", dir}},
		{0, "hello\n", []string{"get", "-dir", dir, "greeting"}},
		{0, "", []string{"put", "-dir", dir, "--", "-dash", "-value"}},
		{0, "-value\n", []string{"get", "-dir", dir, "--", "-dash"}},
		{0, "filter:", []string{"stats", "-dir", dir}},
		{0, "", []string{"del", "greeting", "-dir", dir}},
		{1, "", []string{"get", "greeting", "-dir", dir}},
	} {
		code, out, stderr := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %d and %q", tc.args, code, out, stderr, tc.code, tc.out)
		}
	}
	// A flag the command does not know is misuse wherever it stands.
	if code, _, stderr := runCLI(t, "get", "greeting", "-dri", dir); code != 2 || !strings.Contains(stderr, "-dri") {
		t.Errorf("unknown flag after the key: exit %d, %q", code, stderr)
	}
}

// TestReadCommandsDoNotCreateStores: get, del, lookup and stats refuse a
// directory that holds no store, and leave the file system as it was.
func TestReadCommandsDoNotCreateStores(t *testing.T) {
	parent := t.TempDir()
	missing := filepath.Join(parent, "typo")
	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(parent, "file")
	if err := os.WriteFile(file, []byte("not a store"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{missing, empty, file} {
		for _, args := range [][]string{
			{"get", "-dir", dir, "k"},
			{"del", "-dir", dir, "k"},
			{"stats", "-dir", dir},
			{"lookup", "-dir", dir, "-n", "10"},
		} {
			code, out, stderr := runCLI(t, args...)
			if code != 1 || out != "" || !strings.Contains(stderr, "no store in "+dir) {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want 1 and \"no store in\"", args, code, out, stderr)
			}
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("a read command created %s (%v)", missing, err)
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a read command wrote into an empty directory: %v", entries)
	}
	if b, _ := os.ReadFile(file); string(b) != "not a store" {
		t.Errorf("the file changed: %q", b)
	}
	// put still creates a store, and then get finds it.
	if code, _, stderr := runCLI(t, "put", "-dir", missing, "k", "v"); code != 0 {
		t.Fatalf("put into a new directory: %d %s", code, stderr)
	}
	if code, out, stderr := runCLI(t, "get", "-dir", missing, "k"); code != 0 || out != "v\n" {
		t.Errorf("get after put: %d %q %q", code, out, stderr)
	}
}

// TestServeBindsFirst: serve takes its port before it creates or opens a
// store, so a port in use leaves nothing behind.
func TestServeBindsFirst(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := filepath.Join(t.TempDir(), "new-store")
	code, _, stderr := runCLI(t, "serve", "-dir", dir, "-addr", busy.Addr().String())
	if code != 1 || !strings.Contains(stderr, "address already in use") {
		t.Errorf("serve on a busy port: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("serve on a busy port created %s (%v)", dir, err)
	}
	// Likewise a password file that cannot be read stops serve before
	// anything is created.
	code, _, stderr = runCLI(t, "serve", "-dir", dir, "-addr", "127.0.0.1:0", "-requirepass-file", filepath.Join(t.TempDir(), "absent"))
	if code != 1 || !strings.Contains(stderr, "-requirepass-file") {
		t.Errorf("serve with a missing password file: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("serve with a missing password file created %s (%v)", dir, err)
	}
}

// TestMessagesNameProgramOnce: every failure prints one line that starts
// with "kvdemo COMMAND: " and does not repeat the program's name.
func TestMessagesNameProgramOnce(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "put", "-dir", dir, "-filter", "bloom", "k", "v"); code != 0 {
		t.Fatal(stderr)
	}
	locked := t.TempDir()
	db, err := kvdemo.Open(locked, &kvdemo.Options{Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	demoDir := t.TempDir()
	os.Mkdir(filepath.Join(demoDir, "cuckoo"), 0o755)
	os.WriteFile(filepath.Join(demoDir, "cuckoo", "something"), nil, 0o644)
	badManifest := t.TempDir()
	if code, _, stderr := runCLI(t, "put", "-dir", badManifest, "k", "v"); code != 0 {
		t.Fatal(stderr)
	}
	os.WriteFile(filepath.Join(badManifest, "MANIFEST"), []byte("{not json"), 0o644)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "-dir", dir, "absent"}, "kvdemo get: key not found\n"},
		{[]string{"get", "-dir", dir, "-filter", "cuckoo", "k"}, "kvdemo get: store in " + dir + " was created with filter"},
		{[]string{"put", "-dir", locked, "k", "v"}, "kvdemo put: store is in use by another process"},
		{[]string{"get", "-dir", badManifest, "k"}, "kvdemo get: MANIFEST in " + badManifest + " is damaged"},
		{[]string{"get", "-dir", filepath.Join(dir, "nope"), "k"}, "kvdemo get: no store in"},
		{[]string{"demo", "-dir", demoDir, "-n", "10"}, "kvdemo demo: " + filepath.Join(demoDir, "cuckoo") + " is not empty"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != 1 || !strings.HasPrefix(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 1 and a message starting %q", tc.args, code, stderr, tc.want)
		}
		for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
			if n := strings.Count(line, "kvdemo"); n != 1 {
				t.Errorf("%q: %q names the program %d times", tc.args, line, n)
			}
		}
	}
}

func TestWithoutInnerPrefixes(t *testing.T) {
	for _, tc := range []struct{ in, name, want string }{
		{"kvdemo: key not found", "get", "key not found"},
		{"kvdemo: replaying log 000003: kvdemo: key or value too large", "get", "replaying log 000003: key or value too large"},
		{"kvdemo: kvdemo: doubled", "get", "doubled"},
		{"kvdemo demo: /tmp/x is not empty", "demo", "/tmp/x is not empty"},
		{"kvdemo demo: x", "get", "kvdemo demo: x"}, // another command's prefix is its business
		{"opening table 000031: damaged table", "get", "opening table 000031: damaged table"},
		{"path /srv/kvdemo: data", "get", "path /srv/kvdemo: data"},
	} {
		if got := withoutInnerPrefixes(tc.in, tc.name); got != tc.want {
			t.Errorf("withoutInnerPrefixes(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var b strings.Builder
	l := log.New(logWriter{&b, "serve"}, programPrefix, 0)
	l.Printf("flush failed, retrying in 1s: %v", "kvdemo: writing table 000007: no space left on device")
	if got, want := b.String(), "kvdemo: flush failed, retrying in 1s: writing table 000007: no space left on device\n"; got != want {
		t.Errorf("log line %q, want %q", got, want)
	}
}

// TestPasswordFlags: where serve takes its password from, and what it
// refuses.
func TestPasswordFlags(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		file    string
		want    string // the password, or the error's substring
		fails   bool
		warning string
	}{
		{write("plain", "s3cret", 0o600), "s3cret", false, ""},
		{write("newline", "s3cret\n", 0o600), "s3cret", false, ""},
		{write("crlf", "s3cret\r\n", 0o600), "s3cret", false, ""},
		{write("lines", "s3cret \nsecond line\n", 0o600), "s3cret ", false, ""}, // spaces are the password's own
		{write("shared", "s3cret\n", 0o644), "s3cret", false, "can be read by other users"},
		{write("empty", "", 0o600), "first line is empty", true, ""},
		{write("blank", "\nafter\n", 0o600), "first line is empty", true, ""},
		{write("long", strings.Repeat("p", 4097), 0o600), "longer than 4096 bytes", true, ""},
		{write("fits", strings.Repeat("p", 4096)+"\n", 0o600), strings.Repeat("p", 4096), false, ""},
		{dir, "not a regular file", true, ""},
		{filepath.Join(dir, "absent"), "no such file", true, ""},
	} {
		var stderr strings.Builder
		c := &command{passFile: tc.file, stderr: &stderr}
		got, err := c.password()
		switch {
		case tc.fails && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %q, %v; want an error about %q", filepath.Base(tc.file), got, err, tc.want)
		case !tc.fails && (err != nil || got != tc.want):
			t.Errorf("%s: %q, %v; want %q", filepath.Base(tc.file), truncate(got), err, truncate(tc.want))
		}
		if !strings.Contains(stderr.String(), tc.warning) || tc.warning == "" && stderr.Len() > 0 {
			t.Errorf("%s: stderr %q, want %q", filepath.Base(tc.file), stderr.String(), tc.warning)
		}
	}
	var stderr strings.Builder
	c := &command{pass: "on-the-command-line", stderr: &stderr}
	if got, err := c.password(); err != nil || got != "on-the-command-line" || !strings.Contains(stderr.String(), "visible to other users") {
		t.Errorf("-requirepass: %q, %v, stderr %q", got, err, stderr.String())
	}
	for _, args := range [][]string{
		{"serve", "-dir", dir, "-requirepass", "a", "-requirepass-file", filepath.Join(dir, "plain")},
		{"serve", "-dir", dir, "-requirepass", strings.Repeat("p", 4097)},
		{"serve", "-dir", dir, "-protected-mode=maybe"},
		{"serve", "-dir", dir, "-idle-timeout", "-1s"},
		{"serve", "-dir", dir, "-write-timeout", "soon"},
		{"serve", "-dir", dir, "-request-timeout", "-1s"},
		{"serve", "-dir", dir, "-request-budget", "2"},
		{"serve", "-dir", dir, "-request-budget", "-1"},
		{"serve", "-dir", dir, "-evict-idle", "-1s"},
		{"serve", "-dir", dir, "-auth-burst", "0"},
		{"serve", "-dir", dir, "-auth-interval", "-1ms"},
	} {
		if code, _, stderr := runCLI(t, args...); code != 2 || !strings.Contains(stderr, "usage") {
			t.Errorf("%q: exit %d, %q; want misuse", truncate(strings.Join(args, " ")), code, stderr)
		}
	}
}

// TestPasswordFileFIFO: a named pipe given as the password file is
// refused like any file that is not regular, at once: opening one for
// reading would otherwise wait, silently, for a writer that may never come.
func TestPasswordFileFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	type result struct {
		pass string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		c := &command{passFile: fifo, stderr: io.Discard}
		p, err := c.password()
		done <- result{p, err}
	}()
	select {
	case r := <-done:
		if r.err == nil || !strings.Contains(r.err.Error(), "not a regular file") {
			t.Errorf("a FIFO as the password file: %q, %v; want an error about a file that is not regular", r.pass, r.err)
		}
	case <-time.After(3 * time.Second):
		// Unblock the open so the goroutine ends.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		t.Fatal("reading the password from a FIFO with no writer hangs")
	}
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// TestServeDefaultsToLoopback: without -addr, serve listens on the
// loopback interface only, and protected mode is on.
func TestServeDefaultsToLoopback(t *testing.T) {
	c := newCommand("serve", io.Discard)
	host, _, err := net.SplitHostPort(c.fs.Lookup("addr").DefValue)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Errorf("default -addr %q is not a loopback address", c.fs.Lookup("addr").DefValue)
	}
	if c.fs.Lookup("protected-mode").DefValue != "true" {
		t.Error("protected mode is off by default")
	}
}
