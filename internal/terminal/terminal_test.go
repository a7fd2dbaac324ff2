package terminal

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestNotATerminal: a buffer, a file and a pipe are not terminals. The
// positive case, a real pseudo-terminal, is cmd/lsmcuckoo's
// TestProgressOnlyOnATerminal.
func TestNotATerminal(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]io.Writer{"buffer": new(bytes.Buffer), "file": file, "pipe": w} {
		if Is(out) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
}
