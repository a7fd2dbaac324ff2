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

// MIX sets AX to keyhash.Mix(x, seed) given k = (seed+1)·0x9e3779b97f4a7c15
// (a constant); CX is clobbered.
#define MIX(x, k) \
	MOVQ  k, AX \
	ADDQ  x, AX \
	MOVQ  AX, CX \
	SHRQ  $30, CX \
	XORQ  CX, AX \
	MOVQ  $0xbf58476d1ce4e5b9, CX \
	IMULQ CX, AX \
	MOVQ  AX, CX \
	SHRQ  $27, CX \
	XORQ  CX, AX \
	MOVQ  $0x94d049bb133111eb, CX \
	IMULQ CX, AX \
	MOVQ  AX, CX \
	SHRQ  $31, CX \
	XORQ  CX, AX

// FINGERPRINT sets R10 to a key's fingerprint x&0xffff | c>>48<<16 for
// its position hash x in DI and coefficients c in AX; CX is clobbered.
#define FINGERPRINT \
	MOVQ    AX, R10 \
	SHRQ    $48, R10 \
	SHLQ    $16, R10 \
	MOVWQZX DI, CX \
	ORQ     CX, R10

// COLUMN sets AX to the 64 bits of the line at R8 from bit off (a
// register, below 506): one load from the bit's byte shifted by the
// bit's place in it, the next 8 bytes shifting in the bits it pushed
// out (the line has 40 bytes after it: the next lines or the trailer).
// BX and CX are clobbered.
#define COLUMN(off) \
	MOVQ off, CX \
	SHRQ $3, CX \
	MOVQ (R8)(CX*1), AX \
	MOVQ 8(R8)(CX*1), BX \
	MOVQ off, CX \
	ANDQ $7, CX \
	SHRQ CX, BX, AX

// ONECOLUMN compares one full column of m ≤ 64 rows (from bit R14):
// the parity of its rows under the masked coefficients R9 against the
// fingerprint's bit 0 (R10), ORed into R13; then R10 shifts to the next
// column's bit and R14 to its first bit.
#define ONECOLUMN \
	COLUMN(R14) \
	ANDQ    R9, AX \
	PARITY

// PARITY ORs the parity of AX's bits, against the fingerprint's bit 0
// (R10), into R13; then R10 shifts to the next column's bit and R14 to
// its first bit.
#define PARITY \
	POPCNTQ AX, AX \
	XORQ    R10, AX \
	ORQ     AX, R13 \
	SHRQ    $1, R10 \
	ADDQ    R12, R14

// COLUMNS checks the r full columns (R11) of m rows (R12) of the line at
// R8 against the key's coefficients and fingerprint R10 (bit j for
// column j), as Lookup's solves, one column per STEP (ONECOLUMN, or
// TALLONECOLUMN for m > 64): four columns at a time, written out, their
// mismatches ORed into R13 and checked after each four (an absent key
// fails a column with probability 1/2: it leaves after the first four 15
// times in 16), then the rest one by one; a jump to fail on a mismatch.
// Falling through, all matched; R14 is then r·m (the extra column's
// first bit) and R10 the fingerprint shifted right by r. DX counts the
// columns left; AX, BX, CX are clobbered.
#define COLUMNS(STEP, four, one, done, fail) \
	MOVQ  R11, DX \
	XORL  R13, R13 \
	XORL  R14, R14 \
four: \
	CMPQ  DX, $4 \
	JB    one \
	STEP \
	STEP \
	STEP \
	STEP \
	TESTQ $1, R13 \
	JNZ   fail \
	SUBQ  $4, DX \
	JMP   four \
one: \
	TESTQ DX, DX \
	JZ    done \
	STEP \
	DECQ  DX \
	JMP   one \
done: \
	TESTQ $1, R13 \
	JNZ   fail

// TALLONECOLUMN is ONECOLUMN for a column of m > 64 rows: R9 holds the
// coefficients of rows 0..63, X7 those of rows 64..m-1 (masked); the
// column is read from three words (its first 64 rows, then the rest),
// and the two halves' parities are one parity of their XOR. SI is
// clobbered too.
#define TALLONECOLUMN \
	MOVQ    R14, CX \
	SHRQ    $3, CX \
	MOVQ    (R8)(CX*1), AX \
	MOVQ    8(R8)(CX*1), BX \
	MOVQ    16(R8)(CX*1), SI \
	MOVQ    R14, CX \
	ANDQ    $7, CX \
	SHRQ    CX, BX, AX \
	SHRQ    CX, SI, BX \
	ANDQ    R9, AX \
	MOVQ    X7, CX \
	ANDQ    CX, BX \
	XORQ    BX, AX \
	PARITY

// func MayContainKey64(block, key []byte) bool
//
// Lookup's word-wise path for a HashKey64 key, step for step (the Go
// code is the reference). No frame: its set-up and tear-down are
// instructions too. Registers: SI block, DI the key hash and then x,
// R8 the line, R9 the masked coefficients, R10 the fingerprint, R11 r,
// R12 m; X2 w0, X3 the coefficients, X4 block, X5 the line count, X6
// the mask of the rows in one word (m, or m-64 for columns of over 64
// rows), X7 the coefficients of rows 64..m-1, X8 the secondary line's
// position hash.
TEXT ·MayContainKey64(SB), NOSPLIT, $0-49
	CMPB ·UsePOPCNT(SB), $0
	JEQ  other
	// At least one line and the trailer; the trailer's cache line is
	// asked for first: a miss started here overlaps the hashing.
	MOVQ       block_base+0(FP), AX
	MOVQ       block_len+8(FP), CX
	CMPQ       CX, $104
	JB         other
	PREFETCHT0 -36(AX)(CX*1)

	// The key hash, as keyhash.MulHash computes it (linev3's
	// probe_body_amd64.h has the same steps; an include cannot cross
	// packages): x and y are the key's first and last 8 bytes (4 for
	// 4..7 bytes; three bytes folded into x for 1..3); a longer key
	// folds 16 bytes per multiply into an accumulator, and its last 16
	// bytes are x and y^accumulator.
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

	// The primary line under the fixed line hash, from the key hash and
	// the block's length alone, asked for before the trailer's checks:
	// (h·LineMultiplier)>>32 · ((n-40)/64) >> 32 (the position hash's
	// xorshift leaves its top 32 bits as they are).
	MOVQ       block_base+0(FP), SI
	MOVQ       block_len+8(FP), BX
	MOVQ       $0xd6e8feb86659fd93, AX
	IMULQ      DI, AX
	SHRQ       $32, AX
	LEAQ       -40(BX), CX
	SHRQ       $6, CX
	IMULQ      CX, AX
	SHRQ       $32, AX
	SHLQ       $6, AX
	LEAQ       (SI)(AX*1), R8
	PREFETCHT0 (R8)

	// The trailer: both copies agree, the id is version 4's, byte 5's
	// hash kind (HashKey64) and always-maybe bits are clear, the length
	// is the line count's (which is then at least 1).
	LEAQ  -36(SI)(BX*1), R9
	MOVQ  0(R9), R10             // w0
	MOVQ  8(R9), R11             // w1
	MOVQ  16(R9), AX
	XORQ  R10, AX
	MOVQ  24(R9), CX
	XORQ  R11, CX
	ANDQ  CX, AX
	CMPQ  AX, $-1
	JNE   other
	MOVQ  $0xffffffffff, CX
	ANDQ  R10, CX
	CMPQ  CX, ·idWord(SB)
	JNE   other
	MOVQ  $0x600000000000, CX
	TESTQ CX, R10
	JNE   other
	MOVL  R11, CX                // lines
	MOVQ  CX, AX
	SHLQ  $6, AX
	ADDQ  $40, AX
	CMPQ  AX, BX
	JNE   other
	MOVQ  CX, X5

	// The shape: 1 <= m <= 128, 1 <= r <= 31, r·m <= 506, and below 506
	// when U is not 0.
	MOVQ  R10, R12
	SHRQ  $48, R12
	ANDQ  $0xff, R12             // m
	MOVQ  R10, R13
	SHRQ  $40, R13
	ANDQ  $31, R13               // r
	LEAQ  -1(R12), CX
	CMPQ  CX, $128
	JAE   other
	LEAQ  -1(R13), CX
	CMPQ  CX, $31
	JAE   other
	MOVQ  R13, CX
	IMULQ R12, CX
	CMPQ  CX, $506
	JB    shaped
	JA    other
	MOVQ  R10, CX
	SHRQ  $56, CX                // U
	JNZ   other

shaped:
	MOVQ R10, X2

	// x = frame.Position(h, frame.Multiplier(seed)).
	MOVQ  R11, AX
	SHRQ  $32, AX
	INCQ  AX
	MOVQ  $0x9e3779b97f4a7c15, CX
	IMULQ CX, AX
	ORQ   $1, AX
	IMULQ DI, AX
	MOVQ  AX, DI
	SHRQ  $32, DI
	XORQ  AX, DI                 // x
	MOVQ  R13, R11               // r

	// The secondary line is asked for now: 13–31% of absent keys read
	// it, and its miss then overlaps the primary line's.
	MIX(DI, $0x7eab76c4a261aa4f)
	MOVQ       AX, X8            // x2
	SHRQ       $32, AX
	MOVQ       X5, CX
	IMULQ      CX, AX
	SHRQ       $32, AX
	SHLQ       $6, AX
	PREFETCHT0 (SI)(AX*1)

	// Seeded lines (byte 5's bit 7): the primary line from x.
	BTQ   $47, R10
	JCC   primary
	MOVQ  DI, AX
	SHRQ  $32, AX
	MOVQ  X5, CX
	IMULQ CX, AX
	SHRQ  $32, AX
	SHLQ  $6, AX
	LEAQ  (SI)(AX*1), R8

primary:
	// The coefficients c = keyhash.Mix(x, CoefficientSalt), masked to m
	// rows in R9; the fingerprint x&0xffff | c>>48<<16.
	MOVQ    SI, X4
	MIX(DI, $0xe34793012cdcccea)
	MOVQ    AX, X3
	FINGERPRINT
	CMPQ    R12, $64
	JA      primarytall
	MOVQ    $64, CX
	SUBQ    R12, CX
	MOVQ    $-1, R9
	SHRQ    CX, R9
	MOVQ    R9, X6
	ANDQ    AX, R9
	COLUMNS(ONECOLUMN, pfour, pone, pdone, notprimary)
	JMP     extra

primarytall:
	// Columns of over 64 rows: c whole in R9, rows 64..m-1 from
	// keyhash.Mix(x, CoefficientSalt2) in X7.
	MOVQ    AX, R9
	MIX(DI, $0x817f0cbaac2748ff)
	MOVQ    $128, CX
	SUBQ    R12, CX
	MOVQ    $-1, BX
	SHRQ    CX, BX
	MOVQ    BX, X6
	ANDQ    BX, AX
	MOVQ    AX, X7
	COLUMNS(TALLONECOLUMN, ptfour, ptone, ptdone, notprimary)

extra:

	// Every full column holds: the extra column, for a share byte
	// (x's bits 16..23) below U, of e = min(48, 506 - r·m) rows from
	// bit r·m, on c's low bits; R10 is the fingerprint from bit r.
	MOVQ    DI, AX
	SHRQ    $16, AX
	ANDQ    $0xff, AX
	MOVQ    X2, CX
	SHRQ    $56, CX              // U
	CMPQ    AX, CX
	JAE     maybe
	MOVQ    $506, DX
	SUBQ    R14, DX
	MOVL    $48, CX
	CMPQ    DX, CX
	CMOVQHI CX, DX               // e
	MOVQ    $64, CX
	SUBQ    DX, CX
	MOVQ    $-1, DX
	SHRQ    CX, DX               // e rows
	COLUMN(R14)
	ANDQ    DX, AX
	MOVQ    X3, CX
	ANDQ    CX, AX
	POPCNTQ AX, AX
	XORQ    R10, AX
	TESTQ   $1, AX
	JZ      maybe

notprimary:
	// Absent if the key's priority, (x's bits 24..31)·63>>8, is below the
	// line's threshold (its top 6 bits).
	MOVQ   56(R8), AX
	SHRQ   $58, AX
	MOVQ   DI, CX
	SHRQ   $24, CX
	ANDQ   $0xff, CX
	IMUL3Q $63, CX, CX
	SHRQ   $8, CX
	CMPQ   CX, AX
	JB     absent

	// The secondary line: x2 = keyhash.Mix(x, frame.SecondarySalt), its
	// line (x2>>32)·lines>>32, its coefficients and fingerprint as the
	// primary's; its full columns only.
	MOVQ    X8, AX
	MOVQ    AX, DI               // x2
	SHRQ    $32, AX
	MOVQ    X5, CX
	IMULQ   CX, AX
	SHRQ    $32, AX
	SHLQ    $6, AX
	MOVQ    X4, SI
	LEAQ    (SI)(AX*1), R8
	MIX(DI, $0xe34793012cdcccea)
	FINGERPRINT
	CMPQ    R12, $64
	JA      secondarytall
	MOVQ    X6, R9
	ANDQ    AX, R9
	COLUMNS(ONECOLUMN, sfour, sone, sdone, absent)
	JMP     maybe

secondarytall:
	MOVQ    AX, R9
	MIX(DI, $0x817f0cbaac2748ff)
	MOVQ    X6, CX
	ANDQ    CX, AX
	MOVQ    AX, X7
	COLUMNS(TALLONECOLUMN, stfour, stone, stdone, absent)

maybe:
	MOVB $1, ret+48(FP)
	RET

absent:
	MOVB $0, ret+48(FP)
	RET

other:
	JMP ·mayContainOther(SB)
