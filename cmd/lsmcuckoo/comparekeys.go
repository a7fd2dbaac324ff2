package main

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
)

// maxKeyLine bounds one line of a key file: the reader's memory stays
// bounded whatever the file holds, and a longer line is not a key a store
// would hold.
const maxKeyLine = 1 << 20

// keyEncodings of a key file's lines.
const (
	encText   = "text"
	encHex    = "hex"
	encBase64 = "base64"
)

// sampler keeps a uniform sample of at most max distinct keys (Vitter's
// algorithm R): a key already in the sample is not taken twice. It copies
// the keys it keeps.
type sampler struct {
	max     int
	rng     *rand.Rand
	keys    [][]byte
	index   map[string]int // sampled key → its slot in keys
	offered uint64
}

func newSampler(max int, seed uint64) *sampler {
	return &sampler{max: max, rng: rand.New(rand.NewPCG(seed, 0x5a3c1e)), index: map[string]int{}}
}

func (s *sampler) add(k []byte) {
	if _, dup := s.index[string(k)]; dup {
		return
	}
	s.offered++
	if len(s.keys) < s.max {
		s.index[string(k)] = len(s.keys)
		s.keys = append(s.keys, append([]byte(nil), k...))
		return
	}
	if j := s.rng.Uint64N(s.offered); j < uint64(s.max) {
		delete(s.index, string(s.keys[j]))
		s.keys[j] = append([]byte(nil), k...)
		s.index[string(k)] = int(j)
	}
}

// readKeyFile reads one key a line from path, decoding each as enc, and
// hands it to add. Blank lines are skipped (a text key file ends in one) and
// a trailing carriage return is dropped. It returns the keys read.
func readKeyFile(path, enc string, add func([]byte)) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("%s: no such file", path)
		}
		return 0, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return 0, fmt.Errorf("%s is a directory, not a key file", path)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxKeyLine)
	line, n := 0, 0
	var buf []byte
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if len(text) > 0 && text[len(text)-1] == '\r' {
			text = text[:len(text)-1]
		}
		if len(text) == 0 {
			continue
		}
		switch enc {
		case encHex:
			buf = buf[:0]
			if buf, err = hex.AppendDecode(buf, text); err != nil {
				return n, fmt.Errorf("%s:%d: invalid hex: %v", path, line, err)
			}
			add(buf)
		case encBase64:
			buf = buf[:0]
			s := strings.TrimSpace(string(text))
			if buf, err = base64.StdEncoding.AppendDecode(buf, []byte(s)); err != nil {
				if buf2, err2 := base64.RawStdEncoding.AppendDecode(buf[:0], []byte(s)); err2 == nil {
					buf, err = buf2, nil
				} else {
					return n, fmt.Errorf("%s:%d: invalid base64: %v", path, line, err)
				}
			}
			add(buf)
		default:
			add(text)
		}
		n++
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return n, fmt.Errorf("%s:%d: a line longer than %d bytes (one key per line; -hex or -base64 for binary keys)", path, line+1, maxKeyLine)
		}
		return n, fmt.Errorf("%s: %v", path, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: no keys (one key per line)", path)
	}
	return n, nil
}

// absentKeys makes up to n keys absent from present, in the way named:
// "shaped" keys are the user's keys with one change that keeps their shape
// (a neighbouring counter, a changed last byte), "random" keys are uniform
// bytes of the user's key lengths. Every key is checked against present,
// so none is a key the filter holds; a key set too dense to leave room
// yields fewer.
func absentKeys(keys [][]byte, present map[string]struct{}, n int, how string, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 0xab5e))
	out := make([][]byte, 0, n)
	made := make(map[string]struct{}, n)
	// reach is the largest power of ten a counter moves by: it grows as
	// candidates keep landing on keys of the set, as they do in a dense
	// range of counters, until the neighbours lie past its ends.
	reach, failed := 0, 0
	for tries := 0; len(out) < n && tries < 20*n; tries++ {
		k := keys[rng.IntN(len(keys))]
		var a []byte
		if how == "random" {
			a = make([]byte, len(k))
			for i := range a {
				a[i] = byte(rng.Uint32())
			}
		} else {
			a = reshape(k, rng, reach)
		}
		if a == nil {
			continue
		}
		if _, in := present[string(a)]; in {
			if failed++; failed > n/8+16 && reach < 18 {
				reach, failed = reach+1, 0
			}
			continue
		}
		if _, dup := made[string(a)]; dup {
			continue
		}
		made[string(a)] = struct{}{}
		out = append(out, a)
	}
	return out
}

// reshape returns k changed as a neighbouring key would be: its trailing
// decimal counter moved by a few times a power of ten up to 10^reach, or
// its trailing big-endian counter for a binary key, or its last byte
// replaced by another of the same class (digit, letter, other). nil for an
// empty key.
func reshape(k []byte, rng *rand.Rand, reach int) []byte {
	if len(k) == 0 {
		return nil
	}
	a := append([]byte(nil), k...)
	delta := int64(1 + rng.IntN(3))
	for e := rng.IntN(reach + 1); e > 0; e-- {
		delta *= 10
	}
	if rng.IntN(2) == 0 {
		delta = -delta
	}
	if rng.IntN(2) == 0 {
		if digits := trailingDigits(a); digits > 0 && addDecimal(a[len(a)-digits:], delta) {
			return a
		}
		if !printable(a) {
			addBinary(a[max(0, len(a)-8):], delta)
			return a
		}
	}
	last := &a[len(a)-1]
	switch c := *last; {
	case c >= '0' && c <= '9':
		*last = '0' + byte((int(c-'0')+1+rng.IntN(9))%10)
	case c >= 'a' && c <= 'z':
		*last = 'a' + byte((int(c-'a')+1+rng.IntN(25))%26)
	case c >= 'A' && c <= 'Z':
		*last = 'A' + byte((int(c-'A')+1+rng.IntN(25))%26)
	default:
		*last = c + byte(1+rng.IntN(255))
	}
	return a
}

func trailingDigits(a []byte) int {
	n := 0
	for n < len(a) && a[len(a)-1-n] >= '0' && a[len(a)-1-n] <= '9' {
		n++
	}
	return n
}

// addDecimal adds delta to the decimal counter d in place, keeping its
// width; false if the result does not fit or would go below zero.
func addDecimal(d []byte, delta int64) bool {
	if len(d) > 18 {
		d = d[len(d)-18:]
	}
	var v int64
	for _, c := range d {
		v = v*10 + int64(c-'0')
	}
	v += delta
	if v < 0 {
		return false
	}
	for i := len(d) - 1; i >= 0; i-- {
		d[i] = '0' + byte(v%10)
		v /= 10
	}
	return v == 0
}

// addBinary adds delta to the big-endian counter b in place, wrapping.
func addBinary(b []byte, delta int64) {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	v += uint64(delta)
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func printable(a []byte) bool {
	for _, c := range a {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}
