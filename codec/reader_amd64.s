#include "textflag.h"

// func MayContain(block, key []byte) bool
//
// A jump, with the arguments as they came, to the assembly entry of the
// version the trailer's version byte names: version 4's, or version 3's
// for every other block (which hands what it does not settle to the Go
// lookups). 104 bytes is the least a version-3 or version-4 block with a
// line has.
TEXT ·MayContain(SB), NOSPLIT, $0-49
	MOVQ block_base+0(FP), AX
	MOVQ block_len+8(FP), CX
	CMPQ CX, $104
	JB   v3
	CMPB -32(AX)(CX*1), $4
	JEQ  v4

v3:
	JMP github·com∕lsmcuckoo∕lsmcuckoo∕codec∕internal∕linev3·MayContainKey64(SB)

v4:
	JMP github·com∕lsmcuckoo∕lsmcuckoo∕codec∕internal∕linev4·MayContainKey64(SB)
