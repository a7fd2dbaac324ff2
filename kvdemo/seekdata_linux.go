package kvdemo

import (
	"errors"
	"io"
	"syscall"
)

// seekWhenceData is lseek(2)'s SEEK_DATA.
const seekWhenceData = 3

// seekData is the first offset at or after off that holds data, the
// file's holes skipped (lseek SEEK_DATA), and false if only holes follow.
// A filesystem without the call answers off: no hole is skipped.
func seekData(s io.Seeker, off int64) (int64, bool) {
	d, err := s.Seek(off, seekWhenceData)
	switch {
	case errors.Is(err, syscall.ENXIO):
		return 0, false
	case err != nil || d < off:
		return off, true
	}
	return d, true
}
