package server

import (
	"bufio"
	"context"
	"io"
	"log"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
)

// pipeListener hands the server the server ends of in-memory pipes: a
// pipe has no buffer, so a reply the client does not read blocks the
// server's write at once.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	select {
	case <-l.done:
	default:
		close(l.done)
	}
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

func (l *pipeListener) dial(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, s := net.Pipe()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	select {
	case l.conns <- s:
	case <-time.After(5 * time.Second):
		t.Fatal("the server accepts no connection")
	}
	return c, bufio.NewReader(c)
}

// TestEvictedWriterLeaves: a connection that lost its slot while the
// server was sending it replies it does not read gives up the write
// within moments, not WriteTimeout later: an evicted connection's slot
// counts as free at once, so one that lingers would let clients that
// never read hold connections past MaxConns.
func TestEvictedWriterLeaves(t *testing.T) {
	db, err := kvdemo.Open(t.TempDir(), &kvdemo.Options{Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	srv := New(db, Config{MaxConns: 2, EvictIdleAfter: 50 * time.Millisecond, DisableProtectedMode: true,
		Logger: log.New(io.Discard, "", 0)})
	ln := &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
		db.Close()
	})

	// A: a command answered, then the start of another; A reads nothing,
	// so the server, needing the rest, blocks sending the first answer.
	a, _ := ln.dial(t)
	go io.WriteString(a, "PING\r\n*1\r\n$4\r\nPI")
	time.Sleep(200 * time.Millisecond)
	ping := func(c net.Conn, br *bufio.Reader) {
		t.Helper()
		go io.WriteString(c, "PING\r\n")
		if line, err := br.ReadString('\n'); err != nil || strings.TrimSpace(line) != "+PONG" {
			t.Fatalf("PING: %q, %v", line, err)
		}
	}
	b, bbr := ln.dial(t)
	ping(b, bbr)
	c, cbr := ln.dial(t) // takes A's slot: A has waited longest
	ping(c, cbr)
	if srv.evictions.Load() != 1 {
		t.Fatalf("%d evictions, want 1", srv.evictions.Load())
	}
	held := func() (int, int) {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns), srv.evicting
	}
	if !waitFor(func() bool { n, e := held(); return n == 2 && e == 0 }) {
		n, e := held()
		t.Errorf("5 s after A was evicted the server holds %d connections, %d of them evicted: A's write still waits for a reader", n, e)
	}
}
