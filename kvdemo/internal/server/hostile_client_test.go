package server

import (
	"strings"
	"testing"
	"time"
)

// TestSlowlorisClosedByIdleTimeout: a client that sends a command one byte
// at a time and never finishes it is closed when IdleTimeout has passed
// since its previous command, however steadily the bytes come: the
// timeout is for the whole command, not renewed by each byte.
func TestSlowlorisClosedByIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	f := start(t, Config{IdleTimeout: idle})
	for _, partial := range []string{
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$60000\r\n" + strings.Repeat("v", 2000), // in a value
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$600",                                   // in a header
		"SET k " + strings.Repeat("v", 2000),                                   // in an inline line
	} {
		c := f.dial(t)
		if got := c.cmd("PING"); got != "+PONG" {
			t.Fatal(got)
		}
		begin := time.Now()
		var cut time.Duration
		for i := 0; i < len(partial); i++ {
			if _, err := c.c.Write([]byte{partial[i]}); err != nil {
				cut = time.Since(begin)
				break
			}
			time.Sleep(20 * time.Millisecond)
			if time.Since(begin) > 5*idle {
				break
			}
		}
		// Cut while it was still sending: a write after the server's
		// close fails.
		if cut == 0 || cut > 3*idle {
			t.Errorf("%q...: still open after %v of a byte every 20 ms (cut after %v; idle timeout %v)", partial[:12], time.Since(begin), cut, idle)
		}
		bystander := f.dial(t)
		if got := bystander.cmd("PING"); got != "+PONG" {
			t.Fatalf("bystander: %q", got)
		}
		bystander.c.Close()
	}
	if !waitFor(func() bool { return f.srv.idleTimeouts.Load() == 3 }) {
		n := f.srv.idleTimeouts.Load()
		t.Errorf("%d idle timeouts counted, want 3", n)
	}
}

// TestPipelineEndsAtQuit: in one write, an unknown command (SHUTDOWN, which
// this server does not have) gets Redis's error and the pipeline goes on;
// QUIT is answered and ends the connection, and nothing after it runs.
func TestPipelineEndsAtQuit(t *testing.T) {
	f := start(t, Config{})
	c := f.dial(t)
	c.send("PING\r\nSHUTDOWN NOSAVE\r\n*3\r\n$3\r\nSET\r\n$6\r\nbefore\r\n$1\r\n1\r\nQUIT\r\nSET after 1\r\n*1\r\n$8\r\nSHUTDOWN\r\n")
	for _, want := range []string{
		"+PONG",
		"-ERR unknown command 'SHUTDOWN', with args beginning with: 'NOSAVE' ",
		"+OK",
		"+OK",
	} {
		if got := c.reply(); got != want {
			t.Errorf("reply %q, want %q", got, want)
		}
	}
	if !c.closed() {
		t.Error("connection open after QUIT")
	}
	other := f.dial(t)
	if got := other.cmd("GET", "before"); got != "$1" {
		t.Errorf("SET before QUIT: %q", got)
	}
	if got := other.cmd("GET", "after"); got != "$nil" {
		t.Errorf("a SET pipelined after QUIT ran: %q", got)
	}
}

// TestRepliesSentBeforeWaitingForTheRest: when the bytes read so far end
// in the middle of a command, the replies to the complete commands before
// it are sent before the server waits for the rest, as Redis sends them: a
// client that waits for them before sending more (or a pasted line
// without its newline) is not left hanging.
func TestRepliesSentBeforeWaitingForTheRest(t *testing.T) {
	f := start(t, Config{})
	for _, tc := range []struct {
		sent, rest string
		then       []string // the replies after +PONG
	}{
		{"PING\r\nSET k v\r\nGET k\r\nPI", "NG\r\n", []string{"+OK", "$v", "+PONG"}},
		{"PING\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nva", "lue\r\n", []string{"+OK"}},
	} {
		c := f.dial(t)
		c.send(tc.sent)
		c.c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if got, err := c.readReply(); err != nil || got != "+PONG" {
			t.Errorf("%q: first reply %q, %v; want +PONG before the rest is sent", tc.sent, got, err)
			continue
		}
		c.c.SetReadDeadline(time.Now().Add(20 * time.Second))
		c.send(tc.rest)
		for _, want := range tc.then {
			if got := c.reply(); got != want {
				t.Errorf("%q: reply %q, want %q", tc.sent, got, want)
			}
		}
	}
}
