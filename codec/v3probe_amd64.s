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

// func v3ProbeBMI2(block, key []byte) (outcome, x uint64)
//
// keyhash.MulHash of key, then v3Lookup's common case for a HashKey64
// block, step for step (see the Go code, which is the reference): it
// answers v3Absent or v3Maybe only where every check v3Lookup makes has
// passed, v3Secondary (with the position hash x) where v3Lookup would
// probe the secondary line, and v3Other (with the key hash x) for
// everything else, which the caller gives to the Go lookups.
//
// Registers: SI block, BX length, R8 the primary line, R9 x, R10 w0,
// R11 q, R12 r, R13 k, DX Q. Frame: 0(SP) Q+K, 8(SP) 64 minus the
// threshold's width, 16(SP) the key hash.
TEXT ·v3ProbeBMI2(SB), NOSPLIT, $24-64
	// The key hash, as keyhash.MulHash computes it: x and y are the key's
	// first and last 8 bytes (4 for 4..7 bytes; three bytes folded into x
	// for 1..3); a longer key folds 16 bytes per multiply into an
	// accumulator, and its last 16 bytes are x and y^accumulator.
	MOVQ key_base+24(FP), SI
	MOVQ key_len+32(FP), BX
	CMPQ BX, $16
	JA   hashlong
	CMPQ BX, $8
	JB   hashshort
	MOVQ (SI), AX
	MOVQ -8(SI)(BX*1), DX
	JMP  hashfold

hashshort:
	CMPQ    BX, $4
	JB      hashtiny
	MOVLQZX (SI), AX
	MOVLQZX -4(SI)(BX*1), DX
	JMP     hashfold

hashtiny:
	XORL    AX, AX
	XORL    DX, DX
	TESTQ   BX, BX
	JZ      hashfold
	MOVBQZX (SI), AX
	SHLQ    $16, AX
	MOVQ    BX, CX
	SHRQ    $1, CX
	MOVBQZX (SI)(CX*1), CX
	SHLQ    $8, CX
	ORQ     CX, AX
	MOVBQZX -1(SI)(BX*1), CX
	ORQ     CX, AX
	JMP     hashfold

hashlong:
	// acc = n^K2, then acc = fold(word0^K0, word1^acc^K1) for each 16
	// bytes while more than 16 remain.
	MOVQ BX, R8
	MOVQ $0x3c6ef372fe94f82b, R9
	XORQ R9, R8                  // acc
	LEAQ -16(SI)(BX*1), R10      // the last 16 bytes
	MOVQ $0x6a09e667f3bcc909, R11
	MOVQ $0xbb67ae8584caa73b, R12

hashloop:
	MOVQ (SI), AX
	XORQ R11, AX
	MOVQ 8(SI), DX
	XORQ R8, DX
	XORQ R12, DX
	MULQ DX
	XORQ DX, AX
	MOVQ AX, R8
	ADDQ $16, SI
	CMPQ SI, R10
	JB   hashloop
	MOVQ (R10), AX
	MOVQ 8(R10), DX
	XORQ R8, DX

hashfold:
	// h = fold(fold(x^K0, y^K1)^K2, n^K3), fold(a, b) = hi^lo of a·b.
	MOVQ $0x6a09e667f3bcc909, CX
	XORQ CX, AX
	MOVQ $0xbb67ae8584caa73b, CX
	XORQ CX, DX
	MULQ DX
	XORQ DX, AX
	MOVQ $0x3c6ef372fe94f82b, CX
	XORQ CX, AX
	MOVQ $0xa54ff53a5f1d36f1, DX
	XORQ BX, DX
	MULQ DX
	XORQ DX, AX
	MOVQ AX, DI                  // h
	MOVQ AX, 16(SP)

	MOVQ block_base+0(FP), SI
	MOVQ block_len+8(FP), BX
	CMPQ BX, $104
	JB   other

	// The primary line from the key hash and the block's length alone:
	// (h·v3LineMultiplier)>>32 · ((n-40)/64) >> 32.
	MOVQ  $0xd6e8feb86659fd93, AX
	IMULQ DI, AX
	SHRQ  $32, AX
	LEAQ  -40(BX), CX
	SHRQ  $6, CX
	IMULQ CX, AX
	SHRQ  $32, AX
	SHLQ  $6, AX
	LEAQ  (SI)(AX*1), R8

	// The trailer: both copies agree and the id word is version 3's.
	LEAQ -36(SI)(BX*1), R9
	MOVQ 0(R9), R10
	MOVQ 8(R9), R11
	MOVQ 16(R9), AX
	XORQ R10, AX
	MOVQ 24(R9), CX
	XORQ R11, CX
	ANDQ CX, AX
	CMPQ AX, $-1
	JNE  other
	MOVQ $0xffffffffff, AX
	ANDQ R10, AX
	CMPQ AX, ·v3IDWord(SB)
	JNE  other

	// Byte 5: the hash kind, always-maybe and seeded-lines bits all 0.
	MOVQ  $0xe00000000000, AX
	TESTQ AX, R10
	JNE   other

	// The shape: 1 <= r <= 16, K >= 1, Q >= 1, Q+K <= 192,
	// Q + K + K·r + len(Q) <= 512, and the length the line count implies.
	MOVQ   R10, R12
	SHRQ   $40, R12
	ANDQ   $31, R12
	LEAQ   -1(R12), AX
	CMPQ   AX, $16
	JAE    other
	MOVQ   R10, R13
	SHRQ   $48, R13
	ANDQ   $0xff, R13
	JZ     other
	MOVQ   R10, DX
	SHRQ   $56, DX
	JZ     other
	LEAQ   (DX)(R13*1), AX
	CMPQ   AX, $192
	JA     other
	MOVQ   AX, 0(SP)             // Q+K
	BSRQ   DX, CX
	INCQ   CX                    // len(Q)
	MOVQ   R13, DI
	IMULQ  R12, DI
	ADDQ   AX, DI
	ADDQ   CX, DI
	CMPQ   DI, $512
	JA     other
	NEGQ   CX
	ADDQ   $64, CX
	MOVQ   CX, 8(SP)             // 64 - len(Q)
	MOVL   R11, AX               // lines
	TESTQ  AX, AX
	JZ     other
	SHLQ   $6, AX
	ADDQ   $40, AX
	CMPQ   AX, BX
	JNE    other

	// x = v2Position(h, v2Multiplier(seed)); q from its bits 16..31.
	MOVQ  R11, AX
	SHRQ  $32, AX
	INCQ  AX
	MOVQ  $0x9e3779b97f4a7c15, CX
	IMULQ CX, AX
	ORQ   $1, AX
	IMULQ 16(SP), AX
	MOVQ  AX, R9
	SHRQ  $32, R9
	XORQ  AX, R9                 // x
	MOVQ  R9, R11
	SHRQ  $16, R11
	MOVWQZX R11, R11
	IMULQ DX, R11
	SHRQ  $16, R11               // q

	// pos: the header bit after the q-th zero (0 for q = 0). The zero is
	// the j-th (j = q-1, from 0) of the inverted header words z0, z1, z2:
	// in word z0 if j < c0, z1 if j < c0+c1, else z2, where it is the
	// jj-th; the word, jj and the word's first bit (base) are chosen by
	// conditional moves, not branches (which word it is depends on the
	// key: a branch would mispredict about every other lookup). PDEP then
	// puts a bit at the word's jj-th set bit.
	XORL    AX, AX
	TESTQ   R11, R11
	JZ      haspos
	LEAQ    -1(R11), AX          // j
	MOVQ    0(R8), SI
	NOTQ    SI                   // z0
	MOVQ    8(R8), DI
	NOTQ    DI                   // z1
	MOVQ    16(R8), R10
	NOTQ    R10                  // z2
	POPCNTQ SI, BX               // c0
	POPCNTQ DI, CX
	ADDQ    BX, CX               // c0+c1
	MOVQ    AX, DX
	SUBQ    BX, DX               // j - c0
	CMPQ    AX, BX
	CMOVQCC DI, SI               // the word: z1 if j >= c0
	SBBQ    BX, BX
	NOTQ    BX
	ANDQ    $64, BX              // base: 64 if j >= c0
	MOVQ    AX, DI
	SUBQ    CX, DI               // j - (c0+c1)
	CMPQ    AX, CX
	CMOVQCC R10, SI              // z2 if j >= c0+c1
	CMOVQCC DI, DX
	SBBQ    CX, CX
	NOTQ    CX
	ANDQ    $64, CX
	ADDQ    CX, BX               // base: 128 if j >= c0+c1
	TESTQ   BX, BX
	CMOVQNE DX, AX               // jj
	POPCNTQ SI, CX
	CMPQ    AX, CX
	JAE     other                // fewer zeros than quotients: not a block we wrote
	MOVL    $1, CX
	SHLXQ   AX, CX, CX
	PDEPQ   SI, CX, CX
	TZCNTQ  CX, AX
	LEAQ    1(BX)(AX*1), AX      // pos

haspos:
	// run: the ones from pos, read from one unaligned load.
	MOVQ   AX, BX
	SHRQ   $3, BX
	ANDQ   $31, BX
	MOVQ   (R8)(BX*1), BX
	MOVQ   AX, CX
	ANDQ   $7, CX
	SHRXQ  CX, BX, BX
	NOTQ   BX
	TZCNTQ BX, BX                // run
	// pos+run < Q+K, pos-q+run <= K, run·r <= 56.
	LEAQ   (AX)(BX*1), CX
	CMPQ   CX, 0(SP)
	JAE    other
	MOVQ   AX, DI
	SUBQ   R11, DI               // the run's first slot
	LEAQ   (DI)(BX*1), CX
	CMPQ   CX, R13
	JA     other
	IMULQ  R12, BX               // nb
	CMPQ   BX, $56
	JA     other

	// The remainders of the run against the key's: a SWAR compare of
	// r-bit lanes, those past the run masked off.
	IMULQ  R12, DI
	ADDQ   0(SP), DI             // off
	MOVQ   DI, CX
	SHRQ   $3, CX
	ANDQ   $63, CX
	MOVQ   (R8)(CX*1), AX
	ANDQ   $7, DI
	SHRXQ  DI, AX, AX            // rw
	LEAQ   ·v3Lanes(SB), CX
	MOVQ   (CX)(R12*8), CX       // lo
	MOVQ   $-1, DI
	SHLXQ  R12, DI, DI
	ANDNQ  R9, DI, DI            // x & (1<<r - 1)
	IMULQ  CX, DI
	XORQ   DI, AX                // v
	MOVQ   AX, DI
	SUBQ   CX, DI
	ANDNQ  DI, AX, AX            // (v-lo) &^ v
	LEAQ   -1(R12), DI
	SHLXQ  DI, CX, CX            // lane tops
	ANDQ   CX, AX
	MOVQ   $-1, CX
	SHLXQ  BX, CX, CX
	ANDNQ  AX, CX, AX            // the run's lanes only
	JNZ    maybe

	// Not in the primary line: absent unless q is at or past the
	// line's threshold.
	MOVQ  56(R8), AX
	MOVQ  8(SP), CX
	SHRXQ CX, AX, AX
	CMPQ  R11, AX
	JAE   secondary
	MOVQ $0, outcome+48(FP)
	MOVQ $0, x+56(FP)
	RET

maybe:
	MOVQ $1, outcome+48(FP)
	MOVQ $0, x+56(FP)
	RET

secondary:
	MOVQ $3, outcome+48(FP)
	MOVQ R9, x+56(FP)
	RET

other:
	MOVQ $2, outcome+48(FP)
	MOVQ 16(SP), AX
	MOVQ AX, x+56(FP)
	RET
