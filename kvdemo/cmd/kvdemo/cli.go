package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// parseInterspersed parses flags wherever they stand among the positional
// arguments ("get KEY -dir D" as well as "get -dir D KEY"), which the flag
// package alone stops at the first positional argument. "--" ends the
// flags: everything after it is positional. It returns the positional
// arguments in order.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// Parse stopped at a positional argument, or consumed a "--"
		// and stopped after it.
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" && !isFlagValue(fs, args[:consumed-1]) {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// isFlagValue reports whether the argument after args would be the value
// of args' last element, a non-boolean flag given without "=" (as in
// "-dir --", a directory named "--").
func isFlagValue(fs *flag.FlagSet, args []string) bool {
	if len(args) == 0 {
		return false
	}
	last := args[len(args)-1]
	if !strings.HasPrefix(last, "-") || last == "-" || last == "--" || strings.Contains(last, "=") {
		return false
	}
	f := fs.Lookup(strings.TrimLeft(last, "-"))
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// programPrefix starts every message this command prints, once. The store
// package starts its errors with the same word (once: errors it wraps are
// quoted without it), and other packages wrap store errors in theirs
// ("loading cuckoo store: kvdemo: ..."), so a message would otherwise say
// it two or three times ("kvdemo get: kvdemo: key not found").
const programPrefix = "kvdemo: "

// withoutInnerPrefixes removes the store's own "kvdemo: " (and "kvdemo
// NAME: ") from the start of msg and from the errors wrapped inside it,
// for a caller that prints its own prefix.
func withoutInnerPrefixes(msg, name string) string {
	for _, p := range []string{programPrefix, "kvdemo " + name + ": "} {
		for strings.HasPrefix(msg, p) {
			msg = strings.TrimPrefix(msg, p)
		}
		msg = strings.ReplaceAll(msg, ": "+p, ": ")
	}
	return msg
}

// logWriter lets the store's log lines, which carry wrapped errors, name
// the program once.
type logWriter struct {
	w    io.Writer
	name string
}

func (l logWriter) Write(p []byte) (int, error) {
	line := string(p)
	if i := strings.Index(line, ": "); i >= 0 {
		// Keep the logger's own prefix; clean what follows it.
		line = line[:i+2] + withoutInnerPrefixes(line[i+2:], l.name)
	}
	if _, err := io.WriteString(l.w, line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// requireStore refuses a directory that holds no store, for the commands
// that read or delete: opening would create one there, and a mistyped
// -dir would silently look like an empty store.
func requireStore(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no store in %s: the directory does not exist (put, load and serve create a store)", dir)
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("no store in %s: not a directory", dir)
	}
	// Every store has its MANIFEST from the moment Open creates it.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "MANIFEST") {
			return nil
		}
	}
	return fmt.Errorf("no store in %s: it has no MANIFEST (put, load and serve create a store)", dir)
}
