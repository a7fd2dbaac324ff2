package codec_test

import (
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/lsmcuckoo/lsmcuckoo/codec"
)

// A home-grown store's table writer: add every key of the table (versions
// of one key may repeat), store the block beside the table, and probe it
// before reading the table. Decode verifies a block once, where it is
// loaded; MayContain is the per-lookup probe.
func ExampleNewBuilder() {
	b := codec.NewBuilder(codec.Options{BitsPerKey: 10})
	for i := 0; i < 10000; i++ {
		for version := 0; version < 3; version++ {
			b.Add(fmt.Appendf(nil, "user:%05d", i)) // repeats take one slot
		}
	}
	block := b.Finish(nil) // the bytes to store with the table

	f, err := codec.Decode(block) // on load: header, layout and checksum
	if err != nil {
		fmt.Println("damaged filter:", err)
		return
	}
	fmt.Println("distinct keys:", f.Info().Keys, "format version:", f.Info().Version)

	fmt.Println("user:04711 present:", codec.MayContain(block, []byte("user:04711")))
	rejected := 0
	for i := 10000; i < 20000; i++ {
		if !codec.MayContain(block, fmt.Appendf(nil, "user:%05d", i)) {
			rejected++ // certainly not in the table: no read
		}
	}
	fmt.Println("most absent keys rejected:", rejected > 9800)
	// Output:
	// distinct keys: 10000 format version: 3
	// user:04711 present: true
	// most absent keys rejected: true
}

// Sizing by a target false-positive rate instead of a budget. The builder
// reports what it chose.
func ExampleOptions_falsePositiveRate() {
	keys := make([][]byte, 5000)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "order/%d", i)
	}
	b := codec.NewBuilder(codec.Options{FalsePositiveRate: 0.001})
	for _, k := range keys {
		b.Add(k)
	}
	block := b.Finish(nil)
	f, err := codec.Decode(block)
	if err != nil {
		panic(err)
	}
	fmt.Println("planned rate at most 0.1%:", f.Info().ExpectedFPR <= 0.001)
	fmt.Println("stats match the block:", b.Stats().Bytes == len(block), b.Stats().Keys == f.Info().Keys)
	// Output:
	// planned rate at most 0.1%: true
	// stats match the block: true true
}

// A block that is damaged or truncated never hides a key: MayContain
// answers "maybe", and Decode says what is wrong.
func ExampleMayContain_damaged() {
	block := codec.Build([][]byte{[]byte("a"), []byte("b")}, codec.Options{})
	truncated := block[:len(block)-1]

	fmt.Println(codec.MayContain(truncated, []byte("never added")))
	_, err := codec.Decode(truncated)
	fmt.Println(errors.Is(err, codec.ErrCorrupt))
	// Output:
	// true
	// true
}

// A host that hands filters only a 32-bit hash of each key (Badger's
// y.Hash on its read path, here FNV-1a for the sake of the example)
// builds a HashHost32 block and probes it by that hash. This is what
// badgerfilter.Filter does, without importing Badger or Pebble.
func ExampleBuilder_AddHash32() {
	hash := func(key []byte) uint32 {
		h := fnv.New32a()
		h.Write(key)
		return h.Sum32()
	}
	b := codec.NewBuilder(codec.Options{Hash: codec.HashHost32, BitsPerKey: 10})
	for i := 0; i < 1000; i++ {
		b.AddHash32(hash(fmt.Appendf(nil, "key-%d", i)))
	}
	block := b.Finish(nil)

	fmt.Println(codec.MayContainHash32(block, hash([]byte("key-7"))))
	fmt.Println(codec.MayContain(block, []byte("key-7"))) // wrong kind of lookup: always "maybe"
	// Output:
	// true
	// true
}
