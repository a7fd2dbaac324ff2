package kvdemo

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestErrorsNameThePackageOnce: wrapped errors say "kvdemo:" once, at
// the start, and still match every sentinel they wrap.
func TestErrorsNameThePackageOnce(t *testing.T) {
	inner := errorf("%w: table %06d: %w", ErrCorrupt, 31, os.ErrClosed)
	err := errorf("%w: %w", ErrNotStored, errorf("%w (since: %v)", ErrReadOnly, inner))
	if n := strings.Count(err.Error(), "kvdemo"); n != 1 || !strings.HasPrefix(err.Error(), errPrefix) {
		t.Errorf("%q names the package %d times", err, n)
	}
	if !errors.Is(err, ErrNotStored) || !errors.Is(err, ErrReadOnly) || !errors.Is(inner, os.ErrClosed) || !errors.Is(inner, ErrCorrupt) {
		t.Errorf("%q does not match its sentinels", err)
	}
}
