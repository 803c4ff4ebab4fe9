#include "textflag.h"

// One-token kernels for F16 and BF16 weights (decode), AVX2 + FMA + F16C:
// f16_amd64.s's scheme with 256-bit registers, 4 consecutive rows. The
// A2ROW kernels read the rows one after the other (one ascending stream of
// addresses), the leapfrog kernels at the end two at a time; row r keeps its
// 16 canonical lane accumulators in two registers (lanes 0–7 and 8–15:
// column c in lane c mod 16, in column order; F16 by FMA, the f16×f16
// product being exact; BF16 by a rounded multiply, then the add), and at
// the row's end sums them by the fixed tree +8, +4, +2, +1 into acc[r].

// A2F16STEP and A2BF16STEP do one step of 16 columns: weights at
// disp(w)(off), activations at 2·disp(xx)(2·off), into lo (lanes 0–7) and
// hi (lanes 8–15).
#define A2F16STEP(disp, w, xx, off, lo, hi) \
	VCVTPH2PS disp(w)(off*1), Y8 \
	VCVTPH2PS (disp+16)(w)(off*1), Y9 \
	VFMADD231PS (2*disp)(xx)(off*2), Y8, lo \
	VFMADD231PS (2*disp+32)(xx)(off*2), Y9, hi

#define A2BF16STEP(disp, w, xx, off, lo, hi) \
	VPMOVZXWD disp(w)(off*1), Y8 \
	VPMOVZXWD (disp+16)(w)(off*1), Y9 \
	VPSLLD $16, Y8, Y8 \
	VPSLLD $16, Y9, Y9 \
	VMULPS (2*disp)(xx)(off*2), Y8, Y8 \
	VMULPS (2*disp+32)(xx)(off*2), Y9, Y9 \
	VADDPS Y8, lo, lo \
	VADDPS Y9, hi, hi

// A2SUM sums a row's lanes by the tree +8, +4, +2, +1 into off(R10).
#define A2SUM(lo, hi, xlo, off) \
	VADDPS hi, lo, lo \
	VEXTRACTF128 $1, lo, X10 \
	VADDPS X10, xlo, xlo \
	VMOVHLPS xlo, xlo, X10 \
	VADDPS X10, xlo, xlo \
	VMOVSHDUP xlo, X10 \
	VADDSS X10, xlo, xlo \
	VMOVSS xlo, off(R10)

// A2ROW runs row r's chain (R9 = n16/2 double steps from R11, then the odd
// step if R12 = n16 mod 2 is set), sums it by the tree into off(R10) and
// moves R11 on to the next row. The steps' index register AX is 0
// (A2PROLOGUE).
#define A2ROW(STEP, lo, hi, xlo, off, lbl, odd, sum) \
	VXORPS lo, lo, lo \
	VXORPS hi, hi, hi \
	MOVQ R11, SI \
	MOVQ R8, DI \
	MOVQ R9, CX \
	TESTQ CX, CX \
	JEQ odd \
lbl: \
	STEP(0, SI, DI, AX, lo, hi) \
	STEP(32, SI, DI, AX, lo, hi) \
	ADDQ $64, SI \
	ADDQ $128, DI \
	DECQ CX \
	JNZ lbl \
odd: \
	TESTQ R12, R12 \
	JEQ sum \
	STEP(0, SI, DI, AX, lo, hi) \
sum: \
	A2SUM(lo, hi, xlo, off) \
	ADDQ DX, R11

#define A2PROLOGUE \
	MOVQ w+0(FP), R11 \
	MOVQ rowBytes+8(FP), DX \
	MOVQ x+16(FP), R8 \
	MOVQ n16+24(FP), R9 \
	MOVQ acc+32(FP), R10 \
	MOVQ R9, R12 \
	ANDQ $1, R12 \
	SHRQ $1, R9 \
	XORQ AX, AX

// func f16Dot4x1SAVX2(w *byte, rowBytes int, x *float32, n16 int, acc *float32)
TEXT ·f16Dot4x1SAVX2(SB), NOSPLIT, $0-40
	A2PROLOGUE
	A2ROW(A2F16STEP, Y0, Y1, X0, 0, f16a0, f16ao0, f16as0)
	A2ROW(A2F16STEP, Y2, Y3, X2, 4, f16a1, f16ao1, f16as1)
	A2ROW(A2F16STEP, Y4, Y5, X4, 8, f16a2, f16ao2, f16as2)
	A2ROW(A2F16STEP, Y6, Y7, X6, 12, f16a3, f16ao3, f16as3)
	VZEROUPPER
	RET

// func bf16Dot4x1SAVX2(w *byte, rowBytes int, x *float32, n16 int, acc *float32)
TEXT ·bf16Dot4x1SAVX2(SB), NOSPLIT, $0-40
	A2PROLOGUE
	A2ROW(A2BF16STEP, Y0, Y1, X0, 0, bf16a0, bf16ao0, bf16as0)
	A2ROW(A2BF16STEP, Y2, Y3, X2, 4, bf16a1, bf16ao1, bf16as1)
	A2ROW(A2BF16STEP, Y4, Y5, X4, 8, bf16a2, bf16ao2, bf16as2)
	A2ROW(A2BF16STEP, Y6, Y7, X6, 12, bf16a3, bf16ao3, bf16as3)
	VZEROUPPER
	RET

// The leapfrog kernels: the 4 rows' chains as above, two in flight at a
// time (f16_amd64.s's leapfrog scheme, which says why): phase 0 runs row
// 0's first half, phase k (1..3) row k-1's second half beside row k's
// first half, phase 4 row 3's second half; a row is summed into acc when
// its second half ends. One software prefetch sweeps the 4 rows in address
// order A2PFDIST bytes ahead, one line a step. BX = h·32 (h = n16/2 steps
// in a first half), R12 = n16 mod 2; AX runs over a half's weight bytes,
// R9 is the phase's prefetch base.
#define A2PFDIST 3072

// A2HEAD runs row 0's first half, leaving R13/R14 at its second.
#define A2HEAD(STEP, lo, hi, lbl, done) \
	MOVQ R11, R13 \
	MOVQ R8, R14 \
	LEAQ A2PFDIST(R13), R9 \
	XORQ AX, AX \
	TESTQ BX, BX \
	JEQ done \
lbl: \
	PREFETCHT0 (R9)(AX*2) \
	STEP(0, R13, R14, AX, lo, hi) \
	ADDQ $32, AX \
	CMPQ AX, BX \
	JLT lbl \
done: \
	ADDQ BX, R13 \
	ADDQ BX, R14 \
	ADDQ BX, R14 \
	ADDQ DX, R11

// A2PAIR runs the previous row's second half (then sums it into off(R10))
// beside this row's first half.
#define A2PAIR(STEP, loA, hiA, xloA, off, loB, hiB, lbl, odd, next) \
	MOVQ R13, SI \
	MOVQ R14, DI \
	MOVQ R11, R13 \
	MOVQ R8, R14 \
	LEAQ A2PFDIST(R13), R9 \
	XORQ AX, AX \
	TESTQ BX, BX \
	JEQ odd \
lbl: \
	PREFETCHT0 (R9)(AX*2) \
	STEP(0, SI, DI, AX, loA, hiA) \
	STEP(0, R13, R14, AX, loB, hiB) \
	ADDQ $32, AX \
	CMPQ AX, BX \
	JLT lbl \
odd: \
	TESTQ R12, R12 \
	JEQ next \
	STEP(0, SI, DI, BX, loA, hiA) \
next: \
	A2SUM(loA, hiA, xloA, off) \
	ADDQ BX, R13 \
	ADDQ BX, R14 \
	ADDQ BX, R14 \
	ADDQ DX, R11

// A2TAIL runs row 3's second half and sums it into 12(R10).
#define A2TAIL(STEP, lbl, odd, next) \
	XORQ AX, AX \
	TESTQ BX, BX \
	JEQ odd \
lbl: \
	STEP(0, R13, R14, AX, Y6, Y7) \
	ADDQ $32, AX \
	CMPQ AX, BX \
	JLT lbl \
odd: \
	TESTQ R12, R12 \
	JEQ next \
	STEP(0, R13, R14, BX, Y6, Y7) \
next: \
	A2SUM(Y6, Y7, X6, 12)

#define A2LPROLOGUE \
	A2PROLOGUE \
	MOVQ R9, BX \
	SHLQ $5, BX \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7

// func f16Dot4x1LeapAVX2(w *byte, rowBytes int, x *float32, n16 int, acc *float32)
TEXT ·f16Dot4x1LeapAVX2(SB), NOSPLIT, $0-40
	A2LPROLOGUE
	A2HEAD(A2F16STEP, Y0, Y1, f16lh, f16lhd)
	A2PAIR(A2F16STEP, Y0, Y1, X0, 0, Y2, Y3, f16lp1, f16lq1, f16lr1)
	A2PAIR(A2F16STEP, Y2, Y3, X2, 4, Y4, Y5, f16lp2, f16lq2, f16lr2)
	A2PAIR(A2F16STEP, Y4, Y5, X4, 8, Y6, Y7, f16lp3, f16lq3, f16lr3)
	A2TAIL(A2F16STEP, f16lt, f16lto, f16ltn)
	VZEROUPPER
	RET

// func bf16Dot4x1LeapAVX2(w *byte, rowBytes int, x *float32, n16 int, acc *float32)
TEXT ·bf16Dot4x1LeapAVX2(SB), NOSPLIT, $0-40
	A2LPROLOGUE
	A2HEAD(A2BF16STEP, Y0, Y1, bf16lh, bf16lhd)
	A2PAIR(A2BF16STEP, Y0, Y1, X0, 0, Y2, Y3, bf16lp1, bf16lq1, bf16lr1)
	A2PAIR(A2BF16STEP, Y2, Y3, X2, 4, Y4, Y5, bf16lp2, bf16lq2, bf16lr2)
	A2PAIR(A2BF16STEP, Y4, Y5, X4, 8, Y6, Y7, bf16lp3, bf16lq3, bf16lr3)
	A2TAIL(A2BF16STEP, bf16lt, bf16lto, bf16ltn)
	VZEROUPPER
	RET
