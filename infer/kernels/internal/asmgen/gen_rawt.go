package main

import "fmt"

// rawTok returns the address of byte disp of token t (0..7) of a token
// group for the multi-token raw-block kernels: tokens 0-3 from DI, 4-7 from
// R12, R8 being the token stride and R9 three strides (SI, R14, DX and BX
// address the weight rows, see row).
func rawTok(t, disp int) string {
	base := "DI"
	if t >= 4 {
		base = "R12"
	}
	idx := [...]string{"", "(R8*1)", "(R8*2)", "(R9*1)"}[t%4]
	return fmt.Sprintf("%d(%s)%s", disp, base, idx)
}

// genQ8_0RawT writes the Q8_0 raw-block kernel for nt tokens (1..8) that
// reads each weight block once for all of them. Per block it loads the 32
// quant bytes of the 8 rows in place, flips them to unsigned (w+128), and
// transposes the 8×8 dwords in registers so that vector k's lane j holds
// bytes 4k..4k+3 of row j — the transposed-panel layout, built on the fly
// instead of unpacked into memory. VNNI dots with each token's broadcast
// activation bytes then leave every row's block sum in its own lane, with
// no horizontal reduction per token. Then, per token and exactly as in
// dotLegacy: isum = Σ(w+128)·a − 128·Σa; p = (dw·da)·float32(isum);
// acc = acc + p.
//
// Arguments: w points at block 0 of row 0 of an 8-row group and idx holds
// the byte offsets of the 8 rows (idx[1] is the row stride); q is token 0's
// activation bytes, qStride the bytes between tokens; daT and corrT are the
// token-group-transposed scales and 128·Σa (prepPanels: 8 entries a block);
// acc holds nt×8 sums, row-minor, which the kernel adds to.
func genQ8_0RawT(nt int) {
	name := fmt.Sprintf("q8_0Raw%dAVX512", nt)
	emit("")
	emit("// func %s(w *byte, idx *[8]int32, nb int, q *int8, qStride int, daT *float32, corrT *int32, acc *float32)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-64", name)
	emit("\tMOVQ w+0(FP), SI")
	emit("\tMOVQ idx+8(FP), AX")
	emit("\tMOVQ nb+16(FP), CX")
	emit("\tMOVQ q+24(FP), DI")
	emit("\tMOVQ qStride+32(FP), R8")
	emit("\tMOVQ daT+40(FP), R11")
	emit("\tMOVQ corrT+48(FP), R13")
	emit("\tVMOVDQU (AX), Y12")
	emit("\tMOVL 4(AX), DX")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (SI)(DX*4), R14")
	emit("\tLEAQ (R8)(R8*2), R9")
	emit("\tLEAQ (DI)(R8*4), R12")
	emit("\tMOVQ DX, R10") // prefetch pointer: two 8-row groups ahead
	emit("\tSHLQ $4, R10")
	emit("\tADDQ SI, R10")
	emit("\tMOVL $0x80808080, AX")
	emit("\tVPBROADCASTD AX, Y13")
	emit("\tMOVQ acc+56(FP), AX")
	for t := 0; t < nt; t++ {
		emit("\tVMOVUPS %d(AX), Y%d", 32*t, t)
	}
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", name)
	emit("%sloop:", name)
	for i := 0; i < 5; i++ {
		emit("\tPREFETCHT0 %d(R10)", 64*i)
	}
	emit("\tADDQ $272, R10")
	// Rows r in Y16+r, flipped to unsigned.
	for r := 0; r < 8; r++ {
		emit("\tVPXORD %s, Y13, Y%d", row(r, 2), 16+r)
	}
	// Stage 1: T(2p) = dwords 0,1,4,5 of rows 2p, 2p+1 interleaved; T(2p+1)
	// dwords 2,3,6,7 (Y24..Y31).
	for p := 0; p < 4; p++ {
		emit("\tVPUNPCKLDQ Y%d, Y%d, Y%d", 17+2*p, 16+2*p, 24+2*p)
		emit("\tVPUNPCKHDQ Y%d, Y%d, Y%d", 17+2*p, 16+2*p, 25+2*p)
	}
	// Stage 2: S(4h+i) for rows 4h..4h+3: S0 = dword 0|4, S1 = 1|5, S2 =
	// 2|6, S3 = 3|7 (Y16..Y23).
	for h := 0; h < 2; h++ {
		t0 := 24 + 4*h
		emit("\tVPUNPCKLQDQ Y%d, Y%d, Y%d", t0+2, t0, 16+4*h)
		emit("\tVPUNPCKHQDQ Y%d, Y%d, Y%d", t0+2, t0, 17+4*h)
		emit("\tVPUNPCKLQDQ Y%d, Y%d, Y%d", t0+3, t0+1, 18+4*h)
		emit("\tVPUNPCKHQDQ Y%d, Y%d, Y%d", t0+3, t0+1, 19+4*h)
	}
	// Stage 3: K_i = low halves of S_i (rows 0-3) and S_{4+i} (rows 4-7),
	// K_{4+i} the high halves; K_k lands in Y(kreg[k]).
	for i := 0; i < 4; i++ {
		emit("\tVSHUFI32X4 $0, Y%d, Y%d, Y%d", 20+i, 16+i, kreg[i])
		emit("\tVSHUFI32X4 $3, Y%d, Y%d, Y%d", 20+i, 16+i, kreg[4+i])
	}
	// dw of the 8 rows.
	emit("\tKXNORB K1, K1, K1")
	emit("\tVPGATHERDD (SI)(Y12*1), K1, Y14")
	emit("\tVPMOVDW Y14, X14")
	emit("\tVCVTPH2PS X14, Y14")
	for t := 0; t < nt; t++ {
		a := 8 + t%4
		emit("\tVPXORD Y%d, Y%d, Y%d", a, a, a)
		for k := 0; k < 8; k++ {
			emit("\tVPDPBUSD.BCST %s, Y%d, Y%d", rawTok(t, 4*k), kreg[k], a)
		}
		emit("\tVPSUBD.BCST %d(R13), Y%d, Y%d", 4*t, a, a)
		emit("\tVCVTDQ2PS Y%d, Y%d", a, a)
		emit("\tVMULPS.BCST %d(R11), Y14, Y15", 4*t)
		emit("\tVMULPS Y%d, Y15, Y15", a)
		emit("\tVADDPS Y15, Y%d, Y%d", t, t)
	}
	emit("\tADDQ $34, SI")
	emit("\tADDQ $34, R14")
	emit("\tADDQ $32, DI")
	emit("\tADDQ $32, R12")
	emit("\tADDQ $32, R11")
	emit("\tADDQ $32, R13")
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	emit("%sdone:", name)
	emit("\tMOVQ acc+56(FP), AX")
	for t := 0; t < nt; t++ {
		emit("\tVMOVUPS Y%d, %d(AX)", t, 32*t)
	}
	emit("\tVZEROUPPER")
	emit("\tRET")
}

// kreg[k] is the register holding transposed vector K_k in genQ8_0RawT.
var kreg = [8]int{24, 26, 28, 30, 25, 27, 29, 31}
