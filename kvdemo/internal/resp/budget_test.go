package resp

import (
	"errors"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// countingBudget grants up to limit bytes and records what it was asked.
type countingBudget struct {
	limit, used int
	refusals    int
	heldAtAsk   []int
}

var errNoBudget = errors.New("no budget")

func (b *countingBudget) Reserve(n, held int) error {
	b.heldAtAsk = append(b.heldAtAsk, held)
	if b.used+n > b.limit {
		b.refusals++
		return errNoBudget
	}
	b.used += n
	return nil
}

func (b *countingBudget) Release(n int) {
	b.used -= n
	if b.used < 0 {
		panic("released more than reserved")
	}
}

func bulkCmd(args ...string) string {
	var s strings.Builder
	s.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		s.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
	}
	return s.String()
}

// testingAllocs reports the bytes f allocates.
func testingAllocs(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestBudgetCoversDeclaredBytes: a command's bulk strings beyond the
// allowance are reserved before they are read, held while the command
// runs, and returned when the next command is read or on an error.
func TestBudgetCoversDeclaredBytes(t *testing.T) {
	const allowance = 100
	big := strings.Repeat("v", 300)
	in := bulkCmd("SET", "k", big) + bulkCmd("PING") + bulkCmd("SET", "k", big, big)
	b := &countingBudget{limit: 1000}
	r := NewReader(strings.NewReader(in), Limits{})
	r.SetBudget(b, allowance)
	args, err := r.ReadCommand()
	if err != nil || len(args) != 3 {
		t.Fatalf("first command: %q, %v", args, err)
	}
	// SET (3+2) + k (1+2) + value (300+2) = 310 declared, 210 past the allowance.
	if b.used != 210 {
		t.Errorf("while the first command runs, %d bytes are reserved, want 210", b.used)
	}
	if _, err := r.ReadCommand(); err != nil {
		t.Fatal(err)
	}
	if b.used != 0 {
		t.Errorf("a small command holds %d bytes of the budget", b.used)
	}
	if _, err := r.ReadCommand(); err != nil {
		t.Fatal(err)
	}
	if b.used != 512 {
		t.Errorf("two values: %d bytes reserved, want 512", b.used)
	}
	// The first value was asked for holding nothing, the second holding
	// what the first took.
	if got := b.heldAtAsk; len(got) != 3 || got[0] != 0 || got[1] != 0 || got[2] != 210 {
		t.Errorf("held when asking: %v, want [0 0 210]", got)
	}
	if _, err := r.ReadCommand(); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v", err)
	}
	if b.used != 0 {
		t.Errorf("%d bytes still reserved at the end of input", b.used)
	}
}

// TestBudgetRefusalAllocatesNothing: a value the budget refuses fails the
// command before its bytes are read, with the budget's error, and the
// reader gives back what the command held.
func TestBudgetRefusalAllocatesNothing(t *testing.T) {
	b := &countingBudget{limit: 1 << 20}
	// Declares 2 × 900 KiB and sends only the first.
	in := "*3\r\n$3\r\nSET\r\n$921600\r\n" + strings.Repeat("a", 921600) + "\r\n$921600\r\n"
	r := NewReader(strings.NewReader(in), Limits{MaxBulk: 1 << 20})
	r.SetBudget(b, 64<<10)
	_, err := r.ReadCommand()
	if !errors.Is(err, errNoBudget) {
		t.Fatalf("over budget: %v", err)
	}
	if b.refusals != 1 || b.used != 0 {
		t.Errorf("refusals %d, still reserved %d", b.refusals, b.used)
	}
	// Without any budget, the first value alone is too large to start.
	b = &countingBudget{limit: 1000}
	r = NewReader(strings.NewReader(in), Limits{MaxBulk: 1 << 20})
	r.SetBudget(b, 64<<10)
	allocs := testingAllocs(func() { r.ReadCommand() })
	if allocs > 1<<20/2 {
		t.Errorf("a refused value allocated %d bytes", allocs)
	}
}

// TestOnCommandStart: the hook runs once per command, when its first
// byte is there, and not for the blank lines skipped before it.
func TestOnCommandStart(t *testing.T) {
	var calls int
	r := NewReader(strings.NewReader("\r\n\r\nPING\r\n"+bulkCmd("GET", "k")), Limits{})
	r.OnCommandStart(func() { calls++ })
	for i := 1; i <= 2; i++ {
		if _, err := r.ReadCommand(); err != nil {
			t.Fatal(err)
		}
		if calls != i {
			t.Errorf("after command %d: %d calls", i, calls)
		}
	}
	if _, err := r.ReadCommand(); !errors.Is(err, io.EOF) || calls != 2 {
		t.Errorf("at the end: %v, %d calls", err, calls)
	}
}
