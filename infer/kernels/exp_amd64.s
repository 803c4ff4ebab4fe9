#include "textflag.h"

// Exp32 for eight float32 lanes, with the float64 operations of Exp32 in
// vec.go in the same order (no FMA), so every lane is bit-identical to it.
// BX points at expConsts (vec_amd64.go): float64 log2e, 0.5, ln2hi, ln2lo,
// the 12 polynomial coefficients in Horner order, int64 1023, then float32
// 88.72284, -104, +Inf. Input in Y16, result in Y17; clobbers Z20-Z25, K1-K3.
#define EXP32 \
	VCVTPS2PD Y16, Z20 \
	VMULPD.BCST 0(BX), Z20, Z21 \
	VADDPD.BCST 8(BX), Z21, Z21 \
	VRNDSCALEPD $0x09, Z21, Z21 \
	VMULPD.BCST 16(BX), Z21, Z22 \
	VSUBPD Z22, Z20, Z22 \
	VMULPD.BCST 24(BX), Z21, Z23 \
	VSUBPD Z23, Z22, Z22 \
	VBROADCASTSD 32(BX), Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 40(BX), Z23, Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 48(BX), Z23, Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 56(BX), Z23, Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 64(BX), Z23, Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 72(BX), Z23, Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 80(BX), Z23, Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 88(BX), Z23, Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 96(BX), Z23, Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 104(BX), Z23, Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 112(BX), Z23, Z23 \
	VMULPD Z22, Z23, Z23 \
	VADDPD.BCST 120(BX), Z23, Z23 \
	VCVTPD2DQ Z21, Y24 \
	VPSRLD $31, Y24, Y25 \
	VPADDD Y25, Y24, Y25 \
	VPSRAD $1, Y25, Y25 \
	VPSUBD Y25, Y24, Y24 \
	VPMOVSXDQ Y25, Z25 \
	VPADDQ.BCST 128(BX), Z25, Z25 \
	VPSLLQ $52, Z25, Z25 \
	VPMOVSXDQ Y24, Z24 \
	VPADDQ.BCST 128(BX), Z24, Z24 \
	VPSLLQ $52, Z24, Z24 \
	VMULPD Z25, Z23, Z23 \
	VMULPD Z24, Z23, Z23 \
	VCVTPD2PS Z23, Y17 \
	VCMPPS.BCST $0x1e, 136(BX), Y16, K1 \
	VBROADCASTSS 144(BX), Y20 \
	VMOVAPS Y20, K1, Y17 \
	VCMPPS.BCST $0x11, 140(BX), Y16, K2 \
	VPXORD Y17, Y17, K2, Y17 \
	VCMPPS $3, Y16, Y16, K3 \
	VMOVAPS Y16, K3, Y17

// func softmaxExpAVX512(x *float32, n8 int, mx float32, c *float64, sums *[8]float64)
//
// x[i] = Exp32(x[i]-mx) for i < 8·n8, and sums[l] += float64(x[i]) for
// i ≡ l mod 8, in index order.
TEXT ·softmaxExpAVX512(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ n8+8(FP), CX
	VBROADCASTSS mx+16(FP), Y18
	MOVQ c+24(FP), BX
	MOVQ sums+32(FP), DI
	VMOVUPD (DI), Z19
	TESTQ CX, CX
	JLE smdone
smloop:
	VMOVUPS (SI), Y16
	VSUBPS Y18, Y16, Y16
	EXP32
	VMOVUPS Y17, (SI)
	VCVTPS2PD Y17, Z20
	VADDPD Z20, Z19, Z19
	ADDQ $32, SI
	DECQ CX
	JNZ smloop
smdone:
	VMOVUPD Z19, (DI)
	VZEROUPPER
	RET

// func siluMulAVX512(dst, gate, up *float32, n8 int, c *float64)
//
// dst[i] = (g/(1+Exp32(-g)))·up[i], g = gate[i], for i < 8·n8.
TEXT ·siluMulAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n8+24(FP), CX
	MOVQ c+32(FP), BX
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Y26
	MOVL $0x3f800000, AX
	VPBROADCASTD AX, Y27
	TESTQ CX, CX
	JLE sidone
siloop:
	VMOVUPS (SI), Y28
	VXORPS Y26, Y28, Y16           // -g
	EXP32
	VADDPS Y27, Y17, Y17            // 1 + e
	VDIVPS Y17, Y28, Y17            // g / (1+e)
	VMULPS (DX), Y17, Y17
	VMOVUPS Y17, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ siloop
sidone:
	VZEROUPPER
	RET

// func maxNaNAVX512(x *float32, n16 int) (mx float32, nan bool)
//
// The largest of x[0:16·n16] and whether any is NaN. Without NaNs the
// maximum is order-independent (a zero maximum's sign may differ from a
// sequential scan's, which Softmax's x−max cannot see).
TEXT ·maxNaNAVX512(SB), NOSPLIT, $0-21
	MOVQ x+0(FP), SI
	MOVQ n16+8(FP), CX
	VMOVUPS (SI), Z0
	KXORW K2, K2, K2
mnloop:
	VMOVUPS (SI), Z1
	VCMPPS $3, Z1, Z1, K1
	KORW K1, K2, K2
	VMAXPS Z1, Z0, Z0
	ADDQ $64, SI
	DECQ CX
	JNZ mnloop
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VMAXPS X1, X0, X0
	VMOVSHDUP X0, X1
	VMAXSS X1, X0, X0
	MOVSS X0, mx+16(FP)
	KORTESTW K2, K2
	SETNE nan+20(FP)
	VZEROUPPER
	RET

// func scaleAVX512(x *float32, s float32, n16 int)
TEXT ·scaleAVX512(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	VBROADCASTSS s+8(FP), Z1
	MOVQ n16+16(FP), CX
scloop:
	VMULPS (SI), Z1, Z0
	VMOVUPS Z0, (SI)
	ADDQ $64, SI
	DECQ CX
	JNZ scloop
	VZEROUPPER
	RET
