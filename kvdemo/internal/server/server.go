// Package server serves a kvdemo store over RESP2, so that redis-cli and
// redis-benchmark can drive it.
//
// Commands: PING, ECHO, GET, SET, DEL, EXISTS, INFO, QUIT, AUTH, HELLO 2,
// SELECT 0, and enough of COMMAND and CONFIG GET (empty replies) for
// redis-cli and redis-benchmark's start-up queries. SET answers only once
// the store has made the write durable (the store fsyncs each write,
// concurrent writers sharing fsyncs). Every connection has its own
// goroutine and state; a malformed or oversized request gets an error
// reply and the connection is closed, and nothing a client sends can crash
// the server.
//
// Who may connect follows Redis (see auth.go): with a password set, a
// connection must AUTH before any other command; without one, protected
// mode refuses clients that are not on the loopback interface. Password
// guessing is throttled per source address, per connection and across the
// server, in a way that never makes the right password wait behind other
// addresses' guesses (authLimiter). Clients that are slow or idle hold
// bounded memory and no slot another client needs (slots.go).
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/resp"
)

// Config tunes a Server. Zero fields take defaults.
type Config struct {
	MaxConns int         // simultaneous connections; more are refused with an error [1024]
	Limits   resp.Limits // per-command input limits; set MaxBulk to the store's value cap
	Logger   *log.Logger // [stderr]

	// RequirePass, if not empty, must be given with AUTH PASS, AUTH
	// default PASS or HELLO 2 AUTH default PASS before any command but
	// AUTH, HELLO and QUIT is served.
	RequirePass string
	// DisableProtectedMode lets clients from other hosts in while no
	// password is set. Protected mode is on unless this is true.
	DisableProtectedMode bool
	// IdleTimeout closes a connection whose next command has not arrived
	// in full this long after the previous one [0: never, as Redis's
	// default "timeout 0"].
	IdleTimeout time.Duration
	// AuthTimeout closes a connection that has not given the password this
	// long after connecting, so that connections which cannot
	// authenticate do not hold MaxConns slots [10s; negative: never].
	AuthTimeout time.Duration
	// WriteTimeout closes a connection that accepts none of its replies
	// for this long: a client that sends and never reads holds no
	// goroutine forever [30s; negative: never].
	WriteTimeout time.Duration
	// RequestTimeout closes a connection whose command has begun to
	// arrive and is not complete this long after its first byte, as
	// proxies bound the time to send a request's headers [30s; negative:
	// never].
	RequestTimeout time.Duration
	// RequestBudget bounds the bytes that all connections' commands hold
	// while they arrive and run, beyond 64 KiB each. A command that
	// cannot get its bytes waits for them, within RequestTimeout, if it
	// holds none yet; otherwise it is refused with an error and its
	// connection closed. It must exceed Limits.MaxCommand for the largest
	// commands to be served [64 MiB; negative: no bound].
	RequestBudget int64
	// EvictIdleAfter lets a new client in while every MaxConns slot is
	// taken: it takes the slot of the connection that has gone longest
	// without authenticating or, if every connection has authenticated,
	// of the connection that has waited longest for its next command,
	// once that is this long [1s; negative: never, and new clients are
	// refused].
	EvictIdleAfter time.Duration

	// Password guessing (see authLimiter). FailedAuthInterval spaces out
	// the answers to failed AUTHs across the whole server [20ms];
	// FailedAuthDelay is the least a failure waits for its answer, which
	// bounds one connection's guesses [100ms]; a source address may
	// guess AddrAuthBurst times at once [10] and then once per
	// AddrAuthInterval [200ms]. A right password waits for none of them,
	// unless its own address has used its burst. Negative durations turn
	// a limit off.
	FailedAuthInterval time.Duration
	FailedAuthDelay    time.Duration
	AddrAuthBurst      int
	AddrAuthInterval   time.Duration
}

// Server is a RESP front end to one store.
type Server struct {
	db       *kvdemo.DB
	cfg      Config // RequirePass cleared: only its hash is kept
	password password
	limiter  authLimiter
	budget   *requestBudget // nil: no bound
	quit     chan struct{}  // closed by Shutdown: ends AUTH throttling waits

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]*connState
	evicting int // connections evicted whose goroutines have not ended
	shutdown bool
	wg       sync.WaitGroup

	started                                    time.Time
	connsTotal, refused, cmds                  atomic.Int64
	protocolErrors, panicsCaught               atomic.Int64
	authFailures, deniedByProtectedMode        atomic.Int64
	idleTimeouts, authTimeouts, writeTimeouts  atomic.Int64
	requestTimeouts, budgetRefusals, evictions atomic.Int64
}

// New returns a server for db.
func New(db *kvdemo.DB, cfg Config) *Server {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 1024
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(os.Stderr, "kvdemo serve: ", log.LstdFlags)
	}
	if cfg.AuthTimeout == 0 {
		cfg.AuthTimeout = 10 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 30 * time.Second
	}
	if cfg.RequestBudget == 0 {
		cfg.RequestBudget = 64 << 20
	}
	if cfg.EvictIdleAfter == 0 {
		cfg.EvictIdleAfter = time.Second
	}
	cfg.FailedAuthInterval = orDefault(cfg.FailedAuthInterval, 20*time.Millisecond)
	cfg.FailedAuthDelay = orDefault(cfg.FailedAuthDelay, 100*time.Millisecond)
	cfg.AddrAuthInterval = orDefault(cfg.AddrAuthInterval, 200*time.Millisecond)
	if cfg.AddrAuthBurst <= 0 {
		cfg.AddrAuthBurst = 10
	}
	s := &Server{
		db: db, password: newPassword(cfg.RequirePass),
		limiter: authLimiter{
			failDelay: cfg.FailedAuthDelay, failInterval: cfg.FailedAuthInterval,
			addrBurst: cfg.AddrAuthBurst, addrInterval: cfg.AddrAuthInterval,
		},
		quit: make(chan struct{}), conns: map[net.Conn]*connState{}, started: time.Now(),
	}
	if cfg.RequestBudget > 0 {
		s.budget = &requestBudget{limit: cfg.RequestBudget}
	}
	cfg.RequirePass = ""
	s.cfg = cfg
	return s
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("server: closed")

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shutdown {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.ln = ln
	s.mu.Unlock()
	var delay time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			down := s.shutdown
			s.mu.Unlock()
			if down {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || outOfResources(err) {
				// Out of file descriptors or similar: back off, don't spin.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.cfg.Logger.Printf("accept: %v; retrying in %v", err, delay)
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		s.mu.Lock()
		if s.shutdown {
			s.mu.Unlock()
			c.Close()
			return ErrServerClosed
		}
		if protectedModeDenies(!s.cfg.DisableProtectedMode, s.password.set, c.RemoteAddr()) {
			s.mu.Unlock()
			s.deniedByProtectedMode.Add(1)
			refuse(c, replyDenied)
			continue
		}
		now := time.Now()
		if len(s.conns)-s.evicting >= s.cfg.MaxConns {
			v := s.victim(now)
			if v == nil {
				s.mu.Unlock()
				s.refused.Add(1)
				refuse(c, "ERR max number of clients reached")
				continue
			}
			s.evictLocked(v)
		}
		st := &connState{c: c, addr: guessAddr(c.RemoteAddr()), connected: now, evict: make(chan struct{})}
		st.authed.Store(!s.password.set)
		s.conns[c] = st
		s.wg.Add(1)
		s.mu.Unlock()
		id := s.connsTotal.Add(1)
		go s.handle(st, id)
	}
}

// refuse answers a connection that will not be served with an error
// reply, and closes it. The reply fits in the new socket's send buffer, so
// this does not hold up accepting.
func refuse(c net.Conn, reply string) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(c, "-"+reply+"\r\n")
	c.Close()
}

// Shutdown stops accepting, lets every connection finish the command it
// is executing (a SET in progress is completed and answered), closes the
// connections and waits for their goroutines, or until ctx is done. It
// does not close the store.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.shutdown {
		close(s.quit)
	}
	s.shutdown = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		// Unblocks a connection waiting for its next command; one
		// executing a command notices after replying.
		c.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

func (s *Server) closing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shutdown
}

func (s *Server) handle(st *connState, id int64) {
	c := st.c
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		if st.evicted {
			s.evicting--
		}
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	tw := &timedWriter{c: c, st: st, timeout: s.cfg.WriteTimeout}
	w := resp.NewWriter(tw)
	defer func() {
		// A bug in a command must cost one connection, not the server
		// (and with it every other client's connection).
		if r := recover(); r != nil {
			s.panicsCaught.Add(1)
			s.cfg.Logger.Printf("connection %s: panic: %v\n%s", c.RemoteAddr(), r, debug.Stack())
			w.Error("ERR internal error")
		}
		w.Flush()
	}()
	cn := &connection{s: s, st: st, tw: tw, w: w, sess: &session{id: id, authed: !s.password.set, st: st}}
	r := resp.NewReader(flushingReader{c, w, cn.beforeRead}, s.cfg.Limits)
	defer r.Release()
	if s.budget != nil {
		cn.budget = &connBudget{s: s, st: st}
		r.SetBudget(cn.budget, requestAllowance)
	}
	r.OnCommandStart(cn.commandStarted)
	if !cn.sess.authed {
		r.SetLimits(unauthenticatedLimits)
		if s.cfg.AuthTimeout > 0 {
			cn.authDeadline = time.Now().Add(s.cfg.AuthTimeout)
			// Before AUTH, nothing the server does for the client
			// outlasts the deadline: not the writes of replies it does
			// not read, not the limiter's waits for guesses it has
			// already sent.
			cn.sess.authDeadline = cn.authDeadline
			tw.notAfter = cn.authDeadline
		}
	}
	for {
		cn.awaitCommand()
		args, err := r.ReadCommand()
		st.idleSince.Store(0)
		if err != nil {
			cn.readFailed(err)
			return
		}
		s.cmds.Add(1)
		wasAuthed := cn.sess.authed
		quit := s.exec(cn.sess, w, args)
		if cn.sess.authed && !wasAuthed {
			st.authed.Store(true)
			r.SetLimits(s.cfg.Limits)
			tw.notAfter = time.Time{}
		}
		// Commands already in the read buffer are parsed without a read
		// that a deadline or an eviction could end: look again.
		if cn.ended() {
			return
		}
		// Flush when the client has nothing more in flight: one write
		// per pipeline, not per command.
		if quit || r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				// The replies' writes are timed (timedWriter): a client
				// that accepts none of them for WriteTimeout is dropped.
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					s.writeTimeouts.Add(1)
				}
				return
			}
		}
		if quit || s.closing() {
			return
		}
	}
}

// connection is one connection's goroutine's state.
type connection struct {
	s    *Server
	st   *connState
	sess *session
	tw   *timedWriter
	w    *resp.Writer

	budget       *connBudget // nil without a request budget
	authDeadline time.Time   // zero: none, or authenticated
	// waitUntil ends the wait for the next command (idle timeout or
	// auth deadline); commandDue is when the command that has begun to
	// arrive must be complete.
	waitUntil, commandDue time.Time
	// want is the read deadline that the next read from the client must
	// have, applied the one the connection has: deadlines are set only
	// before a read that waits, not for every command parsed from the
	// buffer.
	want, applied time.Time
}

// awaitCommand prepares the wait for the next command: it ends at the
// idle timeout or, before AUTH, at the auth deadline, whichever comes
// first.
func (cn *connection) awaitCommand() {
	var d time.Time
	if cn.s.cfg.IdleTimeout > 0 {
		d = time.Now().Add(cn.s.cfg.IdleTimeout)
	}
	if !cn.sess.authed && !cn.authDeadline.IsZero() && (d.IsZero() || cn.authDeadline.Before(d)) {
		d = cn.authDeadline
	}
	cn.waitUntil, cn.commandDue = d, time.Time{}
	cn.setWant(d)
	cn.st.idleSince.Store(time.Now().UnixNano())
}

// commandStarted runs when the first byte of a command has arrived: the
// rest must come within RequestTimeout.
func (cn *connection) commandStarted() {
	if cn.s.cfg.RequestTimeout <= 0 {
		return
	}
	cn.commandDue = time.Now().Add(cn.s.cfg.RequestTimeout)
	d := cn.commandDue
	if !cn.waitUntil.IsZero() && cn.waitUntil.Before(d) {
		d = cn.waitUntil
	}
	cn.setWant(d)
}

// setWant makes d (zero: none) the deadline of the reads to come, and of
// a wait for the request budget.
func (cn *connection) setWant(d time.Time) {
	cn.want = d
	if cn.budget != nil {
		cn.budget.deadline = d
	}
}

// beforeRead gives the connection the read deadline its next read must
// have.
func (cn *connection) beforeRead() {
	if cn.want.Equal(cn.applied) {
		return
	}
	cn.st.c.SetReadDeadline(cn.want)
	cn.applied = cn.want
	// Shutdown and eviction end waits with a deadline of their own, which
	// this one may just have replaced: look again. (Both are for good, so
	// a deadline left in place stays theirs.)
	if cn.s.closing() || wasEvicted(cn.st) {
		cn.st.c.SetReadDeadline(time.Now())
	}
}

// ended reports, after a command, whether the connection is to close
// for a reason the client is told: it lost its slot, or it has not
// authenticated by its deadline.
func (cn *connection) ended() bool {
	switch {
	case wasEvicted(cn.st):
		cn.finalWords(replyEvicted)
	case !cn.sess.authed && !cn.authDeadline.IsZero() && !time.Now().Before(cn.authDeadline):
		if !cn.s.closing() {
			cn.authTimedOut()
		}
	default:
		return false
	}
	return true
}

// finalWords sends an error reply to a connection about to be closed.
// It gets a moment, as a refused connection's does, however late.
func (cn *connection) finalWords(msg string) {
	cn.tw.notAfter = time.Now().Add(time.Second)
	cn.w.Error(msg)
}

func (cn *connection) authTimedOut() {
	cn.s.authTimeouts.Add(1)
	cn.finalWords(fmt.Sprintf("ERR closing the connection: no AUTH within %v of connecting", cn.s.cfg.AuthTimeout))
}

// readFailed answers, if it can, a connection whose next command could
// not be read, and counts why.
func (cn *connection) readFailed(err error) {
	s := cn.s
	var pe *resp.ProtocolError
	var ne net.Error
	var fe flushError
	timeout := errors.As(err, &ne) && ne.Timeout() && !s.closing()
	now := time.Now()
	switch msg, overBudget := isBudgetError(err); {
	case errors.As(err, &fe):
		if errors.As(fe.err, &ne) && ne.Timeout() {
			s.writeTimeouts.Add(1)
		}
	case wasEvicted(cn.st):
		cn.finalWords(replyEvicted)
	case errors.As(err, &pe):
		s.protocolErrors.Add(1)
		cn.w.Error("ERR " + pe.Error())
	case overBudget && !s.closing():
		s.budgetRefusals.Add(1)
		cn.finalWords(msg)
	case timeout && !cn.sess.authed && !cn.authDeadline.IsZero() && !now.Before(cn.authDeadline):
		cn.authTimedOut()
	case timeout && !cn.commandDue.IsZero() && !now.Before(cn.commandDue):
		s.requestTimeouts.Add(1)
		cn.finalWords(fmt.Sprintf("ERR closing the connection: the command did not arrive in full within %v of its first byte", s.cfg.RequestTimeout))
	case timeout:
		s.idleTimeouts.Add(1)
	}
}

// flushingReader sends the replies written so far before it waits for
// more of the client's bytes. The server also flushes when no bytes are
// left unparsed; this covers bytes that end in the middle of a command,
// after which the replies to the commands before it must not wait for the
// rest (Redis sends them too).
type flushingReader struct {
	c          net.Conn
	w          *resp.Writer
	beforeRead func() // sets the read deadline
}

// flushError is a failure to send replies, met while reading.
type flushError struct{ err error }

func (e flushError) Error() string { return "sending replies: " + e.err.Error() }

func (f flushingReader) Read(p []byte) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, flushError{err}
	}
	f.beforeRead()
	return f.c.Read(p)
}

// timedWriter gives every write to the connection WriteTimeout to
// complete: the replies' buffer also writes through when a large reply
// fills it, in the middle of a command. No write lasts past notAfter, if
// set (the auth deadline of a connection that has not authenticated), nor
// more than evictedWriteGrace once the connection has lost its slot: its
// slot counts as free at once, so a client that reads none of its replies
// must not keep the connection open past MaxConns for WriteTimeout.
type timedWriter struct {
	c        net.Conn
	st       *connState
	timeout  time.Duration
	notAfter time.Time
}

func (t *timedWriter) Write(p []byte) (int, error) {
	evicted := wasEvicted(t.st)
	if t.timeout > 0 || !t.notAfter.IsZero() || evicted {
		now := time.Now()
		var d time.Time
		if t.timeout > 0 {
			d = now.Add(t.timeout)
		}
		d = sooner(d, t.notAfter)
		if evicted {
			d = sooner(d, now.Add(evictedWriteGrace))
		}
		t.c.SetWriteDeadline(d)
		if !evicted && wasEvicted(t.st) {
			// The eviction's own deadline (evictLocked) may just have
			// been replaced: look again.
			t.c.SetWriteDeadline(sooner(d, time.Now().Add(evictedWriteGrace)))
		}
	}
	return t.c.Write(p)
}

// sooner is the earlier of two deadlines, zero meaning none.
func sooner(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// session is one connection's state.
type session struct {
	id     int64      // the connection's number since the server started
	st     *connState // the connection as the server sees it
	authed bool       // gave the password, or none is required
	// authDeadline is when a connection that has not authenticated is
	// closed; zero: never.
	authDeadline time.Time
}
