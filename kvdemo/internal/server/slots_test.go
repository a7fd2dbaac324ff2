package server

import (
	"strings"
	"testing"
	"time"
)

// TestRequestBudget: a command that holds none of the budget waits for
// bytes to be released, until its deadline; one that holds some is
// refused at once, so that no two commands wait for each other's bytes;
// a request larger than the whole budget is refused at once.
func TestRequestBudget(t *testing.T) {
	b := &requestBudget{limit: 100}
	never := make(chan struct{})
	if err := b.reserve(80, 0, time.Time{}, never, never); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := b.reserve(30, 10, time.Now().Add(time.Hour), never, never); err == nil || time.Since(t0) > time.Second {
		t.Errorf("a holder asking for more than is left: %v after %v", err, time.Since(t0))
	}
	if err := b.reserve(30, 0, time.Now().Add(100*time.Millisecond), never, never); err == nil || !strings.Contains(err.Error(), "server busy") {
		t.Errorf("no bytes released before the deadline: %v", err)
	}
	got := make(chan error, 1)
	go func() { got <- b.reserve(30, 0, time.Now().Add(10*time.Second), never, never) }()
	time.Sleep(50 * time.Millisecond)
	b.release(80)
	if err := <-got; err != nil {
		t.Errorf("bytes released while waiting: %v", err)
	}
	if err := b.reserve(91, 10, time.Time{}, never, never); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("more than the whole budget: %v", err)
	}
	quit := make(chan struct{})
	go func() { time.Sleep(50 * time.Millisecond); close(quit) }()
	if err := b.reserve(80, 0, time.Time{}, quit, never); err == nil {
		t.Error("a wait with no deadline outlived shutdown")
	}
	if b.used != 30 {
		t.Errorf("%d bytes in use, want 30", b.used)
	}
}

// TestCommandRefusedItsBytes: while one connection's unfinished command
// holds the budget, another's large command waits for it and, when it
// does not come within the request timeout, is told why and closed; a
// command larger than the whole budget is refused at once.
func TestCommandRefusedItsBytes(t *testing.T) {
	const within = 500 * time.Millisecond
	f := start(t, Config{RequestBudget: 64 << 10, RequestTimeout: within})
	// Two 60 KiB bulks: 56 KiB past the connection's 64 KiB allowance.
	half := strings.Repeat("v", 60<<10)
	command := "*3\r\n$3\r\nSET\r\n$61440\r\n" + half + "\r\n$61440\r\n" + half + "\r\n"
	holder := f.dial(t)
	holder.send(command[:len(command)-100])
	if !waitFor(func() bool {
		f.srv.budget.mu.Lock()
		defer f.srv.budget.mu.Unlock()
		return f.srv.budget.used > 32<<10
	}) {
		t.Fatal("the unfinished command holds none of the budget")
	}
	waiter := f.dial(t)
	begin := time.Now()
	waiter.send(command)
	got, err := waiter.readReply()
	switch {
	case strings.Contains(got, "server busy"), strings.Contains(got, "did not arrive in full"):
		// Refused for want of budget, or, on a machine slow enough that
		// its own request time ran out first, for that: either way it
		// waited and was told why.
		if el := time.Since(begin); el < within/2 {
			t.Errorf("refused after %v, before its wait could end", el)
		}
	case strings.Contains(got, "too large"), got == "+OK":
		// The holder timed out first and gave its bytes back: the waiter
		// got them (and the store judged the value). The holder's reader
		// gives the bytes back as its wait ends, a moment before the
		// server counts the timeout: wait for the count.
		if !waitFor(func() bool { return f.srv.requestTimeouts.Load() > 0 }) {
			t.Errorf("the waiter got bytes the holder still held: %q", got)
		}
	default:
		t.Errorf("a command waiting for the budget: %q, %v", got, err)
	}
	if line, _ := holder.readReply(); !strings.Contains(line, "did not arrive in full") {
		t.Errorf("the holder: %q", line)
	}
	big := f.dial(t)
	big.send("*3\r\n$3\r\nSET\r\n$66000\r\n" + strings.Repeat("k", 66000) + "\r\n$66000\r\nabc")
	if got, _ := big.readReply(); !strings.Contains(got, "larger than the server's request budget") {
		t.Errorf("a command larger than the budget: %q", got)
	}
	if !big.closed() {
		t.Error("still open after its refusal")
	}
}
