package server

import (
	"strings"
	"testing"
	"time"
)

// waitFor polls cond for up to five seconds.
func waitFor(cond func() bool) bool {
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

func (f *fixture) connections() int {
	f.srv.mu.Lock()
	defer f.srv.mu.Unlock()
	return len(f.srv.conns)
}

// TestIdleTimeout: a connection that sends nothing for IdleTimeout is
// closed; one that keeps sending is not.
func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	f := start(t, Config{IdleTimeout: idle})
	quiet, busy := f.dial(t), f.dial(t)
	if got := quiet.cmd("PING"); got != "+PONG" {
		t.Fatal(got)
	}
	last := time.Now()
	for end := time.Now().Add(3 * idle); time.Now().Before(end); time.Sleep(idle / 10) {
		got, err := busy.cmdErr("PING")
		if err != nil || got != "+PONG" {
			// Only a failure if the client really kept sending: a machine
			// stalled past the timeout between two pings says nothing.
			if gap := time.Since(last); gap < idle {
				t.Fatalf("a busy connection was cut %v after its last command: %q, %v", gap, got, err)
			}
			t.Skipf("this machine stalled %v between two commands, longer than the idle timeout", time.Since(last))
		}
		last = time.Now()
	}
	if !quiet.closed() {
		t.Error("an idle connection outlived IdleTimeout")
	}
	if n := f.srv.idleTimeouts.Load(); n != 1 {
		t.Errorf("%d idle timeouts counted", n)
	}
}

// TestAuthTimeout: with a password set, a connection that does not
// authenticate in time is told why and closed, and frees its slot; one
// that authenticated stays.
func TestAuthTimeout(t *testing.T) {
	const within = 400 * time.Millisecond
	f := start(t, Config{RequirePass: testPass, AuthTimeout: within, MaxConns: 2})
	authed, loiterer := f.dial(t), f.dial(t)
	if got := authed.cmd("AUTH", testPass); got != "+OK" {
		t.Fatal(got)
	}
	if got := loiterer.cmd("PING"); got != "-"+replyNoAuth {
		t.Fatal(got) // commands before AUTH do not extend the deadline
	}
	got, err := loiterer.readReply()
	if err != nil || !strings.Contains(got, "no AUTH within") || !loiterer.closed() {
		t.Errorf("unauthenticated connection after the deadline: %q, %v", got, err)
	}
	if !waitFor(func() bool { return f.connections() == 1 }) {
		t.Fatalf("%d connections; the loiterer's slot was not freed", f.connections())
	}
	if got := f.dial(t).cmd("AUTH", testPass); got != "+OK" {
		t.Errorf("a new client after the loiterer left: %q", got)
	}
	time.Sleep(2 * within)
	if got := authed.cmd("PING"); got != "+PONG" {
		t.Errorf("an authenticated connection was cut: %q", got)
	}
	if n := f.srv.authTimeouts.Load(); n != 1 {
		t.Errorf("%d auth timeouts counted", n)
	}
}

// TestWriteTimeout: a client that pipelines requests and never reads the
// replies is disconnected once the server has waited WriteTimeout to send
// them; other clients are served throughout.
func TestWriteTimeout(t *testing.T) {
	f := start(t, Config{WriteTimeout: 200 * time.Millisecond})
	bystander := f.dial(t)
	value := strings.Repeat("v", 60000)
	if got := bystander.cmd("SET", "big", value); got != "+OK" {
		t.Fatal(got)
	}
	stalled := f.dial(t)
	// Replies of about 60 MB: far more than the sockets' buffers hold.
	stalled.send(strings.Repeat("GET big\r\n", 1000))
	if !waitFor(func() bool { return f.srv.writeTimeouts.Load() == 1 }) {
		t.Fatalf("the server still waits on a client that reads nothing: %d conns, %d cmds", f.connections(), f.srv.cmds.Load())
	}
	if !waitFor(func() bool { return f.connections() == 1 }) {
		t.Errorf("%d connections after the write timeout", f.connections())
	}
	if got := bystander.cmd("GET", "big"); got != "$"+value {
		t.Errorf("bystander: %q", truncateString(got))
	}
}
