package resp

import (
	"errors"
	"runtime"
	"strings"
	"testing"
)

// TestInlineArgsRefusedBeforeSplit: an inline line of many one-byte
// words, from a client allowed 10 arguments, is refused without the
// reader building every word first. The line fits the read buffer, so
// nothing else bounds it: splitting it whole would turn 64 KiB of input
// into megabytes of slices, per connection, outside the request budget.
func TestInlineArgsRefusedBeforeSplit(t *testing.T) {
	line := strings.Repeat("a ", 32<<10-8) + "\r\n"
	r := NewReader(strings.NewReader(line), Limits{MaxArgs: 10, MaxBulk: 16 << 10, MaxCommand: 32 << 10})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := r.ReadCommand()
	runtime.ReadMemStats(&after)
	var pe *ProtocolError
	if !errors.As(err, &pe) {
		t.Fatalf("a line of %d arguments, limit 10: %v", 32<<10-8, err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4*uint64(len(line)) {
		t.Errorf("refusing a %d-byte inline line of too many arguments allocated %d bytes", len(line), got)
	}
}

// TestSplitArgsLimit: the limited split agrees with the whole split
// whenever the line is within the limit, and refuses it otherwise.
func TestSplitArgsLimit(t *testing.T) {
	for _, line := range []string{"", "a", "a b c", `"x y" 'z' w`, "  a   b  ", `"" '' ""`} {
		whole, err := SplitArgs([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		for max := 1; max <= 4; max++ {
			got, err := splitArgs([]byte(line), max)
			if len(whole) > max {
				if err == nil {
					t.Errorf("%q, limit %d: %d arguments accepted", line, max, len(got))
				}
				continue
			}
			if err != nil || len(got) != len(whole) {
				t.Errorf("%q, limit %d: %q, %v; want %q", line, max, got, err, whole)
			}
			for i := range got {
				if string(got[i]) != string(whole[i]) {
					t.Errorf("%q, limit %d: %q; want %q", line, max, got, whole)
				}
			}
		}
	}
}
