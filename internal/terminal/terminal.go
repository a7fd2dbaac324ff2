// Package terminal tells the commands whether an output is a terminal. A
// progress line redraws itself with carriage returns: in a log file or a
// pipe it is a wall of partial lines, so the commands draw one only where
// someone watches it.
package terminal

import (
	"io"
	"os"

	"golang.org/x/term"
)

// Is reports whether w is a terminal: an *os.File whose descriptor is one.
func Is(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
