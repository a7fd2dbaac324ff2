package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/errorfs"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/resp"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// startOnFS serves a store in dir that does its I/O through efs. The
// caller closes nothing: the cleanup shuts the server down and closes the
// store, whatever state the faults left it in.
func startOnFS(t *testing.T, dir string, efs *errorfs.FS) *fixture {
	t.Helper()
	db, err := kvdemo.Open(dir, &kvdemo.Options{FS: efs, Logger: log.New(io.Discard, "", 0), MaxValueSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{db: db, srv: New(db, Config{Logger: log.New(io.Discard, "", 0), Limits: resp.Limits{MaxBulk: 1<<16 + 1024}}), addr: ln.Addr().String(), done: make(chan error, 1)}
	go func() { f.done <- f.srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		f.srv.Shutdown(ctx)
		<-f.done
		db.Close()
	})
	return f
}

// TestStoreFaultsAsClientsSeeThem: a disk that fills and an fsync that
// fails, seen through the server by clients writing concurrently. Every
// failed SET and DEL gets a one-line error that says whether the write is
// certainly not stored or its outcome is unknown; the connection and
// reads keep working; writes resume when space comes back; after an fsync
// failure the store refuses writes; and after a power loss every SET
// answered +OK is there with its value.
func TestStoreFaultsAsClientsSeeThem(t *testing.T) {
	dir := t.TempDir()
	efs := errorfs.New(vfs.Default)
	f := startOnFS(t, dir, efs)
	c := f.dial(t)
	acked := map[string]string{}
	set := func(c *client, k, v string) string {
		got := c.cmd("SET", k, v)
		if got == "+OK" {
			acked[k] = v
		}
		return got
	}
	for i := 0; i < 20; i++ {
		if got := set(c, fmt.Sprintf("before-%02d", i), "v"); got != "+OK" {
			t.Fatal(got)
		}
	}

	// A full disk: not stored, and said so; reads and the connection
	// carry on; space back, writes resume.
	efs.SetSpace(0)
	for i := 0; i < 5; i++ {
		got := set(c, fmt.Sprintf("full-%d", i), strings.Repeat("v", 100))
		if !strings.HasPrefix(got, "-ERR write not stored") {
			t.Errorf("SET on a full disk: %q, want -ERR write not stored ...", got)
		}
	}
	if got := c.cmd("DEL", "before-00"); !strings.HasPrefix(got, "-ERR write not stored") {
		t.Errorf("DEL on a full disk: %q", got)
	}
	if got := c.cmd("GET", "before-00"); got != "$v" {
		t.Errorf("GET after a DEL that was not stored: %q", got)
	}
	efs.SetSpace(-1)
	if got := set(c, "after-space", "v"); got != "+OK" {
		t.Errorf("SET once space is back: %q", got)
	}

	// An fsync that fails while clients write: each SET is +OK or an
	// error naming its outcome; then the store is read-only.
	efs.Add(&errorfs.Rule{Op: errorfs.OpSync, Match: func(p string) bool { return strings.HasSuffix(p, ".log") }, Times: 1})
	var mu sync.Mutex
	var wg sync.WaitGroup
	unknown := 0
	for w := 0; w < 3; w++ {
		wc := f.dial(t)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				k := fmt.Sprintf("w%d-%02d", w, i)
				got := wc.cmd("SET", k, k+"-value")
				mu.Lock()
				switch {
				case got == "+OK":
					acked[k] = k + "-value"
				case strings.HasPrefix(got, "-ERR write outcome unknown"):
					unknown++
				case strings.HasPrefix(got, "-ERR write not stored: store is read-only"):
				default:
					t.Errorf("SET %s during a failed fsync: %q", k, got)
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if efs.Count(errorfs.OpSync) == 0 {
		t.Fatal("no fsync attempted")
	}
	if unknown == 0 {
		t.Error("no SET was told its outcome is unknown")
	}
	if got := c.cmd("SET", "late", "v"); !strings.HasPrefix(got, "-ERR write not stored: store is read-only") {
		t.Errorf("SET after a failed fsync: %q", got)
	}
	if got := c.cmd("GET", "before-01"); got != "$v" {
		t.Errorf("GET on a read-only store: %q", got)
	}
	if got := c.cmd("PING"); got != "+PONG" {
		t.Errorf("PING on a read-only store: %q", got)
	}

	// Power loss, then the store opened again from what is on disk.
	if err := efs.Crash(); err != nil && !errors.Is(err, errorfs.ErrCrashed) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f.srv.Shutdown(ctx)
	f.db.Close() // the crashed store's error says nothing new; its lock goes
	db, err := kvdemo.Open(dir, &kvdemo.Options{Logger: log.New(io.Discard, "", 0), MaxValueSize: 1 << 16})
	if err != nil {
		t.Fatalf("reopen after the crash: %v", err)
	}
	defer db.Close()
	for k, v := range acked {
		got, err := db.Get([]byte(k))
		if err != nil || string(got) != v {
			t.Errorf("%s was answered +OK, after the crash: %q, %v", k, got, err)
		}
	}
	if len(acked) < 21 {
		t.Errorf("only %d SETs acknowledged", len(acked))
	}
}
