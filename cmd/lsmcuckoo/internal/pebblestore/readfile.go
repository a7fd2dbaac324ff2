package pebblestore

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// ReadFileAtMost reads a whole file of the store (a manifest, a filter file)
// that the format keeps small, refusing one larger than most bytes: a
// damaged or sparse file must not make the command allocate, or read
// through a hole, gigabytes it claims.
func ReadFileAtMost(path string, most int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > most {
		return nil, fmt.Errorf("%s: %d bytes, more than the %d its format allows", filepath.Base(path), st.Size(), most)
	}
	b, err := io.ReadAll(io.LimitReader(f, most+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > most {
		return nil, fmt.Errorf("%s: more than the %d bytes its format allows", filepath.Base(path), most)
	}
	return b, nil
}
