#include "textflag.h"

// This file was written out by a short script (one STEP macro and one
// TEXT block per type and token count); edit all six kernels alike.

// Few-token kernels for F16 and BF16 weights (decode of 2 to 4 streams),
// AVX-512: rows one after the other (one ascending stream of addresses, as
// in f16_amd64.s), each row against nt tokens at once, so that each
// weight vector is widened once for nt independent chains. Row r of token t
// keeps its 16 canonical lane accumulators (column c in lane c mod 16, in
// column order) in register Zt; at the row's end each is reduced by the
// fixed tree +8, +4, +2, +1 and stored to y + t·yStride + 4r.
//
// func f16DotRowsNAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)
//
// Registers: R11 the row, SI/DI the walk along it and the activations, DX
// rowBytes, R8/BX one and three activation strides (bytes), R9 double steps
// per row, R12 n16 mod 2, R10 the row's output, AX/R13 one and three output
// strides (bytes), R14 rows left.

#define PROLOGUE \
	MOVQ w+0(FP), R11 \
	MOVQ rowBytes+8(FP), DX \
	MOVQ xStride+24(FP), R8 \
	LEAQ (R8)(R8*2), BX \
	MOVQ n16+32(FP), R9 \
	MOVQ R9, R12 \
	ANDQ $1, R12 \
	SHRQ $1, R9 \
	MOVQ rows+40(FP), R14 \
	MOVQ y+48(FP), R10 \
	MOVQ yStride+56(FP), AX \
	LEAQ (AX)(AX*2), R13

// TREE reduces Zacc by +8, +4, +2, +1 into the low lane of Xacc.
#define TREE(Zacc, Yacc, Xacc) \
	VEXTRACTF32X8 $1, Zacc, Y24 \
	VADDPS Y24, Yacc, Yacc \
	VEXTRACTF32X4 $1, Yacc, X24 \
	VADDPS X24, Xacc, Xacc \
	VMOVHLPS Xacc, Xacc, X24 \
	VADDPS X24, Xacc, Xacc \
	VMOVSHDUP Xacc, X24 \
	VADDSS X24, Xacc, Xacc

#define STEP_f16r2(d) \
	VCVTPH2PS d(SI), Z16 \
	VFMADD231PS (2*d)(DI), Z16, Z0 \
	VFMADD231PS (2*d)(DI)(R8*1), Z16, Z1

// func f16DotRows2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)
TEXT ·f16DotRows2AVX512(SB), NOSPLIT, $0-64
	PROLOGUE
f16r2row:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	MOVQ R11, SI
	MOVQ x+16(FP), DI
	MOVQ R9, CX
	TESTQ CX, CX
	JEQ f16r2odd
f16r2loop:
	STEP_f16r2(0)
	STEP_f16r2(32)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ f16r2loop
f16r2odd:
	TESTQ R12, R12
	JEQ f16r2sum
	STEP_f16r2(0)
f16r2sum:
	TREE(Z0, Y0, X0)
	VMOVSS X0, (R10)
	TREE(Z1, Y1, X1)
	VMOVSS X1, (R10)(AX*1)
	ADDQ $4, R10
	ADDQ DX, R11
	DECQ R14
	JNZ f16r2row
	VZEROUPPER
	RET

#define STEP_f16r3(d) \
	VCVTPH2PS d(SI), Z16 \
	VFMADD231PS (2*d)(DI), Z16, Z0 \
	VFMADD231PS (2*d)(DI)(R8*1), Z16, Z1 \
	VFMADD231PS (2*d)(DI)(R8*2), Z16, Z2

// func f16DotRows3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)
TEXT ·f16DotRows3AVX512(SB), NOSPLIT, $0-64
	PROLOGUE
f16r3row:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	MOVQ R11, SI
	MOVQ x+16(FP), DI
	MOVQ R9, CX
	TESTQ CX, CX
	JEQ f16r3odd
f16r3loop:
	STEP_f16r3(0)
	STEP_f16r3(32)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ f16r3loop
f16r3odd:
	TESTQ R12, R12
	JEQ f16r3sum
	STEP_f16r3(0)
f16r3sum:
	TREE(Z0, Y0, X0)
	VMOVSS X0, (R10)
	TREE(Z1, Y1, X1)
	VMOVSS X1, (R10)(AX*1)
	TREE(Z2, Y2, X2)
	VMOVSS X2, (R10)(AX*2)
	ADDQ $4, R10
	ADDQ DX, R11
	DECQ R14
	JNZ f16r3row
	VZEROUPPER
	RET

#define STEP_f16r4(d) \
	VCVTPH2PS d(SI), Z16 \
	VFMADD231PS (2*d)(DI), Z16, Z0 \
	VFMADD231PS (2*d)(DI)(R8*1), Z16, Z1 \
	VFMADD231PS (2*d)(DI)(R8*2), Z16, Z2 \
	VFMADD231PS (2*d)(DI)(BX*1), Z16, Z3

// func f16DotRows4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)
TEXT ·f16DotRows4AVX512(SB), NOSPLIT, $0-64
	PROLOGUE
f16r4row:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ R11, SI
	MOVQ x+16(FP), DI
	MOVQ R9, CX
	TESTQ CX, CX
	JEQ f16r4odd
f16r4loop:
	STEP_f16r4(0)
	STEP_f16r4(32)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ f16r4loop
f16r4odd:
	TESTQ R12, R12
	JEQ f16r4sum
	STEP_f16r4(0)
f16r4sum:
	TREE(Z0, Y0, X0)
	VMOVSS X0, (R10)
	TREE(Z1, Y1, X1)
	VMOVSS X1, (R10)(AX*1)
	TREE(Z2, Y2, X2)
	VMOVSS X2, (R10)(AX*2)
	TREE(Z3, Y3, X3)
	VMOVSS X3, (R10)(R13*1)
	ADDQ $4, R10
	ADDQ DX, R11
	DECQ R14
	JNZ f16r4row
	VZEROUPPER
	RET

#define STEP_bf16r2(d) \
	VPMOVZXWD d(SI), Z16 \
	VPSLLD $16, Z16, Z16 \
	VMULPS (2*d)(DI), Z16, Z17 \
	VMULPS (2*d)(DI)(R8*1), Z16, Z18 \
	VADDPS Z17, Z0, Z0 \
	VADDPS Z18, Z1, Z1

// func bf16DotRows2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)
TEXT ·bf16DotRows2AVX512(SB), NOSPLIT, $0-64
	PROLOGUE
bf16r2row:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	MOVQ R11, SI
	MOVQ x+16(FP), DI
	MOVQ R9, CX
	TESTQ CX, CX
	JEQ bf16r2odd
bf16r2loop:
	STEP_bf16r2(0)
	STEP_bf16r2(32)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ bf16r2loop
bf16r2odd:
	TESTQ R12, R12
	JEQ bf16r2sum
	STEP_bf16r2(0)
bf16r2sum:
	TREE(Z0, Y0, X0)
	VMOVSS X0, (R10)
	TREE(Z1, Y1, X1)
	VMOVSS X1, (R10)(AX*1)
	ADDQ $4, R10
	ADDQ DX, R11
	DECQ R14
	JNZ bf16r2row
	VZEROUPPER
	RET

#define STEP_bf16r3(d) \
	VPMOVZXWD d(SI), Z16 \
	VPSLLD $16, Z16, Z16 \
	VMULPS (2*d)(DI), Z16, Z17 \
	VMULPS (2*d)(DI)(R8*1), Z16, Z18 \
	VMULPS (2*d)(DI)(R8*2), Z16, Z19 \
	VADDPS Z17, Z0, Z0 \
	VADDPS Z18, Z1, Z1 \
	VADDPS Z19, Z2, Z2

// func bf16DotRows3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)
TEXT ·bf16DotRows3AVX512(SB), NOSPLIT, $0-64
	PROLOGUE
bf16r3row:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	MOVQ R11, SI
	MOVQ x+16(FP), DI
	MOVQ R9, CX
	TESTQ CX, CX
	JEQ bf16r3odd
bf16r3loop:
	STEP_bf16r3(0)
	STEP_bf16r3(32)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ bf16r3loop
bf16r3odd:
	TESTQ R12, R12
	JEQ bf16r3sum
	STEP_bf16r3(0)
bf16r3sum:
	TREE(Z0, Y0, X0)
	VMOVSS X0, (R10)
	TREE(Z1, Y1, X1)
	VMOVSS X1, (R10)(AX*1)
	TREE(Z2, Y2, X2)
	VMOVSS X2, (R10)(AX*2)
	ADDQ $4, R10
	ADDQ DX, R11
	DECQ R14
	JNZ bf16r3row
	VZEROUPPER
	RET

#define STEP_bf16r4(d) \
	VPMOVZXWD d(SI), Z16 \
	VPSLLD $16, Z16, Z16 \
	VMULPS (2*d)(DI), Z16, Z17 \
	VMULPS (2*d)(DI)(R8*1), Z16, Z18 \
	VMULPS (2*d)(DI)(R8*2), Z16, Z19 \
	VMULPS (2*d)(DI)(BX*1), Z16, Z20 \
	VADDPS Z17, Z0, Z0 \
	VADDPS Z18, Z1, Z1 \
	VADDPS Z19, Z2, Z2 \
	VADDPS Z20, Z3, Z3

// func bf16DotRows4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)
TEXT ·bf16DotRows4AVX512(SB), NOSPLIT, $0-64
	PROLOGUE
bf16r4row:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ R11, SI
	MOVQ x+16(FP), DI
	MOVQ R9, CX
	TESTQ CX, CX
	JEQ bf16r4odd
bf16r4loop:
	STEP_bf16r4(0)
	STEP_bf16r4(32)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ bf16r4loop
bf16r4odd:
	TESTQ R12, R12
	JEQ bf16r4sum
	STEP_bf16r4(0)
bf16r4sum:
	TREE(Z0, Y0, X0)
	VMOVSS X0, (R10)
	TREE(Z1, Y1, X1)
	VMOVSS X1, (R10)(AX*1)
	TREE(Z2, Y2, X2)
	VMOVSS X2, (R10)(AX*2)
	TREE(Z3, Y3, X3)
	VMOVSS X3, (R10)(R13*1)
	ADDQ $4, R10
	ADDQ DX, R11
	DECQ R14
	JNZ bf16r4row
	VZEROUPPER
	RET
