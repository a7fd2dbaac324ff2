package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
)

func read(t *testing.T, input string, lim Limits) ([][]string, error) {
	t.Helper()
	r := NewReader(strings.NewReader(input), lim)
	var cmds [][]string
	for {
		args, err := r.ReadCommand()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return cmds, nil
			}
			return cmds, err
		}
		var s []string
		for _, a := range args {
			s = append(s, string(a))
		}
		cmds = append(cmds, s)
	}
}

func TestReadCommands(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [][]string
	}{
		{"*1\r\n$4\r\nPING\r\n", [][]string{{"PING"}}},
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n", [][]string{{"SET", "k", ""}}},
		{"*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n", [][]string{{"GET", "a\r\nb"}}}, // binary-safe
		{"PING\r\n", [][]string{{"PING"}}},
		{"PING\n", [][]string{{"PING"}}}, // bare LF, as nc sends
		{"set  k   v\r\nGET k\r\n", [][]string{{"set", "k", "v"}, {"GET", "k"}}},
		{"\r\n\r\n*0\r\n*-1\r\nPING\r\n", [][]string{{"PING"}}}, // empty requests are skipped
		{`SET "a b" 'c d'` + "\r\n", [][]string{{"SET", "a b", "c d"}}},
		{`SET k "x\x41\n\"y"` + "\r\n", [][]string{{"SET", "k", "xA\n\"y"}}},
		{`SET k ''` + "\r\n", [][]string{{"SET", "k", ""}}},
		{"*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n", [][]string{{"PING"}, {"PING"}, {"QUIT"}}},
	} {
		got, err := read(t, tc.in, Limits{})
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if len(got) != len(tc.want) {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
			continue
		}
		for i := range got {
			if strings.Join(got[i], "\x00") != strings.Join(tc.want[i], "\x00") {
				t.Errorf("%q: command %d = %q, want %q", tc.in, i, got[i], tc.want[i])
			}
		}
	}
}

// TestByteAtATime: framing must not depend on how the stream is split.
func TestByteAtATime(t *testing.T) {
	in := "*3\r\n$3\r\nSET\r\n$5\r\nhello\r\n$5\r\nworld\r\nPING\r\n"
	r := NewReader(iotest.OneByteReader(strings.NewReader(in)), Limits{})
	a, err := r.ReadCommand()
	if err != nil || len(a) != 3 || string(a[2]) != "world" {
		t.Fatalf("%q, %v", a, err)
	}
	if a, err := r.ReadCommand(); err != nil || string(a[0]) != "PING" {
		t.Fatalf("%q, %v", a, err)
	}
}

func TestMalformed(t *testing.T) {
	lim := Limits{MaxArgs: 8, MaxBulk: 100, MaxCommand: 150, MaxInline: 64}
	for _, in := range []string{
		"*x\r\n",
		"*\r\n",
		"*99999999999999999999999\r\n",
		"*9\r\n",             // more arguments than allowed
		"*1\r\n+PING\r\n",    // not a bulk string
		"*1\r\n$-1\r\n",      // null bulk as an argument
		"*1\r\n$101\r\n",     // longer than MaxBulk
		"*1\r\n$1x\r\n",      // junk in a length
		"*1\r\n$4\r\nPINGxx", // no CRLF after the bulk
		"*2\r\n$100\r\n" + strings.Repeat("a", 100) + "\r\n$100\r\n", // command longer than MaxCommand
		strings.Repeat("A", 100) + "\r\n",                            // inline line longer than the buffer
		`SET "unterminated` + "\r\n",
		`SET "a"b` + "\r\n",
		"*1\r\n$" + strings.Repeat("9", 30) + "\r\n",
	} {
		_, err := read(t, in, lim)
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			t.Errorf("%q: %v, want a protocol error", in, err)
		}
	}
	// Truncated streams are the connection's end, not a protocol error.
	for _, in := range []string{"*2\r\n$3\r\nGET\r\n", "*1\r\n$4\r\nPI", "*1\r\n$4", "PING"} {
		_, err := read(t, in, lim)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: %v, want unexpected EOF", in, err)
		}
	}
}

// TestOversizedLengthAllocatesNothing: a client declaring a huge bulk or a
// huge array is refused from the header alone, before a byte is allocated
// for what it declared.
func TestOversizedLengthAllocatesNothing(t *testing.T) {
	for _, in := range []string{"*2\r\n$3\r\nGET\r\n$2147483647\r\n", "*2147483647\r\n", "*1\r\n$9223372036854775807\r\n", "*1024\r\n"} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := NewReader(strings.NewReader(in), Limits{})
		_, err := r.ReadCommand()
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%q accepted", in)
		}
		// The reader's own 64 KiB buffer, and nothing of the declared size.
		if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
			t.Errorf("%q: %d bytes allocated", in, got)
		}
	}
}

func TestWriter(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Simple("OK")
	w.Error("ERR bad\r\nthing")
	w.Int(-42)
	w.Bulk([]byte("a\r\nb"))
	w.Null()
	w.Array(2)
	w.Bulk(nil)
	w.Bulk([]byte("x"))
	w.Flush()
	want := "+OK\r\n-ERR bad  thing\r\n:-42\r\n$4\r\na\r\nb\r\n$-1\r\n*2\r\n$0\r\n\r\n$1\r\nx\r\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
}

// FuzzReadCommand: no input makes the reader panic, allocate past its
// limits, or return a command whose total size breaks them.
func FuzzReadCommand(f *testing.F) {
	for _, s := range []string{"*1\r\n$4\r\nPING\r\n", "PING\r\n", `SET "a\x00" 'b'` + "\r\n", "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", "*-1\r\n", "$5\r\n"} {
		f.Add([]byte(s))
	}
	lim := Limits{MaxArgs: 16, MaxBulk: 64, MaxCommand: 96, MaxInline: 128} // a line may be longer than an argument
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in), lim)
		for i := 0; i < 100; i++ {
			args, err := r.ReadCommand()
			if err != nil {
				return
			}
			// Arrays and inline lines alike stay within the limits.
			total := 0
			for _, a := range args {
				if len(a) > lim.MaxBulk {
					t.Fatalf("argument of %d bytes", len(a))
				}
				total += len(a)
			}
			if len(args) == 0 || len(args) > lim.MaxArgs || total > lim.MaxCommand {
				t.Fatalf("command of %d args, %d bytes", len(args), total)
			}
		}
	})
}

// FuzzChunkedBulk: reading bulk strings in small growing chunks gives
// exactly what reading each in one allocation gives, commands and errors
// alike, however the input is split.
func FuzzChunkedBulk(f *testing.F) {
	for _, s := range []string{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20\r\n0123456789abcdefghij\r\n", "*1\r\n$9\r\nPINGPONGX\r\n*1\r\n$4\r\nPING\r\n", "*1\r\n$30\r\nshort\r\n"} {
		f.Add([]byte(s), uint8(3))
	}
	lim := Limits{MaxArgs: 16, MaxBulk: 4096, MaxCommand: 8192, MaxInline: 128}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		whole := NewReader(bytes.NewReader(in), lim)
		whole.chunk = 1 << 20
		chunked := NewReader(iotest.HalfReader(bytes.NewReader(in)), lim)
		chunked.chunk = 1 + int(chunk%16)
		for i := 0; i < 50; i++ {
			a, errA := whole.ReadCommand()
			b, errB := chunked.ReadCommand()
			if fmt.Sprint(errA) != fmt.Sprint(errB) || fmt.Sprintf("%q", a) != fmt.Sprintf("%q", b) {
				t.Fatalf("command %d: whole %q, %v; chunked by %d %q, %v", i, a, errA, chunked.chunk, b, errB)
			}
			if errA != nil {
				return
			}
		}
	})
}

// TestDeclaredBulkAllocatesAsItArrives: a client that declares a large
// value within the limits and then sends only part of it has made the
// reader allocate about what it sent, not what it declared.
func TestDeclaredBulkAllocatesAsItArrives(t *testing.T) {
	const declared = 1 << 20
	in := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048576\r\n" + strings.Repeat("v", 1000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := NewReader(strings.NewReader(in), Limits{MaxBulk: declared})
	_, err := r.ReadCommand()
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated value: %v, want io.ErrUnexpectedEOF", err)
	}
	// The reader's 64 KiB buffer and one 64 KiB chunk, not the megabyte.
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
		t.Errorf("%d bytes allocated for 1000 bytes received of a %d-byte value", got, declared)
	}
}

// TestLargeBulkValues: values around and well past the allocation chunk
// arrive intact however the stream is split.
func TestLargeBulkValues(t *testing.T) {
	for _, n := range []int{0, 1, bulkChunk - 2, bulkChunk - 1, bulkChunk, bulkChunk + 1, 3*bulkChunk + 7, 1<<20 + 3} {
		value := make([]byte, n)
		for i := range value {
			value[i] = byte(i*7 + i>>8)
		}
		var in bytes.Buffer
		in.WriteString("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$")
		in.WriteString(strconv.Itoa(n))
		in.WriteString("\r\n")
		in.Write(value)
		in.WriteString("\r\n*1\r\n$4\r\nPING\r\n")
		for name, src := range map[string]io.Reader{
			"whole": bytes.NewReader(in.Bytes()),
			"half":  iotest.HalfReader(bytes.NewReader(in.Bytes())),
		} {
			r := NewReader(src, Limits{MaxBulk: 2 << 20})
			args, err := r.ReadCommand()
			if err != nil || len(args) != 3 || !bytes.Equal(args[2], value) {
				t.Errorf("%d bytes, %s: %d args, %v; value intact: %v", n, name, len(args), err, len(args) == 3 && bytes.Equal(args[2], value))
				continue
			}
			if args, err := r.ReadCommand(); err != nil || string(args[0]) != "PING" {
				t.Errorf("%d bytes, %s: next command %q, %v", n, name, args, err)
			}
		}
	}
	// A bulk string not followed by CRLF is still refused at any size.
	in := "*1\r\n$" + strconv.Itoa(3*bulkChunk) + "\r\n" + strings.Repeat("x", 3*bulkChunk) + "XY"
	if _, err := NewReader(strings.NewReader(in), Limits{}).ReadCommand(); err == nil {
		t.Error("unterminated large bulk accepted")
	}
}

// TestSetLimits: a reader's limits can be tightened and loosened between
// commands.
func TestSetLimits(t *testing.T) {
	in := "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100\r\n" + strings.Repeat("v", 100) + "\r\n"
	r := NewReader(strings.NewReader(in+in), Limits{})
	r.SetLimits(Limits{MaxBulk: 10})
	if _, err := r.ReadCommand(); err != nil {
		t.Fatal(err)
	}
	var pe *ProtocolError
	if _, err := r.ReadCommand(); !errors.As(err, &pe) {
		t.Fatalf("100-byte bulk under a 10-byte limit: %v", err)
	}
	r = NewReader(strings.NewReader(in), Limits{})
	r.SetLimits(Limits{MaxBulk: 10})
	r.ReadCommand()
	r.SetLimits(Limits{})
	if args, err := r.ReadCommand(); err != nil || len(args[2]) != 100 {
		t.Fatalf("after loosening: %v", err)
	}
}

// TestInlineWithinBulkLimits: an inline command is held to the same
// argument and command sizes as an array, so that a server's tightened
// limits (before AUTH) cannot be sidestepped by typing the command as a
// line. Only the line's own bound (the buffer) would hold otherwise.
func TestInlineWithinBulkLimits(t *testing.T) {
	lim := Limits{MaxArgs: 10, MaxBulk: 100, MaxCommand: 150}
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"AUTH " + strings.Repeat("p", 100), true},
		{"AUTH " + strings.Repeat("p", 101), false},
		{`AUTH "` + strings.Repeat(`\x41`, 101) + `"`, false}, // counted after unquoting
		{`AUTH "` + strings.Repeat(`\x41`, 100) + `"`, true},
		{"SET " + strings.Repeat("k", 90) + " " + strings.Repeat("v", 60), false}, // each fits, not together
		{"SET " + strings.Repeat("k", 80) + " " + strings.Repeat("v", 60), true},
	} {
		cmds, err := read(t, tc.line+"\r\n", lim)
		var pe *ProtocolError
		switch {
		case tc.ok && (err != nil || len(cmds) != 1):
			t.Errorf("%d-byte line within the limits: %v", len(tc.line), err)
		case !tc.ok && !errors.As(err, &pe):
			t.Errorf("%d-byte line over the limits: %v, want a protocol error", len(tc.line), err)
		}
	}
}
