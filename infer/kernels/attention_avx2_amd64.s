#include "textflag.h"

// Attention tile kernels, AVX2 (attention.go): the AVX-512 kernels' work
// in 8-lane registers. Every query keeps the canonical order of
// DotF16Rows and AXPYF16Rows: 16 lanes (two registers: lanes 0-7 and
// 8-15), product rounded before the add (no FMA), lanes summed by the
// tree +8, +4, +2, +1.

// func scoresF16AVX2(s *float32, ld int, k *uint16, stride int, q *float32, n16, nq, blocks int, kf *float32, scale float32)
//
// For each block of 4 keys: the 4 K rows are widened once into kf (laid
// out [chunk][key][16]); then for each query, Y(2r) and Y(2r+1) hold key
// r's lanes 0-7 and 8-15 chunk by chunk, and one transposing reduction
// sums the 4 keys with the same pairwise tree per key; VPERMPS puts the
// 4 scores in key order before the scale multiply.
TEXT ·scoresF16AVX2(SB), NOSPLIT, $0-76
	MOVQ s+0(FP), DI
	MOVQ ld+8(FP), BX
	SHLQ $2, BX
	MOVQ k+16(FP), SI
	MOVQ stride+24(FP), DX
	SHLQ $1, DX
	MOVQ n16+40(FP), R9
	MOVQ blocks+56(FP), R10
	MOVQ kf+64(FP), R8
	VBROADCASTSS scale+72(FP), Y15
	// VPERMPS indices 0, 4, 1, 5: keys 0, 1, 2, 3 from lanes 0, 4, 1, 5
	MOVQ $0x0000000400000000, AX
	VMOVQ AX, X14
	MOVQ $0x0000000500000001, AX
	VMOVQ AX, X13
	VPUNPCKLQDQ X13, X14, X14
ablock:
	// widen the block's 4 K rows into kf
	MOVQ SI, R11
	MOVQ R8, R13
	MOVQ $4, CX
akrow:
	MOVQ R11, R14
	MOVQ R13, R15
	MOVQ R9, AX
akchunk:
	VCVTPH2PS (R14), Y12
	VCVTPH2PS 16(R14), Y13
	VMOVUPS Y12, (R15)
	VMOVUPS Y13, 32(R15)
	ADDQ $32, R14
	ADDQ $256, R15
	DECQ AX
	JNZ akchunk
	ADDQ DX, R11
	ADDQ $64, R13
	DECQ CX
	JNZ akrow
	// queries
	MOVQ q+32(FP), R12
	MOVQ DI, R14
	MOVQ nq+48(FP), CX
aquery:

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	MOVQ R8, R15
	MOVQ R9, AX
achunk:
	VMOVUPS (R12), Y8
	VMOVUPS 32(R12), Y9
	VMULPS 0(R15), Y8, Y10
	VADDPS Y10, Y0, Y0
	VMULPS 32(R15), Y9, Y11
	VADDPS Y11, Y1, Y1
	VMULPS 64(R15), Y8, Y10
	VADDPS Y10, Y2, Y2
	VMULPS 96(R15), Y9, Y11
	VADDPS Y11, Y3, Y3
	VMULPS 128(R15), Y8, Y10
	VADDPS Y10, Y4, Y4
	VMULPS 160(R15), Y9, Y11
	VADDPS Y11, Y5, Y5
	VMULPS 192(R15), Y8, Y10
	VADDPS Y10, Y6, Y6
	VMULPS 224(R15), Y9, Y11
	VADDPS Y11, Y7, Y7
	ADDQ $64, R12
	ADDQ $256, R15
	DECQ AX
	JNZ achunk
	// lane l += lane l+8: key r in Y(r)
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y1
	VADDPS Y5, Y4, Y2
	VADDPS Y7, Y6, Y3
	// lane l += lane l+4: keys 0 | 1 in Y0, 2 | 3 in Y1 (128-bit halves)
	VPERM2F128 $0x20, Y1, Y0, Y4
	VPERM2F128 $0x31, Y1, Y0, Y5
	VADDPS Y5, Y4, Y0
	VPERM2F128 $0x20, Y3, Y2, Y4
	VPERM2F128 $0x31, Y3, Y2, Y5
	VADDPS Y5, Y4, Y1
	// lane l += lane l+2: per half, keys (0, 2) | (1, 3), two lanes each
	VSHUFPS $0x44, Y1, Y0, Y4
	VSHUFPS $0xEE, Y1, Y0, Y5
	VADDPS Y5, Y4, Y0
	// lane 0 += lane 1: per half, keys 0, 2 | 1, 3
	VSHUFPS $0x88, Y0, Y0, Y4
	VSHUFPS $0xDD, Y0, Y0, Y5
	VADDPS Y5, Y4, Y0
	VPERMPS Y0, Y14, Y0
	VMULPS X15, X0, X0
	VMOVUPS X0, (R14)
	ADDQ BX, R14
	DECQ CX
	JNZ aquery
	// next block
	MOVQ DX, AX
	SHLQ $2, AX
	ADDQ AX, SI
	ADDQ $16, DI
	DECQ R10
	JNZ ablock
	VZEROUPPER
	RET

// func weightedSum4F16AVX2(y *[4]*float32, a *[4]*float32, v *uint16, stride int, n16, rows int)
//
// For 4 queries (outputs y[g], weights a[g]) and j < rows in order:
// y_g[d] = y_g[d] + a_g[j]·v[j*stride+d] (product rounded), d < 16*n16.
// Each stretch of 16 outputs of the 4 queries stays in Y0..Y7 while all
// rows stream past; each V row is widened once for all 4.
TEXT ·weightedSum4F16AVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ v+16(FP), SI
	MOVQ stride+24(FP), DX
	SHLQ $1, DX
	MOVQ n16+32(FP), R10
	XORQ BX, BX // byte offset of the current stretch of 16 outputs
awchunk:
	MOVQ 0(DI), R11
	VMOVUPS 0(R11)(BX*1), Y0
	VMOVUPS 32(R11)(BX*1), Y1
	MOVQ 8(DI), R12
	VMOVUPS 0(R12)(BX*1), Y2
	VMOVUPS 32(R12)(BX*1), Y3
	MOVQ 16(DI), R13
	VMOVUPS 0(R13)(BX*1), Y4
	VMOVUPS 32(R13)(BX*1), Y5
	MOVQ 24(DI), R14
	VMOVUPS 0(R14)(BX*1), Y6
	VMOVUPS 32(R14)(BX*1), Y7
	MOVQ a+8(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R9
	MOVQ 16(AX), R15
	MOVQ 24(AX), AX
	MOVQ SI, R11
	MOVQ rows+40(FP), CX
awrow:
	VCVTPH2PS 0(R11), Y8
	VCVTPH2PS 16(R11), Y9
	VBROADCASTSS (R8), Y10
	VMULPS Y10, Y8, Y11
	VADDPS Y11, Y0, Y0
	VMULPS Y10, Y9, Y12
	VADDPS Y12, Y1, Y1
	VBROADCASTSS (R9), Y10
	VMULPS Y10, Y8, Y11
	VADDPS Y11, Y2, Y2
	VMULPS Y10, Y9, Y12
	VADDPS Y12, Y3, Y3
	VBROADCASTSS (R15), Y10
	VMULPS Y10, Y8, Y11
	VADDPS Y11, Y4, Y4
	VMULPS Y10, Y9, Y12
	VADDPS Y12, Y5, Y5
	VBROADCASTSS (AX), Y10
	VMULPS Y10, Y8, Y11
	VADDPS Y11, Y6, Y6
	VMULPS Y10, Y9, Y12
	VADDPS Y12, Y7, Y7
	ADDQ $4, R8
	ADDQ $4, R9
	ADDQ $4, R15
	ADDQ $4, AX
	ADDQ DX, R11
	DECQ CX
	JNZ awrow
	MOVQ 0(DI), R11
	VMOVUPS Y0, 0(R11)(BX*1)
	VMOVUPS Y1, 32(R11)(BX*1)
	MOVQ 8(DI), R12
	VMOVUPS Y2, 0(R12)(BX*1)
	VMOVUPS Y3, 32(R12)(BX*1)
	MOVQ 16(DI), R13
	VMOVUPS Y4, 0(R13)(BX*1)
	VMOVUPS Y5, 32(R13)(BX*1)
	MOVQ 24(DI), R14
	VMOVUPS Y6, 0(R14)(BX*1)
	VMOVUPS Y7, 32(R14)(BX*1)
	ADDQ $64, BX
	ADDQ $32, SI
	DECQ R10
	JNZ awchunk
	VZEROUPPER
	RET
