package server

import (
	"strings"
	"testing"
	"time"
)

// TestYoungGuessersCannotEvictAuthenticated: with a password set, clients
// that have not authenticated, connecting faster than they become old
// enough to give up their slots, cannot make a newcomer take the slot of
// an authenticated connection: one that lacks the password would
// otherwise close every idle authenticated session, one new connection
// each. The newcomer is refused instead, as with every slot busy.
func TestYoungGuessersCannotEvictAuthenticated(t *testing.T) {
	const slots = 4
	f := start(t, Config{RequirePass: testPass, MaxConns: slots, EvictIdleAfter: 300 * time.Millisecond})
	authed := make([]*client, slots/2)
	for i := range authed {
		authed[i] = f.dial(t)
		if got := authed[i].cmd("AUTH", testPass); got != "+OK" {
			t.Fatal(got)
		}
	}
	time.Sleep(400 * time.Millisecond) // idle long enough to be evicted
	for range slots - len(authed) {
		f.dial(t).cmd("PING") // NOAUTH; connected just now
	}
	newcomer := f.dial(t)
	got, _ := newcomer.cmdErr("PING")
	if !strings.Contains(got, "max number of clients") {
		t.Errorf("newcomer while unauthenticated clients hold slots: %q", got)
	}
	for i, c := range authed {
		if got, err := c.cmdErr("PING"); got != "+PONG" {
			t.Errorf("authenticated connection %d, idle while unauthenticated ones held slots: %q, %v", i, got, err)
		}
	}
}
