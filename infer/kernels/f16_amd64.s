#include "textflag.h"

// One-token kernels for F16 and BF16 weights (decode), AVX-512: 8
// consecutive rows against one token of activations, every row's columns a
// whole number of 16. Each row keeps its 16 canonical lane accumulators in
// one register (column c goes to lane c mod 16, in column order: F16 by
// FMA, as the f16×f16 product is exact; BF16 by a rounded multiply, then
// the add). The rows are read one after the other, so that the 8 rows — and
// a sweep of consecutive groups — are one ascending stream of addresses,
// which the hardware prefetchers follow (2, 4 or 8 rows read side by side,
// with or without software prefetches, measured at about half the rate on
// matrices larger than the caches: docs/benchmarks.md). The next row's
// loads and products can overlap a row's chain of dependent adds out of
// order. Then the 8 rows are reduced together by the fixed tree, applied
// to each row: +8, +4, +2, +1 (f16Perm puts the 8 sums in row order).

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
// disp(SI), activations at 2·disp(DI).
#define F16STEP(disp, acc) \
	VCVTPH2PS disp(SI), Z16 \
	VFMADD231PS (2*disp)(DI), Z16, acc

#define BF16STEP(disp, acc) \
	VPMOVZXWD disp(SI), Z16 \
	VPSLLD $16, Z16, Z16 \
	VMULPS (2*disp)(DI), Z16, Z16 \
	VADDPS Z16, acc, acc

// ROW runs one row's chain into acc: R9 = n16/2 double steps from R11, then
// the odd step if n16 is odd (R12 = n16 mod 2); R11 moves on to the next row.
#define ROW(STEP, acc, lbl, odd, next) \
	MOVQ R11, SI \
	MOVQ R8, DI \
	MOVQ R9, CX \
	TESTQ CX, CX \
	JEQ odd \
lbl: \
	STEP(0, acc) \
	STEP(32, acc) \
	ADDQ $64, SI \
	ADDQ $128, DI \
	DECQ CX \
	JNZ lbl \
odd: \
	TESTQ R12, R12 \
	JEQ next \
	STEP(0, acc) \
next: \
	ADDQ DX, R11

#define PROLOGUE \
	MOVQ w+0(FP), R11 \
	MOVQ rowBytes+8(FP), DX \
	MOVQ x+16(FP), R8 \
	MOVQ n16+24(FP), R9 \
	MOVQ acc+32(FP), R10 \
	MOVQ R9, R12 \
	ANDQ $1, R12 \
	SHRQ $1, R9 \
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
	PROLOGUE
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
	PROLOGUE
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

// The BF16 one-token kernel on VDPBF16PS (AVX512_BF16; the Go side takes
// it on AMD CPUs for matrices and tokens that bf16DotExact accepts, where
// it gives the canonical bits: bf16dot_amd64.go). As bf16Dot8x1AVX512,
// 8 rows one after the other, each row's 16 canonical accumulators in one
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
// VDPBF16PS): weights at disp(SI), activations at disp(DI).
#define BF16DSTEP(disp, DP) \
	VPERMW disp(SI), Z24, Z16 \
	VMOVDQU16 disp(DI), Z20 \
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
	BF16DSTEP(0, DP) \
	BF16DSTEP(64, DP) \
	ADDQ $128, SI \
	ADDQ $128, DI \
	DECQ CX \
	JNZ lbl \
odd: \
	TESTQ R12, R12 \
	JEQ next \
	BF16DSTEP(0, DP) \
next: \
	ADDQ DX, R11


// func bf16dDot8x1AVX512(w *byte, rowBytes int, x *uint16, n32 int, acc *float32)
TEXT ·bf16dDot8x1AVX512(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), R11
	MOVQ rowBytes+8(FP), DX
	MOVQ x+16(FP), R8
	MOVQ n32+24(FP), R9
	MOVQ acc+32(FP), R10
	MOVQ R9, R12
	ANDQ $1, R12
	SHRQ $1, R9
	VMOVDQU16 ·bf16dPerm(SB), Z24
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
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
