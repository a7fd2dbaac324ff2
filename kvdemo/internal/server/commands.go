package server

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo"
	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/resp"
)

// exec runs one command and writes its reply; quit reports that the
// client asked to close the connection. Arity and authentication are
// checked here, before any command touches the store, so each command's
// function sees well-formed arguments only.
func (s *Server) exec(sess *session, w *resp.Writer, args [][]byte) (quit bool) {
	name := strings.ToUpper(string(args[0]))
	arity := func(min, max int) bool {
		return checkArity(w, name, args, min, max)
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
		if arity(2, 2) {
			s.get(w, args[1])
		}
	case "SET":
		if arity(3, -1) {
			s.set(w, args)
		}
	case "DEL", "UNLINK":
		if arity(2, -1) {
			s.del(w, args[1:])
		}
	case "EXISTS":
		if arity(2, -1) {
			s.exists(w, args[1:])
		}
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
		if arity(2, -1) {
			s.config(w, args)
		}
	default:
		unknownCommand(w, args)
	}
	return false
}

// checkArity answers whether a command has between min and max arguments
// (the command name counted; max < 0: no upper bound), and otherwise
// writes the error reply Redis gives for it.
func checkArity(w *resp.Writer, name string, args [][]byte, min, max int) bool {
	if len(args) < min || (max >= 0 && len(args) > max) {
		w.Error(fmt.Sprintf("ERR wrong number of arguments for '%s' command", strings.ToLower(name)))
		return false
	}
	return true
}

// get answers GET: the value, a null reply for a missing key, or the
// store's error.
func (s *Server) get(w *resp.Writer, key []byte) {
	v, err := s.db.Get(key)
	switch {
	case errors.Is(err, kvdemo.ErrNotFound):
		w.Null()
	case err != nil:
		w.Error(errReply(err))
	default:
		w.Bulk(v)
	}
}

// set answers SET key value; args is the whole command.
func (s *Server) set(w *resp.Writer, args [][]byte) {
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
}

// del answers DEL and UNLINK with the number of keys that existed.
// Counting existing keys takes a Get before each Delete; the two are not
// atomic together, so under concurrent writers the count is approximate.
// Each Delete itself is durable before the reply.
func (s *Server) del(w *resp.Writer, keys [][]byte) {
	var n int64
	for _, k := range keys {
		ok, err := s.present(k)
		if err == nil && ok {
			n++
			err = s.db.Delete(k)
		}
		if err != nil {
			w.Error(errReply(err))
			return
		}
	}
	w.Int(n)
}

// present reports whether key is in the store; an error other than
// ErrNotFound is the store's.
func (s *Server) present(key []byte) (bool, error) {
	_, err := s.db.Get(key)
	if errors.Is(err, kvdemo.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// exists answers EXISTS with the number of the keys that are present (a
// key named twice counts twice, as in Redis).
func (s *Server) exists(w *resp.Writer, keys [][]byte) {
	var n int64
	for _, k := range keys {
		ok, err := s.present(k)
		if err != nil {
			w.Error(errReply(err))
			return
		}
		if ok {
			n++
		}
	}
	w.Int(n)
}

// config answers CONFIG GET for the few parameters clients ask about;
// args is the whole command. Other subcommands are refused.
func (s *Server) config(w *resp.Writer, args [][]byte) {
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
}

// unknownCommand writes the error Redis gives for a command it does not
// know, quoting the name and the first arguments (truncated, control
// characters replaced) so a reply never carries a client's bytes raw.
func unknownCommand(w *resp.Writer, args [][]byte) {
	var b strings.Builder
	for _, a := range args[1:min(len(args), 4)] {
		fmt.Fprintf(&b, "'%s' ", truncate(a, 64))
	}
	w.Error(fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", truncate(args[0], 64), b.String()))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
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
