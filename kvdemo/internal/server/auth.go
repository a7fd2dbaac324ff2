package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/netip"
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

// authThrottle spaces out the answers to AUTHs across the whole server,
// so that a guesser gains nothing by opening more connections: each failure
// takes the next answer slot, at most one per interval. A right password
// takes no slot, but is answered no sooner than a failure sent at the same
// moment would be: otherwise a guesser would not wait for the WRONGPASS
// answers at all, and would learn which guess was right from the one
// answered at once. With no failures queued, nothing waits. Each
// connection runs one command at a time, so the queue is at most MaxConns
// long, and no slot is taken past the connection's auth deadline.
type authThrottle struct {
	interval time.Duration

	mu   sync.Mutex
	next time.Time // the earliest time the next answer may be given
}

// wait returns how long an AUTH that arrived at now, and failed or not,
// waits for its answer. A slot that comes after deadline (if not zero) is
// not taken: late reports that the connection should be closed at the
// deadline, unanswered, after waiting the duration returned.
func (a *authThrottle) wait(now, deadline time.Time, failed bool) (d time.Duration, late bool) {
	if a.interval <= 0 {
		return 0, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	slot := now
	if a.next.After(slot) {
		slot = a.next
	}
	if !deadline.IsZero() && slot.After(deadline) {
		return max(deadline.Sub(now), 0), true
	}
	if failed {
		a.next = slot.Add(a.interval)
	}
	return slot.Sub(now), false
}
