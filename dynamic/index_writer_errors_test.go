package dynamic

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/internal/testkeys"
)

// TestIndexWriterErrors checks each writer call's documented error and
// that a rejected call changes nothing: every key of every table is still
// named by its table, and no table appears or disappears.
func TestIndexWriterErrors(t *testing.T) {
	x := NewIndex(4000, 12)
	a := hashesOf(testkeys.Random(1000, 16, 71))
	b := hashesOf(testkeys.Random(1000, 16, 72))
	if err := x.AddTable(0, a); err != nil { // 0 is a valid ID
		t.Fatal(err)
	}
	if err := x.AddTable(1, b); err != nil {
		t.Fatal(err)
	}
	intact := func(step string) {
		t.Helper()
		if x.Tables() != 2 || !x.HasTable(0) || !x.HasTable(1) {
			t.Fatalf("%s: tables changed (%d tables)", step, x.Tables())
		}
		for id, hs := range map[uint64][]uint64{0: a, 1: b} {
			for _, h := range hs {
				if !holds(x.LookupHash(h, nil), id) {
					t.Fatalf("%s: a key of table %d is no longer named", step, id)
				}
			}
		}
	}
	cases := []struct {
		step string
		call func() error
		want error
	}{
		{"AddTable of a present ID", func() error { return x.AddTable(1, nil) }, ErrTableExists},
		{"AddTables with a present ID", func() error { return x.AddTables([]uint64{5, 0}, [][]uint64{nil, nil}) }, ErrTableExists},
		{"AddTables with a repeated ID", func() error { return x.AddTables([]uint64{5, 5}, [][]uint64{nil, nil}) }, ErrTableExists},
		{"RemoveTable of an unknown ID", func() error { return x.RemoveTable(9) }, ErrNoTable},
		{"RemoveTables with an unknown ID", func() error { return x.RemoveTables(0, 9) }, ErrNoTable},
		{"RemoveTables with a repeated ID", func() error { return x.RemoveTables(0, 0) }, ErrNoTable},
		{"Replace into an input's ID", func() error { return x.Replace([]uint64{0, 1}, 1, a, nil) }, ErrTableExists},
		{"Replace of an unknown input", func() error { return x.Replace([]uint64{0, 9}, 2, a, nil) }, ErrNoTable},
		{"Replace of a repeated input", func() error { return x.Replace([]uint64{0, 0}, 2, a, nil) }, ErrNoTable},
	}
	for _, c := range cases {
		if err := c.call(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.step, err, c.want)
		}
		intact(c.step)
	}
	if err := x.AddTables([]uint64{5}, nil); err == nil {
		t.Error("AddTables with more IDs than key sets was accepted")
	}
	intact("AddTables with mismatched lengths")

	// Replace with no inputs adds the merged table as the newest.
	c := hashesOf(testkeys.Random(500, 16, 73))
	c = append(c, a[0]) // a key also in table 0: newest first
	if err := x.Replace(nil, 7, c, nil); err != nil {
		t.Fatal(err)
	}
	for _, h := range c {
		if !holds(x.LookupHash(h, nil), 7) {
			t.Fatal("Replace with no inputs: a key of the new table is not named")
		}
	}
	if got := x.LookupHash(a[0], nil); !slices.Equal(got[:1], []uint64{7}) || !holds(got, 0) {
		t.Fatalf("Replace with no inputs: %v, want table 7 first and table 0 named", got)
	}
}

// TestNewIndexOddArguments: a capacity hint below one and a budget that
// is zero, negative or NaN build a working index with the narrowest
// slots, as NewIndex documents; it grows to hold what is added.
func TestNewIndexOddArguments(t *testing.T) {
	floor := NewIndex(1000, 1).Stats().SlotBits
	for _, c := range []struct {
		hint int
		bits float64
	}{{0, 10}, {-5, 10}, {1000, 0}, {1000, -3}, {1000, math.NaN()}, {0, math.Inf(-1)}} {
		x := NewIndex(c.hint, c.bits)
		if c.bits <= 0 || math.IsNaN(c.bits) {
			if got := x.Stats().SlotBits; got != floor {
				t.Errorf("NewIndex(%d, %v): %d-bit slots, want the floor %d", c.hint, c.bits, got, floor)
			}
		}
		hs := hashesOf(testkeys.Random(3000, 16, 74))
		if err := x.AddTable(1, hs); err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if !holds(x.LookupHash(h, nil), 1) {
				t.Fatalf("NewIndex(%d, %v): false negative", c.hint, c.bits)
			}
		}
	}
}
