package server

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/resp"
)

// guessers keeps conns connections per address busy guessing the
// password, each sending a wrong AUTH as soon as the last is answered,
// and reconnecting when closed, until stop is closed.
func guessers(t *testing.T, addr string, from []net.IP, conns int, stop chan struct{}) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for _, ip := range from {
		for i := 0; i < conns; i++ {
			wg.Add(1)
			go func(ip net.IP, i int) {
				defer wg.Done()
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 2 * time.Second}
				for n := 0; ; n++ {
					c, err := d.Dial("tcp", addr)
					if err != nil {
						select {
						case <-stop:
							return
						case <-time.After(10 * time.Millisecond):
							continue
						}
					}
					go func() { <-stop; c.Close() }()
					br := bufio.NewReader(c)
					for ; ; n++ {
						if _, err := fmt.Fprintf(c, "AUTH guess-%s-%d-%d\r\n", ip, i, n); err != nil {
							break
						}
						if _, err := br.ReadString('\n'); err != nil {
							break
						}
					}
					c.Close()
					select {
					case <-stop:
						return
					default:
					}
				}
			}(ip, i)
		}
	}
	return &wg
}

// TestRightPasswordGetsInWhileOthersGuess: hundreds of connections from
// other loopback addresses keep guessing; a client with the right
// password still authenticates and runs a command within a second, every
// time, while the guessers stay throttled per address.
func TestRightPasswordGetsInWhileOthersGuess(t *testing.T) {
	f := start(t, Config{RequirePass: testPass})
	from := []net.IP{net.ParseIP("127.0.0.2"), net.ParseIP("127.0.0.3"), net.ParseIP("127.0.0.4"), net.ParseIP("127.0.0.5")}
	const perAddr = 50
	stop := make(chan struct{})
	begin := time.Now()
	wg := guessers(t, f.addr, from, perAddr, stop)
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(500 * time.Millisecond) // the guessers' queue builds up
	for i := 0; i < 3; i++ {
		// How long any answer takes on this machine now: a command
		// refused for want of AUTH waits for no limiter.
		t0 := time.Now()
		probe := dialFrom(t, net.ParseIP("127.0.0.1"), f.addr)
		if got := probe.cmd("PING"); got != "-"+replyNoAuth {
			t.Fatalf("PING before AUTH: %q", got)
		}
		probe.c.Close()
		bound := max(time.Second, 3*time.Since(t0))
		t0 = time.Now()
		c := dialFrom(t, net.ParseIP("127.0.0.1"), f.addr)
		c.send("*2\r\n$4\r\nAUTH\r\n$" + fmt.Sprint(len(testPass)) + "\r\n" + testPass + "\r\nPING\r\n")
		a, err := c.readReply()
		p, err2 := c.readReply()
		el := time.Since(t0)
		if a != "+OK" || p != "+PONG" || err != nil || err2 != nil {
			t.Fatalf("attempt %d, right password while %d connections guess: %q %q %v %v after %v", i, len(from)*perAddr, a, p, err, err2, el)
		}
		if el > bound {
			t.Errorf("attempt %d: the right password took %v while %d connections guess (bound %v)", i, el, len(from)*perAddr, bound)
		}
		c.c.Close()
		time.Sleep(300 * time.Millisecond)
	}
	// Brute force stays slow: each address checked its burst and then
	// one guess per AddrAuthInterval (defaults 10 and 200ms).
	elapsed := time.Since(begin)
	limit := int64(len(from)) * (10 + int64(elapsed/(200*time.Millisecond)) + 1)
	if n := f.srv.authFailures.Load(); n > limit || n == 0 {
		t.Errorf("%d wrong guesses checked in %v from %d addresses, want 1..%d", n, elapsed, len(from), limit)
	}
}

// TestOneAddressManyConnections: an address that opens many connections
// and pipelines guesses on each gets no more guesses checked than its
// bucket allows, however many connections it spreads them over.
func TestOneAddressManyConnections(t *testing.T) {
	f := start(t, Config{RequirePass: testPass})
	ip := net.ParseIP("127.0.0.6")
	const conns = 100
	begin := time.Now()
	for i := 0; i < conns; i++ {
		dialFrom(t, ip, f.addr).send(strings.Repeat(fmt.Sprintf("AUTH guess-%d\r\n", i), 20))
	}
	time.Sleep(2 * time.Second)
	elapsed := time.Since(begin)
	limit := 10 + int64(elapsed/(200*time.Millisecond)) + 1
	if n := f.srv.authFailures.Load(); n > limit || n < 10 {
		t.Errorf("%d guesses checked in %v from one address over %d connections, want 10..%d", n, elapsed, conns, limit)
	}
}

// unfinishedCommand is a SET whose key and value are nearly as large as
// a command may be, less its last bytes: the server holds it until the
// rest comes.
func unfinishedCommand(bulk int) []byte {
	b := fmt.Appendf(nil, "*3\r\n$3\r\nSET\r\n$%d\r\n", bulk-16)
	b = append(b, strings.Repeat("k", bulk-16)...)
	b = fmt.Appendf(b, "\r\n$%d\r\n", bulk)
	return append(b, strings.Repeat("v", bulk)...) // no CRLF: not finished
}

// liveHeap is the heap the last full collection found reachable. Not
// MemStats.HeapAlloc: that also counts what the server's goroutines
// allocate between the collection and the reading (a growing value's old
// buffer, already garbage), which under the race detector, with its
// slower collections, was tens of MiB and made the bound flaky.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestUnfinishedCommandsWithinBudget: connections that each send most of
// a command of twice the largest value, and never the rest, make the
// server hold no more than its request budget and the
// connections' allowances, not what they sent; a client with small
// commands is served meanwhile, and each of the others is told why it is
// closed: refused its bytes, or timed out holding them.
func TestUnfinishedCommandsWithinBudget(t *testing.T) {
	const bulk = 1<<20 + 64<<10
	const within = time.Second
	const budget = 16 << 20
	f := start(t, Config{MaxConns: 400, Limits: resp.Limits{MaxBulk: bulk}, RequestTimeout: within, RequestBudget: budget})
	payload := unfinishedCommand(bulk)
	const conns = 100
	base := liveHeap()
	var wg sync.WaitGroup
	var sent atomic.Int64
	clients := make([]net.Conn, conns)
	for i := range clients {
		c, err := net.DialTimeout("tcp", f.addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetWriteDeadline(time.Now().Add(within))
			n, _ := c.Write(payload)
			sent.Add(int64(n))
		}()
	}
	// Sample while the commands are unfinished: a few times, as the
	// writes complete (the server reads what it is sent, or stops
	// reading at its budget and the writes wait).
	// A collection also counts as live what is allocated while it marks
	// (the server's readers allocate as the bytes arrive, and on a loaded
	// machine the mark runs long): each sample is the smaller of two
	// collections in a row, which a heap the server really holds fills
	// in both.
	var peak uint64
	for i := 0; i < 4; i++ {
		time.Sleep(within / 8)
		peak = max(peak, min(liveHeap(), liveHeap()))
	}
	if got := f.dial(t).cmd("SET", "small", "v"); got != "+OK" {
		t.Errorf("a small command while the budget is taken: %q", got)
	}
	wg.Wait()
	held := int64(peak) - int64(base)
	// The budget, each connection's 64 KiB allowance, its buffers, and
	// as much again as the budget for values caught while they are copied
	// to a buffer twice as large (the old one is still live) and the
	// test's own goroutines; the whole of what they sent would be over
	// 200 MiB.
	bound := int64(2*budget + conns*(64<<10+96<<10))
	t.Logf("clients sent %d MiB; the heap grew by %d MiB at most (bound %d MiB)", sent.Load()>>20, held>>20, bound>>20)
	if held > bound {
		t.Errorf("unfinished commands hold %d MiB of heap, bound %d MiB", held>>20, bound>>20)
	}
	var refused, timedOut int
	told := time.Now().Add(2 * within)
	for i, c := range clients {
		c.SetReadDeadline(told)
		line, err := bufio.NewReader(c).ReadString('\n')
		switch {
		case strings.Contains(line, "request budget"):
			refused++
		case strings.Contains(line, "did not arrive in full"):
			timedOut++
		default:
			t.Errorf("connection %d: %q, %v", i, line, err)
		}
	}
	t.Logf("%d refused their bytes, %d timed out holding them", refused, timedOut)
	if int64(refused) != f.srv.budgetRefusals.Load() || int64(timedOut) != f.srv.requestTimeouts.Load() {
		t.Errorf("%d connections refused their bytes and %d timed out; counted %d and %d", refused, timedOut, f.srv.budgetRefusals.Load(), f.srv.requestTimeouts.Load())
	}
	if !waitFor(func() bool {
		f.srv.budget.mu.Lock()
		defer f.srv.budget.mu.Unlock()
		return f.srv.budget.used == 0
	}) {
		t.Error("the budget was not given back")
	}
}

// TestUnfinishedCommandTimesOut: a command that has begun to arrive and
// stops is closed, with the reason, after RequestTimeout, though the idle
// timeout is "never" (as by default); a client that idles between
// complete commands is not.
func TestUnfinishedCommandTimesOut(t *testing.T) {
	if d := New(nil, Config{}).cfg.RequestTimeout; d <= 0 {
		t.Fatalf("no request timeout by default: %v", d)
	}
	const within = 300 * time.Millisecond
	f := start(t, Config{RequestTimeout: within})
	slow, idle := f.dial(t), f.dial(t)
	idle.cmd("PING")
	begin := time.Now()
	slow.send("*2\r\n$3\r\nGET\r\n$10\r\nabc")
	line, err := slow.br.ReadString('\n')
	if !strings.Contains(line, "did not arrive in full within 300ms") {
		t.Errorf("unfinished command: %q, %v", line, err)
	}
	if el := time.Since(begin); el < within || el > within+2*time.Second {
		t.Errorf("closed after %v, request timeout %v", el, within)
	}
	if !slow.closed() {
		t.Error("still open")
	}
	time.Sleep(within)
	if got := idle.cmd("PING"); got != "+PONG" {
		t.Errorf("a client idle between commands: %q", got)
	}
	if n := f.srv.requestTimeouts.Load(); n != 1 {
		t.Errorf("%d request timeouts counted", n)
	}
}

// TestIdleConnectionsLeaveRoom: every slot held by idle connections does
// not lock new clients out: a new client takes the slot of the connection
// idle longest, which is told why; a busy one keeps its slot.
func TestIdleConnectionsLeaveRoom(t *testing.T) {
	const slots = 100
	f := start(t, Config{MaxConns: slots, EvictIdleAfter: 200 * time.Millisecond})
	busy := f.dial(t)
	busy.cmd("PING")
	idle := make([]*client, slots-1)
	for i := range idle {
		idle[i] = f.dial(t)
		idle[i].cmd("PING")
	}
	// The first one dialled speaks again: the oldest idle connections are
	// then not the first ones read below.
	idle[0].cmd("PING")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stopBusy := func() { close(stop); wg.Wait() }
	defer func() {
		if stop != nil {
			stopBusy()
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if got, err := busy.cmdErr("PING"); got != "+PONG" {
				t.Errorf("a busy client lost its slot: %q, %v", got, err)
				return
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if got := f.dial(t).cmd("PING"); got != "+PONG" {
			t.Fatalf("new client %d while idle connections hold every slot: %q", i, got)
		}
	}
	stopBusy()
	stop = nil
	// Three of the oldest idle connections made room, and were told.
	// (Which of those that went idle at nearly the same moment is not
	// certain: the server notes it after sending the reply.)
	if !waitFor(func() bool {
		f.srv.mu.Lock()
		defer f.srv.mu.Unlock()
		return f.srv.evicting == 0
	}) {
		t.Fatal("the evicted connections are still open")
	}
	told := 0
	// Every evicted connection was told before it was closed (evicting is
	// 0), so its line is already in the socket: each read gets a deadline
	// of its own. One shared deadline made every read after the first
	// connection that had nothing to say fail at once, message or not, and
	// the server notes a connection idle after sending its reply, so the
	// three oldest need not be the first three dialled.
	look := time.Now().Add(300 * time.Millisecond)
	for i, c := range idle {
		c.c.SetReadDeadline(later(look, time.Now().Add(50*time.Millisecond)))
		line, err := c.br.ReadString('\n')
		switch {
		case strings.Contains(line, "took the slot of this idle one"):
			told++
			if i >= slots/2 {
				t.Errorf("idle connection %d of %d gave up its slot", i, slots)
			}
		case line != "" || !isTimeout(err):
			t.Errorf("idle connection %d: %q, %v", i, line, err)
		}
	}
	if told != 3 {
		t.Errorf("%d idle connections gave up their slots to 3 new clients", told)
	}
	last := idle[len(idle)-1]
	last.c.SetDeadline(time.Now().Add(10 * time.Second))
	if got := last.cmd("PING"); got != "+PONG" {
		t.Errorf("the youngest idle connection: %q", got)
	}
	if n := f.srv.evictions.Load(); n != 3 {
		t.Errorf("%d evictions counted", n)
	}
	// Fresh connections are not idle long enough to give up their slots.
	f2 := start(t, Config{MaxConns: 2, EvictIdleAfter: time.Hour})
	f2.dial(t).cmd("PING")
	f2.dial(t).cmd("PING")
	if got, err := f2.dial(t).readReply(); got != "-ERR max number of clients reached" {
		t.Errorf("no connection idle long enough: %q, %v", got, err)
	}
}

// TestUnauthenticatedGoFirst: with a password set, a connection that has
// not authenticated gives up its slot before an authenticated one that
// has been idle longer.
func TestUnauthenticatedGoFirst(t *testing.T) {
	const slots = 20
	f := start(t, Config{RequirePass: testPass, MaxConns: slots, EvictIdleAfter: 100 * time.Millisecond})
	authed := make([]*client, slots/2)
	for i := range authed {
		authed[i] = f.dial(t)
		if got := authed[i].cmd("AUTH", testPass); got != "+OK" {
			t.Fatal(got)
		}
	}
	time.Sleep(200 * time.Millisecond)
	anon := make([]*client, slots-len(authed))
	for i := range anon {
		anon[i] = f.dial(t)
		anon[i].cmd("PING") // NOAUTH: a command, but not authenticated
	}
	time.Sleep(200 * time.Millisecond)
	for i := range anon {
		c := f.dial(t)
		if got := c.cmd("AUTH", testPass); got != "+OK" {
			t.Fatalf("new client %d: %q", i, got)
		}
	}
	for i, c := range anon {
		if line, _ := c.br.ReadString('\n'); !strings.Contains(line, "took the slot") {
			t.Errorf("unauthenticated connection %d: %q", i, line)
		}
	}
	for i, c := range authed {
		if got := c.cmd("PING"); got != "+PONG" {
			t.Errorf("authenticated connection %d, idle longer than the unauthenticated: %q", i, got)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
