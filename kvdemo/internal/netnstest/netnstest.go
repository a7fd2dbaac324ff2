// Package netnstest runs a test inside a private network namespace that
// the test creates, so that it can connect from an address that is not
// loopback (as a client on another host would) without sending a packet
// to any interface of the machine it runs on.
//
// The test re-executes its own binary, limited to itself, under
// `unshare -rn`: a new user namespace (so no privilege is needed) and a new
// network namespace whose only device is a loopback that carries, besides
// 127.0.0.1 and ::1, the address [Outsider]. Everything the test sends
// stays in that namespace, which disappears when the child exits.
package netnstest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Outsider is the address a client in the namespace connects from to look
// like another host. It is in TEST-NET-1 (RFC 5737), which no real host
// uses, and it exists only on the namespace's loopback device.
var Outsider = net.IPv4(192, 0, 2, 99)

// Environment variables that mark the child: the test it is to run, and
// the network namespace of its parent, which it must not be in.
const (
	childEnv       = "LSMCUCKOO_NETNS_TEST"
	parentNetnsEnv = "LSMCUCKOO_NETNS_PARENT"
)

// RequireEnv, set to any value (CI sets it), turns "cannot make the
// namespace here" from a skip into a failure, so that CI cannot pass
// without running the tests that need one.
const RequireEnv = "LSMCUCKOO_REQUIRE_NETNS"

// cannot skips t, or fails it when RequireEnv is set, for a reason that
// is about this machine rather than the code under test.
func cannot(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf(format+" (and %s is set, so this fails rather than skips)", append(args, RequireEnv)...)
	}
	t.Skipf(format, args...)
}

// setupScript runs as root of the new user namespace, before the test
// binary replaces it.
const setupScript = `ip link set lo up && ip addr add %s/32 dev lo && exec "$@"`

// Enter reports whether the calling test runs inside its private network
// namespace; when it returns false, the test must return at once.
//
// Called from the test as the go tool started it, Enter runs the same test
// again in a child process inside a new namespace, fails if the child
// fails, skips if the child skips or if the namespace cannot be made here
// (naming what is missing; a failure instead when [RequireEnv] is set),
// and returns false. In the child, it checks that the namespace is not the
// parent's and holds only loopback, then returns true.
//
// extraEnv is added to the child's environment (a path to a binary the
// parent has built, for instance). Enter must be called by a top-level
// test before it starts anything: the child runs the test alone, from the
// start.
func Enter(t *testing.T, extraEnv ...string) bool {
	t.Helper()
	if strings.Contains(t.Name(), "/") {
		t.Fatalf("netnstest.Enter called from subtest %s; call it from the top-level test", t.Name())
	}
	if os.Getenv(childEnv) == t.Name() {
		checkIsolated(t)
		return true
	}
	runChild(t, extraEnv)
	return false
}

// checkIsolated fails the child unless it is in a network namespace other
// than its parent's, with no device but loopback, and Outsider is one of
// its own addresses: otherwise the test's traffic could leave the machine
// or reach its real interfaces.
func checkIsolated(t *testing.T) {
	t.Helper()
	here, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatalf("reading this process's network namespace: %v", err)
	}
	if parent := os.Getenv(parentNetnsEnv); parent == "" || here == parent {
		t.Fatalf("the child runs in network namespace %q, its parent's is %q: not a private namespace", here, parent)
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatalf("listing the namespace's devices: %v", err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagLoopback == 0 {
			t.Fatalf("the private namespace has device %s besides loopback", ifc.Name)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(Outsider.String(), "0"))
	if err != nil {
		t.Fatalf("%v is not an address of the namespace: %v", Outsider, err)
	}
	ln.Close()
}

// runChild runs t's test again inside a new user and network namespace
// and reports its outcome as t's.
func runChild(t *testing.T, extraEnv []string) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		cannot(t, "needs unshare (package util-linux) to make a private network namespace; not found in PATH")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		cannot(t, "needs ip (package iproute2) to set up a private network namespace; not found in PATH")
	}
	parentNetns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		cannot(t, "cannot read this process's network namespace (/proc/self/ns/net): %v", err)
	}
	script := fmt.Sprintf(setupScript, Outsider)
	// A probe first, so that a kernel or policy refusing user namespaces
	// is a skip that says so, not a failure of the test.
	if out, err := exec.Command(unshare, "-rn", "sh", "-c", script, "netns", "true").CombinedOutput(); err != nil {
		cannot(t, "cannot make a private network namespace with `unshare -rn` and `ip` (user namespaces refused? see sysctl user.max_user_namespaces, kernel.unprivileged_userns_clone, kernel.apparmor_restrict_unprivileged_userns): %v\n%s", err, bytes.TrimSpace(out))
	}

	args := []string{"-rn", "sh", "-c", script, "netns", os.Args[0],
		"-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.count=1", "-test.v=true"}
	ctx := context.Background()
	if d, ok := t.Deadline(); ok {
		// The child times out first, so that it prints where it hung.
		if left := time.Until(d) - 10*time.Second; left > 0 {
			args = append(args, "-test.timeout="+left.String())
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-5*time.Second))
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, unshare, args...)
	// A process the child started and left behind must not keep the
	// output pipe, and this test, open.
	cmd.WaitDelay = 5 * time.Second
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.Env = append(cmd.Env, childEnv+"="+t.Name(), parentNetnsEnv+"="+parentNetns)
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil:
		t.Fatalf("%s in a private network namespace: %v\n%s", t.Name(), err, out)
	case bytes.Contains(out, []byte("--- SKIP: "+t.Name()+" ")):
		t.Skipf("%s skipped in its private network namespace:\n%s", t.Name(), out)
	case !bytes.Contains(out, []byte("--- PASS: "+t.Name()+" ")):
		t.Fatalf("%s did not run in its private network namespace:\n%s", t.Name(), out)
	}
	t.Logf("%s passed in a private network namespace:\n%s", t.Name(), out)
}
