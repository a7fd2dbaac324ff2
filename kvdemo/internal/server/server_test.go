package server

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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/resp"
)

type fixture struct {
	db   *kvdemo.DB
	srv  *Server
	addr string
	done chan error
}

func start(t *testing.T, cfg Config) *fixture {
	t.Helper()
	return startOn(t, "127.0.0.1:0", cfg)
}

// startOn serves a new store on a listener at addr.
func startOn(t *testing.T, addr string, cfg Config) *fixture {
	t.Helper()
	db, err := kvdemo.Open(t.TempDir(), &kvdemo.Options{Logger: log.New(io.Discard, "", 0), MaxValueSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(io.Discard, "", 0)
	}
	if cfg.Limits.MaxBulk == 0 {
		cfg.Limits.MaxBulk = 1<<16 + 1024
	}
	f := &fixture{db: db, srv: New(db, cfg), addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { f.done <- f.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-f.done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
		db.Close()
	})
	return f
}

// client is a minimal RESP client: it sends raw bytes and reads one reply
// as a string ("+OK", "-ERR ...", ":1", "$bar" for bulk, "$nil", "*n").
type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func (f *fixture) dial(t *testing.T) *client {
	t.Helper()
	c, err := net.DialTimeout("tcp", f.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func (c *client) send(raw string) {
	c.t.Helper()
	if _, err := io.WriteString(c.c, raw); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) cmd(args ...string) string {
	c.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.send(b.String())
	return c.reply()
}

// cmdErr is cmd for a connection the server may have closed.
func (c *client) cmdErr(args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.c, b.String()); err != nil {
		return "", err
	}
	return c.readReply()
}

func (c *client) reply() string {
	c.t.Helper()
	s, err := c.readReply()
	if err != nil {
		c.t.Fatalf("reading reply: %v", err)
	}
	return s
}

func (c *client) readReply() (string, error) {
	line, err := c.br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "$-1" {
		return "$nil", nil
	}
	if strings.HasPrefix(line, "$") {
		var n int
		fmt.Sscanf(line, "$%d", &n)
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.br, buf); err != nil {
			return "", err
		}
		return "$" + string(buf[:n]), nil
	}
	return line, nil
}

// closed reports whether the server closed the connection.
func (c *client) closed() bool {
	c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.br.ReadByte()
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "reset") }

func TestCommands(t *testing.T) {
	f := start(t, Config{})
	c := f.dial(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "+PONG"},
		{[]string{"ping", "hi"}, "$hi"},
		{[]string{"ECHO", "a\r\nb"}, "$a\r\nb"},
		{[]string{"GET", "k"}, "$nil"},
		{[]string{"SET", "k", "v1"}, "+OK"},
		{[]string{"GET", "k"}, "$v1"},
		{[]string{"set", "k", "v2"}, "+OK"},
		{[]string{"GET", "k"}, "$v2"},
		{[]string{"SET", "bin", "\x00\xff\r\n"}, "+OK"},
		{[]string{"GET", "bin"}, "$\x00\xff\r\n"},
		{[]string{"EXISTS", "k", "nope", "bin", "k"}, ":3"},
		{[]string{"DEL", "k", "nope"}, ":1"},
		{[]string{"GET", "k"}, "$nil"},
		{[]string{"DEL", "k"}, ":0"},
		{[]string{"UNLINK", "bin", "nope"}, ":1"},
		{[]string{"GET", "bin"}, "$nil"},
		{[]string{"SELECT", "0"}, "+OK"},
		{[]string{"SELECT", "1"}, "-ERR DB index is out of range"},
		{[]string{"COMMAND", "DOCS"}, "*0"},
		{[]string{"CONFIG", "GET", "save"}, "*2"},
		{[]string{"CONFIG", "GET", "maxmemory"}, "*0"},
		{[]string{"CONFIG", "SET", "save", ""}, "-ERR CONFIG SET is not supported"},
		{[]string{"GET"}, "-ERR wrong number of arguments for 'get' command"},
		{[]string{"SET", "k"}, "-ERR wrong number of arguments for 'set' command"},
		{[]string{"SET", "k", "v", "EX", "10"}, "-ERR syntax error (kvdemo supports SET key value only)"},
		{[]string{"SET", "", "v"}, "-ERR empty key"},
		{[]string{"GET", strings.Repeat("k", 2000)}, "-ERR key or value too large: key of 2000 bytes (max 1024)"},
		{[]string{"SET", "k", strings.Repeat("v", 1<<16+1)}, "-ERR key or value too large: value of 65537 bytes (max 65536)"},
		{[]string{"FLUSHALL"}, "-ERR unknown command 'FLUSHALL', with args beginning with: "},
	} {
		if got := c.cmd(tc.args...); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.args, truncateString(got), tc.want)
		}
		if tc.want == "*2" { // CONFIG GET save's pair
			if k, v := c.reply(), c.reply(); k != "$save" || v != "$" {
				t.Errorf("CONFIG GET save = %q %q", k, v)
			}
		}
	}
	if got := c.cmd("CONFIG", "GET", "protected-mode"); got != "*2" {
		t.Errorf("CONFIG GET protected-mode = %q, want a name/value pair", got)
	} else if k, v := c.reply(), c.reply(); k != "$protected-mode" || v != "$yes" {
		t.Errorf("CONFIG GET protected-mode = %q %q, want the default yes", k, v)
	}
	info := c.cmd("INFO")
	for _, want := range []string{"redis_version:", "filter:cuckoo", "puts:3", "filter_negatives:", "tables_probed:", "filter_false_positives:", "filter_bytes:", "connected_clients:1"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
	if got := c.cmd("QUIT"); got != "+OK" || !c.closed() {
		t.Errorf("QUIT: %q, connection left open", got)
	}
}

func truncateString(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

func TestInlineAndPipelining(t *testing.T) {
	f := start(t, Config{})
	c := f.dial(t)
	c.send("PING\r\nSET a 1\r\nset \"b c\" '2 3'\nGET \"b c\"\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n")
	for _, want := range []string{"+PONG", "+OK", "+OK", "$2 3", "$1"} {
		if got := c.reply(); got != want {
			t.Errorf("pipelined reply %q, want %q", got, want)
		}
	}
	// A deep pipeline: 500 SETs then 500 GETs in one write.
	var b strings.Builder
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&b, "SET p%d v%d\r\n", i, i)
	}
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&b, "GET p%d\r\n", i)
	}
	c.send(b.String())
	for i := 0; i < 1000; i++ {
		want := "+OK"
		if i >= 500 {
			want = fmt.Sprintf("$v%d", i-500)
		}
		if got := c.reply(); got != want {
			t.Fatalf("reply %d = %q, want %q", i, got, want)
		}
	}
}

// TestMalformedInput: each bad request is answered with an error (or the
// connection closed), the server stays up, and other connections never
// notice.
func TestMalformedInput(t *testing.T) {
	f := start(t, Config{Limits: resp.Limits{MaxArgs: 16, MaxBulk: 1 << 16}})
	bystander := f.dial(t)
	if got := bystander.cmd("SET", "safe", "1"); got != "+OK" {
		t.Fatal(got)
	}
	for _, in := range []string{
		"*1\r\n$999999999999\r\n",                  // oversized bulk
		"*100000000\r\n",                           // oversized array
		"*2\r\n$3\r\nGET\r\n:1\r\n",                // not a bulk string
		"*1\r\n$4\r\nPINGPONG\r\n",                 // bulk longer than declared
		"*x\r\n",                                   //
		"\"unbalanced\r\n",                         //
		strings.Repeat("A", 70<<10),                // a line longer than the buffer, no newline
		"*1\r\n$-5\r\n",                            //
		"\x00\x01\x02\xff\r\n",                     // binary junk as an inline command
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$70000\r\n", // a value over the store's cap
	} {
		c := f.dial(t)
		c.send(in)
		got, err := c.readReply()
		if err == nil && !strings.HasPrefix(got, "-ERR") {
			t.Errorf("%q: reply %q, want an error", truncateString(in), got)
		}
		if err == nil && strings.Contains(got, "Protocol error") && !c.closed() {
			t.Errorf("%q: connection left open after a protocol error", truncateString(in))
		}
	}
	// Half a command, then the client vanishes.
	c := f.dial(t)
	c.send("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\nabc")
	c.c.Close()

	if got := bystander.cmd("GET", "safe"); got != "$1" {
		t.Errorf("bystander: %q", got)
	}
	if got := f.dial(t).cmd("PING"); got != "+PONG" {
		t.Errorf("new connection after abuse: %q", got)
	}
	if got := f.srv.protocolErrors.Load(); got < 5 {
		t.Errorf("%d protocol errors counted", got)
	}
}

func TestMaxConns(t *testing.T) {
	f := start(t, Config{MaxConns: 2})
	a, b := f.dial(t), f.dial(t)
	a.cmd("PING")
	b.cmd("PING")
	c := f.dial(t)
	if got, err := c.readReply(); err != nil || got != "-ERR max number of clients reached" {
		t.Errorf("third connection: %q, %v", got, err)
	}
	a.cmd("QUIT")
	a.closed()
	var got string
	for i := 0; i < 100; i++ { // the server notices a's departure asynchronously
		d := f.dial(t)
		if got = d.cmd("PING"); got == "+PONG" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got != "+PONG" {
		t.Errorf("after a client left: %q", got)
	}
}

// TestConcurrentClients: independent connections writing and reading
// their own keys at once (group commit underneath), then each sees all.
func TestConcurrentClients(t *testing.T) {
	f := start(t, Config{})
	const clients, each = 8, 100
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := f.dial(t)
			for j := 0; j < each; j++ {
				k, v := fmt.Sprintf("c%d-%d", i, j), fmt.Sprintf("v%d-%d", i, j)
				if got := c.cmd("SET", k, v); got != "+OK" {
					t.Errorf("SET: %q", got)
					return
				}
				if got := c.cmd("GET", k); got != "$"+v {
					t.Errorf("GET own write: %q", got)
					return
				}
			}
		}(i)
	}
	wg.Wait()
	c := f.dial(t)
	for i := 0; i < clients; i++ {
		if got := c.cmd("GET", fmt.Sprintf("c%d-%d", i, each-1)); got != fmt.Sprintf("$v%d-%d", i, each-1) {
			t.Errorf("client %d's last write: %q", i, got)
		}
	}
	if st := f.db.Stats(); st.Puts != clients*each {
		t.Errorf("%d puts", st.Puts)
	}
}

// TestShutdownAnswersInFlight: Shutdown closes idle connections, finishes
// the command a connection is executing, and makes Serve return.
func TestShutdownAnswersInFlight(t *testing.T) {
	f := start(t, Config{})
	idle := f.dial(t)
	idle.cmd("PING")
	busy := f.dial(t)
	// A pipeline of SETs; Shutdown lands somewhere in it. Every reply the
	// client got must be +OK for a SET that is then in the store.
	var b strings.Builder
	for i := 0; i < 300; i++ {
		fmt.Fprintf(&b, "SET s%d x\r\n", i)
	}
	busy.send(b.String())
	time.Sleep(5 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	acked := 0
	for {
		got, err := busy.readReply()
		if err != nil {
			break
		}
		if got != "+OK" {
			t.Fatalf("reply %q", got)
		}
		acked++
	}
	for i := 0; i < acked; i++ {
		if _, err := f.db.Get([]byte(fmt.Sprintf("s%d", i))); err != nil {
			t.Fatalf("acknowledged SET s%d: %v", i, err)
		}
	}
	if !idle.closed() {
		t.Error("idle connection still open after Shutdown")
	}
	if _, err := net.DialTimeout("tcp", f.addr, time.Second); err == nil {
		t.Error("still accepting after Shutdown")
	}
	t.Logf("%d of 300 pipelined SETs acknowledged before shutdown", acked)
}

// TestRandomGarbage: connections sending random bytes (and random
// mutations of valid commands) get error replies or closed connections;
// no handler panics and the server keeps serving.
func TestRandomGarbage(t *testing.T) {
	f := start(t, Config{Limits: resp.Limits{MaxArgs: 64, MaxBulk: 4096}})
	rng := rand.New(rand.NewPCG(1, 2))
	valid := []byte("*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n*2\r\n$3\r\nGET\r\n$3\r\nkey\r\nPING\r\n")
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		var in []byte
		if i%2 == 0 {
			in = make([]byte, 1+rng.IntN(4096))
			for j := range in {
				in[j] = byte(rng.IntN(256))
			}
		} else {
			in = append([]byte(nil), bytes.Repeat(valid, 5)...)
			for k := 0; k < 1+rng.IntN(6); k++ {
				in[rng.IntN(len(in))] = byte(rng.IntN(256))
			}
		}
		wg.Add(1)
		go func(in []byte) {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", f.addr, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(2 * time.Second))
			c.Write(in)
			c.(*net.TCPConn).CloseWrite() // the server sees EOF after the garbage
			io.Copy(io.Discard, c)        // until the server closes
		}(in)
	}
	wg.Wait()
	if got := f.dial(t).cmd("PING"); got != "+PONG" {
		t.Errorf("after garbage: %q", got)
	}
	if n := f.srv.panicsCaught.Load(); n != 0 {
		t.Errorf("%d handler panics", n)
	}
}

func TestErrReply(t *testing.T) {
	inner := errors.New("kvdemo: writing table 000007: no space left on device")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{kvdemo.ErrEmptyKey, "ERR empty key"},
		{fmt.Errorf("kvdemo: memtable full and the previous one cannot be flushed: %w", inner), "ERR memtable full and the previous one cannot be flushed: writing table 000007: no space left on device"},
		{errors.New("kvdemo: kvdemo: twice"), "ERR twice"},
		{errors.New("plain"), "ERR plain"},
	} {
		if got := errReply(tc.err); got != tc.want {
			t.Errorf("errReply(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
