#include "textflag.h"

// func bf16ExpRangeAVX512(p *byte, n32 int) uint32
//
// Scans n32 × 32 bf16 values at p and returns the smallest exponent field
// of a value whose magnitude is not zero (0xFFFF if there is none) in the
// low 16 bits, and the largest exponent field of any value in the high 16
// bits (bf16ExpRange).
TEXT ·bf16ExpRangeAVX512(SB), NOSPLIT, $0-20
	MOVQ p+0(FP), SI
	MOVQ n32+8(FP), CX
	VPTERNLOGD $0xFF, Z0, Z0, Z0 // smallest exponent so far: 0xFFFF per word
	VPXORD Z1, Z1, Z1            // largest exponent so far
	MOVL $0x7FFF7FFF, AX
	VPBROADCASTD AX, Z2          // magnitude bits
	MOVL $0x00FF00FF, AX
	VPBROADCASTD AX, Z3          // exponent field after the shift
	TESTQ CX, CX
	JLE bf16rangeDone

bf16rangeLoop:
	VMOVDQU64 (SI), Z4
	VPTESTMW Z2, Z4, K1          // K1: values that are not ±0
	VPSRLW $7, Z4, Z5
	VPANDD Z3, Z5, Z5
	VPMINUW Z5, Z0, K1, Z0
	VPMAXUW Z5, Z1, Z1
	ADDQ $64, SI
	DECQ CX
	JNZ bf16rangeLoop

bf16rangeDone:
	VEXTRACTI64X4 $1, Z0, Y4
	VPMINUW Y4, Y0, Y0
	VEXTRACTI128 $1, Y0, X4
	VPMINUW X4, X0, X0
	VPHMINPOSUW X0, X0           // word 0: the smallest of the 8
	VEXTRACTI64X4 $1, Z1, Y4
	VPMAXUW Y4, Y1, Y1
	VEXTRACTI128 $1, Y1, X4
	VPMAXUW X4, X1, X1
	VPTERNLOGD $0xFF, Z4, Z4, Z4
	VPXORD X4, X1, X1            // 0xFFFF − x turns the largest into the smallest
	VPHMINPOSUW X1, X1
	VPXORD X4, X1, X1
	VMOVD X0, AX
	VMOVD X1, BX
	MOVWLZX AX, AX
	SHLL $16, BX
	ORL BX, AX
	MOVL AX, ret+16(FP)
	VZEROUPPER
	RET

// func bf16RoundAVX512(src *float32, dst *float32, n16 int) uint32
//
// Rounds n16 × 16 floats at src to bf16 as ggml.F32ToBF16 does (to nearest
// even; a NaN keeps its top 16 bits with the quiet bit set) and stores the
// results widened back to float32 at dst; returns their bf16Range, as
// bf16ExpRangeAVX512 does.
TEXT ·bf16RoundAVX512(SB), NOSPLIT, $0-28
	MOVQ src+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ n16+16(FP), CX
	VPTERNLOGD $0xFF, Z0, Z0, Z0 // smallest exponent so far
	VPSRLD $16, Z0, Z0           // 0xFFFF per dword
	VPXORD Z1, Z1, Z1            // largest exponent so far
	MOVL $0x7FFFFFFF, AX
	VPBROADCASTD AX, Z2          // magnitude bits
	MOVL $0x7F800000, AX
	VPBROADCASTD AX, Z3          // infinity
	MOVL $0x00007FFF, AX
	VPBROADCASTD AX, Z4          // rounding bias
	MOVL $0xFFFF0000, AX
	VPBROADCASTD AX, Z5          // bf16 bits of a float32
	MOVL $0x00400000, AX
	VPBROADCASTD AX, Z6          // the quiet bit
	MOVL $1, AX
	VPBROADCASTD AX, Z7
	MOVL $0xFF, AX
	VPBROADCASTD AX, Z8
	TESTQ CX, CX
	JLE bf16roundDone

bf16roundLoop:
	VMOVDQU32 (SI), Z9
	VPSRLD $16, Z9, Z10
	VPANDD Z7, Z10, Z10          // (u >> 16) & 1
	VPADDD Z9, Z10, Z10
	VPADDD Z4, Z10, Z10          // u + 0x7fff + ((u >> 16) & 1)
	VPANDD Z5, Z10, Z10
	VPANDD Z2, Z9, Z11
	VPCMPUD $6, Z3, Z11, K1      // K1: NaN (|u| > infinity)
	VPORD Z6, Z9, Z12
	VPANDD Z5, Z12, K1, Z10      // NaN: top half with the quiet bit
	VMOVDQU32 Z10, (DI)
	VPTESTMD Z2, Z10, K2         // K2: not ±0
	VPSRLD $23, Z10, Z11
	VPANDD Z8, Z11, Z11          // exponent field
	VPMINUD Z11, Z0, K2, Z0
	VPMAXUD Z11, Z1, Z1
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ bf16roundLoop

bf16roundDone:
	VEXTRACTI64X4 $1, Z0, Y9
	VPMINUD Y9, Y0, Y0
	VEXTRACTI128 $1, Y0, X9
	VPMINUD X9, X0, X0
	VPSHUFD $0x4E, X0, X9
	VPMINUD X9, X0, X0
	VPSHUFD $0xB1, X0, X9
	VPMINUD X9, X0, X0
	VEXTRACTI64X4 $1, Z1, Y9
	VPMAXUD Y9, Y1, Y1
	VEXTRACTI128 $1, Y1, X9
	VPMAXUD X9, X1, X1
	VPSHUFD $0x4E, X1, X9
	VPMAXUD X9, X1, X1
	VPSHUFD $0xB1, X1, X9
	VPMAXUD X9, X1, X1
	VMOVD X0, AX
	VMOVD X1, BX
	SHLL $16, BX
	ORL BX, AX
	MOVL AX, ret+24(FP)
	VZEROUPPER
	RET

// func cpuVendor() (ebx, edx, ecx uint32)
//
// CPUID leaf 0: the vendor string, 12 bytes in EBX, EDX, ECX.
TEXT ·cpuVendor(SB), NOSPLIT, $0-12
	XORL AX, AX
	XORL CX, CX
	CPUID
	MOVL BX, ebx+0(FP)
	MOVL DX, edx+4(FP)
	MOVL CX, ecx+8(FP)
	RET
