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
// tilezero tmm0 … tmm3
#define TILEZERO_T0 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0
#define TILEZERO_T1 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8
#define TILEZERO_T2 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd0
#define TILEZERO_T3 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd8
// tileloadd tmm4 / tmm5, [rsi+rbx*1]: 16 tokens' activations of a block
#define TILELOAD_T4_SI_BX BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x1e
#define TILELOAD_T5_SI_BX BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x1e
// tileloadd tmm6 / tmm7, [rdi+rdx*1]: a block of 16 rows' packed weights
#define TILELOAD_T6_DI_DX BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x17
#define TILELOAD_T7_DI_DX BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x3c; BYTE $0x17
// tdpbssd tmm0, tmm4, tmm6 / tmm1, tmm5, tmm7 / tmm2, tmm4, tmm6 / tmm3, tmm5, tmm7
#define TDPBSSD_T0_T4_T6 BYTE $0xc4; BYTE $0xe2; BYTE $0x4b; BYTE $0x5e; BYTE $0xc4
#define TDPBSSD_T1_T5_T7 BYTE $0xc4; BYTE $0xe2; BYTE $0x43; BYTE $0x5e; BYTE $0xcd
#define TDPBSSD_T2_T4_T6 BYTE $0xc4; BYTE $0xe2; BYTE $0x4b; BYTE $0x5e; BYTE $0xd4
#define TDPBSSD_T3_T5_T7 BYTE $0xc4; BYTE $0xe2; BYTE $0x43; BYTE $0x5e; BYTE $0xdd
// tilestored [r10+rdx*1+disp32], tmmN with MODRM 0x84|N<<3 and the
// displacement HI<<8: the result tiles' 1 KiB slots of the scratch
#define TSTORE(modrm, hi) BYTE $0xc4; BYTE $0xc2; BYTE $0x7a; BYTE $0x4b; BYTE $modrm; BYTE $0x12; BYTE $0x00; BYTE $hi; BYTE $0x00; BYTE $0x00

// PAIR multiplies the next two blocks (activations at SI, packed weights
// at DI, both advanced past them) into result tiles A and B and stores
// them to their scratch slots; tiles 4…7 hold the operands.
#define PAIR(ZA, ZB, DA, DB, SA, SB) \
	ZA; \
	ZB; \
	TILELOAD_T4_SI_BX; \
	TILELOAD_T6_DI_DX; \
	DA; \
	ADDQ qBlock+40(FP), SI; \
	ADDQ $512, DI; \
	TILELOAD_T5_SI_BX; \
	TILELOAD_T7_DI_DX; \
	DB; \
	ADDQ qBlock+40(FP), SI; \
	ADDQ $512, DI; \
	SA; \
	SB

// PAIRA/PAIRB multiply a pair into tiles 0 and 1 / 2 and 3 and store them
// to the 2 KiB pair slot whose displacement bytes are H0 and H1.
#define PAIRA(h0, h1) PAIR(TILEZERO_T0, TILEZERO_T1, TDPBSSD_T0_T4_T6, TDPBSSD_T1_T5_T7, TSTORE(0x84, h0), TSTORE(0x8c, h1))
#define PAIRB(h0, h1) PAIR(TILEZERO_T2, TILEZERO_T3, TDPBSSD_T2_T4_T6, TDPBSSD_T3_T5_T7, TSTORE(0x94, h0), TSTORE(0x9c, h1))

// EPI adds token row t of a stored 16×16 int32 tile (base S, 64 bytes a
// row) into accumulator ACC in the canonical order: p = (dw·da)·float32(isum),
// acc = acc + p, with dw the 16 rows' scales in Z16 and da the token's
// activation scale at DA.
#define EPI(S, off, DA, doff, ACC) \
	VCVTDQ2PS off(S), Z17; \
	VMULPS.BCST doff(DA), Z16, Z18; \
	VMULPS Z17, Z18, Z18; \
	VADDPS Z18, ACC, ACC

// BLOCK runs EPI for the 16 tokens of one block: its tile stored at
// soff(S), its 16 rows' scales at doff(D) and its tokens' activation
// scales at aoff(DA) (16 float32 each).
#define BLOCK(S, soff, D, doff, DA, aoff) \
	VMOVUPS doff(D), Z16; \
	EPI(S, soff+0, DA, aoff+0, Z0); \
	EPI(S, soff+64, DA, aoff+4, Z1); \
	EPI(S, soff+128, DA, aoff+8, Z2); \
	EPI(S, soff+192, DA, aoff+12, Z3); \
	EPI(S, soff+256, DA, aoff+16, Z4); \
	EPI(S, soff+320, DA, aoff+20, Z5); \
	EPI(S, soff+384, DA, aoff+24, Z6); \
	EPI(S, soff+448, DA, aoff+28, Z7); \
	EPI(S, soff+512, DA, aoff+32, Z8); \
	EPI(S, soff+576, DA, aoff+36, Z9); \
	EPI(S, soff+640, DA, aoff+40, Z10); \
	EPI(S, soff+704, DA, aoff+44, Z11); \
	EPI(S, soff+768, DA, aoff+48, Z12); \
	EPI(S, soff+832, DA, aoff+52, Z13); \
	EPI(S, soff+896, DA, aoff+56, Z14); \
	EPI(S, soff+960, DA, aoff+60, Z15)

// SLOTS runs BLOCK for the pair stored at slot byte offset soff (its two
// tiles at soff and soff+1024) and advances the scale pointers past it.
#define SLOTS(soff) \
	BLOCK(R10, soff, R8, 0, R9, 0); \
	BLOCK(R10, soff+1024, R8, 64, R9, 64); \
	ADDQ $128, R8; \
	ADDQ $128, R9

// tileloadd tmm4 / tmm5, [rsi+rdx*1+0/32]: tokens 0-15 / 16-31 of a pair
// of token groups (q8_0AMX32's activation layout, 64 bytes a tile row)
#define TILELOAD_T4_SI_DX BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x16
#define TILELOAD_T5_SI_DX_32 BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x6c; BYTE $0x16; BYTE $0x20
// tileloadd tmm7, [rbx+rdx*1]: the second row group's packed weights
#define TILELOAD_T7_BX_DX BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x3c; BYTE $0x13
// tdpbssd tmm1, tmm5, tmm6 / tdpbssd tmm2, tmm4, tmm7
#define TDPBSSD_T1_T5_T6 BYTE $0xc4; BYTE $0xe2; BYTE $0x4b; BYTE $0x5e; BYTE $0xcd
#define TDPBSSD_T2_T4_T7 BYTE $0xc4; BYTE $0xe2; BYTE $0x43; BYTE $0x5e; BYTE $0xd4

// QUAD multiplies the next block of a pair of token groups by the next
// block of two row groups (activations at SI, weights at DI and BX, all
// advanced past it) into tiles 0 (tokens 0-15, rows 0-15), 1 (tokens
// 16-31, rows 0-15), 2 (tokens 0-15, rows 16-31) and 3 (tokens 16-31,
// rows 16-31), and stores them to the 4 KiB slot whose displacement byte
// is H (tile i at H<<8 + i·1024).
#define QUAD(h0, h1, h2, h3) \
	TILEZERO_T0; \
	TILEZERO_T1; \
	TILEZERO_T2; \
	TILEZERO_T3; \
	TILELOAD_T4_SI_DX; \
	TILELOAD_T5_SI_DX_32; \
	TILELOAD_T6_DI_DX; \
	TILELOAD_T7_BX_DX; \
	TDPBSSD_T0_T4_T6; \
	TDPBSSD_T1_T5_T6; \
	TDPBSSD_T2_T4_T7; \
	TDPBSSD_T3_T5_T7; \
	ADDQ $1024, SI; \
	ADDQ $512, DI; \
	ADDQ $512, BX; \
	TSTORE(0x84, h0); \
	TSTORE(0x8c, h1); \
	TSTORE(0x94, h2); \
	TSTORE(0x9c, h3)

// EPIM is EPI with the accumulator in memory: token row t of a stored
// tile at off(R10), its activation scale at doff(R9), the row group's
// scales in DW, the accumulator at aoff(R12).
#define EPIM(off, doff, DW, aoff) \
	VCVTDQ2PS off(R10), Z17; \
	VMULPS.BCST doff(R9), DW, Z18; \
	VMULPS Z17, Z18, Z18; \
	VMOVUPS aoff(R12), Z19; \
	VADDPS Z18, Z19, Z19; \
	VMOVUPS Z19, aoff(R12)

// QUADEPI0 and QUADEPI1 scale and add the four tiles of the block stored
// at scratch slot 0 (bytes 0-4095) or 1 (4096-8191): tile i = 2·RG + TG
// (row group RG, token group TG) at slot + i·1024, token row t of it for
// token T = 16·TG + t, whose scale is at T·4(R9) and whose accumulator
// row is at T·128 + RG·64(R12); rows 0-15's scales at (R8), rows 16-31's
// at (R8)(R13*1). Then they advance the scale pointers past the block.
#define QUADEPI0 \
	VMOVUPS (R8), Z20; \
	VMOVUPS (R8)(R13*1), Z21; \
	EPIM(0, 0, Z20, 0); \
	EPIM(64, 4, Z20, 128); \
	EPIM(128, 8, Z20, 256); \
	EPIM(192, 12, Z20, 384); \
	EPIM(256, 16, Z20, 512); \
	EPIM(320, 20, Z20, 640); \
	EPIM(384, 24, Z20, 768); \
	EPIM(448, 28, Z20, 896); \
	EPIM(512, 32, Z20, 1024); \
	EPIM(576, 36, Z20, 1152); \
	EPIM(640, 40, Z20, 1280); \
	EPIM(704, 44, Z20, 1408); \
	EPIM(768, 48, Z20, 1536); \
	EPIM(832, 52, Z20, 1664); \
	EPIM(896, 56, Z20, 1792); \
	EPIM(960, 60, Z20, 1920); \
	EPIM(1024, 64, Z20, 2048); \
	EPIM(1088, 68, Z20, 2176); \
	EPIM(1152, 72, Z20, 2304); \
	EPIM(1216, 76, Z20, 2432); \
	EPIM(1280, 80, Z20, 2560); \
	EPIM(1344, 84, Z20, 2688); \
	EPIM(1408, 88, Z20, 2816); \
	EPIM(1472, 92, Z20, 2944); \
	EPIM(1536, 96, Z20, 3072); \
	EPIM(1600, 100, Z20, 3200); \
	EPIM(1664, 104, Z20, 3328); \
	EPIM(1728, 108, Z20, 3456); \
	EPIM(1792, 112, Z20, 3584); \
	EPIM(1856, 116, Z20, 3712); \
	EPIM(1920, 120, Z20, 3840); \
	EPIM(1984, 124, Z20, 3968); \
	EPIM(2048, 0, Z21, 64); \
	EPIM(2112, 4, Z21, 192); \
	EPIM(2176, 8, Z21, 320); \
	EPIM(2240, 12, Z21, 448); \
	EPIM(2304, 16, Z21, 576); \
	EPIM(2368, 20, Z21, 704); \
	EPIM(2432, 24, Z21, 832); \
	EPIM(2496, 28, Z21, 960); \
	EPIM(2560, 32, Z21, 1088); \
	EPIM(2624, 36, Z21, 1216); \
	EPIM(2688, 40, Z21, 1344); \
	EPIM(2752, 44, Z21, 1472); \
	EPIM(2816, 48, Z21, 1600); \
	EPIM(2880, 52, Z21, 1728); \
	EPIM(2944, 56, Z21, 1856); \
	EPIM(3008, 60, Z21, 1984); \
	EPIM(3072, 64, Z21, 2112); \
	EPIM(3136, 68, Z21, 2240); \
	EPIM(3200, 72, Z21, 2368); \
	EPIM(3264, 76, Z21, 2496); \
	EPIM(3328, 80, Z21, 2624); \
	EPIM(3392, 84, Z21, 2752); \
	EPIM(3456, 88, Z21, 2880); \
	EPIM(3520, 92, Z21, 3008); \
	EPIM(3584, 96, Z21, 3136); \
	EPIM(3648, 100, Z21, 3264); \
	EPIM(3712, 104, Z21, 3392); \
	EPIM(3776, 108, Z21, 3520); \
	EPIM(3840, 112, Z21, 3648); \
	EPIM(3904, 116, Z21, 3776); \
	EPIM(3968, 120, Z21, 3904); \
	EPIM(4032, 124, Z21, 4032); \
	ADDQ $64, R8; \
	ADDQ $128, R9

#define QUADEPI1 \
	VMOVUPS (R8), Z20; \
	VMOVUPS (R8)(R13*1), Z21; \
	EPIM(4096, 0, Z20, 0); \
	EPIM(4160, 4, Z20, 128); \
	EPIM(4224, 8, Z20, 256); \
	EPIM(4288, 12, Z20, 384); \
	EPIM(4352, 16, Z20, 512); \
	EPIM(4416, 20, Z20, 640); \
	EPIM(4480, 24, Z20, 768); \
	EPIM(4544, 28, Z20, 896); \
	EPIM(4608, 32, Z20, 1024); \
	EPIM(4672, 36, Z20, 1152); \
	EPIM(4736, 40, Z20, 1280); \
	EPIM(4800, 44, Z20, 1408); \
	EPIM(4864, 48, Z20, 1536); \
	EPIM(4928, 52, Z20, 1664); \
	EPIM(4992, 56, Z20, 1792); \
	EPIM(5056, 60, Z20, 1920); \
	EPIM(5120, 64, Z20, 2048); \
	EPIM(5184, 68, Z20, 2176); \
	EPIM(5248, 72, Z20, 2304); \
	EPIM(5312, 76, Z20, 2432); \
	EPIM(5376, 80, Z20, 2560); \
	EPIM(5440, 84, Z20, 2688); \
	EPIM(5504, 88, Z20, 2816); \
	EPIM(5568, 92, Z20, 2944); \
	EPIM(5632, 96, Z20, 3072); \
	EPIM(5696, 100, Z20, 3200); \
	EPIM(5760, 104, Z20, 3328); \
	EPIM(5824, 108, Z20, 3456); \
	EPIM(5888, 112, Z20, 3584); \
	EPIM(5952, 116, Z20, 3712); \
	EPIM(6016, 120, Z20, 3840); \
	EPIM(6080, 124, Z20, 3968); \
	EPIM(6144, 0, Z21, 64); \
	EPIM(6208, 4, Z21, 192); \
	EPIM(6272, 8, Z21, 320); \
	EPIM(6336, 12, Z21, 448); \
	EPIM(6400, 16, Z21, 576); \
	EPIM(6464, 20, Z21, 704); \
	EPIM(6528, 24, Z21, 832); \
	EPIM(6592, 28, Z21, 960); \
	EPIM(6656, 32, Z21, 1088); \
	EPIM(6720, 36, Z21, 1216); \
	EPIM(6784, 40, Z21, 1344); \
	EPIM(6848, 44, Z21, 1472); \
	EPIM(6912, 48, Z21, 1600); \
	EPIM(6976, 52, Z21, 1728); \
	EPIM(7040, 56, Z21, 1856); \
	EPIM(7104, 60, Z21, 1984); \
	EPIM(7168, 64, Z21, 2112); \
	EPIM(7232, 68, Z21, 2240); \
	EPIM(7296, 72, Z21, 2368); \
	EPIM(7360, 76, Z21, 2496); \
	EPIM(7424, 80, Z21, 2624); \
	EPIM(7488, 84, Z21, 2752); \
	EPIM(7552, 88, Z21, 2880); \
	EPIM(7616, 92, Z21, 3008); \
	EPIM(7680, 96, Z21, 3136); \
	EPIM(7744, 100, Z21, 3264); \
	EPIM(7808, 104, Z21, 3392); \
	EPIM(7872, 108, Z21, 3520); \
	EPIM(7936, 112, Z21, 3648); \
	EPIM(8000, 116, Z21, 3776); \
	EPIM(8064, 120, Z21, 3904); \
	EPIM(8128, 124, Z21, 4032); \
	ADDQ $64, R8; \
	ADDQ $128, R9

// func q8_0AMX16(b *byte, dw *float32, nb int, q *int8, qStride int, qBlock int, qGroup int, daT *float32, ntg int, y *float32, yStride int, cfg *byte, scratch *byte)
//
// For each of ntg groups of 16 tokens and the 16 rows packed by
// q8_0PackAMX (b: 512 bytes a block, dw: 16 scales a block), it writes the
// 16 rows' results for token t at y + t·yStride. Token t's values of a
// block are the 32 bytes at q + t·qStride; the next block's are qBlock
// bytes further, the next group's qGroup; daT holds the activation scales,
// [group][block][16]. cfg is the tile configuration (amxConfig), scratch
// 4,096 bytes, 64-byte aligned.
TEXT ·q8_0AMX16(SB), NOSPLIT, $0-104
	MOVQ cfg+88(FP), AX
	LDTILECFG_AX
	MOVQ q+24(FP), AX
	MOVQ qStride+32(FP), BX
	MOVQ $64, DX
	MOVQ daT+56(FP), R9
	MOVQ scratch+96(FP), R10
	MOVQ y+72(FP), R11
	MOVQ yStride+80(FP), R13
	MOVQ ntg+64(FP), R14
	TESTQ R14, R14
	JLE qAMX16done
qAMX16group:
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
	MOVQ CX, R12
	SHRQ $1, R12
	JZ qAMX16single
	PAIRA(0x00, 0x04)
	DECQ R12
qAMX16loop:
	TESTQ R12, R12
	JZ qAMX16last0
	PAIRB(0x08, 0x0c)
	SLOTS(0)
	DECQ R12
	JZ qAMX16last1
	PAIRA(0x00, 0x04)
	SLOTS(2048)
	DECQ R12
	JMP qAMX16loop
qAMX16last0:
	SLOTS(0)
	JMP qAMX16single
qAMX16last1:
	SLOTS(2048)
qAMX16single:
	TESTQ $1, CX
	JZ qAMX16store
	TILEZERO_T0
	TILELOAD_T4_SI_BX
	TILELOAD_T6_DI_DX
	TDPBSSD_T0_T4_T6
	TSTORE(0x84, 0x00)
	BLOCK(R10, 0, R8, 0, R9, 0)
	ADDQ $64, R9
qAMX16store:
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
	ADDQ qGroup+48(FP), AX
	MOVQ R13, CX
	SHLQ $4, CX
	ADDQ CX, R11
	DECQ R14
	JNZ qAMX16group
qAMX16done:
	TILERELEASE
	VZEROUPPER
	RET

// func q8_0AMX32(b0, b1 *byte, dw *float32, dwOff int, nb int, q *int8, qPair int, daP *float32, npair int, y *float32, yStride int, cfg *byte, scratch *byte, acc *float32)
//
// For each of npair pairs of 16-token groups and two 16-row groups
// packed by q8_0PackAMX (b0, b1: 512 bytes a block; dw: the first group's
// 16 scales a block, the second's dwOff bytes further), it writes the 32
// rows' results for token t of the pair at y + t·yStride. q holds the
// pairs' activations, qPair bytes a pair: block k's 16 tile rows of 64
// bytes, row t the 32 bytes of token t and then of token 16+t; daP their
// scales, [pair][block][32]. cfg is the tile configuration (amxConfig),
// scratch 8,192 bytes and acc 4,096 bytes, both 64-byte aligned: each
// block's four tiles go to one half of the scratch while AVX-512 adds the
// previous block's, from the other half, into the accumulators at acc
// (token t's 32 rows at t·128) in the canonical order.
TEXT ·q8_0AMX32(SB), NOSPLIT, $0-112
	MOVQ cfg+88(FP), AX
	LDTILECFG_AX
	MOVQ q+40(FP), AX
	MOVQ $64, DX
	MOVQ daP+56(FP), R9
	MOVQ scratch+96(FP), R10
	MOVQ acc+104(FP), R12
	MOVQ y+72(FP), R11
	MOVQ dwOff+24(FP), R13
	MOVQ npair+64(FP), R14
	TESTQ R14, R14
	JLE amx32done
amx32pair:
	VPXORD Z0, Z0, Z0
	VMOVUPS Z0, 0(R12)
	VMOVUPS Z0, 64(R12)
	VMOVUPS Z0, 128(R12)
	VMOVUPS Z0, 192(R12)
	VMOVUPS Z0, 256(R12)
	VMOVUPS Z0, 320(R12)
	VMOVUPS Z0, 384(R12)
	VMOVUPS Z0, 448(R12)
	VMOVUPS Z0, 512(R12)
	VMOVUPS Z0, 576(R12)
	VMOVUPS Z0, 640(R12)
	VMOVUPS Z0, 704(R12)
	VMOVUPS Z0, 768(R12)
	VMOVUPS Z0, 832(R12)
	VMOVUPS Z0, 896(R12)
	VMOVUPS Z0, 960(R12)
	VMOVUPS Z0, 1024(R12)
	VMOVUPS Z0, 1088(R12)
	VMOVUPS Z0, 1152(R12)
	VMOVUPS Z0, 1216(R12)
	VMOVUPS Z0, 1280(R12)
	VMOVUPS Z0, 1344(R12)
	VMOVUPS Z0, 1408(R12)
	VMOVUPS Z0, 1472(R12)
	VMOVUPS Z0, 1536(R12)
	VMOVUPS Z0, 1600(R12)
	VMOVUPS Z0, 1664(R12)
	VMOVUPS Z0, 1728(R12)
	VMOVUPS Z0, 1792(R12)
	VMOVUPS Z0, 1856(R12)
	VMOVUPS Z0, 1920(R12)
	VMOVUPS Z0, 1984(R12)
	VMOVUPS Z0, 2048(R12)
	VMOVUPS Z0, 2112(R12)
	VMOVUPS Z0, 2176(R12)
	VMOVUPS Z0, 2240(R12)
	VMOVUPS Z0, 2304(R12)
	VMOVUPS Z0, 2368(R12)
	VMOVUPS Z0, 2432(R12)
	VMOVUPS Z0, 2496(R12)
	VMOVUPS Z0, 2560(R12)
	VMOVUPS Z0, 2624(R12)
	VMOVUPS Z0, 2688(R12)
	VMOVUPS Z0, 2752(R12)
	VMOVUPS Z0, 2816(R12)
	VMOVUPS Z0, 2880(R12)
	VMOVUPS Z0, 2944(R12)
	VMOVUPS Z0, 3008(R12)
	VMOVUPS Z0, 3072(R12)
	VMOVUPS Z0, 3136(R12)
	VMOVUPS Z0, 3200(R12)
	VMOVUPS Z0, 3264(R12)
	VMOVUPS Z0, 3328(R12)
	VMOVUPS Z0, 3392(R12)
	VMOVUPS Z0, 3456(R12)
	VMOVUPS Z0, 3520(R12)
	VMOVUPS Z0, 3584(R12)
	VMOVUPS Z0, 3648(R12)
	VMOVUPS Z0, 3712(R12)
	VMOVUPS Z0, 3776(R12)
	VMOVUPS Z0, 3840(R12)
	VMOVUPS Z0, 3904(R12)
	VMOVUPS Z0, 3968(R12)
	VMOVUPS Z0, 4032(R12)
	MOVQ AX, SI
	MOVQ b0+0(FP), DI
	MOVQ b1+8(FP), BX
	MOVQ dw+16(FP), R8
	MOVQ nb+32(FP), CX
	QUAD(0x00, 0x04, 0x08, 0x0c)
	DECQ CX
	JZ amx32last0
amx32loop:
	QUAD(0x10, 0x14, 0x18, 0x1c)
	QUADEPI0
	DECQ CX
	JZ amx32last1
	QUAD(0x00, 0x04, 0x08, 0x0c)
	QUADEPI1
	DECQ CX
	JNZ amx32loop
amx32last0:
	QUADEPI0
	JMP amx32out
amx32last1:
	QUADEPI1
amx32out:
	MOVQ R11, SI
	MOVQ yStride+80(FP), CX
	VMOVUPS 0(R12), Z1
	VMOVUPS 64(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 128(R12), Z1
	VMOVUPS 192(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 256(R12), Z1
	VMOVUPS 320(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 384(R12), Z1
	VMOVUPS 448(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 512(R12), Z1
	VMOVUPS 576(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 640(R12), Z1
	VMOVUPS 704(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 768(R12), Z1
	VMOVUPS 832(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 896(R12), Z1
	VMOVUPS 960(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 1024(R12), Z1
	VMOVUPS 1088(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 1152(R12), Z1
	VMOVUPS 1216(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 1280(R12), Z1
	VMOVUPS 1344(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 1408(R12), Z1
	VMOVUPS 1472(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 1536(R12), Z1
	VMOVUPS 1600(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 1664(R12), Z1
	VMOVUPS 1728(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 1792(R12), Z1
	VMOVUPS 1856(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 1920(R12), Z1
	VMOVUPS 1984(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 2048(R12), Z1
	VMOVUPS 2112(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 2176(R12), Z1
	VMOVUPS 2240(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 2304(R12), Z1
	VMOVUPS 2368(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 2432(R12), Z1
	VMOVUPS 2496(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 2560(R12), Z1
	VMOVUPS 2624(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 2688(R12), Z1
	VMOVUPS 2752(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 2816(R12), Z1
	VMOVUPS 2880(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 2944(R12), Z1
	VMOVUPS 3008(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 3072(R12), Z1
	VMOVUPS 3136(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 3200(R12), Z1
	VMOVUPS 3264(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 3328(R12), Z1
	VMOVUPS 3392(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 3456(R12), Z1
	VMOVUPS 3520(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 3584(R12), Z1
	VMOVUPS 3648(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 3712(R12), Z1
	VMOVUPS 3776(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 3840(R12), Z1
	VMOVUPS 3904(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ CX, SI
	VMOVUPS 3968(R12), Z1
	VMOVUPS 4032(R12), Z2
	VMOVUPS Z1, (SI)
	VMOVUPS Z2, 64(SI)
	ADDQ qPair+48(FP), AX
	SHLQ $5, CX
	ADDQ CX, R11
	DECQ R14
	JNZ amx32pair
amx32done:
	TILERELEASE
	VZEROUPPER
	RET
