package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// guessAUTH keeps conns connections from each address in from guessing
// the password at addr, each sending a wrong AUTH as soon as the last is
// answered and reconnecting when closed, until the returned stop is
// called.
func guessAUTH(addr string, from []string, conns int) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, ip := range from {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 2 * time.Second}
		for i := 0; i < conns; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; {
					select {
					case <-done:
						return
					default:
					}
					c, err := d.Dial("tcp", addr)
					if err != nil {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					go func() { <-done; c.Close() }()
					br := bufio.NewReader(c)
					for ; ; n++ {
						if _, err := fmt.Fprintf(c, "AUTH wrong-%s-%d-%d\r\n", ip, i, n); err != nil {
							break
						}
						if _, err := br.ReadString('\n'); err != nil {
							break
						}
					}
					c.Close()
				}
			}()
		}
	}
	return func() { close(done); wg.Wait() }
}

// TestRedisCLIWhileOthersGuess: redis-cli with the right password gets in
// and runs PING within a second, three times, while 200 connections from
// other loopback addresses keep sending wrong passwords.
func TestRedisCLIWhileOthersGuess(t *testing.T) {
	srv := startServe(t, t.TempDir(), "-requirepass-file", writePasswordFile(t, "right-password"))
	cli := newRedisCLI(t, srv.addr)
	stop := guessAUTH(srv.addr, []string{"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}, 50)
	defer stop()
	time.Sleep(500 * time.Millisecond) // the guesses queue up
	for i := 0; i < 3; i++ {
		// How long redis-cli takes on this machine now, with an answer
		// that waits for no limiter: PING before AUTH.
		t0 := time.Now()
		if got := cli.run(nil, "PING"); !strings.Contains(got, "NOAUTH") {
			t.Fatalf("PING without a password: %q", got)
		}
		bound := max(time.Second, 3*time.Since(t0))
		t0 = time.Now()
		got := cli.run(nil, "-a", "right-password", "--no-auth-warning", "PING")
		if el := time.Since(t0); got != "PONG" || el > bound {
			t.Errorf("attempt %d: redis-cli -a PING while others guess: %q after %v (bound %v)", i, got, el, bound)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRedisCLIWhileIdleClientsHoldEverySlot: idle connections holding
// every -max-conns slot do not lock redis-cli out; -request-timeout closes
// a command that never finishes arriving, with the reason.
func TestRedisCLIWhileIdleClientsHoldEverySlot(t *testing.T) {
	const slots = 100
	srv := startServe(t, t.TempDir(), "-max-conns", fmt.Sprint(slots), "-evict-idle", "300ms", "-request-timeout", "500ms")
	cli := newRedisCLI(t, srv.addr)
	idle := make([]*respConn, slots)
	for i := range idle {
		c, err := dialRESP(srv.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.c.Close()
		if got, err := c.do("PING"); got != "+PONG" {
			t.Fatalf("idle client %d: %q, %v", i, got, err)
		}
		idle[i] = c
	}
	time.Sleep(400 * time.Millisecond)
	if got := cli.run(nil, "PING"); got != "PONG" {
		t.Errorf("redis-cli while idle clients hold every slot: %q", got)
	}
	// One of the longest idle gave up its slot, and was told why. (Which
	// one of those that went idle at nearly the same moment is not
	// certain.)
	told := 0
	// The eviction notice is sent before redis-cli is served, so it has
	// arrived by now; each client gets a short deadline of its own (one
	// shared deadline would expire on the first silent client and hide a
	// notice to any later one).
	time.Sleep(100 * time.Millisecond)
	for i, c := range idle {
		c.c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		line, err := c.br.ReadString('\n')
		switch {
		case strings.Contains(line, "took the slot"):
			told++
			if i >= slots/2 {
				t.Errorf("idle client %d of %d gave up its slot: %q", i, slots, line)
			}
		case line != "" || !isTimeout(err):
			t.Errorf("idle client %d: %q, %v", i, line, err)
		}
	}
	if told != 1 {
		t.Errorf("%d idle clients gave up their slots to one redis-cli", told)
	}
	slow := idle[slots-1]
	slow.c.SetDeadline(time.Now().Add(5 * time.Second))
	slow.c.Write([]byte("*2\r\n$3\r\nGET\r\n$5\r\nab"))
	if line, err := slow.br.ReadString('\n'); !strings.Contains(line, "did not arrive in full within 500ms") {
		t.Errorf("a command that never finishes arriving: %q, %v", line, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
