#include "textflag.h"

// One-token kernels for F16 and BF16 weights (decode), AVX2 + FMA + F16C:
// f16_amd64.s's scheme with 256-bit registers. 4 consecutive rows are read
// one after the other (one ascending stream of addresses); row r keeps its
// 16 canonical lane accumulators in two registers (lanes 0–7 and 8–15:
// column c in lane c mod 16, in column order; F16 by FMA, the f16×f16
// product being exact; BF16 by a rounded multiply, then the add), and at
// the row's end sums them by the fixed tree +8, +4, +2, +1 into acc[r].

// A2F16STEP and A2BF16STEP do one step of 16 columns: weights at disp(SI),
// activations at 2·disp(DI), into lo (lanes 0–7) and hi (lanes 8–15).
#define A2F16STEP(disp, lo, hi) \
	VCVTPH2PS disp(SI), Y8 \
	VCVTPH2PS (disp+16)(SI), Y9 \
	VFMADD231PS (2*disp)(DI), Y8, lo \
	VFMADD231PS (2*disp+32)(DI), Y9, hi

#define A2BF16STEP(disp, lo, hi) \
	VPMOVZXWD disp(SI), Y8 \
	VPMOVZXWD (disp+16)(SI), Y9 \
	VPSLLD $16, Y8, Y8 \
	VPSLLD $16, Y9, Y9 \
	VMULPS (2*disp)(DI), Y8, Y8 \
	VMULPS (2*disp+32)(DI), Y9, Y9 \
	VADDPS Y8, lo, lo \
	VADDPS Y9, hi, hi

// A2ROW runs row r's chain (R9 = n16/2 double steps from R11, then the odd
// step if R12 = n16 mod 2 is set), sums it by the tree into off(R10) and
// moves R11 on to the next row.
#define A2ROW(STEP, lo, hi, xlo, off, lbl, odd, sum) \
	VXORPS lo, lo, lo \
	VXORPS hi, hi, hi \
	MOVQ R11, SI \
	MOVQ R8, DI \
	MOVQ R9, CX \
	TESTQ CX, CX \
	JEQ odd \
lbl: \
	STEP(0, lo, hi) \
	STEP(32, lo, hi) \
	ADDQ $64, SI \
	ADDQ $128, DI \
	DECQ CX \
	JNZ lbl \
odd: \
	TESTQ R12, R12 \
	JEQ sum \
	STEP(0, lo, hi) \
sum: \
	VADDPS hi, lo, lo \
	VEXTRACTF128 $1, lo, X10 \
	VADDPS X10, xlo, xlo \
	VMOVHLPS xlo, xlo, X10 \
	VADDPS X10, xlo, xlo \
	VMOVSHDUP xlo, X10 \
	VADDSS X10, xlo, xlo \
	VMOVSS xlo, off(R10) \
	ADDQ DX, R11

#define A2PROLOGUE \
	MOVQ w+0(FP), R11 \
	MOVQ rowBytes+8(FP), DX \
	MOVQ x+16(FP), R8 \
	MOVQ n16+24(FP), R9 \
	MOVQ acc+32(FP), R10 \
	MOVQ R9, R12 \
	ANDQ $1, R12 \
	SHRQ $1, R9

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
