// The body of ProbeBMI2 and MayContainKey64 (probe_amd64.s), included by
// both: from the key hash to a jump to the label absent, maybe or other,
// which each defines as its results require. It writes no argument slot
// (MayContainKey64 hands its arguments on to Go unchanged); the key hash
// is left in X0. With PROBE_CHECKED_VERSION defined, the includer has
// checked the length (at least 104) and that the version byte is not 2,
// which touched the trailer's cache line.
//
// Registers: SI block, BX length, R8 the line, R9 x, R10 w0 and then
// the primary line's threshold, R11 q, R12 r, R13 K, R14 Q+K, DX Q.

	// The trailer's cache line is asked for first: its address needs no
	// hash, and a miss started here overlaps the hashing.
#ifndef PROBE_CHECKED_VERSION
	MOVQ       block_base+0(FP), AX
	MOVQ       block_len+8(FP), CX
	PREFETCHT0 -36(AX)(CX*1)
#endif
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
	MOVQ AX, X0                  // h, for the exit to the Go lookups

	MOVQ block_base+0(FP), SI
	MOVQ block_len+8(FP), BX
#ifndef PROBE_CHECKED_VERSION
	CMPQ BX, $104
	JB   other
	// A version-2 block (its trailer's version byte): the Go lookup, at
	// once.
	CMPB -32(SI)(BX*1), $2
	JEQ  other
#endif

	// The primary line from the key hash and the block's length alone:
	// (h·LineMultiplier)>>32 · ((n-40)/64) >> 32.
	MOVQ  $0xd6e8feb86659fd93, AX
	IMULQ DI, AX
	SHRQ  $32, AX
	LEAQ  -40(BX), CX
	SHRQ  $6, CX
	IMULQ CX, AX
	SHRQ  $32, AX
	SHLQ  $6, AX
	LEAQ  (SI)(AX*1), R8
	PREFETCHT0 (R8)              // the line's miss starts before the trailer's checks

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

	// The id word (version 3's id, byte 5 and the shape) is checked once
	// per distinct word: the checks are a function of the word alone, and
	// CheckedW0 remembers words that passed, one per slot chosen by a
	// hash of the word.
	MOVQ  $0x9e3779b97f4a7c15, AX
	IMULQ R10, AX
	SHRQ  $59, AX                // the word's slot
	LEAQ  ·CheckedW0(SB), SI
	MOVQ  R10, R12
	SHRQ  $40, R12
	ANDQ  $31, R12               // r
	MOVQ  R10, R13
	SHRQ  $48, R13
	ANDQ  $0xff, R13             // K
	MOVQ  R10, DX
	SHRQ  $56, DX                // Q
	LEAQ  (DX)(R13*1), R14       // Q+K
	CMPQ  R10, (SI)(AX*8)
	JNE   checkw0

checkedw0:
	// The primary line's threshold T (its top len(Q) bits), into R10:
	// a key whose quotient is below it is absent if the line lacks it.
	BSRQ  DX, CX
	XORQ  $63, CX                // 64 - len(Q)
	MOVQ  56(R8), R10
	SHRXQ CX, R10, R10

	// The length the line count implies (at least one line: the length
	// is at least 104).
	MOVL R11, AX
	SHLQ $6, AX
	ADDQ $40, AX
	CMPQ AX, BX
	JNE  other

	// x = frame.Position(h, frame.Multiplier(seed)); q from its bits 16..31.
	MOVQ  R11, AX
	SHRQ  $32, AX
	INCQ  AX
	MOVQ  $0x9e3779b97f4a7c15, CX
	IMULQ CX, AX
	ORQ   $1, AX
	IMULQ DI, AX
	MOVQ  AX, R9
	SHRQ  $32, R9
	XORQ  AX, R9                 // x
	MOVL  R9, R11
	SHRL  $16, R11
	IMULQ DX, R11
	SHRQ  $16, R11               // q

	// pos: the header bit after the q-th zero (0 for q = 0). The zero is
	// the j-th (j = q-1, from 0) of the inverted header words z0, z1, z2:
	// in word z0 if j < c0, z1 if j < c0+c1, else z2, where it is the
	// jj-th; the word, jj and the word's first bit (base) are chosen by
	// conditional moves, not branches (which word it is depends on the
	// key: a branch would mispredict about every other lookup). PDEP then
	// puts a bit at the word's jj-th set bit.
probeline:
	XORL    AX, AX
	TESTQ   R11, R11
	JZ      haspos
	LEAQ    -1(R11), AX          // j
	// A word's zeros are 64 minus its ones: j - c0 and j - (c0+c1) come
	// from the ones' counts, and the zero is in the last word whose
	// difference is not negative.
	POPCNTQ 0(R8), BX
	// A header of at most 128 bits (Q+K <= 128: the default layout from
	// about 10 bits per key) has every zero in w0 or w1, so w2 is not
	// counted. (In a damaged line the zero may be missing from both: then
	// jj is past w1's zeros, or 64 or more, and the checks below send the
	// lookup to Go, as the three-word select would.) The branch goes the
	// same way for every lookup of a shape.
	CMPQ    R14, $128
	JA      select3
	LEAQ    -64(AX)(BX*1), DI    // j - c0
	MOVQ    0(R8), SI            // the word, w0 unless w1 is chosen
	XORL    CX, CX               // the word's first bit
	MOVL    $64, BX
	TESTQ   DI, DI
	CMOVQGE 8(R8), SI
	CMOVQGE DI, AX               // jj
	CMOVQGE BX, CX
selected:
	NOTQ    SI
	CMPQ    AX, $64
	JAE     other
	MOVL    $1, BX
	SHLXQ   AX, BX, BX
	PDEPQ   SI, BX, BX
	TZCNTQ  BX, AX
	JCS     other                // fewer zeros than quotients: not a block we wrote
	LEAQ    1(CX)(AX*1), AX      // pos

haspos:
	// run: the ones from pos, read from one unaligned load.
	// (pos is at most 192: the word's first bit plus a bit of it, plus 1.)
	MOVQ   AX, BX
	SHRQ   $3, BX
	MOVQ   (R8)(BX*1), BX
	MOVQ   AX, CX
	ANDQ   $7, CX
	SHRXQ  CX, BX, BX
	NOTQ   BX
	TZCNTQ BX, BX                // run
	// pos+run < Q+K, pos-q+run <= K, run·r <= 56.
	LEAQ   (AX)(BX*1), CX
	CMPQ   CX, R14
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
	ADDQ   R14, DI               // off
	// (off is below 512: the run's slots end within K, and the shape's
	// Q+K+K·r is within the line, which CheckedW0's words were checked for.)
	MOVQ   DI, CX
	SHRQ   $3, CX
	MOVQ   (R8)(CX*1), AX
	ANDQ   $7, DI
	SHRXQ  DI, AX, AX            // rw
	LEAQ   ·lanes(SB), CX
	MOVQ   (CX)(R12*8), CX       // lo
	BZHIQ  R12, R9, DI           // x & (1<<r - 1)
	IMULQ  CX, DI
	XORQ   DI, AX                // v
	MOVQ   AX, DI
	SUBQ   CX, DI
	ANDNQ  DI, AX, AX            // (v-lo) &^ v
	LEAQ   -1(R12), DI
	SHLXQ  DI, CX, CX            // lane tops
	ANDQ   CX, AX
	BZHIQ  BX, AX, AX            // the run's lanes only
	JNZ    maybe

	// Not in this line: absent if q is below the primary line's
	// threshold (no key of a q this low overflowed), or if this was the
	// secondary line (whose probe sets R10 past every quotient).
	CMPQ  R11, R10
	JB    absent

	// The secondary line, as secondaryHas finds it: position hash
	// x2 = keyhash.Mix(x, frame.SecondarySalt), its line (x2>>32)·lines>>32,
	// its quotient and remainder as the primary's; then the same probe.
	MOVL  $256, R10              // the secondary line's probe: no third
	MOVQ  $0x7eab76c4a261aa4f, AX // (frame.SecondarySalt+1)·0x9e3779b97f4a7c15
	ADDQ  R9, AX
	MOVQ  AX, CX
	SHRQ  $30, CX
	XORQ  CX, AX
	MOVQ  $0xbf58476d1ce4e5b9, CX
	IMULQ CX, AX
	MOVQ  AX, CX
	SHRQ  $27, CX
	XORQ  CX, AX
	MOVQ  $0x94d049bb133111eb, CX
	IMULQ CX, AX
	MOVQ  AX, R9
	SHRQ  $31, R9
	XORQ  AX, R9                 // x2
	MOVQ  block_len+8(FP), AX
	SUBQ  $40, AX
	SHRQ  $6, AX                 // lines
	MOVQ  R9, CX
	SHRQ  $32, CX
	IMULQ CX, AX
	SHRQ  $32, AX
	SHLQ  $6, AX
	MOVQ  block_base+0(FP), R8
	ADDQ  AX, R8                 // the secondary line
	MOVQ  R14, DX
	SUBQ  R13, DX                // Q
	MOVL  R9, R11
	SHRL  $16, R11
	IMULQ DX, R11
	SHRQ  $16, R11               // q
	JMP   probeline

checkw0:
	// id and byte 5 (hash kind, always-maybe and seeded-lines bits 0)
	MOVQ  $0xffffffffff, CX
	ANDQ  R10, CX
	CMPQ  CX, ·IDWord(SB)
	JNE   other
	MOVQ  $0xe00000000000, CX
	TESTQ CX, R10
	JNE   other
	// the shape: 1 <= r <= 16, K >= 1, Q >= 1, Q+K <= 192,
	// Q + K + K·r + len(Q) <= 512
	LEAQ  -1(R12), CX
	CMPQ  CX, $16
	JAE   other
	TESTQ R13, R13
	JZ    other
	TESTQ DX, DX
	JZ    other
	CMPQ  R14, $192
	JA    other
	BSRQ  DX, CX
	INCQ  CX
	MOVQ  R13, BX
	IMULQ R12, BX
	ADDQ  R14, BX
	ADDQ  CX, BX
	CMPQ  BX, $512
	JA    other
	MOVQ  block_len+8(FP), BX    // the length again
	MOVQ  R10, (SI)(AX*8)        // remembered
	JMP   checkedw0

	// The three-word select, for headers of more than 128 bits (out of
	// line: the default layout's lines from about 10 bits per key never
	// come here).
select3:
	POPCNTQ 8(R8), DX
	ADDQ    BX, DX
	LEAQ    -64(AX)(BX*1), DI    // j - c0
	LEAQ    -128(AX)(DX*1), DX   // j - (c0+c1)
	MOVQ    0(R8), SI            // the word, w0 until another is chosen
	XORL    CX, CX               // the word's first bit
	MOVL    $64, BX
	TESTQ   DI, DI
	CMOVQGE 8(R8), SI
	CMOVQGE DI, AX
	CMOVQGE BX, CX
	MOVL    $128, BX
	TESTQ   DX, DX
	CMOVQGE 16(R8), SI
	CMOVQGE DX, AX               // jj
	CMOVQGE BX, CX
	JMP     selected
