package server

import (
	"io"
	"net"
	"net/netip"
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

// TestRightGuessWaitsForItsAddressTurn: a guesser need not wait for the
// WRONGPASS answers if the right password is answered at once: it sends
// many guesses on many connections and watches for the first +OK. From an
// address that has used its burst, every guess, the right one too, waits
// for the address's turn before it is checked, so the outcomes are learned
// no faster than one per interval. A client at another address is
// answered at once.
func TestRightGuessWaitsForItsAddressTurn(t *testing.T) {
	const iv, burst = 100 * time.Millisecond, 2
	f := start(t, Config{RequirePass: testPass, AddrAuthBurst: burst, AddrAuthInterval: iv, FailedAuthDelay: -1, FailedAuthInterval: -1})
	guesser := net.ParseIP("127.0.0.2")
	const wrong = 8
	begin := time.Now()
	for i := 0; i < wrong; i++ {
		dialFrom(t, guesser, f.addr).send("AUTH guess-" + strings.Repeat("x", i) + "\r\n")
	}
	// The guesses past the burst wait their turns, one interval apart,
	// unchecked: the first burst are checked at once.
	if !waitFor(func() bool { return f.srv.authFailures.Load() >= burst }) {
		t.Fatalf("%d guesses checked", f.srv.authFailures.Load())
	}
	other := dialFrom(t, net.ParseIP("127.0.0.1"), f.addr)
	t0 := time.Now()
	if got := other.cmd("AUTH", testPass); got != "+OK" {
		t.Fatalf("the right password from another address: %q", got)
	}
	if el := time.Since(t0); el > 5*iv {
		t.Errorf("the right password from another address took %v, behind the guesser's turns", el)
	}
	// Every queued guess must have taken its turn before the right one
	// asks: a guess whose connection the server has not read yet would
	// let the right one queue ahead of it (arrival order is the order).
	// The address's bucket is full again at begin + wrong intervals or
	// later once the guesses have taken that many turns from it, and the
	// right guess's turn is then an interval before that at the earliest.
	if !waitFor(func() bool {
		f.srv.limiter.mu.Lock()
		defer f.srv.limiter.mu.Unlock()
		full, ok := f.srv.limiter.addrs[netip.MustParseAddr("127.0.0.2")]
		return ok && !full.Before(begin.Add(wrong*iv))
	}) {
		t.Fatalf("the guesser's %d guesses never all took their turns", wrong)
	}
	right := dialFrom(t, guesser, f.addr)
	if got := right.cmd("AUTH", testPass); got != "+OK" {
		t.Fatalf("the right password from the guesser's address: %q", got)
	}
	// The guesses past the burst hold the address's next wrong-burst
	// turns; the right guess comes after them.
	if el, min := time.Since(begin), (wrong-burst+1)*iv; el < min {
		t.Errorf("the right password from the guesser's address was told after %v, ahead of %d queued guesses (%v)", el, wrong-burst, min)
	}
	if got := right.cmd("GET", "k"); got != "$nil" {
		t.Errorf("after AUTH: %q", got)
	}
}
