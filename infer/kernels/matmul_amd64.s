#include "textflag.h"

// Lane-per-row kernels: each computes one token against an 8-row panel of
// unpacked weights; lane r of every vector is output row r, and each lane
// performs exactly the scalar canonical order of generic.go (dotLegacy,
// dotK). Integer parts are exact in any order.

// Reduce8 sums the eight int32 lanes of each of Y0..Y7 and leaves row r's
// total in lane r of Y1. Clobbers Y0, Y2..Y7.
#define REDUCE8 \
	VPHADDD Y1, Y0, Y0 \
	VPHADDD Y3, Y2, Y2 \
	VPHADDD Y5, Y4, Y4 \
	VPHADDD Y7, Y6, Y6 \
	VPHADDD Y2, Y0, Y0 \
	VPHADDD Y6, Y4, Y4 \
	VPERM2I128 $0x20, Y4, Y0, Y1 \
	VPERM2I128 $0x31, Y4, Y0, Y2 \
	VPADDD Y2, Y1, Y1

// func legacyDot8AVX512(w *int8, wsum *int32, dw *float32, mw *float32, nb int, qu *uint8, da *float32, sa *float32, acc *[8]float32)
//
// Per block b (rows in lanes): isum = Σ (a+128)·w − 128·Σw; p = (dw·da)·float32(isum);
// if mw != nil: p = p + mw·sa; acc = acc + p.
TEXT ·legacyDot8AVX512(SB), NOSPLIT, $0-72
	MOVQ w+0(FP), SI
	MOVQ wsum+8(FP), R8
	MOVQ dw+16(FP), R9
	MOVQ mw+24(FP), R10
	MOVQ nb+32(FP), CX
	MOVQ qu+40(FP), DI
	MOVQ da+48(FP), R11
	MOVQ sa+56(FP), R12
	MOVQ acc+64(FP), AX
	VMOVUPS (AX), Y15
	TESTQ CX, CX
	JLE   done
	TESTQ R10, R10
	JNZ   loopmin

loop:
	VMOVDQU (DI), Y14
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPDPBUSD 0(SI), Y14, Y0
	VPDPBUSD 32(SI), Y14, Y1
	VPDPBUSD 64(SI), Y14, Y2
	VPDPBUSD 96(SI), Y14, Y3
	VPDPBUSD 128(SI), Y14, Y4
	VPDPBUSD 160(SI), Y14, Y5
	VPDPBUSD 192(SI), Y14, Y6
	VPDPBUSD 224(SI), Y14, Y7
	REDUCE8
	VPSUBD (R8), Y1, Y1
	VCVTDQ2PS Y1, Y1
	VBROADCASTSS (R11), Y2
	VMULPS (R9), Y2, Y2
	VMULPS Y1, Y2, Y2
	VADDPS Y2, Y15, Y15
	ADDQ $256, SI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, DI
	ADDQ $4, R11
	DECQ CX
	JNZ  loop
	JMP  done

loopmin:
	VMOVDQU (DI), Y14
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPDPBUSD 0(SI), Y14, Y0
	VPDPBUSD 32(SI), Y14, Y1
	VPDPBUSD 64(SI), Y14, Y2
	VPDPBUSD 96(SI), Y14, Y3
	VPDPBUSD 128(SI), Y14, Y4
	VPDPBUSD 160(SI), Y14, Y5
	VPDPBUSD 192(SI), Y14, Y6
	VPDPBUSD 224(SI), Y14, Y7
	REDUCE8
	VPSUBD (R8), Y1, Y1
	VCVTDQ2PS Y1, Y1
	VBROADCASTSS (R11), Y2
	VMULPS (R9), Y2, Y2
	VMULPS Y1, Y2, Y2
	VBROADCASTSS (R12), Y3
	VMULPS (R10), Y3, Y3
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y15, Y15
	ADDQ $256, SI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	ADDQ $32, DI
	ADDQ $4, R11
	ADDQ $4, R12
	DECQ CX
	JNZ  loopmin

done:
	VMOVUPS Y15, (AX)
	VZEROUPPER
	RET

// func kDot8AVX512(u *uint8, sc *int16, mn *int16, dw *float32, dm *float32, nsb int, q *int8, da *float32, bs *int16, acc *[8]float32)
//
// Per super-block (rows in lanes): S = Σ_chunks Σ sc·(u·a) (u unsigned),
// M = Σ_h mn_h·bs_h. With dm: p = (dw·da)·float32(S) − (dm·da)·float32(M);
// without: p = (dw·da)·float32(S−M). acc = acc + p.
TEXT ·kDot8AVX512(SB), NOSPLIT, $0-80
	MOVQ u+0(FP), SI
	MOVQ sc+8(FP), R8
	MOVQ mn+16(FP), R9
	MOVQ dw+24(FP), R10
	MOVQ dm+32(FP), R11
	MOVQ nsb+40(FP), CX
	MOVQ q+48(FP), DI
	MOVQ da+56(FP), R12
	MOVQ bs+64(FP), R13
	MOVQ acc+72(FP), AX
	VMOVUPS (AX), Y15
	TESTQ CX, CX
	JLE   kdone

kloop:
	// M: Σ_h mn_h·bs_h for each row.
	VMOVDQU (R13), Y14
	VPMADDWD 0(R9), Y14, Y0
	VPMADDWD 32(R9), Y14, Y1
	VPMADDWD 64(R9), Y14, Y2
	VPMADDWD 96(R9), Y14, Y3
	VPMADDWD 128(R9), Y14, Y4
	VPMADDWD 160(R9), Y14, Y5
	VPMADDWD 192(R9), Y14, Y6
	VPMADDWD 224(R9), Y14, Y7
	REDUCE8
	VMOVDQA Y1, Y13

	// S: eight chunks of 32 per row.
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	XORQ BX, BX

kchunk:
	VMOVDQU (DI)(BX*1), Y14
	VMOVDQU (SI)(BX*1), Y8
	VPMADDUBSW Y14, Y8, Y8
	VPDPWSSD (R8)(BX*1), Y8, Y0
	VMOVDQU 256(SI)(BX*1), Y9
	VPMADDUBSW Y14, Y9, Y9
	VPDPWSSD 256(R8)(BX*1), Y9, Y1
	VMOVDQU 512(SI)(BX*1), Y10
	VPMADDUBSW Y14, Y10, Y10
	VPDPWSSD 512(R8)(BX*1), Y10, Y2
	VMOVDQU 768(SI)(BX*1), Y11
	VPMADDUBSW Y14, Y11, Y11
	VPDPWSSD 768(R8)(BX*1), Y11, Y3
	VMOVDQU 1024(SI)(BX*1), Y8
	VPMADDUBSW Y14, Y8, Y8
	VPDPWSSD 1024(R8)(BX*1), Y8, Y4
	VMOVDQU 1280(SI)(BX*1), Y9
	VPMADDUBSW Y14, Y9, Y9
	VPDPWSSD 1280(R8)(BX*1), Y9, Y5
	VMOVDQU 1536(SI)(BX*1), Y10
	VPMADDUBSW Y14, Y10, Y10
	VPDPWSSD 1536(R8)(BX*1), Y10, Y6
	VMOVDQU 1792(SI)(BX*1), Y11
	VPMADDUBSW Y14, Y11, Y11
	VPDPWSSD 1792(R8)(BX*1), Y11, Y7
	ADDQ $32, BX
	CMPQ BX, $256
	JNE  kchunk

	REDUCE8
	VBROADCASTSS (R12), Y2
	VMULPS (R10), Y2, Y3
	TESTQ R11, R11
	JZ    knomin
	VCVTDQ2PS Y1, Y1
	VMULPS Y1, Y3, Y3
	VMULPS (R11), Y2, Y4
	VCVTDQ2PS Y13, Y5
	VMULPS Y5, Y4, Y4
	VSUBPS Y4, Y3, Y3
	ADDQ $32, R11
	JMP  kacc

knomin:
	VPSUBD Y13, Y1, Y1
	VCVTDQ2PS Y1, Y1
	VMULPS Y1, Y3, Y3

kacc:
	VADDPS Y3, Y15, Y15
	ADDQ $2048, SI
	ADDQ $2048, R8
	ADDQ $256, R9
	ADDQ $32, R10
	ADDQ $256, DI
	ADDQ $4, R12
	ADDQ $32, R13
	DECQ CX
	JNZ  kloop

kdone:
	VMOVUPS Y15, (AX)
	VZEROUPPER
	RET

// func q8_0Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)
//
// The Q8_0 lane-per-row kernel on raw blocks: w points at block 0 of row 0
// of an 8-row group, idx holds the byte offsets of the 8 rows. Per block:
// isum = Σ (w+128)·a − 128·Σa; p = (dw·da)·float32(isum); acc = acc + p.
TEXT ·q8_0Dot8AVX512(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ idx+8(FP), AX
	MOVQ nb+16(FP), CX
	MOVQ q+24(FP), DI
	MOVQ da+32(FP), R11
	MOVQ bs+40(FP), R12
	MOVQ acc+48(FP), R13
	VMOVDQU (AX), Y12              // row offsets
	MOVL 4(AX), DX                 // rowBytes
	LEAQ (DX)(DX*2), BX            // 3·rowBytes
	LEAQ (SI)(DX*4), R14           // row 4
	MOVL $0x80808080, R8
	VPBROADCASTD R8, Y13           // 0x80 in every byte
	VMOVUPS (R13), Y15
	TESTQ CX, CX
	JLE   q8done

q8loop:
	VMOVDQU32 2(SI), Y16
	VMOVDQU32 2(SI)(DX*1), Y17
	VMOVDQU32 2(SI)(DX*2), Y18
	VMOVDQU32 2(SI)(BX*1), Y19
	VMOVDQU32 2(R14), Y20
	VMOVDQU32 2(R14)(DX*1), Y21
	VMOVDQU32 2(R14)(DX*2), Y22
	VMOVDQU32 2(R14)(BX*1), Y23
	VPXORD Y13, Y16, Y16
	VPXORD Y13, Y17, Y17
	VPXORD Y13, Y18, Y18
	VPXORD Y13, Y19, Y19
	VPXORD Y13, Y20, Y20
	VPXORD Y13, Y21, Y21
	VPXORD Y13, Y22, Y22
	VPXORD Y13, Y23, Y23
	VMOVDQU (DI), Y14
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPDPBUSD Y14, Y16, Y0
	VPDPBUSD Y14, Y17, Y1
	VPDPBUSD Y14, Y18, Y2
	VPDPBUSD Y14, Y19, Y3
	VPDPBUSD Y14, Y20, Y4
	VPDPBUSD Y14, Y21, Y5
	VPDPBUSD Y14, Y22, Y6
	VPDPBUSD Y14, Y23, Y7
	REDUCE8
	VPBROADCASTD (R12), Y2
	VPSLLD $7, Y2, Y2
	VPSUBD Y2, Y1, Y1
	VCVTDQ2PS Y1, Y1
	KXNORB K1, K1, K1
	VPGATHERDD (SI)(Y12*1), K1, Y3
	VPMOVDW Y3, X3
	VCVTPH2PS X3, Y3
	VBROADCASTSS (R11), Y2
	VMULPS Y2, Y3, Y3
	VMULPS Y1, Y3, Y3
	VADDPS Y3, Y15, Y15
	ADDQ $34, SI
	ADDQ $34, R14
	ADDQ $32, DI
	ADDQ $4, R11
	ADDQ $4, R12
	DECQ CX
	JNZ  q8loop

q8done:
	VMOVUPS Y15, (R13)
	VZEROUPPER
	RET
