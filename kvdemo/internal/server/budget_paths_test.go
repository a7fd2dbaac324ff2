package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestBudgetReturnedOnEveryPath: commands that hold part of the
// budget and then end every way a command can (completed, the client
// gone, a protocol error, the request timeout, refused for the budget)
// give every byte back.
func TestBudgetReturnedOnEveryPath(t *testing.T) {
	f := start(t, Config{RequestBudget: 600 << 10, RequestTimeout: 400 * time.Millisecond, MaxConns: 64})
	half := strings.Repeat("v", 60<<10)
	full := "*3\r\n$3\r\nSET\r\n$61440\r\n" + half + "\r\n$61440\r\n" + half + "\r\n"
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := f.dial(t)
			switch i % 5 {
			case 0:
				cmd := fmt.Sprintf("*3\r\n$3\r\nSET\r\n$4\r\nk%03d\r\n$61440\r\n%s\r\n", i, half)
				c.c.Write([]byte(cmd))
				c.readReply()
			case 1:
				c.c.Write([]byte(full[:len(full)-1000]))
				time.Sleep(50 * time.Millisecond)
				c.c.Close()
			case 2:
				c.c.Write([]byte(full[:len(half)+40]))
				c.c.Write([]byte("XXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX\r\n$3\r\n"))
				c.readReply()
			case 3:
				c.c.Write([]byte(full[:len(full)-10]))
				c.readReply() // the request timeout
			case 4:
				c.c.Write([]byte(full))
				c.readReply()
			}
		}()
	}
	wg.Wait()
	used := func() int64 {
		f.srv.budget.mu.Lock()
		defer f.srv.budget.mu.Unlock()
		return f.srv.budget.used
	}
	if !waitFor(func() bool { return used() == 0 }) {
		t.Fatalf("%d bytes of the budget still held after every command ended", used())
	}
}
