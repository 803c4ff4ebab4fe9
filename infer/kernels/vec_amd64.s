#include "textflag.h"

// Vector helpers, AVX-512. Each follows the canonical order of vec.go:
// Z0 holds the 16 lane accumulators (element i goes to lane i mod 16), the
// product is rounded before the add (no FMA), and the lanes are summed by
// the tree +8, +4, +2, +1. n16 is len/16 and at least 1.

#define TREE16 \
	VEXTRACTF32X8 $1, Z0, Y1 \
	VADDPS Y1, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VMOVHLPS X0, X0, X1 \
	VADDPS X1, X0, X0 \
	VMOVSHDUP X0, X1 \
	VADDSS X1, X0, X0

// func dotAVX512(a, b *float32, n16 int) float32
TEXT ·dotAVX512(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n16+16(FP), CX
	VPXORD Z0, Z0, Z0
dotloop:
	VMOVUPS (SI), Z1
	VMULPS (DI), Z1, Z1
	VADDPS Z1, Z0, Z0
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  dotloop
	TREE16
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF16AVX512(a *uint16, b *float32, n16 int) float32
TEXT ·dotF16AVX512(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n16+16(FP), CX
	VPXORD Z0, Z0, Z0
dotf16loop:
	VCVTPH2PS (SI), Z1
	VMULPS (DI), Z1, Z1
	VADDPS Z1, Z0, Z0
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  dotf16loop
	TREE16
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyAVX512(y *float32, a float32, x *float32, n16 int)
TEXT ·axpyAVX512(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	VBROADCASTSS a+8(FP), Z2
	MOVQ x+16(FP), SI
	MOVQ n16+24(FP), CX
axpyloop:
	VMULPS (SI), Z2, Z1
	VADDPS (DI), Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  axpyloop
	VZEROUPPER
	RET

// func axpyF16AVX512(y *float32, a float32, x *uint16, n16 int)
TEXT ·axpyF16AVX512(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	VBROADCASTSS a+8(FP), Z2
	MOVQ x+16(FP), SI
	MOVQ n16+24(FP), CX
axpyf16loop:
	VCVTPH2PS (SI), Z1
	VMULPS Z2, Z1, Z1
	VADDPS (DI), Z1, Z1
	VMOVUPS Z1, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  axpyf16loop
	VZEROUPPER
	RET

// func dotF16RowsAVX512(dst *float32, k *uint16, stride int, q *float32, n16 int, rows int)
//
// dst[j] = DotF16(k[j*stride : j*stride+16*n16], q) for j < rows, each in
// the canonical order (16 lanes, product then add, tree +8 +4 +2 +1).
TEXT ·dotF16RowsAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), R8
	MOVQ k+8(FP), SI
	MOVQ stride+16(FP), DX
	SHLQ $1, DX
	MOVQ q+24(FP), DI
	MOVQ n16+32(FP), R9
	MOVQ rows+40(FP), R10
	TESTQ R10, R10
	JLE dfrdone
dfrrow:
	VPXORD Z0, Z0, Z0
	MOVQ SI, R11
	MOVQ DI, R12
	MOVQ R9, CX
dfrloop:
	VCVTPH2PS (R11), Z1
	VMULPS (R12), Z1, Z1
	VADDPS Z1, Z0, Z0
	ADDQ $32, R11
	ADDQ $64, R12
	DECQ CX
	JNZ dfrloop
	TREE16
	VMOVSS X0, (R8)
	ADDQ $4, R8
	ADDQ DX, SI
	DECQ R10
	JNZ dfrrow
dfrdone:
	VZEROUPPER
	RET

// func axpyF16RowsAVX512(y *float32, a *float32, v *uint16, stride int, n16 int, rows int)
//
// For j < rows in order: y[i] = y[i] + a[j]·v[j*stride+i] (product rounded),
// i < 16*n16, as a loop of AXPYF16 calls. y is kept in registers in
// stretches of 64 elements.
TEXT ·axpyF16RowsAVX512(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), R8
	MOVQ v+16(FP), SI
	MOVQ stride+24(FP), DX
	SHLQ $1, DX
	MOVQ n16+32(FP), R9
	MOVQ rows+40(FP), R10
	TESTQ R10, R10
	JLE axrdone
axrblock:
	// up to 4 vectors of y at a time
	MOVQ R9, BX
	CMPQ BX, $4
	JLE axrn
	MOVQ $4, BX
axrn:
	VMOVUPS (DI), Z0
	CMPQ BX, $2
	JLT axrload
	VMOVUPS 64(DI), Z1
	CMPQ BX, $3
	JLT axrload
	VMOVUPS 128(DI), Z2
	CMPQ BX, $4
	JLT axrload
	VMOVUPS 192(DI), Z3
axrload:
	MOVQ SI, R11
	MOVQ R8, R12
	MOVQ R10, CX
axrrow:
	VBROADCASTSS (R12), Z8
	VCVTPH2PS (R11), Z4
	VMULPS Z8, Z4, Z4
	VADDPS Z4, Z0, Z0
	CMPQ BX, $2
	JLT axrnext
	VCVTPH2PS 32(R11), Z5
	VMULPS Z8, Z5, Z5
	VADDPS Z5, Z1, Z1
	CMPQ BX, $3
	JLT axrnext
	VCVTPH2PS 64(R11), Z6
	VMULPS Z8, Z6, Z6
	VADDPS Z6, Z2, Z2
	CMPQ BX, $4
	JLT axrnext
	VCVTPH2PS 96(R11), Z7
	VMULPS Z8, Z7, Z7
	VADDPS Z7, Z3, Z3
axrnext:
	ADDQ DX, R11
	ADDQ $4, R12
	DECQ CX
	JNZ axrrow
	VMOVUPS Z0, (DI)
	CMPQ BX, $2
	JLT axrstored
	VMOVUPS Z1, 64(DI)
	CMPQ BX, $3
	JLT axrstored
	VMOVUPS Z2, 128(DI)
	CMPQ BX, $4
	JLT axrstored
	VMOVUPS Z3, 192(DI)
axrstored:
	MOVQ BX, AX
	SHLQ $6, AX
	ADDQ AX, DI
	SHRQ $1, AX
	ADDQ AX, SI
	SUBQ BX, R9
	JNZ axrblock
axrdone:
	VZEROUPPER
	RET
