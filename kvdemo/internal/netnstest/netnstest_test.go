package netnstest

import (
	"net"
	"testing"
	"time"
)

// TestOutsiderIsAnotherHost: inside the namespace, a server on all
// addresses sees a client dialing from Outsider with Outsider as its peer,
// not loopback, and a client dialing 127.0.0.1 as loopback.
func TestOutsiderIsAnotherHost(t *testing.T) {
	if !Enter(t) {
		return
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, tc := range []struct {
		from, to net.IP
		loopback bool
	}{
		{Outsider, Outsider, false},
		{nil, Outsider, false}, // the kernel picks Outsider as the source, as for redis-cli -h
		{nil, net.IPv4(127, 0, 0, 1), true},
	} {
		d := net.Dialer{Timeout: 5 * time.Second}
		if tc.from != nil {
			d.LocalAddr = &net.TCPAddr{IP: tc.from}
		}
		c, err := d.Dial("tcp", net.JoinHostPort(tc.to.String(), port))
		if err != nil {
			t.Fatalf("dial %v from %v: %v", tc.to, tc.from, err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		peer := s.RemoteAddr().(*net.TCPAddr).IP
		if peer.IsLoopback() != tc.loopback || !tc.loopback && !peer.Equal(Outsider) {
			t.Errorf("dial %v from %v: the server sees %v", tc.to, tc.from, peer)
		}
		s.Close()
		c.Close()
	}
}
