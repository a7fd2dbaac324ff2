package kvdemo

import (
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// The decoders of the store's own files (manifest, log, filter header)
// take bytes from disk, which may be anything: they return an error or a
// safe answer, never panic or allocate what the input claims.

func FuzzParseManifest(f *testing.F) {
	f.Add([]byte("{\"version\": 2, \"filter\": \"cuckoo\", \"tables\": [1, 3], \"next_file\": 5, \"log\": 4, \"seq\": 9}\n"))
	body := []byte("{\"version\": 2, \"filter\": \"cuckoo\", \"tables\": [1], \"next_file\": 2, \"log\": 0, \"seq\": 0}\n")
	f.Add(append(body, []byte("crc32c "+hex8(crc32.Checksum(body, crcTable))+"\n")...))
	f.Add([]byte(`{"version": 1, "filter": "bloom", "tables": [2, 2], "next_file": 3}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseManifest(b, "dir")
		if err != nil {
			return
		}
		seen := map[uint64]bool{}
		for _, id := range m.Tables {
			if seen[id] || id >= m.NextFile {
				t.Fatalf("accepted manifest lists table %d twice or at/above next_file %d", id, m.NextFile)
			}
			seen[id] = true
		}
	})
}

func hex8(v uint32) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = digits[v&15]
		v >>= 4
	}
	return string(b)
}

func encodeRecords(recs ...walRecord) []byte {
	w := &wal{}
	for _, r := range recs {
		w.append(r)
	}
	return w.pend
}

func FuzzScanLog(f *testing.F) {
	good := encodeRecords(
		walRecord{seq: 1, kind: kindPut, key: []byte("a"), value: []byte("1")},
		walRecord{seq: 2, kind: kindDel, key: []byte("b")},
		walRecord{seq: 3, kind: kindPut, key: []byte("c"), value: make([]byte, 100)},
	)
	f.Add(good)
	f.Add(good[:len(good)-3])
	bad := append([]byte(nil), good...)
	bad[20] ^= 1
	f.Add(bad)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, skip := range []bool{false, true} {
			sc, err := scanLog(data, skip, func(r walRecord) error {
				if r.kind != kindPut && r.kind != kindDel {
					t.Fatalf("record of kind %d accepted", r.kind)
				}
				if len(r.key)+len(r.value)+walHeader+walFixed > len(data) {
					t.Fatalf("record of %d+%d bytes from %d bytes", len(r.key), len(r.value), len(data))
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if sc.damageAt >= sc.size || sc.nextValid >= sc.size || (sc.damageAt < 0 && sc.nextValid != -1) {
				t.Fatalf("scan %+v of %d bytes", sc, len(data))
			}
			if sc.nextValid >= 0 && sc.nextValid <= sc.damageAt {
				t.Fatalf("next intact record %d not after the damage at %d", sc.nextValid, sc.damageAt)
			}
		}
	})
}

func FuzzFilterBinding(f *testing.F) {
	b := codec.NewBuilder(codec.Options{BitsPerKey: 10})
	b.Add([]byte("k"))
	block := b.Finish(nil)
	st := &sstable{id: 7, size: 1000, sum: 42}
	hdr := make([]byte, filterHeader)
	copy(hdr, filterMagic)
	hdr[4] = filterVersion
	binary.LittleEndian.PutUint64(hdr[8:], 7)
	binary.LittleEndian.PutUint64(hdr[16:], 1000)
	binary.LittleEndian.PutUint64(hdr[24:], 42)
	binary.LittleEndian.PutUint32(hdr[32:], crc32.Checksum(hdr[:32], crcTable))
	f.Add(append(hdr, block...))
	f.Add(block)
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := checkFilterBinding(data, st)
		if err != nil {
			return
		}
		if binary.LittleEndian.Uint64(data[8:]) != st.id {
			t.Fatal("a filter of another table was accepted")
		}
		if fl, err := codec.Decode(got); err == nil {
			fl.MayContain([]byte("k"))
		}
	})
}
