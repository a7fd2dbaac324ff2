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
// mode refuses clients that are not on the loopback interface.
package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
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
	// FailedAuthInterval spaces out the answers to failed AUTHs across all
	// connections, which bounds the rate of password guessing; a right
	// password is answered no sooner than a failure sent with it would be
	// [20ms; negative: no spacing].
	FailedAuthInterval time.Duration
}

// Server is a RESP front end to one store.
type Server struct {
	db       *kvdemo.DB
	cfg      Config // RequirePass cleared: only its hash is kept
	password password
	throttle authThrottle
	quit     chan struct{} // closed by Shutdown: ends AUTH throttling waits

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]struct{}
	shutdown bool
	wg       sync.WaitGroup

	started                                   time.Time
	connsTotal, refused, cmds                 atomic.Int64
	protocolErrors, panicsCaught              atomic.Int64
	authFailures, deniedByProtectedMode       atomic.Int64
	idleTimeouts, authTimeouts, writeTimeouts atomic.Int64
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
	if cfg.FailedAuthInterval == 0 {
		cfg.FailedAuthInterval = 20 * time.Millisecond
	}
	s := &Server{
		db: db, password: newPassword(cfg.RequirePass),
		throttle: authThrottle{interval: cfg.FailedAuthInterval},
		quit:     make(chan struct{}), conns: map[net.Conn]struct{}{}, started: time.Now(),
	}
	cfg.RequirePass = ""
	s.cfg = cfg
	return s
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
		if len(s.conns) >= s.cfg.MaxConns {
			s.mu.Unlock()
			s.refused.Add(1)
			refuse(c, "ERR max number of clients reached")
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		id := s.connsTotal.Add(1)
		go s.handle(c, id)
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

func (s *Server) handle(c net.Conn, id int64) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	tw := &timedWriter{c: c, timeout: s.cfg.WriteTimeout}
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
	r := resp.NewReader(flushingReader{c, w}, s.cfg.Limits)
	sess := &session{id: id, authed: !s.password.set}
	if !sess.authed {
		r.SetLimits(unauthenticatedLimits)
	}
	var authDeadline time.Time
	if !sess.authed && s.cfg.AuthTimeout > 0 {
		authDeadline = time.Now().Add(s.cfg.AuthTimeout)
		// Before AUTH, nothing the server does for the client outlasts
		// the deadline: not the writes of replies it does not read, not
		// the throttle's waits for guesses it has already sent.
		sess.authDeadline = authDeadline
		tw.notAfter = authDeadline
	}
	authTimedOut := func() {
		s.authTimeouts.Add(1)
		// The reason gets a moment past the deadline, as a refused
		// connection's does.
		tw.notAfter = time.Now().Add(time.Second)
		w.Error(fmt.Sprintf("ERR closing the connection: no AUTH within %v of connecting", s.cfg.AuthTimeout))
	}
	deadlineSet := false
	for {
		// The wait for the next command ends at the idle timeout or, before
		// AUTH, at the auth deadline, whichever comes first.
		var deadline time.Time
		if s.cfg.IdleTimeout > 0 {
			deadline = time.Now().Add(s.cfg.IdleTimeout)
		}
		if !sess.authed && !authDeadline.IsZero() && (deadline.IsZero() || authDeadline.Before(deadline)) {
			deadline = authDeadline
		}
		if !deadline.IsZero() || deadlineSet {
			c.SetReadDeadline(deadline)
			deadlineSet = !deadline.IsZero()
			// Shutdown ends waits with a deadline of its own, which this
			// one may just have replaced: look again.
			if s.closing() {
				return
			}
		}
		args, err := r.ReadCommand()
		if err != nil {
			var pe *resp.ProtocolError
			var ne net.Error
			var fe flushError
			switch {
			case errors.As(err, &fe):
				if errors.As(fe.err, &ne) && ne.Timeout() {
					s.writeTimeouts.Add(1)
				}
			case errors.As(err, &pe):
				s.protocolErrors.Add(1)
				w.Error("ERR " + pe.Error())
			case errors.As(err, &ne) && ne.Timeout() && !sess.authed && !authDeadline.IsZero() && !time.Now().Before(authDeadline) && !s.closing():
				authTimedOut()
			case errors.As(err, &ne) && ne.Timeout() && !s.closing():
				s.idleTimeouts.Add(1)
			}
			return
		}
		s.cmds.Add(1)
		wasAuthed := sess.authed
		quit := s.exec(sess, w, args)
		if sess.authed && !wasAuthed {
			r.SetLimits(s.cfg.Limits)
			tw.notAfter = time.Time{}
		}
		// Commands already in the read buffer are parsed without a read
		// that the deadline could end: look at the clock too.
		if !sess.authed && !authDeadline.IsZero() && !time.Now().Before(authDeadline) {
			if !s.closing() {
				authTimedOut()
			}
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

// flushingReader sends the replies written so far before it waits for
// more of the client's bytes. The server also flushes when no bytes are
// left unparsed; this covers bytes that end in the middle of a command,
// after which the replies to the commands before it must not wait for the
// rest (Redis sends them too).
type flushingReader struct {
	c net.Conn
	w *resp.Writer
}

// flushError is a failure to send replies, met while reading.
type flushError struct{ err error }

func (e flushError) Error() string { return "sending replies: " + e.err.Error() }

func (f flushingReader) Read(p []byte) (int, error) {
	if err := f.w.Flush(); err != nil {
		return 0, flushError{err}
	}
	return f.c.Read(p)
}

// timedWriter gives every write to the connection WriteTimeout to
// complete: the replies' buffer also writes through when a large reply
// fills it, in the middle of a command. No write lasts past notAfter, if
// set (the auth deadline of a connection that has not authenticated).
type timedWriter struct {
	c        net.Conn
	timeout  time.Duration
	notAfter time.Time
}

func (t *timedWriter) Write(p []byte) (int, error) {
	if t.timeout > 0 || !t.notAfter.IsZero() {
		var d time.Time
		if t.timeout > 0 {
			d = time.Now().Add(t.timeout)
		}
		if !t.notAfter.IsZero() && (d.IsZero() || t.notAfter.Before(d)) {
			d = t.notAfter
		}
		t.c.SetWriteDeadline(d)
	}
	return t.c.Write(p)
}

// session is one connection's state.
type session struct {
	id     int64 // the connection's number since the server started
	authed bool  // gave the password, or none is required
	// authDeadline is when a connection that has not authenticated is
	// closed; zero: never.
	authDeadline time.Time
}

func (s *Server) exec(sess *session, w *resp.Writer, args [][]byte) (quit bool) {
	name := strings.ToUpper(string(args[0]))
	arity := func(min, max int) bool {
		if len(args) < min || (max >= 0 && len(args) > max) {
			w.Error(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(name)))
			return false
		}
		return true
	}
	if !sess.authed && name != "AUTH" && name != "HELLO" && name != "QUIT" {
		w.Error(replyNoAuth)
		return false
	}
	switch name {
	case "HELLO":
		s.hello(sess, w, args[1:])
	case "AUTH":
		if !arity(2, -1) {
			return
		}
		if len(args) > 3 {
			w.Error("ERR syntax error") // as Redis answers
			return
		}
		s.auth(sess, w, args[1:])
	case "PING":
		if !arity(1, 2) {
			return
		}
		if len(args) == 2 {
			w.Bulk(args[1])
		} else {
			w.Simple("PONG")
		}
	case "ECHO":
		if arity(2, 2) {
			w.Bulk(args[1])
		}
	case "QUIT":
		w.Simple("OK")
		return true
	case "GET":
		if !arity(2, 2) {
			return
		}
		v, err := s.db.Get(args[1])
		switch {
		case errors.Is(err, kvdemo.ErrNotFound):
			w.Null()
		case err != nil:
			w.Error(errReply(err))
		default:
			w.Bulk(v)
		}
	case "SET":
		if !arity(3, -1) {
			return
		}
		if len(args) > 3 {
			// EX, NX, GET... would need expiry or read-modify-write,
			// which the store does not have; refuse rather than ignore.
			w.Error("ERR syntax error (kvdemo supports SET key value only)")
			return
		}
		if err := s.db.Put(args[1], args[2]); err != nil {
			w.Error(errReply(err))
			return
		}
		w.Simple("OK")
	case "DEL", "UNLINK":
		if !arity(2, -1) {
			return
		}
		// Counting existing keys takes a Get before each Delete; the two
		// are not atomic together, so under concurrent writers the count
		// is approximate. Each Delete itself is durable before the reply.
		var n int64
		for _, k := range args[1:] {
			_, err := s.db.Get(k)
			switch {
			case err == nil:
				n++
			case !errors.Is(err, kvdemo.ErrNotFound):
				w.Error(errReply(err))
				return
			}
			if err == nil {
				if err := s.db.Delete(k); err != nil {
					w.Error(errReply(err))
					return
				}
			}
		}
		w.Int(n)
	case "EXISTS":
		if !arity(2, -1) {
			return
		}
		var n int64
		for _, k := range args[1:] {
			_, err := s.db.Get(k)
			switch {
			case err == nil:
				n++
			case !errors.Is(err, kvdemo.ErrNotFound):
				w.Error(errReply(err))
				return
			}
		}
		w.Int(n)
	case "INFO":
		w.Bulk(s.info())
	case "SELECT":
		if !arity(2, 2) {
			return
		}
		if string(args[1]) != "0" {
			w.Error("ERR DB index is out of range")
			return
		}
		w.Simple("OK")
	case "COMMAND":
		// redis-cli asks for command docs to drive its hints; an empty
		// answer just means "no hints".
		w.Array(0)
	case "CONFIG":
		if !arity(2, -1) {
			return
		}
		if strings.EqualFold(string(args[1]), "GET") && len(args) == 3 {
			// redis-benchmark asks for "save" and "appendonly" at start
			// (and warns unless both come back as name/value pairs). The
			// answers are true of this store: no snapshots, a log fsynced
			// on every write. Other parameters do not exist here.
			param := strings.ToLower(string(args[2]))
			v, ok := configParams[param]
			if param == "protected-mode" {
				v, ok = yesNo(!s.cfg.DisableProtectedMode), true
			}
			// requirepass is not among them: the password is never
			// sent back, not even to a client that knows it.
			if ok {
				w.Array(2)
				w.Bulk([]byte(param))
				w.Bulk([]byte(v))
			} else {
				w.Array(0)
			}
			return
		}
		w.Error("ERR CONFIG " + strings.ToUpper(string(args[1])) + " is not supported")
	default:
		var b strings.Builder
		for _, a := range args[1:min(len(args), 4)] {
			fmt.Fprintf(&b, "'%s' ", truncate(a, 64))
		}
		w.Error(fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", truncate(args[0], 64), b.String()))
	}
	return false
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
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
		} else if !s.password.matches(string(cred[0]), cred[1]) {
			s.refuseAuth(sess, w)
			return
		} else if !s.awaitAuthAnswer(sess, w, false) {
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
	user, guess := defaultUser, args[0]
	if len(args) == 2 {
		user, guess = string(args[0]), args[1]
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
	if !s.password.matches(user, guess) {
		// A failed AUTH leaves the session as it was, as in Redis.
		s.refuseAuth(sess, w)
		return
	}
	if !s.awaitAuthAnswer(sess, w, false) {
		return
	}
	sess.authed = true
	w.Simple("OK")
}

// refuseAuth answers a failed AUTH when the throttle allows.
func (s *Server) refuseAuth(sess *session, w *resp.Writer) {
	s.authFailures.Add(1)
	if s.awaitAuthAnswer(sess, w, true) {
		w.Error(replyWrongPass)
	}
}

// awaitAuthAnswer waits until an AUTH's outcome may be told (see
// authThrottle). It reports false for a connection whose auth deadline
// comes first: it gets no answer, and the caller closes it for the
// deadline.
func (s *Server) awaitAuthAnswer(sess *session, w *resp.Writer, failed bool) bool {
	var deadline time.Time
	if !sess.authed {
		deadline = sess.authDeadline
	}
	d, late := s.throttle.wait(time.Now(), deadline, failed)
	if d > 0 {
		w.Flush() // earlier pipelined replies need not wait too
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.quit:
			t.Stop()
		}
	}
	return !late
}

// redisVersion is the Redis version the server reports: the one whose
// replies it follows.
const redisVersion = "7.0.0"

var configParams = map[string]string{"save": "", "appendonly": "yes", "appendfsync": "always"}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(bytes.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, b))
}

// errReply turns a store error into an error reply. The store starts its
// errors with "kvdemo: " (once; errors it wraps are quoted without it);
// the reply names the program nowhere ("ERR memtable full ...: writing table ...").
func errReply(err error) string {
	msg := err.Error()
	for strings.HasPrefix(msg, "kvdemo: ") {
		msg = strings.TrimPrefix(msg, "kvdemo: ")
	}
	return "ERR " + strings.ReplaceAll(msg, ": kvdemo: ", ": ")
}

func (s *Server) info() []byte {
	st := s.db.Stats()
	s.mu.Lock()
	clients := len(s.conns)
	s.mu.Unlock()
	var b bytes.Buffer
	line := func(k string, v any) { fmt.Fprintf(&b, "%s:%v\r\n", k, v) }
	b.WriteString("# Server\r\n")
	line("redis_version", redisVersion)
	line("kvdemo", "lsmcuckoo demo store")
	line("go_version", runtime.Version())
	line("process_id", os.Getpid())
	line("uptime_in_seconds", int64(time.Since(s.started).Seconds()))
	b.WriteString("\r\n# Clients\r\n")
	line("connected_clients", clients)
	line("maxclients", s.cfg.MaxConns)
	line("requirepass_set", yesNo(s.password.set))
	line("protected_mode", yesNo(!s.cfg.DisableProtectedMode))
	b.WriteString("\r\n# Stats\r\n")
	line("total_connections_received", s.connsTotal.Load())
	line("rejected_connections", s.refused.Load())
	line("total_commands_processed", s.cmds.Load())
	line("protocol_errors", s.protocolErrors.Load())
	line("acl_access_denied_auth", s.authFailures.Load())
	line("protected_mode_denied_connections", s.deniedByProtectedMode.Load())
	line("idle_timeouts", s.idleTimeouts.Load())
	line("auth_timeouts", s.authTimeouts.Load())
	line("write_timeouts", s.writeTimeouts.Load())
	b.WriteString("\r\n# Store\r\n")
	line("filter", st.Filter)
	line("compression", st.Compression)
	line("gets", st.Gets)
	line("puts", st.Puts)
	line("deletes", st.Deletes)
	line("filter_negatives", st.FilterNegatives)
	line("mem_filter_negatives", st.MemFilterNegatives)
	line("table_filter_negatives", st.TableFilterNegatives)
	line("tables_probed", st.TablesProbed)
	line("filter_false_positives", st.FilterFalsePositives)
	line("filter_bytes", st.FilterBytes)
	line("table_filter_bytes", st.TableFilterBytes)
	line("mem_filter_bytes", st.MemFilterBytes)
	line("block_cache_bytes", st.BlockCacheBytes)
	line("block_cache_used_bytes", st.BlockCacheUsedBytes)
	if st.Filter == "global" {
		line("index_bytes", st.Index.Bytes)
		line("index_entries", st.Index.Entries)
		line("index_segments", st.Index.Segments)
		line("index_code_bits_per_entry", fmt.Sprintf("%.3f", st.Index.CodeBits))
		line("index_table_size_entropy", fmt.Sprintf("%.3f", st.Index.SizeEntropy))
		line("index_always_probed_tables", st.Index.Always)
		line("index_contended_lookups", st.Index.Contended)
		line("index_rebuilding", yesNo(st.IndexRebuilding))
	}
	line("index_update_ns_per_key", fmt.Sprintf("%.1f", st.IndexUpdateNsPerKey))
	line("filter_build_ns_per_key", fmt.Sprintf("%.1f", st.FilterBuildNsPerKey))
	line("tables", st.Tables)
	line("table_keys", st.TableKeys)
	line("table_bytes", st.TableBytes)
	line("memtable_entries", st.MemtableEntries)
	line("flushes", st.Flushes)
	line("compactions", st.Compactions)
	line("rebuilt_filters", st.RebuiltFilters)
	line("unfiltered_tables", st.UnfilteredTables)
	line("torn_wal_tails", st.TornWALTails)
	line("wal_fsyncs", st.WALSyncs)
	line("last_seq", st.Seq)
	return b.Bytes()
}
