#include "textflag.h"

// One-token kernels for F16 and BF16 weights (decode), AVX-512: 8
// consecutive rows against one token of activations, every row's columns a
// whole number of 16. Each row keeps its 16 canonical lane accumulators in
// one register (column c goes to lane c mod 16, in column order: F16 by
// FMA, as the f16×f16 product is exact; BF16 by a rounded multiply, then
// the add, or by VDPBF16PS in the pair layout below). Then the 8 rows are
// reduced together by the fixed tree, applied to each row: +8, +4, +2, +1
// (f16Perm puts the 8 sums in row order). The ROW kernels run the rows one
// after the other, one ascending stream of addresses; the leapfrog kernels
// after them keep two rows' chains in flight and prefetch in software; the
// lockstep kernels at the end run all 8 chains side by side.

// f16Perm gathers the 8 row sums of the transposing reduction: row j lies
// in lane 4·(j mod 4) + 2·(j / 4).
DATA f16Perm<>+0(SB)/4, $0
DATA f16Perm<>+4(SB)/4, $4
DATA f16Perm<>+8(SB)/4, $8
DATA f16Perm<>+12(SB)/4, $12
DATA f16Perm<>+16(SB)/4, $2
DATA f16Perm<>+20(SB)/4, $6
DATA f16Perm<>+24(SB)/4, $10
DATA f16Perm<>+28(SB)/4, $14
DATA f16Perm<>+32(SB)/4, $0
DATA f16Perm<>+36(SB)/4, $0
DATA f16Perm<>+40(SB)/4, $0
DATA f16Perm<>+44(SB)/4, $0
DATA f16Perm<>+48(SB)/4, $0
DATA f16Perm<>+52(SB)/4, $0
DATA f16Perm<>+56(SB)/4, $0
DATA f16Perm<>+60(SB)/4, $0
GLOBL f16Perm<>(SB), RODATA|NOPTR, $64

// REDUCE8 sums each of Z0..Z7 by the tree +8, +4, +2, +1 and stores the 8
// sums, row j = Zj, as 8 floats at (R10).
#define REDUCE8 \
	VSHUFF32X4 $0x44, Z1, Z0, Z8 \
	VSHUFF32X4 $0xEE, Z1, Z0, Z9 \
	VADDPS Z9, Z8, Z8 \
	VSHUFF32X4 $0x44, Z3, Z2, Z9 \
	VSHUFF32X4 $0xEE, Z3, Z2, Z10 \
	VADDPS Z10, Z9, Z9 \
	VSHUFF32X4 $0x44, Z5, Z4, Z10 \
	VSHUFF32X4 $0xEE, Z5, Z4, Z11 \
	VADDPS Z11, Z10, Z10 \
	VSHUFF32X4 $0x44, Z7, Z6, Z11 \
	VSHUFF32X4 $0xEE, Z7, Z6, Z12 \
	VADDPS Z12, Z11, Z11 \
	VSHUFF32X4 $0x88, Z9, Z8, Z12 \
	VSHUFF32X4 $0xDD, Z9, Z8, Z13 \
	VADDPS Z13, Z12, Z12 \
	VSHUFF32X4 $0x88, Z11, Z10, Z14 \
	VSHUFF32X4 $0xDD, Z11, Z10, Z13 \
	VADDPS Z13, Z14, Z14 \
	VSHUFPS $0x44, Z14, Z12, Z15 \
	VSHUFPS $0xEE, Z14, Z12, Z13 \
	VADDPS Z13, Z15, Z15 \
	VMOVSHDUP Z15, Z13 \
	VADDPS Z13, Z15, Z15 \
	VMOVDQU32 f16Perm<>(SB), Z13 \
	VPERMD Z15, Z13, Z15 \
	VMOVUPS Y15, (R10)

// F16STEP and BF16STEP do one step of 16 columns of row acc: weights at
// disp(w)(off), activations (float32) at 2·disp(xx)(2·off).
#define F16STEP(disp, w, xx, off, acc) \
	VCVTPH2PS disp(w)(off*1), Z16 \
	VFMADD231PS (2*disp)(xx)(off*2), Z16, acc

#define BF16STEP(disp, w, xx, off, acc) \
	VPMOVZXWD disp(w)(off*1), Z16 \
	VPSLLD $16, Z16, Z16 \
	VMULPS (2*disp)(xx)(off*2), Z16, Z16 \
	VADDPS Z16, acc, acc

// ROW runs one row's chain into acc: R9 = n16/2 double steps from R11, then
// the odd step if n16 is odd (R12 = n16 mod 2); R11 moves on to the next row.
// The steps' index register AX is 0 (PROLOGUE).
#define ROW(STEP, acc, lbl, odd, next) \
	MOVQ R11, SI \
	MOVQ R8, DI \
	MOVQ R9, CX \
	TESTQ CX, CX \
	JEQ odd \
lbl: \
	STEP(0, SI, DI, AX, acc) \
	STEP(32, SI, DI, AX, acc) \
	ADDQ $64, SI \
	ADDQ $128, DI \
	DECQ CX \
	JNZ lbl \
odd: \
	TESTQ R12, R12 \
	JEQ next \
	STEP(0, SI, DI, AX, acc) \
next: \
	ADDQ DX, R11

#define PROLOGUE(steps) \
	MOVQ w+0(FP), R11 \
	MOVQ rowBytes+8(FP), DX \
	MOVQ x+16(FP), R8 \
	MOVQ steps+24(FP), R9 \
	MOVQ acc+32(FP), R10 \
	MOVQ R9, R12 \
	ANDQ $1, R12 \
	SHRQ $1, R9 \
	XORQ AX, AX \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	VPXORD Z4, Z4, Z4 \
	VPXORD Z5, Z5, Z5 \
	VPXORD Z6, Z6, Z6 \
	VPXORD Z7, Z7, Z7

// func f16Dot8x1AVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)
TEXT ·f16Dot8x1AVX512(SB), NOSPLIT, $0-40
	PROLOGUE(n16)
	ROW(F16STEP, Z0, f16l0, f16o0, f16n0)
	ROW(F16STEP, Z1, f16l1, f16o1, f16n1)
	ROW(F16STEP, Z2, f16l2, f16o2, f16n2)
	ROW(F16STEP, Z3, f16l3, f16o3, f16n3)
	ROW(F16STEP, Z4, f16l4, f16o4, f16n4)
	ROW(F16STEP, Z5, f16l5, f16o5, f16n5)
	ROW(F16STEP, Z6, f16l6, f16o6, f16n6)
	ROW(F16STEP, Z7, f16l7, f16o7, f16n7)
	REDUCE8
	VZEROUPPER
	RET

// func bf16Dot8x1AVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)
TEXT ·bf16Dot8x1AVX512(SB), NOSPLIT, $0-40
	PROLOGUE(n16)
	ROW(BF16STEP, Z0, bf16l0, bf16o0, bf16n0)
	ROW(BF16STEP, Z1, bf16l1, bf16o1, bf16n1)
	ROW(BF16STEP, Z2, bf16l2, bf16o2, bf16n2)
	ROW(BF16STEP, Z3, bf16l3, bf16o3, bf16n3)
	ROW(BF16STEP, Z4, bf16l4, bf16o4, bf16n4)
	ROW(BF16STEP, Z5, bf16l5, bf16o5, bf16n5)
	ROW(BF16STEP, Z6, bf16l6, bf16o6, bf16n6)
	ROW(BF16STEP, Z7, bf16l7, bf16o7, bf16n7)
	REDUCE8
	VZEROUPPER
	RET

// The BF16 one-token kernels on VDPBF16PS (AVX512_BF16; the Go side takes
// them on AMD CPUs for matrices and tokens that bf16DotExact accepts, where
// they give the canonical bits: bf16dot_amd64.go): this one (the tests'
// and benchmarks' reference), and the leapfrog and lockstep ones below
// that MatMul takes. This one, as bf16Dot8x1AVX512, runs the 8 rows one
// after the other, each row's 16 canonical accumulators in one
// register, then REDUCE8; a step takes 32 columns: the 64-byte weight
// load permuted by VPERMW (·bf16dPerm, in matmul_amd64.s: word 2l+1 =
// column l, word 2l = column l+16) and the activations already in that pair layout (acts.bp),
// so that lane l adds column l, then column l+16. The Go assembler does
// not know VDPBF16PS; DPn is its encoding for VDPBF16PS Z20, Z16, Zn.
#define DP0 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xc4
#define DP1 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xcc
#define DP2 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xd4
#define DP3 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xdc
#define DP4 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xe4
#define DP5 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xec
#define DP6 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xf4
#define DP7 BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xfc

// BF16DSTEP does one step of 32 columns of row acc (DP the accumulator's
// VDPBF16PS): weights at disp(w)(off), activations (bf16, pair layout) at
// disp(xx)(off).
#define BF16DSTEP(disp, w, xx, off, DP) \
	VPERMW disp(w)(off*1), Z24, Z16 \
	VMOVDQU16 disp(xx)(off*1), Z20 \
	DP

// ROWD runs one row's chain: R9 = n32/2 double steps from R11, then the
// odd step if n32 is odd (R12 = n32 mod 2); R11 moves on to the next row.
#define ROWD(DP, lbl, odd, next) \
	MOVQ R11, SI \
	MOVQ R8, DI \
	MOVQ R9, CX \
	TESTQ CX, CX \
	JEQ odd \
lbl: \
	BF16DSTEP(0, SI, DI, AX, DP) \
	BF16DSTEP(64, SI, DI, AX, DP) \
	ADDQ $128, SI \
	ADDQ $128, DI \
	DECQ CX \
	JNZ lbl \
odd: \
	TESTQ R12, R12 \
	JEQ next \
	BF16DSTEP(0, SI, DI, AX, DP) \
next: \
	ADDQ DX, R11


// func bf16dDot8x1AVX512(w *byte, rowBytes int, x *uint16, n32 int, acc *float32)
TEXT ·bf16dDot8x1AVX512(SB), NOSPLIT, $0-40
	PROLOGUE(n32)
	VMOVDQU16 ·bf16dPerm(SB), Z24
	ROWD(DP0, bf16dl0, bf16do0, bf16dn0)
	ROWD(DP1, bf16dl1, bf16do1, bf16dn1)
	ROWD(DP2, bf16dl2, bf16do2, bf16dn2)
	ROWD(DP3, bf16dl3, bf16do3, bf16dn3)
	ROWD(DP4, bf16dl4, bf16do4, bf16dn4)
	ROWD(DP5, bf16dl5, bf16do5, bf16dn5)
	ROWD(DP6, bf16dl6, bf16do6, bf16dn6)
	ROWD(DP7, bf16dl7, bf16do7, bf16dn7)
	REDUCE8
	VZEROUPPER
	RET

// The leapfrog kernels compute what the ROW kernels compute, two of the 8
// chains in flight at a time: a row's chain of dependent steps (an FMA
// every 16 columns, 4 cycles each; a VDPBF16PS every 32) bounds a long
// row, which otherwise waits on its own adds. Phase 0 runs row 0's first
// half; phase k (1..7) row k-1's second half beside row k's first half,
// step by step; phase 8 row 7's second half. Each row's chain keeps its
// order (its first half, then its second). Two pointers half a row apart
// defeat the hardware prefetchers (on their own they read at about 0.55
// of a plain read), so a software prefetch sweeps the weights once, in
// order, PFDIST bytes ahead of the newer pointer: phase k prefetches
// [row k + PFDIST, row k+1 + PFDIST), 2·SZ bytes a step
// (docs/benchmarks.md, "F16 and BF16 decode from memory").
//
// A kernel passes its step macro (F16STEP, BF16STEP, BF16DSTEP), SZ its
// weight bytes, XADV(r) advancing an activation pointer r by BX weight
// bytes' worth, and PF the prefetches of a step. BX = h·SZ (h = steps/2 in a first half), R12 = steps mod 2 (a
// second half's extra step); AX runs over a half's weight bytes, R9 is the
// phase's prefetch base.
#define PFDIST 3072

// LHEAD runs row 0's first half into acc, leaving R13/R14 at its second.
#define LHEAD(STEP, SZ, XADV, PF, acc, lbl, done) \
	MOVQ R11, R13 \
	MOVQ R8, R14 \
	LEAQ PFDIST(R13), R9 \
	XORQ AX, AX \
	TESTQ BX, BX \
	JEQ done \
lbl: \
	PF \
	STEP(0, R13, R14, AX, acc) \
	ADDQ $SZ, AX \
	CMPQ AX, BX \
	JLT lbl \
done: \
	ADDQ BX, R13 \
	XADV(R14) \
	ADDQ DX, R11

// LPAIR runs the previous row's second half into accA beside this row's
// first half into accB.
#define LPAIR(STEP, SZ, XADV, PF, accA, accB, lbl, odd, next) \
	MOVQ R13, SI \
	MOVQ R14, DI \
	MOVQ R11, R13 \
	MOVQ R8, R14 \
	LEAQ PFDIST(R13), R9 \
	XORQ AX, AX \
	TESTQ BX, BX \
	JEQ odd \
lbl: \
	PF \
	STEP(0, SI, DI, AX, accA) \
	STEP(0, R13, R14, AX, accB) \
	ADDQ $SZ, AX \
	CMPQ AX, BX \
	JLT lbl \
odd: \
	TESTQ R12, R12 \
	JEQ next \
	STEP(0, SI, DI, BX, accA) \
next: \
	ADDQ BX, R13 \
	XADV(R14) \
	ADDQ DX, R11

// LTAIL runs row 7's second half into acc.
#define LTAIL(STEP, SZ, acc, lbl, odd, next) \
	XORQ AX, AX \
	TESTQ BX, BX \
	JEQ odd \
lbl: \
	STEP(0, R13, R14, AX, acc) \
	ADDQ $SZ, AX \
	CMPQ AX, BX \
	JLT lbl \
odd: \
	TESTQ R12, R12 \
	JEQ next \
	STEP(0, R13, R14, BX, acc) \
next:

// F16 and BF16 by multiply, then add: 16 columns (32 bytes) a step,
// activations float32 (twice the offset), one line prefetched a step.
#define F16XADV(r) \
	ADDQ BX, r \
	ADDQ BX, r

#define F16PF PREFETCHT0 (R9)(AX*2)

#define F16HEAD(acc, lbl, done) LHEAD(F16STEP, 32, F16XADV, F16PF, acc, lbl, done)
#define F16PAIR(accA, accB, lbl, odd, next) LPAIR(F16STEP, 32, F16XADV, F16PF, accA, accB, lbl, odd, next)

// func f16Dot8x1LeapAVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)
TEXT ·f16Dot8x1LeapAVX512(SB), NOSPLIT, $0-40
	PROLOGUE(n16)
	MOVQ R9, BX
	SHLQ $5, BX
	F16HEAD(Z0, f16h0, f16hd)
	F16PAIR(Z0, Z1, f16p1, f16q1, f16r1)
	F16PAIR(Z1, Z2, f16p2, f16q2, f16r2)
	F16PAIR(Z2, Z3, f16p3, f16q3, f16r3)
	F16PAIR(Z3, Z4, f16p4, f16q4, f16r4)
	F16PAIR(Z4, Z5, f16p5, f16q5, f16r5)
	F16PAIR(Z5, Z6, f16p6, f16q6, f16r6)
	F16PAIR(Z6, Z7, f16p7, f16q7, f16r7)
	LTAIL(F16STEP, 32, Z7, f16t, f16to, f16tn)
	REDUCE8
	VZEROUPPER
	RET

#define BF16MHEAD(acc, lbl, done) LHEAD(BF16STEP, 32, F16XADV, F16PF, acc, lbl, done)
#define BF16MPAIR(accA, accB, lbl, odd, next) LPAIR(BF16STEP, 32, F16XADV, F16PF, accA, accB, lbl, odd, next)

// func bf16Dot8x1LeapAVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)
TEXT ·bf16Dot8x1LeapAVX512(SB), NOSPLIT, $0-40
	PROLOGUE(n16)
	MOVQ R9, BX
	SHLQ $5, BX
	BF16MHEAD(Z0, bmh0, bmhd)
	BF16MPAIR(Z0, Z1, bmp1, bmq1, bmr1)
	BF16MPAIR(Z1, Z2, bmp2, bmq2, bmr2)
	BF16MPAIR(Z2, Z3, bmp3, bmq3, bmr3)
	BF16MPAIR(Z3, Z4, bmp4, bmq4, bmr4)
	BF16MPAIR(Z4, Z5, bmp5, bmq5, bmr5)
	BF16MPAIR(Z5, Z6, bmp6, bmq6, bmr6)
	BF16MPAIR(Z6, Z7, bmp7, bmq7, bmr7)
	LTAIL(BF16STEP, 32, Z7, bmt, bmto, bmtn)
	REDUCE8
	VZEROUPPER
	RET

// BF16 on VDPBF16PS: 32 columns (64 bytes) a step, activations bf16 in
// the pair layout (the same offset), two lines prefetched a step.
#define BF16XADV(r) ADDQ BX, r

#define BF16PF \
	PREFETCHT0 (R9)(AX*2) \
	PREFETCHT0 64(R9)(AX*2)

#define BF16HEAD(DP, lbl, done) LHEAD(BF16DSTEP, 64, BF16XADV, BF16PF, DP, lbl, done)
#define BF16PAIR(DPA, DPB, lbl, odd, next) LPAIR(BF16DSTEP, 64, BF16XADV, BF16PF, DPA, DPB, lbl, odd, next)

// func bf16dDot8x1LeapAVX512(w *byte, rowBytes int, x *uint16, n32 int, acc *float32)
TEXT ·bf16dDot8x1LeapAVX512(SB), NOSPLIT, $0-40
	PROLOGUE(n32)
	MOVQ R9, BX
	SHLQ $6, BX
	VMOVDQU16 ·bf16dPerm(SB), Z24
	BF16HEAD(DP0, bdh0, bdhd)
	BF16PAIR(DP0, DP1, bdp1, bdq1, bdr1)
	BF16PAIR(DP1, DP2, bdp2, bdq2, bdr2)
	BF16PAIR(DP2, DP3, bdp3, bdq3, bdr3)
	BF16PAIR(DP3, DP4, bdp4, bdq4, bdr4)
	BF16PAIR(DP4, DP5, bdp5, bdq5, bdr5)
	BF16PAIR(DP5, DP6, bdp6, bdq6, bdr6)
	BF16PAIR(DP6, DP7, bdp7, bdq7, bdr7)
	LTAIL(BF16DSTEP, 64, DP7, bdt, bdto, bdtn)
	REDUCE8
	VZEROUPPER
	RET

// The lockstep kernels run the 8 rows' chains side by side, one step of
// every row at a time: the activations are loaded once a step for all 8
// rows, 8 chains are in flight, and each row's weights are prefetched
// LOCKPF bytes ahead. Each row's chain is the same sequence of operations
// as in the ROW kernels (the same operand order too), so the bits are the
// same. MatMul takes them for rows of floatLockCols columns or more
// (f16_amd64.go).
#define LOCKPF 1024

// LOCKPF8(o) prefetches the 8 rows' weights LOCKPF+o bytes ahead: rows 0–2
// from R11, 3–5 from R13, 6–7 from R14, row stride DX.
#define LOCKPF8(o) \
	PREFETCHT0 (LOCKPF+o)(R11) \
	PREFETCHT0 (LOCKPF+o)(R11)(DX*1) \
	PREFETCHT0 (LOCKPF+o)(R11)(DX*2) \
	PREFETCHT0 (LOCKPF+o)(R13) \
	PREFETCHT0 (LOCKPF+o)(R13)(DX*1) \
	PREFETCHT0 (LOCKPF+o)(R13)(DX*2) \
	PREFETCHT0 (LOCKPF+o)(R14) \
	PREFETCHT0 (LOCKPF+o)(R14)(DX*1)

// F16ONE and BF16ONE add one row's 16 columns at m into acc (t a scratch
// register), the activations in Z16: as F16STEP and BF16STEP.
#define F16ONE(m, t, acc) \
	VCVTPH2PS m, t \
	VFMADD231PS Z16, t, acc

#define BF16ONE(m, t, acc) \
	VPMOVZXWD m, t \
	VPSLLD $16, t, t \
	VMULPS Z16, t, t \
	VADDPS t, acc, acc

// LOCKSTEP(ONE, d) is one step of 16 columns of the 8 rows at byte d of
// each (activations float32 at 2·d).
#define LOCKSTEP(ONE, d) \
	VMOVUPS (2*d)(R8), Z16 \
	ONE(d(R11), Z8, Z0) \
	ONE(d(R11)(DX*1), Z9, Z1) \
	ONE(d(R11)(DX*2), Z10, Z2) \
	ONE(d(R13), Z11, Z3) \
	ONE(d(R13)(DX*1), Z12, Z4) \
	ONE(d(R13)(DX*2), Z13, Z5) \
	ONE(d(R14), Z14, Z6) \
	ONE(d(R14)(DX*1), Z15, Z7)

// LOCKROWS points R13 and R14 at rows 3 and 6.
#define LOCKROWS \
	LEAQ (R11)(DX*2), R13 \
	ADDQ DX, R13 \
	LEAQ (R13)(DX*2), R14 \
	ADDQ DX, R14

// LOCK runs the 8 rows' chains: R9 double steps (TWO, each followed by
// advancing the rows by WADV bytes and the activations by 128), then the
// odd step (ODD) if R12 is set; then REDUCE8.
#define LOCK(TWO, ODD, WADV, lbl, odd, done) \
	LOCKROWS \
	MOVQ R9, CX \
	TESTQ CX, CX \
	JEQ odd \
lbl: \
	TWO \
	ADDQ $WADV, R11 \
	ADDQ $WADV, R13 \
	ADDQ $WADV, R14 \
	ADDQ $128, R8 \
	DECQ CX \
	JNZ lbl \
odd: \
	TESTQ R12, R12 \
	JEQ done \
	ODD \
done: \
	REDUCE8 \
	VZEROUPPER

// The F16 and BF16 double and single steps: 16 columns (32 weight bytes)
// a step, one line of each row prefetched a double step.
#define F16TWO LOCKPF8(0); LOCKSTEP(F16ONE, 0); LOCKSTEP(F16ONE, 32)
#define F16ODD LOCKSTEP(F16ONE, 0)
#define BF16TWO LOCKPF8(0); LOCKSTEP(BF16ONE, 0); LOCKSTEP(BF16ONE, 32)
#define BF16ODD LOCKSTEP(BF16ONE, 0)

// func f16Dot8x1LockAVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)
TEXT ·f16Dot8x1LockAVX512(SB), NOSPLIT, $0-40
	PROLOGUE(n16)
	LOCK(F16TWO, F16ODD, 64, f16kl, f16ko, f16kd)
	RET

// func bf16Dot8x1LockAVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)
TEXT ·bf16Dot8x1LockAVX512(SB), NOSPLIT, $0-40
	PROLOGUE(n16)
	LOCK(BF16TWO, BF16ODD, 64, bf16kl, bf16ko, bf16kd)
	RET

// LOCKDSTEP(d) is one step of 32 columns of the 8 rows at byte d of each
// (VDPBF16PS, the pair layout of bf16dDot8x1AVX512): the activations once,
// then each row's weights permuted into Z16 and added into its chain.
#define LOCKDSTEP(d) \
	VMOVDQU16 d(R8), Z20 \
	VPERMW d(R11), Z24, Z16 \
	DP0 \
	VPERMW d(R11)(DX*1), Z24, Z16 \
	DP1 \
	VPERMW d(R11)(DX*2), Z24, Z16 \
	DP2 \
	VPERMW d(R13), Z24, Z16 \
	DP3 \
	VPERMW d(R13)(DX*1), Z24, Z16 \
	DP4 \
	VPERMW d(R13)(DX*2), Z24, Z16 \
	DP5 \
	VPERMW d(R14), Z24, Z16 \
	DP6 \
	VPERMW d(R14)(DX*1), Z24, Z16 \
	DP7

// The VDPBF16PS double and single steps: 32 columns (64 weight bytes) a
// step, one line of each row prefetched a step.
#define BF16DTWO LOCKPF8(0); LOCKDSTEP(0); LOCKPF8(64); LOCKDSTEP(64)
#define BF16DODD LOCKDSTEP(0)

// func bf16dDot8x1LockAVX512(w *byte, rowBytes int, x *uint16, n32 int, acc *float32)
TEXT ·bf16dDot8x1LockAVX512(SB), NOSPLIT, $0-40
	PROLOGUE(n32)
	VMOVDQU16 ·bf16dPerm(SB), Z24
	LOCK(BF16DTWO, BF16DODD, 128, lockdloop, lockdodd, lockddone)
	RET
