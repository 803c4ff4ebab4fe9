//go:build amd64

#include "textflag.h"

// AMX int8 kernels for Q8_0 weights (see amx_amd64.go). The Go assembler
// has no AMX mnemonics, so the tile instructions are spelled as bytes;
// each macro names the one instruction (Intel syntax) its bytes encode,
// with the registers fixed by the encoding.

// ldtilecfg [rax]
#define LDTILECFG_AX BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00
// tilerelease
#define TILERELEASE BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0
// tilezero tmm0 / tmm1
#define TILEZERO_T0 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0
#define TILEZERO_T1 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8
// tileloadd tmm4 / tmm5, [rsi+rbx*1]: 16 tokens' activations of a block
#define TILELOAD_T4_SI_BX BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x1e
#define TILELOAD_T5_SI_BX BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x1e
// tileloadd tmm6 / tmm7, [rdi+rdx*1]: a block of 16 rows' packed weights
#define TILELOAD_T6_DI_DX BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x17
#define TILELOAD_T7_DI_DX BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x3c; BYTE $0x17
// tdpbssd tmm0, tmm4, tmm6 / tdpbssd tmm1, tmm5, tmm7
#define TDPBSSD_T0_T4_T6 BYTE $0xc4; BYTE $0xe2; BYTE $0x4b; BYTE $0x5e; BYTE $0xc4
#define TDPBSSD_T1_T5_T7 BYTE $0xc4; BYTE $0xe2; BYTE $0x43; BYTE $0x5e; BYTE $0xcd
// tilestored [r10+rdx*1], tmm0 / tilestored [r12+rdx*1], tmm1
#define TILESTORE_R10_DX_T0 BYTE $0xc4; BYTE $0xc2; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x12
#define TILESTORE_R12_DX_T1 BYTE $0xc4; BYTE $0xc2; BYTE $0x7a; BYTE $0x4b; BYTE $0x0c; BYTE $0x14

// EPI adds token row t of a stored 16×16 int32 tile (base S, 64 bytes a
// row) into accumulator ACC in the canonical order: p = (dw·da)·float32(isum),
// acc = acc + p, with dw the 16 rows' scales in Z16 and da the token's
// activation scale at DA.
#define EPI(S, off, DA, doff, ACC) \
	VCVTDQ2PS off(S), Z17; \
	VMULPS.BCST doff(DA), Z16, Z18; \
	VMULPS Z17, Z18, Z18; \
	VADDPS Z18, ACC, ACC

// BLOCK runs EPI for the 16 tokens of one block: scratch S, scales at
// D (16 float32) and DA (16 float32, one a token).

#define BLOCK(S, D, doff, DA, aoff) \
	VMOVUPS doff(D), Z16; \
	EPI(S, 0, DA, aoff+0, Z0); \
	EPI(S, 64, DA, aoff+4, Z1); \
	EPI(S, 128, DA, aoff+8, Z2); \
	EPI(S, 192, DA, aoff+12, Z3); \
	EPI(S, 256, DA, aoff+16, Z4); \
	EPI(S, 320, DA, aoff+20, Z5); \
	EPI(S, 384, DA, aoff+24, Z6); \
	EPI(S, 448, DA, aoff+28, Z7); \
	EPI(S, 512, DA, aoff+32, Z8); \
	EPI(S, 576, DA, aoff+36, Z9); \
	EPI(S, 640, DA, aoff+40, Z10); \
	EPI(S, 704, DA, aoff+44, Z11); \
	EPI(S, 768, DA, aoff+48, Z12); \
	EPI(S, 832, DA, aoff+52, Z13); \
	EPI(S, 896, DA, aoff+56, Z14); \
	EPI(S, 960, DA, aoff+60, Z15)

// func q8_0AMX16(b *byte, dw *float32, nb int, q *int8, qStride int, daT *float32, ntg int, y *float32, yStride int, cfg *byte, scratch *byte)
//
// For each of ntg groups of 16 tokens (q: the tokens' Q8_0 values, qStride
// bytes a token; daT: [group][block][16] activation scales) and the 16 rows
// packed by q8_0PackAMX (b: 512 bytes a block, dw: 16 scales a block), it
// writes the 16 rows' results for token t at y + t·yStride. cfg is the
// tile configuration (amxConfig), scratch 2,048 bytes.
TEXT ·q8_0AMX16(SB), NOSPLIT, $0-88
	MOVQ cfg+72(FP), AX
	LDTILECFG_AX
	MOVQ q+24(FP), AX
	MOVQ qStride+32(FP), BX
	MOVQ $64, DX
	MOVQ daT+40(FP), R9
	MOVQ scratch+80(FP), R10
	LEAQ 1024(R10), R12
	MOVQ y+56(FP), R11
	MOVQ yStride+64(FP), R13
	MOVQ ntg+48(FP), R14
	TESTQ R14, R14
	JLE amxdone
amxgroup:

	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	MOVQ AX, SI
	MOVQ b+0(FP), DI
	MOVQ dw+8(FP), R8
	MOVQ nb+16(FP), CX
	CMPQ CX, $2
	JLT amxsingle
amxpair:
	TILEZERO_T0
	TILEZERO_T1
	TILELOAD_T4_SI_BX
	TILELOAD_T6_DI_DX
	TDPBSSD_T0_T4_T6
	ADDQ $32, SI
	ADDQ $512, DI
	TILELOAD_T5_SI_BX
	TILELOAD_T7_DI_DX
	TDPBSSD_T1_T5_T7
	ADDQ $32, SI
	ADDQ $512, DI
	TILESTORE_R10_DX_T0
	TILESTORE_R12_DX_T1
	BLOCK(R10, R8, 0, R9, 0)
	BLOCK(R12, R8, 64, R9, 64)
	ADDQ $128, R8
	ADDQ $128, R9
	SUBQ $2, CX
	CMPQ CX, $2
	JGE amxpair
amxsingle:
	TESTQ CX, CX
	JZ amxstore
	TILEZERO_T0
	TILELOAD_T4_SI_BX
	TILELOAD_T6_DI_DX
	TDPBSSD_T0_T4_T6
	TILESTORE_R10_DX_T0
	BLOCK(R10, R8, 0, R9, 0)
	ADDQ $64, R9
amxstore:
	MOVQ R11, SI

	VMOVUPS Z0, (SI)
	ADDQ R13, SI
	VMOVUPS Z1, (SI)
	ADDQ R13, SI
	VMOVUPS Z2, (SI)
	ADDQ R13, SI
	VMOVUPS Z3, (SI)
	ADDQ R13, SI
	VMOVUPS Z4, (SI)
	ADDQ R13, SI
	VMOVUPS Z5, (SI)
	ADDQ R13, SI
	VMOVUPS Z6, (SI)
	ADDQ R13, SI
	VMOVUPS Z7, (SI)
	ADDQ R13, SI
	VMOVUPS Z8, (SI)
	ADDQ R13, SI
	VMOVUPS Z9, (SI)
	ADDQ R13, SI
	VMOVUPS Z10, (SI)
	ADDQ R13, SI
	VMOVUPS Z11, (SI)
	ADDQ R13, SI
	VMOVUPS Z12, (SI)
	ADDQ R13, SI
	VMOVUPS Z13, (SI)
	ADDQ R13, SI
	VMOVUPS Z14, (SI)
	ADDQ R13, SI
	VMOVUPS Z15, (SI)
	MOVQ BX, CX
	SHLQ $4, CX
	ADDQ CX, AX
	MOVQ R13, CX
	SHLQ $4, CX
	ADDQ CX, R11
	DECQ R14
	JNZ amxgroup
amxdone:
	TILERELEASE
	VZEROUPPER
	RET
