package kvdemo

import (
	"fmt"
	"strings"
)

// The store's errors say "kvdemo: " once, at the start of the message,
// however deeply they wrap each other: every error the package returns
// starts with errPrefix (the exported sentinels do, and errorf adds it),
// and an error of the package quoted inside another is quoted without it.
// errors.Is sees through every layer.
const errPrefix = "kvdemo: "

// errorf is fmt.Errorf for the package's errors: the message is
// errPrefix + format, with every error among args (%w or %v) quoted
// without its own errPrefix; %w wraps as fmt.Errorf does.
func errorf(format string, args ...any) error {
	quoted := make([]any, len(args))
	for i, a := range args {
		if err, ok := a.(error); ok {
			a = quote(err)
		}
		quoted[i] = a
	}
	msg := fmt.Sprintf(strings.ReplaceAll(format, "%w", "%v"), quoted...)
	return &storeError{msg: errPrefix + msg, wrapped: fmt.Errorf(format, args...)}
}

type storeError struct {
	msg     string
	wrapped error // fmt.Errorf's, for the %w operands
}

func (e *storeError) Error() string { return e.msg }

func (e *storeError) Unwrap() error { return e.wrapped }

// quote is an error's text without errPrefix, for a log line (the
// Logger has its own prefix) or a message of the package that quotes it.
func quote(err error) string { return strings.TrimPrefix(err.Error(), errPrefix) }
