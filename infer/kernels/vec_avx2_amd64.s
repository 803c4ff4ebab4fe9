#include "textflag.h"

// AVX2 versions of the vector helpers: the 16 canonical lanes are Y0
// (lanes 0-7) and Y1 (lanes 8-15); the tree is Y0+Y1 (+8), then +4, +2, +1
// on the low lanes, exactly as TREE16 in vec_amd64.s.

#define TREE16AVX2 \
	VADDPS Y1, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VMOVHLPS X0, X0, X1 \
	VADDPS X1, X0, X0 \
	VMOVSHDUP X0, X1 \
	VADDSS X1, X0, X0

// func dotAVX2(a, b *float32, n16 int) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n16+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
dot2loop:
	VMOVUPS (SI), Y2
	VMOVUPS 32(SI), Y3
	VMULPS (DI), Y2, Y2
	VMULPS 32(DI), Y3, Y3
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ dot2loop
	TREE16AVX2
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF16AVX2(a *uint16, b *float32, n16 int) float32
TEXT ·dotF16AVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n16+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
dotf162loop:
	VCVTPH2PS (SI), Y2
	VCVTPH2PS 16(SI), Y3
	VMULPS (DI), Y2, Y2
	VMULPS 32(DI), Y3, Y3
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ dotf162loop
	TREE16AVX2
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func axpyAVX2(y *float32, a float32, x *float32, n16 int)
TEXT ·axpyAVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	VBROADCASTSS a+8(FP), Y4
	MOVQ x+16(FP), SI
	MOVQ n16+24(FP), CX
axpy2loop:
	VMULPS (SI), Y4, Y0
	VMULPS 32(SI), Y4, Y1
	VADDPS (DI), Y0, Y0
	VADDPS 32(DI), Y1, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ axpy2loop
	VZEROUPPER
	RET

// func axpyF16AVX2(y *float32, a float32, x *uint16, n16 int)
TEXT ·axpyF16AVX2(SB), NOSPLIT, $0-32
	MOVQ y+0(FP), DI
	VBROADCASTSS a+8(FP), Y4
	MOVQ x+16(FP), SI
	MOVQ n16+24(FP), CX
axpyf162loop:
	VCVTPH2PS (SI), Y0
	VCVTPH2PS 16(SI), Y1
	VMULPS Y4, Y0, Y0
	VMULPS Y4, Y1, Y1
	VADDPS (DI), Y0, Y0
	VADDPS 32(DI), Y1, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ axpyf162loop
	VZEROUPPER
	RET

// func dotF16RowsAVX2(dst *float32, k *uint16, stride int, q *float32, n16 int, rows int)
TEXT ·dotF16RowsAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), R8
	MOVQ k+8(FP), SI
	MOVQ stride+16(FP), DX
	SHLQ $1, DX
	MOVQ q+24(FP), DI
	MOVQ n16+32(FP), R9
	MOVQ rows+40(FP), R10
	TESTQ R10, R10
	JLE dfr2done
dfr2row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	MOVQ SI, R11
	MOVQ DI, R12
	MOVQ R9, CX
dfr2loop:
	VCVTPH2PS (R11), Y2
	VCVTPH2PS 16(R11), Y3
	VMULPS (R12), Y2, Y2
	VMULPS 32(R12), Y3, Y3
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	ADDQ $32, R11
	ADDQ $64, R12
	DECQ CX
	JNZ dfr2loop
	TREE16AVX2
	VMOVSS X0, (R8)
	ADDQ $4, R8
	ADDQ DX, SI
	DECQ R10
	JNZ dfr2row
dfr2done:
	VZEROUPPER
	RET

// func axpyF16RowsAVX2(y *float32, a *float32, v *uint16, stride int, n16 int, rows int)
//
// Keeps y in registers 32 elements (4 vectors) at a time.
TEXT ·axpyF16RowsAVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ a+8(FP), R8
	MOVQ v+16(FP), SI
	MOVQ stride+24(FP), DX
	SHLQ $1, DX
	MOVQ n16+32(FP), R9
	MOVQ rows+40(FP), R10
	TESTQ R10, R10
	JLE axr2done
axr2block:
	MOVQ R9, BX
	CMPQ BX, $2
	JLE axr2n
	MOVQ $2, BX
axr2n:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	CMPQ BX, $2
	JLT axr2load
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
axr2load:
	MOVQ SI, R11
	MOVQ R8, R12
	MOVQ R10, CX
axr2row:
	VBROADCASTSS (R12), Y8
	VCVTPH2PS (R11), Y4
	VCVTPH2PS 16(R11), Y5
	VMULPS Y8, Y4, Y4
	VMULPS Y8, Y5, Y5
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	CMPQ BX, $2
	JLT axr2next
	VCVTPH2PS 32(R11), Y6
	VCVTPH2PS 48(R11), Y7
	VMULPS Y8, Y6, Y6
	VMULPS Y8, Y7, Y7
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
axr2next:
	ADDQ DX, R11
	ADDQ $4, R12
	DECQ CX
	JNZ axr2row
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	CMPQ BX, $2
	JLT axr2stored
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
axr2stored:
	MOVQ BX, AX
	SHLQ $6, AX
	ADDQ AX, DI
	SHRQ $1, AX
	ADDQ AX, SI
	SUBQ BX, R9
	JNZ axr2block
axr2done:
	VZEROUPPER
	RET
