package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/server"
)

// orNever maps the command line's 0 ("never") to the server's negative
// value for it (the server reads 0 as "the default").
func orNever(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// requestBudget maps -request-budget's MiB, 0 for "no bound", to the
// server's bytes (negative for no bound; 0 is its default there).
func requestBudget(mib int64) int64 {
	if mib == 0 {
		return -1
	}
	return mib << 20
}

// password returns the password clients must give, from -requirepass or
// the first line of -requirepass-file; "" when none is set.
func (c *command) password() (string, error) {
	if c.pass != "" {
		fmt.Fprintln(c.stderr, "kvdemo serve: warning: a password given with -requirepass is visible to other users of this machine (ps); -requirepass-file is safer")
		return c.pass, nil
	}
	if c.passFile == "" {
		return "", nil
	}
	// O_NONBLOCK: opening a FIFO would otherwise wait for a writer, and
	// serve would hang silently before it says anything; opened this way,
	// it is refused below as not a regular file.
	f, err := os.OpenFile(c.passFile, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", fmt.Errorf("-requirepass-file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("-requirepass-file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("-requirepass-file %s: not a regular file", c.passFile)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		fmt.Fprintf(c.stderr, "kvdemo serve: warning: %s can be read by other users (mode %04o); chmod 600 it\n", c.passFile, perm)
	}
	// Read one byte past the limit to tell "too long" from "just fits".
	b, err := io.ReadAll(io.LimitReader(f, server.MaxPasswordLen+2+1))
	if err != nil {
		return "", fmt.Errorf("-requirepass-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	switch {
	case line == "":
		return "", fmt.Errorf("-requirepass-file %s: the first line is empty; put the password there", c.passFile)
	case len(line) > server.MaxPasswordLen:
		return "", fmt.Errorf("-requirepass-file %s: password longer than %d bytes", c.passFile, server.MaxPasswordLen)
	}
	return line, nil
}

// warnExposure says, at start, who will be able to use the store when the
// server listens beyond the loopback interface.
func (c *command) warnExposure(addr net.Addr, passwordSet bool) {
	if a, ok := addr.(*net.TCPAddr); !ok || a.IP.IsLoopback() || passwordSet {
		return
	}
	if c.protected {
		fmt.Fprintf(c.stderr, "kvdemo serve: protected mode: no password is set, so clients from other hosts will be refused; set one with -requirepass-file to let them in\n")
		return
	}
	fmt.Fprintf(c.stderr, "kvdemo serve: warning: no password and protected mode off: anyone who can reach %s can read, overwrite and delete every key\n", addr)
}
