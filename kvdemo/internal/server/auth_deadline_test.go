package server

import (
	"io"
	"strings"
	"testing"
	"time"
)

// The auth timeout frees a slot held by a client that cannot
// authenticate. These tests try to outlive it without sending a byte after
// the deadline: by queueing work the server does after reading it.

// TestAuthTimeoutWithPipelinedGuesses: failed AUTHs sent in one write are
// already in the server's read buffer when the deadline passes, and each
// waits out the failed-AUTH throttle. The deadline still closes the
// connection, instead of after every queued guess has been answered.
func TestAuthTimeoutWithPipelinedGuesses(t *testing.T) {
	const within, iv, guesses = 300 * time.Millisecond, 50 * time.Millisecond, 100
	f := start(t, Config{RequirePass: testPass, AuthTimeout: within, FailedAuthInterval: iv})
	c := f.dial(t)
	begin := time.Now()
	c.send(strings.Repeat("AUTH wrong\r\n", guesses)) // answered over 5 s if each waits its turn
	if !waitFor(func() bool { return f.connections() == 0 }) {
		t.Fatalf("the guesser still holds its slot %v after connecting (auth timeout %v)", time.Since(begin), within)
	}
	if held := time.Since(begin); held > within+time.Second {
		t.Errorf("the guesser held its slot %v, auth timeout %v", held, within)
	}
	reply, _ := io.ReadAll(c.br)
	if !strings.Contains(string(reply), "no AUTH within") {
		t.Errorf("not told why it was closed: %q", truncateString(string(reply)))
	}
	if n := f.srv.authFailures.Load(); n >= guesses {
		t.Errorf("all %d guesses were answered", n)
	}
	if n := f.srv.authTimeouts.Load(); n != 1 {
		t.Errorf("%d auth timeouts counted", n)
	}
}

// TestAuthTimeoutWithUnreadReplies: a client that sends many commands
// before authenticating and reads none of the replies blocks the server's
// writes. The auth deadline bounds those writes too, not only the
// (longer) write timeout.
func TestAuthTimeoutWithUnreadReplies(t *testing.T) {
	const within = 300 * time.Millisecond
	f := start(t, Config{RequirePass: testPass, AuthTimeout: within, WriteTimeout: time.Minute})
	c := f.dial(t)
	begin := time.Now()
	go func() {
		// About 12 MB of NOAUTH replies: far more than the sockets
		// buffer. The writes end with an error once the server closes.
		c.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c.c, strings.Repeat("PING\n", 350_000))
	}()
	if !waitFor(func() bool { return f.connections() == 0 }) {
		t.Fatalf("a client that reads nothing still holds its slot %v after connecting (auth timeout %v)", time.Since(begin), within)
	}
	if held := time.Since(begin); held > within+time.Second {
		t.Errorf("the client held its slot %v, auth timeout %v", held, within)
	}
}
