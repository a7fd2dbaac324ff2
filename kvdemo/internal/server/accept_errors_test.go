package server

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
)

// failingListener fails its first Accepts with errs, then accepts from
// the real listener.
type failingListener struct {
	net.Listener
	errs  []error
	calls atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if i := int(l.calls.Add(1)) - 1; i < len(l.errs) {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", l.errs[i])}
	}
	return l.Listener.Accept()
}

// TestAcceptResourceErrorsAreWaitedOut: accept failing for want of file
// descriptors (the process's or the system's) or of kernel memory is
// temporary. A flood of connections that exhausts them must not stop the
// server: it backs off and accepts again once they are freed.
func TestAcceptResourceErrorsAreWaitedOut(t *testing.T) {
	db, err := kvdemo.Open(t.TempDir(), &kvdemo.Options{Logger: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &failingListener{Listener: inner, errs: []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM}}
	srv := New(db, Config{Logger: log.New(io.Discard, "", 0)})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	f := &fixture{db: db, srv: srv, addr: inner.Addr().String()}
	c := f.dial(t)
	c.c.SetDeadline(time.Now().Add(5 * time.Second))
	got, err := c.cmdErr("PING")
	select {
	case err := <-done:
		t.Fatalf("Serve returned %v after accept failed for want of resources", err)
	default:
	}
	if err != nil || got != "+PONG" {
		t.Errorf("PING after the accept errors: %q, %v", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Error(err)
	}
	if err := <-done; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve returned %v", err)
	}
}
