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
