#include "textflag.h"

// Activation quantizers, AVX-512: bit-identical to quantQ8_0 and quantQ8_K
// in quant.go for inputs without NaN. A block holding a NaN stops the
// kernel, which returns the number of blocks done; the caller quantizes
// that block in Go and calls again for the rest.

DATA absmask<>+0(SB)/4, $0x7fffffff
GLOBL absmask<>(SB), RODATA|NOPTR, $4
DATA f127<>+0(SB)/4, $0x42fe0000
GLOBL f127<>(SB), RODATA|NOPTR, $4
DATA fm127<>+0(SB)/4, $0xc2fe0000
GLOBL fm127<>(SB), RODATA|NOPTR, $4
DATA f128<>+0(SB)/4, $0x43000000
GLOBL f128<>(SB), RODATA|NOPTR, $4
DATA fone<>+0(SB)/4, $0x3f800000
GLOBL fone<>(SB), RODATA|NOPTR, $4
DATA fhalf<>+0(SB)/4, $0x3f000000
GLOBL fhalf<>(SB), RODATA|NOPTR, $4
DATA fmhalf<>+0(SB)/4, $0xbf000000
GLOBL fmhalf<>(SB), RODATA|NOPTR, $4

// HMAXZ2 leaves the maximum of Z2's 16 lanes in X2 (lane 0). Clobbers Z3.
#define HMAXZ2 \
	VEXTRACTF32X8 $1, Z2, Y3 \
	VMAXPS Y3, Y2, Y2 \
	VEXTRACTF128 $1, Y2, X3 \
	VMAXPS X3, X2, X2 \
	VMOVHLPS X2, X2, X3 \
	VMAXPS X3, X2, X2 \
	VMOVSHDUP X2, X3 \
	VMAXSS X3, X2, X2

// HSUMZ4 leaves the sum of Z4's 16 int32 lanes in X4 (lane 0). Clobbers Z5.
#define HSUMZ4 \
	VEXTRACTI32X8 $1, Z4, Y5 \
	VPADDD Y5, Y4, Y4 \
	VEXTRACTI128 $1, Y4, X5 \
	VPADDD X5, X4, X4 \
	VPSHUFD $0x4e, X4, X5 \
	VPADDD X5, X4, X4 \
	VPSHUFD $0xb1, X4, X5 \
	VPADDD X5, X4, X4

// func quantQ8_0AVX512(x *float32, nb int, q *int8, qu *uint8, d *float32, sums *int32, s *float32) int
TEXT ·quantQ8_0AVX512(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ qu+24(FP), R8
	MOVQ d+32(FP), R9
	MOVQ sums+40(FP), R10
	MOVQ s+48(FP), R11
	XORQ AX, AX
	VPBROADCASTD absmask<>(SB), Z10
	VBROADCASTSS f128<>(SB), Z11
	VBROADCASTSS fone<>(SB), Z12
	VBROADCASTSS fhalf<>(SB), Z13
	VBROADCASTSS fmhalf<>(SB), Z14
	MOVL $0x80808080, DX
	VPBROADCASTD DX, X15
	TESTQ CX, CX
	JLE q80done

q80loop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VCMPPS $3, Z0, Z0, K1          // unordered: NaN
	VCMPPS $3, Z1, Z1, K2
	KORW K1, K2, K1
	KORTESTW K1, K1
	JNZ q80done
	VANDPS Z10, Z0, Z2
	VANDPS Z10, Z1, Z3
	VMAXPS Z3, Z2, Z2
	HMAXZ2                          // X2 = amax
	VDIVSS f127<>(SB), X2, X2       // d = amax/127
	VMOVAPS X2, X9
	VXORPS X6, X6, X6
	VUCOMISS X6, X2
	JEQ q80zero
	VMOVSS fone<>(SB), X7
	VDIVSS X2, X7, X7               // id = 1/d
	JMP q80id
q80zero:
	VXORPS X7, X7, X7
q80id:
	VCVTPS2PH $0, X2, X8            // f16(d), nearest even
	VCVTPH2PS X8, X8
	VMOVSS X8, (R9)
	VBROADCASTSS X7, Z7
	// v = x·id; q = roundf(v) for |v| ≤ 128, else 0
	VMULPS Z7, Z0, Z0
	VMULPS Z7, Z1, Z1
	VANDPS Z10, Z0, Z2
	VANDPS Z10, Z1, Z3
	VCMPPS $2, Z11, Z2, K3          // |v| <= 128
	VCMPPS $2, Z11, Z3, K4
	VRNDSCALEPS $0x0b, Z0, Z2       // trunc
	VRNDSCALEPS $0x0b, Z1, Z3
	VSUBPS Z2, Z0, Z4               // f = v - t (exact)
	VSUBPS Z3, Z1, Z5
	VCMPPS $13, Z13, Z4, K1         // f >= 0.5
	VADDPS Z12, Z2, K1, Z2
	VCMPPS $2, Z14, Z4, K1          // f <= -0.5
	VSUBPS Z12, Z2, K1, Z2
	VCMPPS $13, Z13, Z5, K1
	VADDPS Z12, Z3, K1, Z3
	VCMPPS $2, Z14, Z5, K1
	VSUBPS Z12, Z3, K1, Z3
	VCVTTPS2DQ Z2, Z2
	VCVTTPS2DQ Z3, Z3
	VPXORD Z4, Z4, Z4
	VMOVDQA32 Z2, K3, Z4            // zero where |v| > 128 or NaN
	VPXORD Z5, Z5, Z5
	VMOVDQA32 Z3, K4, Z5
	VPMOVDB Z4, X0
	VPMOVDB Z5, X1
	VMOVDQU X0, (DI)
	VMOVDQU X1, 16(DI)
	VPXOR X15, X0, X0
	VPXOR X15, X1, X1
	VMOVDQU X0, (R8)
	VMOVDQU X1, 16(R8)
	// Σq: sign-extend the int8 values back (int8 truncation of the int32)
	VPMOVSXBD (DI), Z4
	VPMOVSXBD 16(DI), Z5
	VPADDD Z5, Z4, Z4
	HSUMZ4
	VMOVD X4, DX
	MOVL DX, (R10)
	TESTQ R11, R11
	JZ q80next
	VCVTSI2SSL DX, X6, X6
	VMULSS X9, X6, X6               // Σq·d, d unrounded
	VCVTPS2PH $0, X6, X6
	VCVTPH2PS X6, X6
	VMOVSS X6, (R11)
	ADDQ $4, R11
q80next:
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $4, R9
	ADDQ $4, R10
	INCQ AX
	CMPQ AX, CX
	JLT q80loop

q80done:
	MOVQ AX, ret+56(FP)
	VZEROUPPER
	RET

// func quantQ8_KAVX512(x *float32, nb int, q *int8, d *float32, bs *int32, bs16 *int16) int
TEXT ·quantQ8_KAVX512(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R9
	MOVQ bs+32(FP), R10
	MOVQ bs16+40(FP), R11
	XORQ AX, AX
	VPBROADCASTD absmask<>(SB), Z10
	VBROADCASTSS f128<>(SB), Z11
	MOVL $127, DX
	VPBROADCASTD DX, Z12
	TESTQ CX, CX
	JLE qkdone

qkloop:
	// amax over 256 values, and the NaN check
	VPXORD Z2, Z2, Z2
	KXORW K2, K2, K2
	XORQ BX, BX
qkmax:
	VMOVUPS (SI)(BX*1), Z0
	VCMPPS $3, Z0, Z0, K1
	KORW K1, K2, K2
	VANDPS Z10, Z0, Z0
	VMAXPS Z0, Z2, Z2
	ADDQ $64, BX
	CMPQ BX, $1024
	JLT qkmax
	KORTESTW K2, K2
	JNZ qkdone
	HMAXZ2                          // X2 = amax
	VXORPS X6, X6, X6
	VUCOMISS X6, X2
	JNE qknonzero
	// all zero: d = 0, q = 0, sums = 0
	MOVL $0, (R9)
	VPXORD Z0, Z0, Z0
	XORQ BX, BX
qkzq:
	VMOVDQU32 Z0, (DI)(BX*1)
	ADDQ $64, BX
	CMPQ BX, $256
	JLT qkzq
	VMOVDQU32 Z0, (R10)
	VMOVDQU Y0, (R11)
	JMP qknext

qknonzero:
	// the first element whose magnitude is amax gives max (with sign)
	VBROADCASTSS X2, Z2
	XORQ BX, BX
qkfind:
	VMOVUPS (SI)(BX*4), Z0
	VANDPS Z10, Z0, Z0
	VCMPPS $0, Z2, Z0, K1
	KMOVW K1, DX
	TESTL DX, DX
	JNZ qkfound
	ADDQ $16, BX
	JMP qkfind
qkfound:
	TZCNTL DX, DX
	ADDQ DX, BX
	VMOVSS (SI)(BX*4), X3           // max
	VMOVSS fm127<>(SB), X4
	VDIVSS X3, X4, X4               // iscale = -127/max
	VMOVSS fone<>(SB), X5
	VDIVSS X4, X5, X5               // d = 1/iscale
	VMOVSS X5, (R9)
	VBROADCASTSS X4, Z4
	XORQ BX, BX
qkq:
	VMOVUPS (SI)(BX*4), Z0
	VMULPS Z4, Z0, Z0
	VANDPS Z10, Z0, Z1
	VCMPPS $2, Z11, Z1, K3          // |v| <= 128
	VCVTPS2DQ Z0, Z0                // nearest even (MXCSR default)
	VPMINSD Z12, Z0, Z0
	VPXORD Z1, Z1, Z1
	VMOVDQA32 Z0, K3, Z1
	VPMOVDB Z1, X0
	VMOVDQU X0, (DI)(BX*1)
	VPMOVSXBD X0, Z1
	// Σ of these 16 values
	VEXTRACTI32X8 $1, Z1, Y5
	VPADDD Y5, Y1, Y1
	VEXTRACTI128 $1, Y1, X5
	VPADDD X5, X1, X1
	VPSHUFD $0x4e, X1, X5
	VPADDD X5, X1, X1
	VPSHUFD $0xb1, X1, X5
	VPADDD X5, X1, X1
	VMOVD X1, DX
	MOVQ BX, R8
	SHRQ $4, R8
	MOVL DX, (R10)(R8*4)
	MOVW DX, (R11)(R8*2)
	ADDQ $16, BX
	CMPQ BX, $256
	JLT qkq

qknext:
	ADDQ $1024, SI
	ADDQ $256, DI
	ADDQ $4, R9
	ADDQ $64, R10
	ADDQ $32, R11
	INCQ AX
	CMPQ AX, CX
	JLT qkloop

qkdone:
	MOVQ AX, ret+48(FP)
	VZEROUPPER
	RET
