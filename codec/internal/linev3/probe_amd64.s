#include "textflag.h"

// func cpuid(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET

// func ProbeBMI2(block, key []byte) (outcome, x uint64)
//
// keyhash.MulHash of key, then Lookup's common case for a HashKey64
// block, step for step (see the Go code, which is the reference), the
// secondary line's probe (secondaryHas) included: it answers Absent
// or Maybe only where every check Lookup makes has passed, and
// Other (with the key hash x) for everything else, which the caller
// gives to the Go lookups. No frame: its set-up and tear-down are
// instructions too.
TEXT ·ProbeBMI2(SB), NOSPLIT, $0-64
#include "probe_body_amd64.h"

absent:
	MOVQ $0, outcome+48(FP)
	MOVQ $0, x+56(FP)
	RET

maybe:
	MOVQ $1, outcome+48(FP)
	MOVQ $0, x+56(FP)
	RET

other:
	MOVQ $2, outcome+48(FP)
	MOVQ X0, x+56(FP)
	RET

// func MayContainKey64(block, key []byte) bool
//
// ProbeBMI2's body answering as codec.MayContain: where the probe does
// not settle the lookup (another version, a damaged block, or a processor
// without UseBMI2), it jumps to mayContainOther with its arguments as
// they came, so that a caller pays for one call, not two.
TEXT ·MayContainKey64(SB), NOSPLIT, $0-49
	CMPB ·UseBMI2(SB), $0
	JEQ  other
	// Only a version-3 trailer's version byte goes on (version 2 is
	// looked up in Go, which hashes the key itself).
	MOVQ block_base+0(FP), AX
	MOVQ block_len+8(FP), CX
	CMPQ CX, $104
	JB   other
	CMPB -32(AX)(CX*1), $2
	JEQ  other
#define PROBE_CHECKED_VERSION
#include "probe_body_amd64.h"
#undef PROBE_CHECKED_VERSION

absent:
	MOVB $0, ret+48(FP)
	RET

maybe:
	MOVB $1, ret+48(FP)
	RET

other:
	JMP ·mayContainOther(SB)
