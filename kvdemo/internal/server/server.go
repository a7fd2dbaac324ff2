// Package server serves a kvdemo store over RESP2, so that redis-cli and
// redis-benchmark can drive it.
//
// Commands: PING, ECHO, GET, SET, DEL, EXISTS, INFO, QUIT, SELECT 0, and
// enough of COMMAND and CONFIG GET (empty replies) for redis-cli and
// redis-benchmark's start-up queries. SET answers only once the store has
// made the write durable (the store fsyncs each write, concurrent writers
// sharing fsyncs). Every connection has its own goroutine and state; a
// malformed or oversized request gets an error reply and the connection
// is closed, and nothing a client sends can crash the server.
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
}

// Server is a RESP front end to one store.
type Server struct {
	db  *kvdemo.DB
	cfg Config

	mu       sync.Mutex
	ln       net.Listener
	conns    map[net.Conn]struct{}
	shutdown bool
	wg       sync.WaitGroup

	started                      time.Time
	connsTotal, refused, cmds    atomic.Int64
	protocolErrors, panicsCaught atomic.Int64
}

// New returns a server for db.
func New(db *kvdemo.DB, cfg Config) *Server {
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 1024
	}
	if cfg.Logger == nil {
		cfg.Logger = log.New(os.Stderr, "kvdemo serve: ", log.LstdFlags)
	}
	return &Server{db: db, cfg: cfg, conns: map[net.Conn]struct{}{}, started: time.Now()}
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
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscallEMFILE) {
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
		if len(s.conns) >= s.cfg.MaxConns {
			s.mu.Unlock()
			s.refused.Add(1)
			c.SetWriteDeadline(time.Now().Add(time.Second))
			io.WriteString(c, "-ERR max number of clients reached\r\n")
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.connsTotal.Add(1)
		go s.handle(c)
	}
}

// Shutdown stops accepting, lets every connection finish the command it
// is executing (a SET in progress is completed and answered), closes the
// connections and waits for their goroutines, or until ctx is done. It
// does not close the store.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
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

func (s *Server) handle(c net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
		s.wg.Done()
	}()
	w := resp.NewWriter(c)
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
	r := resp.NewReader(c, s.cfg.Limits)
	for {
		args, err := r.ReadCommand()
		if err != nil {
			var pe *resp.ProtocolError
			if errors.As(err, &pe) {
				s.protocolErrors.Add(1)
				w.Error("ERR " + pe.Error())
			}
			return
		}
		s.cmds.Add(1)
		quit := s.exec(w, args)
		// Flush when the client has nothing more in flight: one write
		// per pipeline, not per command.
		if quit || r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
		if quit || s.closing() {
			return
		}
	}
}

func (s *Server) exec(w *resp.Writer, args [][]byte) (quit bool) {
	name := strings.ToUpper(string(args[0]))
	arity := func(min, max int) bool {
		if len(args) < min || (max >= 0 && len(args) > max) {
			w.Error(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(name)))
			return false
		}
		return true
	}
	switch name {
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
			if v, ok := configParams[param]; ok {
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

func errReply(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "kvdemo: ")
	return "ERR " + msg
}

func (s *Server) info() []byte {
	st := s.db.Stats()
	s.mu.Lock()
	clients := len(s.conns)
	s.mu.Unlock()
	var b bytes.Buffer
	line := func(k string, v any) { fmt.Fprintf(&b, "%s:%v\r\n", k, v) }
	b.WriteString("# Server\r\n")
	line("redis_version", "7.0.0")
	line("kvdemo", "lsmcuckoo demo store")
	line("go_version", runtime.Version())
	line("process_id", os.Getpid())
	line("uptime_in_seconds", int64(time.Since(s.started).Seconds()))
	b.WriteString("\r\n# Clients\r\n")
	line("connected_clients", clients)
	line("maxclients", s.cfg.MaxConns)
	b.WriteString("\r\n# Stats\r\n")
	line("total_connections_received", s.connsTotal.Load())
	line("rejected_connections", s.refused.Load())
	line("total_commands_processed", s.cmds.Load())
	line("protocol_errors", s.protocolErrors.Load())
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
	if st.Filter == "global" {
		line("index_bytes", st.Index.Bytes)
		line("index_entries", st.Index.Entries)
		line("index_segments", st.Index.Segments)
		line("index_code_bits_per_entry", fmt.Sprintf("%.3f", st.Index.CodeBits))
		line("index_table_size_entropy", fmt.Sprintf("%.3f", st.Index.SizeEntropy))
		line("index_always_probed_tables", st.Index.Always)
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
