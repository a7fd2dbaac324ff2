// Package resp reads and writes RESP2, the Redis serialization protocol:
// commands as arrays of bulk strings (what redis-cli and redis-benchmark
// send) or as inline lines ("PING\r\n", what people type into telnet).
//
// The reader is written for untrusted input. Every length is checked
// against a limit before anything is allocated for it, a command's
// declared lengths are summed and capped, lines are bounded by the
// buffer, and anything malformed is a *ProtocolError after which the
// connection should be answered and closed (as Redis does): once framing
// is lost, nothing after it can be trusted.
package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Limits bound what one command may make the reader allocate.
type Limits struct {
	MaxArgs    int // elements of one array [1024]
	MaxBulk    int // bytes of one bulk string [1 MiB + 64 KiB]
	MaxCommand int // declared bytes of all of a command's bulk strings [2*MaxBulk]
	MaxInline  int // bytes of one line, inline command or header [64 KiB]
}

func (l Limits) withDefaults() Limits {
	if l.MaxArgs <= 0 {
		l.MaxArgs = 1024
	}
	if l.MaxBulk <= 0 {
		l.MaxBulk = 1<<20 + 64<<10
	}
	if l.MaxCommand <= 0 {
		l.MaxCommand = 2 * l.MaxBulk
	}
	if l.MaxInline <= 0 {
		l.MaxInline = 64 << 10
	}
	return l
}

// ProtocolError is malformed or oversized input.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

func protoErr(format string, args ...any) error {
	return &ProtocolError{Msg: fmt.Sprintf(format, args...)}
}

// Reader reads commands from a connection.
type Reader struct {
	br    *bufio.Reader
	lim   Limits
	chunk int // bulkChunk; smaller in tests, to exercise growth

	budget    Budget
	allowance int    // bytes of a command's bulk strings that need no budget
	held      int    // budget granted to the command being read or run
	onStart   func() // called when a command's first byte has arrived
}

// A Budget is shared by the readers of many connections and bounds the
// bytes that their commands hold while they arrive: bulk lengths are
// declared before their bytes, so a reader reserves what a command
// declares before it allocates for it, and the sum of what every
// connection holds stays within the budget however slowly the bytes come.
type Budget interface {
	// Reserve grants n more bytes to a command that already holds held
	// bytes of the budget. An error refuses them: ReadCommand returns it
	// and the connection's framing is lost. An implementation must not
	// let a command that holds bytes wait for more (commands that each
	// hold part of the budget and wait for the rest would wait for each
	// other).
	Reserve(n, held int) error
	// Release returns n bytes.
	Release(n int)
}

// SetBudget makes the reader reserve from b the bytes a command's bulk
// strings declare beyond its first allowance bytes, which are the
// connection's own. The reservation lasts until the next ReadCommand, so
// it also covers the command while it runs, or until Release.
func (r *Reader) SetBudget(b Budget, allowance int) {
	r.Release()
	r.budget, r.allowance = b, max(allowance, 0)
}

// OnCommandStart sets f to be called once per ReadCommand, when the first
// byte of a command has arrived: a server times from there how long the
// rest of the command takes to come.
func (r *Reader) OnCommandStart(f func()) { r.onStart = f }

// Release returns the budget held for the last command.
func (r *Reader) Release() {
	if r.held > 0 {
		r.budget.Release(r.held)
		r.held = 0
	}
}

// reserve makes the budget held for the command cover total declared
// bytes.
func (r *Reader) reserve(total int) error {
	need := total - r.allowance
	if r.budget == nil || need <= r.held {
		return nil
	}
	if err := r.budget.Reserve(need-r.held, r.held); err != nil {
		return err
	}
	r.held = need
	return nil
}

// NewReader reads from r within lim (zero fields take defaults).
func NewReader(r io.Reader, lim Limits) *Reader {
	lim = lim.withDefaults()
	return &Reader{br: bufio.NewReaderSize(r, lim.MaxInline), lim: lim, chunk: bulkChunk}
}

// SetLimits replaces the argument and bulk limits from the next command
// on (a server tightens them for a client that has not authenticated yet).
// MaxInline stays as the reader was made: it is the size of its buffer.
func (r *Reader) SetLimits(lim Limits) {
	inline := r.lim.MaxInline
	r.lim = lim.withDefaults()
	r.lim.MaxInline = inline
}

// Buffered reports bytes already read from the connection but not yet
// parsed: a pipelining client's next commands. A server flushes its
// replies when this is zero.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// ReadCommand returns the next non-empty command's arguments. Errors are
// the connection's (io.EOF at a clean end) or a *ProtocolError.
func (r *Reader) ReadCommand() ([][]byte, error) {
	r.Release()
	args, err := r.readCommand()
	if err != nil {
		r.Release()
	}
	return args, err
}

func (r *Reader) readCommand() ([][]byte, error) {
	for first := true; ; first = false {
		b, err := r.br.ReadByte()
		if err != nil {
			return nil, err
		}
		if first && r.onStart != nil {
			r.onStart()
		}
		var args [][]byte
		if b == '*' {
			args, err = r.readArray()
		} else {
			r.br.UnreadByte()
			args, err = r.readInline()
		}
		if err != nil || len(args) > 0 {
			return args, err
		}
		// "*0\r\n", "*-1\r\n" and blank lines are no command: Redis
		// skips them too.
	}
}

// readLine returns one line without its terminator. Header lines must end
// in CRLF; inline commands may end in a bare LF (telnet, nc).
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, protoErr("line longer than %d bytes", r.lim.MaxInline)
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

func (r *Reader) readInt(what string) (int64, error) {
	line, err := r.readLine()
	if err != nil {
		return 0, err
	}
	if len(line) == 0 || len(line) > 20 {
		return 0, protoErr("invalid %s length", what)
	}
	n, err := strconv.ParseInt(string(line), 10, 64)
	if err != nil {
		return 0, protoErr("invalid %s length", what)
	}
	return n, nil
}

func (r *Reader) readArray() ([][]byte, error) {
	n, err := r.readInt("multibulk")
	if err != nil {
		return nil, err
	}
	if n > int64(r.lim.MaxArgs) {
		return nil, protoErr("invalid multibulk length: %d arguments (max %d)", n, r.lim.MaxArgs)
	}
	if n <= 0 {
		return nil, nil
	}
	// Not make([][]byte, n): a client that declares 1024 arguments and
	// sends none should cost nothing.
	var args [][]byte
	total := 0
	for i := int64(0); i < n; i++ {
		b, err := r.br.ReadByte()
		if err != nil {
			return nil, unexpected(err)
		}
		if b != '$' {
			return nil, protoErr("expected '$', got '%s'", printable(b))
		}
		l, err := r.readInt("bulk")
		if err != nil {
			return nil, unexpected(err)
		}
		if l < 0 || l > int64(r.lim.MaxBulk) {
			return nil, protoErr("invalid bulk length: %d (max %d)", l, r.lim.MaxBulk)
		}
		if total += int(l); total > r.lim.MaxCommand {
			return nil, protoErr("command longer than %d bytes", r.lim.MaxCommand)
		}
		if err := r.reserve(total + 2*int(i+1)); err != nil {
			return nil, err
		}
		arg, err := r.readBulk(int(l) + 2)
		if err != nil {
			return nil, unexpected(err)
		}
		if arg[l] != '\r' || arg[l+1] != '\n' {
			return nil, protoErr("bulk string not terminated by CRLF")
		}
		args = append(args, arg[:l:l])
	}
	return args, nil
}

// bulkChunk is how much of a bulk string is allocated before its bytes
// arrive. A client that declares a large value and then sends nothing (or
// sends it slowly) holds only what it has sent, not what it declared.
const bulkChunk = 64 << 10

// readBulk reads n bytes, growing the buffer as they arrive.
func (r *Reader) readBulk(n int) ([]byte, error) {
	if n <= r.chunk {
		b := make([]byte, n)
		_, err := io.ReadFull(r.br, b)
		return b, err
	}
	b := make([]byte, 0, r.chunk)
	for len(b) < n {
		// Doubling: at most twice the bytes received are held, and a large
		// value is copied O(log n) times.
		b = slices.Grow(b, min(n-len(b), max(cap(b)-len(b), len(b))))
		m, err := io.ReadFull(r.br, b[len(b):min(n, cap(b))])
		b = b[:len(b)+m]
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func printable(b byte) string {
	if b >= 0x20 && b < 0x7f {
		return string(rune(b))
	}
	return fmt.Sprintf("\\x%02x", b)
}

func (r *Reader) readInline() ([][]byte, error) {
	line, err := r.readLine()
	if err != nil {
		return nil, err
	}
	// The count is checked as the line is split: a line of many short
	// words would otherwise cost many times its length before refusal.
	args, err := splitArgs(line, r.lim.MaxArgs)
	if err != nil {
		return nil, err
	}
	// The same sizes as an array's: the line's bound is the buffer's,
	// which is larger than the limits a server tightens before AUTH.
	total := 0
	for _, a := range args {
		if len(a) > r.lim.MaxBulk {
			return nil, protoErr("invalid bulk length: %d (max %d)", len(a), r.lim.MaxBulk)
		}
		if total += len(a); total > r.lim.MaxCommand {
			return nil, protoErr("command longer than %d bytes", r.lim.MaxCommand)
		}
	}
	return args, nil
}

// SplitArgs splits an inline command line as Redis does: on spaces, with
// "double quotes" (escapes \n \r \t \b \a \\ \" \xHH) and 'single quotes'
// (escape \') grouping words.
func SplitArgs(line []byte) ([][]byte, error) { return splitArgs(line, 0) }

// splitArgs is SplitArgs refusing, as soon as it is found, a word past
// the first maxArgs (0: no limit).
func splitArgs(line []byte, maxArgs int) ([][]byte, error) {
	var args [][]byte
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return args, nil
		}
		if maxArgs > 0 && len(args) == maxArgs {
			return nil, protoErr("too many arguments in inline request")
		}
		var cur []byte
		inDouble, inSingle, done := false, false, false
		for !done {
			if i == len(line) {
				if inDouble || inSingle {
					return nil, protoErr("unbalanced quotes in request")
				}
				break
			}
			c := line[i]
			switch {
			case inDouble:
				switch {
				case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					v, _ := strconv.ParseUint(string(line[i+2:i+4]), 16, 8)
					cur = append(cur, byte(v))
					i += 3
				case c == '\\' && i+1 < len(line):
					i++
					cur = append(cur, unescape(line[i]))
				case c == '"':
					// A closing quote must end the word.
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, protoErr("unbalanced quotes in request")
					}
					done = true
				default:
					cur = append(cur, c)
				}
			case inSingle:
				switch {
				case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
					i++
					cur = append(cur, '\'')
				case c == '\'':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, protoErr("unbalanced quotes in request")
					}
					done = true
				default:
					cur = append(cur, c)
				}
			default:
				switch {
				case isSpace(c):
					done = true
				case c == '"':
					inDouble = true
				case c == '\'':
					inSingle = true
				default:
					cur = append(cur, c)
				}
			}
			i++
		}
		if cur == nil {
			cur = []byte{}
		}
		args = append(args, cur)
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unescape(c byte) byte {
	switch c {
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	case 'b':
		return '\b'
	case 'a':
		return '\a'
	}
	return c
}

// Writer buffers replies; Flush sends them.
type Writer struct {
	bw  *bufio.Writer
	num []byte
}

func NewWriter(w io.Writer) *Writer { return &Writer{bw: bufio.NewWriterSize(w, 32<<10)} }

func (w *Writer) Flush() error { return w.bw.Flush() }

// Simple writes a status reply (+OK); s must not contain CR or LF.
func (w *Writer) Simple(s string) {
	w.bw.WriteByte('+')
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

// Error writes an error reply ("-ERR ..."); line breaks in msg, which
// would break the framing, become spaces.
func (w *Writer) Error(msg string) {
	w.bw.WriteByte('-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		w.bw.WriteByte(c)
	}
	w.bw.WriteString("\r\n")
}

func (w *Writer) Int(n int64) { w.prefixed(':', n) }

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) {
	w.prefixed('$', int64(len(b)))
	w.bw.Write(b)
	w.bw.WriteString("\r\n")
}

// Null writes the null bulk string (a missing key).
func (w *Writer) Null() { w.bw.WriteString("$-1\r\n") }

// Array writes an array header; the n elements follow.
func (w *Writer) Array(n int) { w.prefixed('*', int64(n)) }

func (w *Writer) prefixed(c byte, n int64) {
	w.bw.WriteByte(c)
	w.num = strconv.AppendInt(w.num[:0], n, 10)
	w.bw.Write(w.num)
	w.bw.WriteString("\r\n")
}
