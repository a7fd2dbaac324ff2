package kvdemo

import (
	"errors"
	"fmt"
	"io"

	"github.com/lsmcuckoo/lsmcuckoo/kvdemo/internal/vfs"
)

// sparseBlock is the unit in which a copy looks for zeros to leave as
// holes: the page and block size of the filesystems a store lives on.
const sparseBlock = 4096

// copyFileSparse copies the bytes of src from offset from to its end into
// dst, a new file, and makes it durable; n is the number of bytes copied
// (known, and returned, even when the copy fails). It reads a chunk at a
// time, so memory stays bounded whatever src's size. Where the filesystem
// allows it (dst can be written at an offset), blocks of zeros and src's
// holes are left as holes in dst: dst reads back byte for byte as that
// part of src, but a sparse or zero-filled stretch costs no disk space.
// Elsewhere every byte is written. On failure dst is removed.
func copyFileSparse(fs vfs.FS, src string, from int64, dst string) (n int64, err error) {
	in, err := fs.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return 0, err
	}
	size := st.Size()
	n = max(size-from, 0)
	out, err := fs.Create(dst)
	if err != nil {
		return n, err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fs.Remove(dst)
		}
	}()
	at, sparse := out.(io.WriterAt)
	seeker, holes := in.(io.Seeker)
	buf := make([]byte, logChunk)
	for pos := from; pos < size; {
		if sparse && holes {
			d, ok := seekData(seeker, pos)
			if !ok {
				break
			}
			if pos = max(pos, d); pos >= size {
				break
			}
		}
		k := int(min(int64(len(buf)), size-pos))
		got, rerr := in.ReadAt(buf[:k], pos)
		if got < k {
			if rerr == nil || errors.Is(rerr, io.EOF) {
				rerr = fmt.Errorf("%s shrank to %d bytes while being copied", src, pos+int64(got))
			}
			return n, rerr
		}
		if sparse {
			err = writeNonZero(at, buf[:k], pos-from)
		} else {
			_, err = out.Write(buf[:k])
		}
		if err != nil {
			return n, err
		}
		pos += int64(k)
	}
	if sparse {
		// The length, with whatever zeros end it as a hole.
		if err := out.Truncate(n); err != nil {
			return n, err
		}
	}
	return n, out.Sync()
}

// writeNonZero writes b at offset off of w, leaving out every block
// (aligned on sparseBlock in w) that holds only zeros.
func writeNonZero(w io.WriterAt, b []byte, off int64) error {
	run := -1 // start in b of the blocks waiting to be written
	flush := func(end int) error {
		if run < 0 {
			return nil
		}
		_, err := w.WriteAt(b[run:end], off+int64(run))
		run = -1
		return err
	}
	for i := 0; i < len(b); {
		end := min(len(b), i+sparseBlock-int((off+int64(i))%sparseBlock))
		if firstNonZero(b[i:end]) < 0 {
			if err := flush(i); err != nil {
				return err
			}
		} else if run < 0 {
			run = i
		}
		i = end
	}
	return flush(len(b))
}
