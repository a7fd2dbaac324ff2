package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/netnstest"
)

const testPass = "correct horse battery staple"

// TestAuth: with a password set, nothing but AUTH and QUIT is served
// before AUTH; wrong passwords and wrong users are refused with Redis's
// replies; both AUTH forms work; and the password never comes back.
func TestAuth(t *testing.T) {
	f := start(t, Config{RequirePass: testPass, FailedAuthInterval: -1, FailedAuthDelay: -1, AddrAuthInterval: -1})
	c := f.dial(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "-" + replyNoAuth},
		{[]string{"SET", "k", "stolen"}, "-" + replyNoAuth},
		{[]string{"GET", "k"}, "-" + replyNoAuth},
		{[]string{"INFO"}, "-" + replyNoAuth},
		{[]string{"CONFIG", "GET", "requirepass"}, "-" + replyNoAuth},
		{[]string{"FLUSHALL"}, "-" + replyNoAuth},
		{[]string{"AUTH"}, "-ERR wrong number of arguments for 'auth' command"},
		{[]string{"AUTH", "default", testPass, "extra"}, "-ERR syntax error"},
		{[]string{"AUTH", "wrong"}, "-" + replyWrongPass},
		{[]string{"AUTH", ""}, "-" + replyWrongPass},
		{[]string{"AUTH", testPass + " "}, "-" + replyWrongPass},
		{[]string{"AUTH", testPass[:len(testPass)-1]}, "-" + replyWrongPass},
		{[]string{"AUTH", "default", "wrong"}, "-" + replyWrongPass},
		{[]string{"AUTH", "admin", testPass}, "-" + replyWrongPass}, // right password, no such user
		{[]string{"PING"}, "-" + replyNoAuth},
		{[]string{"auth", testPass}, "+OK"},
		{[]string{"PING"}, "+PONG"},
		{[]string{"SET", "k", "v"}, "+OK"},
		{[]string{"AUTH", "wrong"}, "-" + replyWrongPass}, // as Redis: the session stays authenticated
		{[]string{"GET", "k"}, "$v"},
		{[]string{"CONFIG", "GET", "requirepass"}, "*0"},
		{[]string{"CONFIG", "GET", "protected-mode"}, "*2"},
	} {
		if got := c.cmd(tc.args...); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.args, got, tc.want)
		}
		if tc.want == "*2" {
			if k, v := c.reply(), c.reply(); k != "$protected-mode" || v != "$yes" {
				t.Errorf("CONFIG GET protected-mode = %q %q", k, v)
			}
		}
	}
	info := c.cmd("INFO")
	if strings.Contains(info, testPass) || strings.Contains(info, "horse") {
		t.Errorf("INFO reveals the password:\n%s", info)
	}
	for _, want := range []string{"requirepass_set:yes", "protected_mode:yes", "acl_access_denied_auth:7"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}

	// Redis 6's form, as redis-cli --user default -a PASS sends it.
	d := f.dial(t)
	if got := d.cmd("AUTH", "default", testPass); got != "+OK" {
		t.Errorf("AUTH default PASS = %q", got)
	}
	if got := d.cmd("GET", "k"); got != "$v" {
		t.Errorf("GET after AUTH default PASS = %q", got)
	}

	// A pipeline: the commands before a successful AUTH are refused, the
	// ones after it served, in order.
	p := f.dial(t)
	p.send("GET k\r\nAUTH nope\r\nSET k overwritten\r\nAUTH \"" + testPass + "\"\r\nGET k\r\n")
	for _, want := range []string{"-" + replyNoAuth, "-" + replyWrongPass, "-" + replyNoAuth, "+OK", "$v"} {
		if got := p.reply(); got != want {
			t.Errorf("pipelined: %q, want %q", got, want)
		}
	}

	// QUIT needs no password.
	q := f.dial(t)
	if got := q.cmd("QUIT"); got != "+OK" || !q.closed() {
		t.Errorf("QUIT before AUTH: %q", got)
	}
	if v, err := f.db.Get([]byte("k")); err != nil || string(v) != "v" {
		t.Errorf("store holds %q, %v: a refused SET got through", v, err)
	}
}

// TestAuthWithoutPassword: with no password set, AUTH behaves as Redis's
// does for a default user without one.
func TestAuthWithoutPassword(t *testing.T) {
	f := start(t, Config{FailedAuthInterval: -1, FailedAuthDelay: -1, AddrAuthInterval: -1})
	c := f.dial(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "+PONG"},
		{[]string{"AUTH", "anything"}, "-" + replyNoPassSet},
		{[]string{"AUTH", "default", "anything"}, "+OK"},
		{[]string{"AUTH", "admin", "anything"}, "-" + replyWrongPass},
		{[]string{"SET", "k", "v"}, "+OK"},
	} {
		if got := c.cmd(tc.args...); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.args, got, tc.want)
		}
	}
	if info := c.cmd("INFO"); !strings.Contains(info, "requirepass_set:no") {
		t.Errorf("INFO:\n%s", info)
	}
}

// TestUnauthenticatedLimits: before AUTH a client cannot make the server
// allocate more than AUTH needs; after AUTH the configured limits apply.
func TestUnauthenticatedLimits(t *testing.T) {
	f := start(t, Config{RequirePass: testPass})
	big := strings.Repeat("v", 20<<10)
	for _, args := range [][]string{
		{"SET", "k", big},
		{"EXISTS", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"},
	} {
		c := f.dial(t)
		got := c.cmd(args...)
		if !strings.HasPrefix(got, "-ERR Protocol error") || !c.closed() {
			t.Errorf("unauthenticated %d args, %d bytes: %q; want a protocol error and a closed connection", len(args), len(strings.Join(args, "")), truncateString(got))
		}
	}
	c := f.dial(t)
	if got := c.cmd("AUTH", testPass); got != "+OK" {
		t.Fatal(got)
	}
	if got := c.cmd("SET", "k", big); got != "+OK" {
		t.Errorf("SET of %d bytes after AUTH: %q", len(big), truncateString(got))
	}
	if got := c.cmd("EXISTS", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"); got != ":1" {
		t.Errorf("EXISTS of 11 keys after AUTH: %q", got)
	}
}

// TestUnauthenticatedInlineLimits: the limits before AUTH hold for inline
// commands too, whose line may otherwise be as long as the read buffer.
func TestUnauthenticatedInlineLimits(t *testing.T) {
	f := start(t, Config{RequirePass: testPass})
	big := strings.Repeat("v", 20<<10)
	for _, line := range []string{"AUTH " + big, "SET k " + big} {
		c := f.dial(t)
		c.send(line + "\r\n")
		if got := c.reply(); !strings.HasPrefix(got, "-ERR Protocol error") || !c.closed() {
			t.Errorf("unauthenticated inline %d bytes: %q; want a protocol error and a closed connection", len(line), truncateString(got))
		}
	}
	if n := f.srv.authFailures.Load(); n != 0 {
		t.Errorf("%d oversized passwords were hashed and refused", n)
	}
	c := f.dial(t)
	c.send("AUTH " + testPass[:7] + "\r\n") // a short wrong password still gets its answer
	if got := c.reply(); got != "-"+replyWrongPass {
		t.Errorf("inline AUTH: %q", got)
	}
}

func TestPasswordMatches(t *testing.T) {
	p := newPassword(testPass)
	if !p.set || !p.matches("default", []byte(testPass)) {
		t.Fatal("the password does not match itself")
	}
	for _, tc := range []struct{ user, guess string }{
		{"default", ""},
		{"default", testPass[:1]},
		{"default", testPass + "x"},
		{"default", strings.ToUpper(testPass)},
		{"default", strings.Repeat("a", 1<<16)},
		{"Default", testPass},
		{"", testPass},
	} {
		if p.matches(tc.user, []byte(tc.guess)) {
			t.Errorf("%q/%q matches", tc.user, truncateString(tc.guess))
		}
	}
	if newPassword("").set {
		t.Error("an empty password counts as set")
	}
}

// TestAuthLimiterPerAddress: an address guesses its burst at once, then
// one per interval, whatever else guesses; a right guess gives its token
// back; a turn past the deadline takes nothing.
func TestAuthLimiterPerAddress(t *testing.T) {
	const iv = time.Second
	a := authLimiter{addrBurst: 3, addrInterval: iv}
	now := time.Unix(1000, 0)
	x, y := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	for i, want := range []time.Duration{0, 0, 0, iv, 2 * iv} {
		if b, d, late := a.reserve(now, time.Time{}, x); d != want || late || b != x {
			t.Errorf("guess %d from one address waits %v (late %v, bucket %v), want %v", i, d, late, b, want)
		}
	}
	if _, d, _ := a.reserve(now, time.Time{}, y); d != 0 {
		t.Errorf("another address waits %v behind the first's guesses", d)
	}
	// A right guess returns its token: the next guess waits no longer
	// than the one before it did.
	a.refund(now, x)
	if _, d, _ := a.reserve(now, time.Time{}, x); d != 2*iv {
		t.Errorf("after a refund, the next guess waits %v, want %v", d, 2*iv)
	}
	// A turn after the deadline is not taken.
	if _, d, late := a.reserve(now, now.Add(iv), x); d != iv || !late {
		t.Errorf("guess whose turn is past its deadline: %v, late %v", d, late)
	}
	if _, d, _ := a.reserve(now, time.Time{}, x); d != 3*iv {
		t.Errorf("after a late guess, the next waits %v, want %v", d, 3*iv)
	}
	// Once the bucket is full again, the address is forgotten.
	later := now.Add(time.Hour)
	a.sweep(later)
	if len(a.addrs) != 0 {
		t.Errorf("%d addresses remembered after an idle hour", len(a.addrs))
	}
	off := authLimiter{addrInterval: -1}
	if _, d, late := off.reserve(now, now, x); d != 0 || late {
		t.Errorf("disabled per-address limit waits %v", d)
	}
}

// TestAuthLimiterAddressTable: past maxGuessingAddrs addresses, new ones
// share one bucket instead of growing the table.
func TestAuthLimiterAddressTable(t *testing.T) {
	a := authLimiter{addrBurst: 1, addrInterval: time.Minute}
	now := time.Unix(1000, 0)
	for i := 0; i < maxGuessingAddrs; i++ {
		addr := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		a.reserve(now, time.Time{}, addr)
	}
	extra := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")}
	b0, d0, _ := a.reserve(now, time.Time{}, extra[0])
	b1, d1, _ := a.reserve(now, time.Time{}, extra[1])
	if b0.IsValid() || b1.IsValid() || d0 != 0 || d1 != time.Minute {
		t.Errorf("past the table's bound: buckets %v %v, waits %v %v; want the shared one, 0 and 1m", b0, b1, d0, d1)
	}
	if len(a.addrs) > maxGuessingAddrs+1 {
		t.Errorf("the table grew to %d addresses", len(a.addrs))
	}
	// Once the old ones are full again, new addresses get their own.
	later := now.Add(time.Hour)
	if b, d, _ := a.reserve(later, time.Time{}, extra[0]); b != extra[0] || d != 0 {
		t.Errorf("after the table emptied: bucket %v, wait %v", b, d)
	}
}

// TestAuthLimiterFailures: a failure waits at least the per-connection
// delay, and failures are answered one global interval apart; a failure
// whose answer comes after its deadline takes no slot.
func TestAuthLimiterFailures(t *testing.T) {
	const delay, iv = 100 * time.Millisecond, 50 * time.Millisecond
	a := authLimiter{failDelay: delay, failInterval: iv}
	now := time.Unix(1000, 0)
	for i, want := range []time.Duration{delay, delay, delay, 3 * iv, 4 * iv} {
		if d, late := a.failed(now, time.Time{}); d != want || late {
			t.Errorf("failure %d at once waits %v (late %v), want %v", i, d, late, want)
		}
	}
	if d, late := a.failed(now, now.Add(iv)); d != iv || !late {
		t.Errorf("failure whose answer is past its deadline: %v, late %v", d, late)
	}
	if d, _ := a.failed(now, time.Time{}); d != 5*iv {
		t.Errorf("the next failure waits %v, want %v", d, 5*iv)
	}
	if d, late := a.failed(now.Add(time.Hour), time.Time{}); d != delay || late {
		t.Errorf("after a quiet hour: %v", d)
	}
}

func TestGuessAddr(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 5}, "127.0.0.2"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7"), Port: 5}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6"), Port: 5}, "2001:db8:1:2::"},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 5}, "::"},
		{strAddr("198.51.100.1:80"), "198.51.100.1"},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, "invalid IP"},
		{nil, "invalid IP"},
	} {
		if got := guessAddr(tc.addr).String(); got != tc.want {
			t.Errorf("%v: bucket %s, want %s", tc.addr, got, tc.want)
		}
	}
}

// TestFailedAuthRateAcrossConnections: guesses spread over many
// connections are answered no faster than one per interval in all, and a
// client with the right password gets in once they have been answered.
func TestFailedAuthRateAcrossConnections(t *testing.T) {
	const iv = 40 * time.Millisecond
	f := start(t, Config{RequirePass: testPass, FailedAuthInterval: iv})
	const conns, each = 4, 3
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		c := f.dial(t)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < each; j++ {
				if got := c.cmd("AUTH", fmt.Sprintf("guess-%d-%d", i, j)); got != "-"+replyWrongPass {
					t.Errorf("guess: %q", got)
				}
			}
		}(i)
	}
	wg.Wait()
	if el, min := time.Since(start), (conns*each-1)*iv; el < min {
		t.Errorf("%d failed AUTHs answered in %v, want at least %v", conns*each, el, min)
	}
	if got := f.srv.authFailures.Load(); got != conns*each {
		t.Errorf("%d failures counted", got)
	}
	// With the failures answered, the right password gets in.
	if got := f.dial(t).cmd("AUTH", testPass); got != "+OK" {
		t.Errorf("right password: %q", got)
	}
}

// TestShutdownEndsAuthWait: a connection waiting out the throttle does
// not hold up Shutdown.
func TestShutdownEndsAuthWait(t *testing.T) {
	f := start(t, Config{RequirePass: testPass, FailedAuthInterval: time.Hour})
	c := f.dial(t)
	c.send("AUTH a\r\nAUTH b\r\n") // the second waits an hour
	if got := c.reply(); got != "-"+replyWrongPass {
		t.Fatal(got)
	}
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v after %v", err, time.Since(start))
	}
}

type strAddr string

func (a strAddr) Network() string { return "tcp" }
func (a strAddr) String() string  { return string(a) }

func TestProtectedModeDecision(t *testing.T) {
	tcp := func(ip string) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000} }
	for _, tc := range []struct {
		addr     net.Addr
		loopback bool
	}{
		{tcp("127.0.0.1"), true},
		{tcp("127.3.2.1"), true},
		{tcp("::1"), true},
		{tcp("::ffff:127.0.0.1"), true},
		{tcp("192.0.2.2"), false},
		{tcp("10.0.0.1"), false},
		{tcp("0.0.0.0"), false},
		{tcp("fe80::1"), false},
		{tcp("fd00::2"), false},
		{tcp("::ffff:192.0.2.2"), false},
		{&net.TCPAddr{}, false},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, true},
		{nil, false},
		{strAddr("127.0.0.1:6380"), true},
		{strAddr("[::1]:6380"), true},
		{strAddr("192.0.2.2:6380"), false},
		{strAddr("localhost:6380"), false}, // a name is not an address it can vouch for
		{strAddr("garbage"), false},
	} {
		if got := isLoopback(tc.addr); got != tc.loopback {
			t.Errorf("isLoopback(%v) = %v", tc.addr, got)
		}
		for _, protected := range []bool{false, true} {
			for _, pass := range []bool{false, true} {
				want := protected && !pass && !tc.loopback
				if got := protectedModeDenies(protected, pass, tc.addr); got != want {
					t.Errorf("protected %v, password %v, client %v: denied %v, want %v", protected, pass, tc.addr, got, want)
				}
			}
		}
	}
}

// dialFrom connects to addr from the local address ip.
func dialFrom(t *testing.T, ip net.IP, addr string) *client {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

// TestProtectedModeListener: a server on all interfaces, with no
// password, serves a loopback client and refuses, with the explanation, a
// client connecting from a non-loopback address; a password or
// -protected-mode=false lets that client in. The test runs in a private
// network namespace where that address lives on loopback, so no traffic
// reaches this machine's real interfaces.
func TestProtectedModeListener(t *testing.T) {
	if !netnstest.Enter(t) {
		return
	}
	ip := netnstest.Outsider
	port := func(f *fixture) string { _, p, _ := net.SplitHostPort(f.addr); return p }

	f := startOn(t, ":0", Config{})
	if got := dialFrom(t, net.IPv4(127, 0, 0, 1), net.JoinHostPort("127.0.0.1", port(f))).cmd("PING"); got != "+PONG" {
		t.Errorf("loopback client: %q", got)
	}
	outsider := dialFrom(t, ip, net.JoinHostPort(ip.String(), port(f)))
	got, err := outsider.readReply()
	if err != nil || got != "-"+replyDenied {
		t.Errorf("client from %v: %q, %v; want the DENIED explanation", ip, got, err)
	}
	for _, want := range []string{"protected mode", "-requirepass", "-protected-mode=false"} {
		if !strings.Contains(got, want) {
			t.Errorf("the refusal does not mention %q: %q", want, got)
		}
	}
	if !outsider.closed() {
		t.Error("refused client left connected")
	}
	if n := f.srv.deniedByProtectedMode.Load(); n != 1 {
		t.Errorf("%d denials counted", n)
	}

	open := startOn(t, ":0", Config{DisableProtectedMode: true})
	if got := dialFrom(t, ip, net.JoinHostPort(ip.String(), port(open))).cmd("PING"); got != "+PONG" {
		t.Errorf("protected mode off, client from %v: %q", ip, got)
	}

	locked := startOn(t, ":0", Config{RequirePass: testPass})
	c := dialFrom(t, ip, net.JoinHostPort(ip.String(), port(locked)))
	if got := c.cmd("GET", "k"); got != "-"+replyNoAuth {
		t.Errorf("password set, client from %v before AUTH: %q", ip, got)
	}
	if got := c.cmd("AUTH", testPass); got != "+OK" {
		t.Errorf("AUTH from %v: %q", ip, got)
	}
	if got := c.cmd("PING"); got != "+PONG" {
		t.Errorf("after AUTH from %v: %q", ip, got)
	}
}

// TestGarbageBeforeAuth: random bytes and mutated commands from clients
// that never authenticated change nothing in the store and crash nothing.
func TestGarbageBeforeAuth(t *testing.T) {
	f := start(t, Config{RequirePass: testPass, FailedAuthInterval: -1, FailedAuthDelay: -1, AddrAuthInterval: -1})
	rng := rand.New(rand.NewPCG(3, 4))
	valid := []byte("*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\nSET key2 v\r\n*2\r\n$3\r\nDEL\r\n$4\r\nsafe\r\nAUTH default wrong\r\n")
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		in := bytes.Repeat(valid, 3)
		if i%2 == 0 {
			in = make([]byte, 1+rng.IntN(4096))
			for j := range in {
				in[j] = byte(rng.IntN(256))
			}
		} else {
			for k := 0; k < rng.IntN(6); k++ {
				in[rng.IntN(len(in))] = byte(rng.IntN(256))
			}
		}
		wg.Add(1)
		go func(in []byte) {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", f.addr, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write(in)
			c.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, c)
		}(in)
	}
	wg.Wait()
	if st := f.db.Stats(); st.Puts != 0 || st.Deletes != 0 {
		t.Errorf("unauthenticated clients wrote: %d puts, %d deletes", st.Puts, st.Deletes)
	}
	if n := f.srv.panicsCaught.Load(); n != 0 {
		t.Errorf("%d handler panics", n)
	}
	if got := f.dial(t).cmd("AUTH", testPass); got != "+OK" {
		t.Errorf("after the garbage: %q", got)
	}
}

// helloReply reads the rest of a HELLO reply after its "*14" header, as
// field -> value ("$redis", ":2", "*0").
func helloReply(c *client) map[string]string {
	c.t.Helper()
	m := map[string]string{}
	for i := 0; i < 7; i++ {
		k, v := c.reply(), c.reply()
		m[strings.TrimPrefix(k, "$")] = v
	}
	return m
}

// TestHello: HELLO authenticates as AUTH does, speaks only RESP2, and
// answers in Redis's words.
func TestHello(t *testing.T) {
	f := start(t, Config{RequirePass: testPass, FailedAuthInterval: -1, FailedAuthDelay: -1, AddrAuthInterval: -1})
	c := f.dial(t)
	const noAuth = "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"HELLO"}, noAuth},
		{[]string{"HELLO", "2"}, noAuth},
		{[]string{"HELLO", "2", "SETNAME", "app"}, noAuth},
		{[]string{"HELLO", "3", "AUTH", "default", testPass}, "-NOPROTO unsupported protocol version"},
		{[]string{"HELLO", "1"}, "-NOPROTO unsupported protocol version"},
		{[]string{"HELLO", "two"}, "-ERR Protocol version is not an integer or out of range"},
		{[]string{"HELLO", "2", "AUTH", "default"}, "-ERR Syntax error in HELLO option 'AUTH'"},
		{[]string{"HELLO", "2", "FOO"}, "-ERR Syntax error in HELLO option 'FOO'"},
		{[]string{"HELLO", "2", "AUTH", "default", "wrong"}, "-" + replyWrongPass},
		{[]string{"HELLO", "2", "AUTH", "admin", testPass}, "-" + replyWrongPass},
		{[]string{"GET", "k"}, "-" + replyNoAuth},
	} {
		if got := c.cmd(tc.args...); got != tc.want {
			t.Errorf("%q = %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := c.cmd("HELLO", "2", "AUTH", "default", testPass, "SETNAME", "app"); got != "*14" {
		t.Fatalf("HELLO 2 AUTH default PASS SETNAME app = %q", got)
	}
	m := helloReply(c)
	if m["server"] != "$redis" || m["proto"] != ":2" || m["id"] != ":1" || m["mode"] != "$standalone" || m["modules"] != "*0" {
		t.Errorf("HELLO reply %q", m)
	}
	if got := c.cmd("SET", "k", "v"); got != "+OK" {
		t.Errorf("SET after HELLO AUTH: %q", got)
	}
	if got := c.cmd("HELLO"); got != "*14" {
		t.Errorf("HELLO once authenticated: %q", got)
	} else {
		helloReply(c)
	}

	open := start(t, Config{FailedAuthInterval: -1, FailedAuthDelay: -1, AddrAuthInterval: -1})
	d := open.dial(t)
	if got := d.cmd("HELLO", "2", "AUTH", "default", "anything"); got != "*14" {
		t.Errorf("no password set, HELLO AUTH default: %q", got)
	} else {
		helloReply(d)
	}
	if got := d.cmd("HELLO", "2", "AUTH", "admin", "anything"); got != "-"+replyWrongPass {
		t.Errorf("no password set, HELLO AUTH admin: %q", got)
	}
}
