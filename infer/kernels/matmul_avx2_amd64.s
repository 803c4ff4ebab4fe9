#include "textflag.h"

// AVX2 kernels (no AVX-512): same canonical order as generic.go.

#define REDUCE8AVX2 \
	VPHADDD Y1, Y0, Y0 \
	VPHADDD Y3, Y2, Y2 \
	VPHADDD Y5, Y4, Y4 \
	VPHADDD Y7, Y6, Y6 \
	VPHADDD Y2, Y0, Y0 \
	VPHADDD Y6, Y4, Y4 \
	VPERM2I128 $0x20, Y4, Y0, Y1 \
	VPERM2I128 $0x31, Y4, Y0, Y2 \
	VPADDD Y2, Y1, Y1

// Q8ROW(addr, dst): dst = 8 int32 partial sums of w·a for one row's block
// (w at addr, a in Y8) by the sign trick: |w| (unsigned) times a with w's
// sign, pairwise into int16 (at most 2·128·127, no saturation), then
// pairwise into int32 with Y11 = 1s.
#define Q8ROW(addr, dst) \
	VMOVDQU addr, Y9 \
	VPSIGNB Y9, Y8, Y10 \
	VPSIGNB Y9, Y9, Y9 \
	VPMADDUBSW Y10, Y9, Y9 \
	VPMADDWD Y11, Y9, dst

// func q8_0Dot8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)
//
// Q8_0 on raw blocks, 8 rows in lanes: isum = Σ w·a (exact);
// p = (dw·da)·float32(isum); acc = acc + p.
TEXT ·q8_0Dot8AVX2(SB), NOSPLIT, $8-56
	MOVQ w+0(FP), SI
	MOVQ idx+8(FP), AX
	MOVQ nb+16(FP), CX
	MOVQ q+24(FP), DI
	MOVQ da+32(FP), R11
	MOVL 4(AX), DX
	LEAQ (DX)(DX*2), BX
	LEAQ (SI)(DX*4), R14
	MOVQ DX, AX                     // prefetch pointer: two groups ahead
	SHLQ $4, AX
	ADDQ SI, AX
	MOVQ AX, pf-8(SP)
	MOVQ acc+48(FP), AX
	VMOVUPS (AX), Y15
	MOVL $0x00010001, R8
	MOVQ R8, X11
	VPBROADCASTD X11, Y11
	TESTQ CX, CX
	JLE q8a2done
q8a2loop:
	MOVQ pf-8(SP), AX
	PREFETCHT1 (AX)
	PREFETCHT1 64(AX)
	PREFETCHT1 128(AX)
	PREFETCHT1 192(AX)
	PREFETCHT1 256(AX)
	ADDQ $272, AX
	MOVQ AX, pf-8(SP)
	VMOVDQU (DI), Y8
	Q8ROW(2(SI), Y0)
	Q8ROW(2(SI)(DX*1), Y1)
	Q8ROW(2(SI)(DX*2), Y2)
	Q8ROW(2(SI)(BX*1), Y3)
	Q8ROW(2(R14), Y4)
	Q8ROW(2(R14)(DX*1), Y5)
	Q8ROW(2(R14)(DX*2), Y6)
	Q8ROW(2(R14)(BX*1), Y7)
	REDUCE8AVX2
	VCVTDQ2PS Y1, Y1
	MOVWLZX (SI), R8                // the 8 rows' f16 scales, packed by
	MOVWLZX (SI)(DX*1), R9          // scalar loads (faster than
	SHLQ $16, R9                    // VPGATHERDD on Zen 4)
	ORQ R9, R8
	MOVWLZX (SI)(DX*2), R9
	SHLQ $32, R9
	ORQ R9, R8
	MOVWLZX (SI)(BX*1), R9
	SHLQ $48, R9
	ORQ R9, R8
	MOVWLZX (R14), R10
	MOVWLZX (R14)(DX*1), R9
	SHLQ $16, R9
	ORQ R9, R10
	MOVWLZX (R14)(DX*2), R9
	SHLQ $32, R9
	ORQ R9, R10
	MOVWLZX (R14)(BX*1), R9
	SHLQ $48, R9
	ORQ R9, R10
	VMOVQ R8, X3
	VPINSRQ $1, R10, X3, X3
	VCVTPH2PS X3, Y3
	VBROADCASTSS (R11), Y2
	VMULPS Y2, Y3, Y3
	VMULPS Y1, Y3, Y3
	VADDPS Y3, Y15, Y15
	ADDQ $34, SI
	ADDQ $34, R14
	ADDQ $32, DI
	ADDQ $4, R11
	DECQ CX
	JNZ q8a2loop
q8a2done:
	MOVQ acc+48(FP), AX
	VMOVUPS Y15, (AX)
	VZEROUPPER
	RET
