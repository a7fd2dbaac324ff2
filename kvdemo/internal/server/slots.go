package server

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Clients that send nothing, or send a command slowly, must not hold the
// server's memory or every connection slot. Three bounds apply: a
// command must arrive in full within RequestTimeout of its first byte; the
// bytes that commands hold while they arrive come from one server-wide
// budget (RequestBudget); and when every slot is taken, a new client takes
// the slot of the connection that has been idle longest, one that has not
// authenticated first. What clients can make the server hold is then
// RequestBudget plus, per connection, its allowance and its read and
// write buffers, whatever they send and however slowly.

// requestAllowance is what each connection's command may hold without
// the budget: the size of its read buffer, so that every command that
// fits in one read (PING, GET, small SETs) is served whatever the
// budget's state, and MaxConns bounds the allowances' sum.
const requestAllowance = 64 << 10

// connState is what the server knows of a connection outside the
// connection's goroutine: enough to choose the one that gives up its slot
// to a new client.
type connState struct {
	c         net.Conn
	addr      netip.Addr // the bucket its password guesses come from
	connected time.Time
	authed    atomic.Bool
	// idleSince is when the connection began to wait for its next
	// command (UnixNano); zero while a command runs. Bytes of a command
	// that has not arrived in full do not make a connection busy.
	idleSince atomic.Int64
	evicted   bool          // under Server.mu
	evict     chan struct{} // closed when the connection loses its slot
}

// victim returns the connection whose slot a new client at now takes, or
// nil if none may be taken: the one that has gone longest without
// authenticating, or else the one that has waited longest for its next
// command, if that is at least EvictIdleAfter. While any connection has
// not authenticated, authenticated ones keep their slots: the newcomer
// has not authenticated either, and clients without the password, by
// connecting faster than they grow old enough to be evicted, would
// otherwise close every idle authenticated session. s.mu is held.
func (s *Server) victim(now time.Time) *connState {
	if s.cfg.EvictIdleAfter < 0 {
		return nil
	}
	cutoff := now.Add(-s.cfg.EvictIdleAfter).UnixNano()
	var unauthed, idle *connState // the longest waiting of each kind
	var unauthedSince, idleSince int64
	anyUnauthed := false
	for _, st := range s.conns {
		if st.evicted {
			continue
		}
		if !st.authed.Load() {
			anyUnauthed = true
			since := st.connected.UnixNano()
			if since <= cutoff && (unauthed == nil || since < unauthedSince) {
				unauthed, unauthedSince = st, since
			}
			continue
		}
		since := st.idleSince.Load()
		if since != 0 && since <= cutoff && (idle == nil || since < idleSince) {
			idle, idleSince = st, since
		}
	}
	switch {
	case unauthed != nil:
		return unauthed
	case anyUnauthed:
		return nil
	}
	return idle
}

// evictLocked takes st's slot: its goroutine stops waiting, tells the
// client why, and closes it. The slot counts as free from now on. s.mu is
// held.
func (s *Server) evictLocked(st *connState) {
	st.evicted = true
	s.evicting++
	s.evictions.Add(1)
	close(st.evict)
	st.c.SetReadDeadline(time.Now())
	// A write in progress (replies the client does not read) gets a
	// moment, as the final words do, not the rest of WriteTimeout.
	st.c.SetWriteDeadline(time.Now().Add(evictedWriteGrace))
}

// evictedWriteGrace is how long a connection that lost its slot may go on
// writing: time for the replies on their way and the reason it is closed.
const evictedWriteGrace = time.Second

// wasEvicted reports whether st has lost its slot.
func wasEvicted(st *connState) bool {
	select {
	case <-st.evict:
		return true
	default:
		return false
	}
}

const replyEvicted = "ERR closing the connection: every connection slot was taken and a new client took the slot of this idle one"

// requestBudget is the server-wide budget of bytes that commands hold
// while they arrive (see resp.Budget).
type requestBudget struct {
	limit int64

	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed, and replaced, when bytes are released
}

// budgetError refuses a command its bytes.
type budgetError struct{ msg string }

func (e *budgetError) Error() string { return e.msg }

// reserve takes n more bytes for a command that holds held. A command
// that holds none yet may wait for them until deadline (if not zero),
// shutdown (quit) or eviction; one that holds some must get them at once,
// so that commands never wait for each other's bytes.
func (b *requestBudget) reserve(n, held int64, deadline time.Time, quit, evict <-chan struct{}) error {
	if held+n > b.limit {
		return &budgetError{fmt.Sprintf("ERR command larger than the server's request budget of %d bytes", b.limit)}
	}
	busy := &budgetError{fmt.Sprintf("ERR server busy: commands still arriving hold all %d bytes of the request budget; try again", b.limit)}
	var timeout <-chan time.Time
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		if held > 0 {
			b.mu.Unlock()
			return busy
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if timeout == nil && !deadline.IsZero() {
			t := time.NewTimer(time.Until(deadline))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
			continue
		case <-timeout:
			return busy
		case <-quit:
			return busy
		case <-evict:
			return busy
		}
	}
}

func (b *requestBudget) release(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
}

// connBudget is one connection's view of the budget (a resp.Budget).
type connBudget struct {
	s  *Server
	st *connState
	// deadline is when the command being read must be complete: a wait
	// for bytes ends there too.
	deadline time.Time
}

func (b *connBudget) Reserve(n, held int) error {
	return b.s.budget.reserve(int64(n), int64(held), b.deadline, b.s.quit, b.st.evict)
}

func (b *connBudget) Release(n int) { b.s.budget.release(int64(n)) }

// isBudgetError reports whether err is the budget's refusal.
func isBudgetError(err error) (string, bool) {
	var be *budgetError
	if errors.As(err, &be) {
		return be.msg, true
	}
	return "", false
}
