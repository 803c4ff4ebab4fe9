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
