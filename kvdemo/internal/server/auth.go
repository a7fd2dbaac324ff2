package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/resp"
)

// Who may connect follows Redis: a password (requirepass) that every
// connection gives with AUTH before anything else, and, while no password
// is set, "protected mode", which serves only clients on the loopback
// interface and tells everyone else why they are refused.

// The replies are Redis's own words, so clients and scripts that know
// Redis recognise them.
const (
	replyNoAuth    = "NOAUTH Authentication required."
	replyWrongPass = "WRONGPASS invalid username-password pair or user is disabled."
	replyNoPassSet = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	// defaultUser is the only user: Redis 6's "AUTH username password",
	// which redis-cli sends for --user, names it.
	defaultUser = "default"
)

// replyDenied is protected mode's refusal. Redis's "-DENIED Redis is
// running in protected mode ..." is the anchor; the remedies are this
// server's flags.
const replyDenied = "DENIED kvdemo is running in protected mode because protected mode is enabled and no password is set. " +
	"In this mode connections are only accepted from the loopback interface. " +
	"To accept clients from other hosts, do one of these: " +
	"1) restart kvdemo serve with a password, -requirepass-file FILE (or -requirepass PASS), and have clients send AUTH; " +
	"2) if only trusted hosts can reach this port, restart kvdemo serve with -protected-mode=false."

// MaxPasswordLen bounds the password: AUTH must fit in what a client may
// send before it has authenticated.
const MaxPasswordLen = 4096

// unauthenticatedLimits bound what a client that has not given the
// password can make the server allocate, as Redis bounds unauthenticated
// multibulk and bulk lengths: AUTH needs three short arguments.
var unauthenticatedLimits = resp.Limits{MaxArgs: 10, MaxBulk: 16 << 10, MaxCommand: 32 << 10}

// password is the hash of the configured password. Comparing hashes in
// constant time means neither the password's bytes nor its length show
// in how long a wrong guess takes to refuse.
type password struct {
	set  bool
	hash [sha256.Size]byte
}

func newPassword(p string) password {
	if p == "" {
		return password{}
	}
	return password{set: true, hash: sha256.Sum256([]byte(p))}
}

// matches reports whether user and guess are the configured credentials.
// The username is not secret; it is checked after the hash so that every
// refusal costs the same work.
func (p password) matches(user string, guess []byte) bool {
	h := sha256.Sum256(guess)
	ok := subtle.ConstantTimeCompare(h[:], p.hash[:]) == 1
	return ok && user == defaultUser
}

// isLoopback reports whether a client at addr is on this host's loopback
// interface. Addresses it cannot read are not loopback: protected mode
// refuses what it cannot vouch for.
func isLoopback(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true // a local socket: only this host can reach it
	case nil:
		return false
	}
	ap, err := netip.ParseAddrPort(addr.String())
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// protectedModeDenies is protected mode's decision for a client at
// remote: refused while protected mode is on, no password is set and the
// client is not on the loopback interface.
func protectedModeDenies(protected, passwordSet bool, remote net.Addr) bool {
	return protected && !passwordSet && !isLoopback(remote)
}

// authLimiter throttles password guessing without locking out the right
// password. A guess is checked, in constant time, as soon as it arrives,
// so a right password never queues behind other clients' wrong ones; what
// waits is the reply to a failure and, for a source address that has
// guessed wrong too often, the check of its next guess. Three limits
// apply:
//
//   - per source address, a token bucket of guesses (burst addrBurst, then
//     one per addrInterval): a guess from an address with no token left
//     waits for one before it is checked, right or wrong. Reserving before
//     the check is what makes the bound hold however many connections the
//     address opens: answering a right guess at once while wrong ones wait
//     would let it learn each outcome, a late answer meaning "wrong",
//     without waiting. A right guess gives its token back.
//   - per connection, a failure is answered no sooner than failDelay after
//     it; a connection runs one command at a time, so it makes at most one
//     guess per failDelay.
//   - across the server, failures are answered at most one per
//     failInterval. Only failures take these slots: a right password from
//     an address with tokens left is answered at once, whatever the queue.
//
// An address is a whole IPv4 address, or an IPv6 /64 (one host's usual
// share). Clients behind one address share its bucket: a client with the
// right password that shares an address with a guesser waits behind that
// address's guesses, and is closed unanswered if its turn comes after its
// auth deadline. A guesser with many addresses gets addrBurst guesses from
// each, and then one per addrInterval from each, within the global rate
// of failure answers and the connections the server holds for it.
type authLimiter struct {
	failDelay, failInterval time.Duration
	addrBurst               int
	addrInterval            time.Duration

	mu       sync.Mutex
	nextFail time.Time // the earliest time the next failure may be answered
	// addrs holds, for each address with guesses outstanding, when its
	// bucket is full again (a "theoretical arrival time"): an address
	// absent, or whose time has passed, has its whole burst.
	addrs   map[netip.Addr]time.Time
	swept   int       // len(addrs) after the last sweep
	sweptAt time.Time // when it was
}

// maxGuessingAddrs bounds the addresses the limiter remembers. Past it,
// new addresses share one bucket (the zero address): a guesser with more
// addresses than this cannot grow the table, and its guesses from the
// addresses beyond it are throttled together.
const maxGuessingAddrs = 1 << 16

// guessAddr is the bucket that a client at addr guesses in.
func guessAddr(addr net.Addr) netip.Addr {
	var a netip.Addr
	switch t := addr.(type) {
	case *net.TCPAddr:
		a, _ = netip.AddrFromSlice(t.IP)
	default:
		if addr != nil {
			if ap, err := netip.ParseAddrPort(addr.String()); err == nil {
				a = ap.Addr()
			}
		}
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		a = p.Addr()
	}
	return a
}

// reserve takes a guess from addr's bucket at now, and returns how long
// the guess waits before it is checked. A guess whose turn comes after
// deadline (if not zero) takes nothing: late reports that the connection
// is closed at the deadline, unanswered.
// The bucket taken is returned, for refund: past maxGuessingAddrs it is
// the shared one.
func (a *authLimiter) reserve(now, deadline time.Time, addr netip.Addr) (bucket netip.Addr, wait time.Duration, late bool) {
	if a.addrInterval <= 0 {
		return addr, 0, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.addrs == nil {
		a.addrs = map[netip.Addr]time.Time{}
	}
	full, ok := a.addrs[addr]
	if !ok && len(a.addrs) >= maxGuessingAddrs {
		// A full table is swept at most once a second: new addresses
		// must not each cost a pass over it.
		if now.Sub(a.sweptAt) >= time.Second {
			a.sweep(now)
		}
		if len(a.addrs) >= maxGuessingAddrs {
			addr = netip.Addr{}
			full = a.addrs[addr]
		}
	}
	full = later(full, now).Add(a.addrInterval)
	turn := full.Add(-time.Duration(a.addrBurst) * a.addrInterval)
	if !deadline.IsZero() && turn.After(deadline) {
		return addr, max(deadline.Sub(now), 0), true
	}
	a.addrs[addr] = full
	if len(a.addrs) > 2*max(a.swept, 1024) {
		a.sweep(now)
	}
	return addr, max(turn.Sub(now), 0), false
}

// refund gives back the token that a right guess took from bucket.
func (a *authLimiter) refund(now time.Time, bucket netip.Addr) {
	if a.addrInterval <= 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	full, ok := a.addrs[bucket]
	if !ok {
		return // full again already
	}
	if full = full.Add(-a.addrInterval); !full.After(now) {
		delete(a.addrs, bucket)
	} else {
		a.addrs[bucket] = full
	}
}

// sweep forgets the addresses whose buckets are full again.
func (a *authLimiter) sweep(now time.Time) {
	for addr, full := range a.addrs {
		if !full.After(now) {
			delete(a.addrs, addr)
		}
	}
	a.swept, a.sweptAt = len(a.addrs), now
}

// failed returns how long a failure checked at now waits for its answer:
// failDelay, or longer for the next of the server's failure slots. A slot
// after deadline (if not zero) is not taken: late reports that the
// connection is closed at the deadline, unanswered, after waiting the
// duration returned.
func (a *authLimiter) failed(now, deadline time.Time) (wait time.Duration, late bool) {
	answer := now.Add(max(a.failDelay, 0))
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failInterval > 0 {
		answer = later(answer, a.nextFail)
	}
	if !deadline.IsZero() && answer.After(deadline) {
		return max(deadline.Sub(now), 0), true
	}
	if a.failInterval > 0 {
		a.nextFail = later(a.nextFail, now).Add(a.failInterval)
	}
	return answer.Sub(now), false
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// hello runs HELLO [protover [AUTH username password] [SETNAME name]],
// with which RESP3-era clients open a connection, authenticating and
// choosing the protocol in one command. Only RESP2 is spoken: HELLO 3 gets
// Redis's NOPROTO, after which clients carry on in RESP2.
func (s *Server) hello(sess *session, w *resp.Writer, args [][]byte) {
	if len(args) > 0 {
		ver, err := strconv.ParseInt(string(args[0]), 10, 64)
		switch {
		case err != nil:
			w.Error("ERR Protocol version is not an integer or out of range")
			return
		case ver != 2:
			w.Error("NOPROTO unsupported protocol version")
			return
		}
	}
	var cred [][]byte
	for i := 1; i < len(args); i++ {
		more := len(args) - 1 - i
		switch opt := strings.ToUpper(string(args[i])); {
		case opt == "AUTH" && more >= 2:
			cred = args[i+1 : i+3]
			i += 2
		case opt == "SETNAME" && more >= 1:
			// Client names only label connections in CLIENT LIST, which
			// this server does not have: accepted and not kept.
			i++
		default:
			w.Error(fmt.Sprintf("ERR Syntax error in HELLO option '%s'", truncate(args[i], 64)))
			return
		}
	}
	if cred != nil {
		if !s.password.set {
			if string(cred[0]) != defaultUser {
				s.refuseAuth(sess, w)
				return
			}
		} else if right, answer := s.guess(sess, w, string(cred[0]), cred[1]); !answer {
			return
		} else if !right {
			w.Error(replyWrongPass)
			return
		}
		sess.authed = true
	}
	if !sess.authed {
		w.Error("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	w.Array(14)
	for _, kv := range [][2]string{{"server", "redis"}, {"version", redisVersion}} {
		w.Bulk([]byte(kv[0]))
		w.Bulk([]byte(kv[1]))
	}
	w.Bulk([]byte("proto"))
	w.Int(2)
	w.Bulk([]byte("id"))
	w.Int(sess.id)
	for _, kv := range [][2]string{{"mode", "standalone"}, {"role", "master"}} {
		w.Bulk([]byte(kv[0]))
		w.Bulk([]byte(kv[1]))
	}
	w.Bulk([]byte("modules"))
	w.Array(0)
}

// auth runs AUTH password or AUTH username password.
func (s *Server) auth(sess *session, w *resp.Writer, args [][]byte) {
	user, pass := defaultUser, args[0]
	if len(args) == 2 {
		user, pass = string(args[0]), args[1]
	}
	if !s.password.set {
		// As Redis: the default user then has no password, which the
		// two-argument form accepts and the old one-argument form calls a
		// configuration mistake.
		if len(args) == 2 && user == defaultUser {
			w.Simple("OK")
			return
		}
		if len(args) == 1 {
			w.Error(replyNoPassSet)
			return
		}
		s.refuseAuth(sess, w)
		return
	}
	right, answer := s.guess(sess, w, user, pass)
	switch {
	case !answer:
	case !right:
		// A failed AUTH leaves the session as it was, as in Redis.
		w.Error(replyWrongPass)
	default:
		sess.authed = true
		w.Simple("OK")
	}
}

// guess checks a password through the limiter (see authLimiter). It
// reports whether user and pass are right, and whether to answer at all:
// a connection whose turn comes after its auth deadline, that gave up its
// slot to a new client or whose server shuts down gets no answer, and the
// caller returns for the connection to be closed.
func (s *Server) guess(sess *session, w *resp.Writer, user string, pass []byte) (right, answer bool) {
	var deadline time.Time
	if !sess.authed {
		deadline = sess.authDeadline
	}
	bucket, d, late := s.limiter.reserve(time.Now(), deadline, sess.st.addr)
	if !s.pause(sess, w, d) || late {
		return false, false
	}
	if s.password.matches(user, pass) {
		s.limiter.refund(time.Now(), bucket)
		return true, true
	}
	s.authFailures.Add(1)
	d, late = s.limiter.failed(time.Now(), deadline)
	return false, s.pause(sess, w, d) && !late
}

// refuseAuth answers a failed AUTH while no password is set (a user
// other than "default") when the limiter allows.
func (s *Server) refuseAuth(sess *session, w *resp.Writer) {
	s.authFailures.Add(1)
	var deadline time.Time
	if !sess.authed {
		deadline = sess.authDeadline
	}
	if d, late := s.limiter.failed(time.Now(), deadline); s.pause(sess, w, d) && !late {
		w.Error(replyWrongPass)
	}
}

// pause waits d, having sent the replies written so far (earlier
// pipelined commands' answers need not wait too). It reports false if the
// wait was cut short: the server is shutting down or the connection gave
// its slot to a new client.
func (s *Server) pause(sess *session, w *resp.Writer, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	w.Flush()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.quit:
	case <-sess.st.evict:
	}
	return false
}
