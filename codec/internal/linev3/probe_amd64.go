package linev3

// ProbeBMI2 is MayContain's common case in assembly (probe_amd64.s)
// for processors with POPCNT, BMI1 and BMI2 and a fast PDEP: the key's
// keyhash.MulHash, then Lookup's checks and its probes of the primary
// and, where the primary line's threshold sends it, the secondary line.
// outcome is Absent, Maybe or Other (not settled: x is the key
// hash, and the Go lookups decide). Go emits several instructions for each
// of POPCNT, the select of the q-th zero, and the variable shifts on the
// default GOAMD64=v1; in a loop of cold lookups every instruction costs
// throughput.
//
//go:noescape
func ProbeBMI2(block, key []byte) (outcome, x uint64)

// MayContainKey64 is codec.MayContain for processors that run ProbeBMI2
// (and for the others, through OtherLookup): ProbeBMI2's assembly, its
// outcome returned as the answer, and for whatever it leaves to the Go
// lookups (OtherLookup), a jump there with the arguments as they came. In
// a loop of cold lookups the instructions of a Go function around
// ProbeBMI2 (its frame, and the arguments kept across the call) cost
// throughput.
//
//go:noescape
func MayContainKey64(block, key []byte) bool

// OtherLookup is the Go lookup of every version (codec's), which
// MayContainKey64 hands what its assembly does not settle: set once by
// codec before any lookup.
var OtherLookup func(block, key []byte) bool

// mayContainOther is where MayContainKey64's assembly jumps: a Go function
// of its signature, which an assembly jump can reach.
func mayContainOther(block, key []byte) bool { return OtherLookup(block, key) }

func cpuid(leaf, sub uint32) (a, b, c, d uint32)

// UseBMI2 reports whether this processor runs ProbeBMI2: POPCNT
// (CPUID 1, ECX bit 23), BMI1 (TZCNT, ANDN; CPUID 7, EBX bit 3) and BMI2
// (PDEP, SHLX, SHRX; EBX bit 8), and not an AMD processor before Zen 3
// (family 0x19), where PDEP is microcoded and slower than the Go select.
var UseBMI2 = func() bool {
	maxLeaf, vb, vc, vd := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	sig, _, c1, _ := cpuid(1, 0)
	_, b7, _, _ := cpuid(7, 0)
	if c1&(1<<23) == 0 || b7&(1<<3) == 0 || b7&(1<<8) == 0 {
		return false
	}
	amd := vb == 0x68747541 && vd == 0x69746e65 && vc == 0x444d4163 // "AuthenticAMD"
	family := sig >> 8 & 0xf
	if family == 0xf {
		family += sig >> 20 & 0xff
	}
	return !amd || family >= 0x19
}()

// CheckedW0 holds trailer id words ProbeBMI2 has checked (id,
// byte 5, shape), in 32 slots chosen by a multiplicative hash of the word,
// so that a lookup in a block whose word is remembered skips those checks.
// Every slot starts with one word the Go checks accept (TestV3CheckedW0
// holds it to them), so a slot never holds a word that was not checked.
// The assembly reads and writes a slot with single 8-byte moves, atomic on
// amd64: a lookup sees a checked word or misses and checks again.
var CheckedW0 = func() (s [32]uint64) {
	w := IDWord | 7<<40 | 53<<48 | 81<<56
	for i := range s {
		s[i] = w
	}
	return s
}()
