// Command lsmcuckoo shows what the table filters of a Pebble store do, on the
// user's own store and without writing into it, and rewrites them to
// lsmcuckoo when asked.
//
//	lsmcuckoo inspect DIR            read-only report: filters per level, reads per absent key, budgets to set
//	lsmcuckoo compare -keys FILE     the filters side by side on the user's keys
//	lsmcuckoo migrate DIR -bits N    rewrite every table's filter to lsmcuckoo
//
// Exit status: 0 done, 1 a finding the user asked to fail on, 2 bad usage or
// an unreadable input.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFinding = 1
	exitUsage   = 2
)

const usage = `lsmcuckoo: see what the table filters of your store do, then adopt lsmcuckoo safely.

Usage:
  lsmcuckoo inspect [flags] DIR                   report a store's filters per level, read-only (Pebble v1.1 and v2, Badger v4, kvdemo)
  lsmcuckoo compare [flags] -keys FILE|-from DIR  Pebble's and Badger's blooms, binary fuse and lsmcuckoo on your keys
  lsmcuckoo migrate [flags] DIR -bits N           rewrite a Pebble store's table filters to lsmcuckoo

Run "lsmcuckoo COMMAND -h" for a command's flags.
Exit status: 0 done, 1 a finding you asked to fail on or a false negative, 2 bad usage or unreadable input.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole command, with its streams, so that tests run it in
// process.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "inspect":
		return runInspect(args[1:], stdout, stderr)
	case "compare":
		return runCompare(args[1:], stdout, stderr)
	case "migrate":
		return runMigrate(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "lsmcuckoo: unknown command %q (lsmcuckoo -h for help)\n", args[0])
	return exitUsage
}

// usageError is bad usage: exit status 2 with the flag set's usage.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// parse parses a subcommand's flags, allowing them before and after the one
// positional argument (lsmcuckoo inspect DIR -json reads naturally).
func parse(fs *flag.FlagSet, args []string) (dir string, err error) {
	var pos []string
	// The flag package prints the whole usage on any error; a mistake gets
	// one line here, and only -h the usage.
	out := fs.Output()
	fs.SetOutput(io.Discard)
	defer fs.SetOutput(out)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				fs.Usage()
				return "", err
			}
			return "", usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	switch len(pos) {
	case 0:
		return "", usageError{"missing DIR"}
	case 1:
		return pos[0], nil
	}
	return "", usageError{fmt.Sprintf("one DIR expected, got %d arguments", len(pos))}
}

// exitFor reports err on stderr in one line and returns the exit status.
func exitFor(err error, fs *flag.FlagSet, stderr io.Writer) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "lsmcuckoo %s: %s (lsmcuckoo %s -h for help)\n", fs.Name(), ue.msg, fs.Name())
		return exitUsage
	}
	fmt.Fprintf(stderr, "lsmcuckoo %s: %v\n", fs.Name(), err)
	return exitUsage
}
