package main

import "fmt"

// tok returns the address of byte disp of token t (0..7) of a token group:
// tokens 0-3 from DI, 4-7 from R12, DX being the token stride and BX three
// strides.
func tok(t, disp int) string {
	base := "DI"
	if t >= 4 {
		base = "R12"
	}
	idx := [...]string{"", "(DX*1)", "(DX*2)", "(BX*1)"}[t%4]
	return fmt.Sprintf("%d(%s)%s", disp, base, idx)
}

// genLegacyPanel writes the transposed-panel kernel for 32-element blocks
// and nt tokens (1..8). The panel holds, per block, eight vectors W_k whose
// lane j is bytes 4k..4k+3 of row j's 32 unsigned values; a VNNI dot of W_k
// with the broadcast activation bytes 4k..4k+3 adds those four products to
// lane j, so eight of them leave each row's block sum in its lane with no
// horizontal reduction. Then, per token and as in dotLegacy:
// isum = Σu·a − corr; p = (dw·da)·float32(isum) [+ mw·sa]; acc = acc + p.
func genLegacyPanel(nt int, withMin bool) {
	name := fmt.Sprintf("legacyPanel%dAVX512", nt)
	if withMin {
		name = fmt.Sprintf("legacyMinPanel%dAVX512", nt)
	}
	emit("")
	emit("// func %s(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-80", name)
	emit("\tMOVQ u+0(FP), SI")
	emit("\tMOVQ dw+8(FP), R8")
	emit("\tMOVQ mw+16(FP), R9")
	emit("\tMOVQ nb+24(FP), CX")
	emit("\tMOVQ q+32(FP), DI")
	emit("\tMOVQ qStride+40(FP), DX")
	emit("\tMOVQ daT+48(FP), R11")
	emit("\tMOVQ corrT+56(FP), R13")
	emit("\tMOVQ saT+64(FP), R14")
	emit("\tMOVQ acc+72(FP), AX")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (DI)(DX*4), R12")
	for t := 0; t < nt; t++ {
		emit("\tVMOVUPS %d(AX), Y%d", 32*t, t)
	}
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", name)
	emit("%sloop:", name)
	for k := 0; k < 8; k++ {
		emit("\tVMOVDQU32 %d(SI), Y%d", 32*k, 16+k)
	}
	emit("\tVMOVUPS (R8), Y24")
	if withMin {
		emit("\tVMOVUPS (R9), Y25")
	}
	for t := 0; t < nt; t++ {
		a := 8 + t
		emit("\tVPXORD Y%d, Y%d, Y%d", a, a, a)
		for k := 0; k < 8; k++ {
			emit("\tVPDPBUSD.BCST %s, Y%d, Y%d", tok(t, 4*k), 16+k, a)
		}
		emit("\tVPSUBD.BCST %d(R13), Y%d, Y%d", 4*t, a, a)
		emit("\tVCVTDQ2PS Y%d, Y%d", a, a)
		emit("\tVMULPS.BCST %d(R11), Y24, Y26", 4*t)
		emit("\tVMULPS Y%d, Y26, Y26", a)
		if withMin {
			emit("\tVMULPS.BCST %d(R14), Y25, Y27", 4*t)
			emit("\tVADDPS Y27, Y26, Y26")
		}
		emit("\tVADDPS Y26, Y%d, Y%d", t, t)
	}
	emit("\tADDQ $256, SI")
	emit("\tADDQ $32, R8")
	if withMin {
		emit("\tADDQ $32, R9")
		emit("\tADDQ $32, R14")
	}
	emit("\tADDQ $32, DI")
	emit("\tADDQ $32, R12")
	emit("\tADDQ $32, R11")
	emit("\tADDQ $32, R13")
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	emit("%sdone:", name)
	emit("\tMOVQ acc+72(FP), AX")
	for t := 0; t < nt; t++ {
		emit("\tVMOVUPS Y%d, %d(AX)", t, 32*t)
	}
	emit("\tVZEROUPPER")
	emit("\tRET")
}

// genKPanel writes the transposed-panel kernel for K-quant super-blocks with
// integer scale groups of group elements (16 or 32) and nt tokens. Per
// group, VNNI dots as in genLegacyPanel give each row's group sum in its
// lane, which is multiplied by the rows' scales and added to S; the "mins"
// M = Σ_h mn_h·bs_h come from pairwise int16 dots with the broadcast pairs
// of block sums. Then as in dotK: with dmin, p = (dw·da)·float32(S) −
// (dmin·da)·float32(M), else p = (dw·da)·float32(S−M); acc = acc + p.
func genKPanel(group, nt int, withMin bool) {
	kpg := group / 4
	ng := 256 / group
	name := fmt.Sprintf("kPanel%dx%dAVX512", group, nt)
	if withMin {
		name = fmt.Sprintf("kMinPanel%dx%dAVX512", group, nt)
	}
	emit("")
	emit("// func %s(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-88", name)
	emit("\tMOVQ u+0(FP), SI")
	emit("\tMOVQ sc+8(FP), R8")
	emit("\tMOVQ mn+16(FP), R9")
	emit("\tMOVQ dw+24(FP), R10")
	emit("\tMOVQ dm+32(FP), R11")
	emit("\tMOVQ nsb+40(FP), CX")
	emit("\tMOVQ q+48(FP), DI")
	emit("\tMOVQ qStride+56(FP), DX")
	emit("\tMOVQ daT+64(FP), R13")
	emit("\tMOVQ bsT+72(FP), R14")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (DI)(DX*4), R12")
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", name)
	emit("%ssb:", name)
	for t := 0; t < nt; t++ {
		emit("\tVPXORD Y%d, Y%d, Y%d", t, t, t)
	}
	emit("\tMOVQ $%d, AX", ng)
	emit("%sgroup:", name)
	for k := 0; k < kpg; k++ {
		emit("\tVMOVDQU32 %d(SI), Y%d", 32*k, 16+k)
	}
	emit("\tVMOVDQU32 (R8), Y24")
	for t := 0; t < nt; t++ {
		a := 8 + t
		emit("\tVPXORD Y%d, Y%d, Y%d", a, a, a)
		for k := 0; k < kpg; k++ {
			emit("\tVPDPBUSD.BCST %s, Y%d, Y%d", tok(t, 4*k), 16+k, a)
		}
		emit("\tVPMULLD Y24, Y%d, Y%d", a, a)
		emit("\tVPADDD Y%d, Y%d, Y%d", a, t, t)
	}
	emit("\tADDQ $%d, SI", 32*kpg)
	emit("\tADDQ $32, R8")
	emit("\tADDQ $%d, DI", 4*kpg)
	emit("\tADDQ $%d, R12", 4*kpg)
	emit("\tDECQ AX")
	emit("\tJNZ %sgroup", name)
	// M per token from 8 pairs of int16 "mins" per row.
	for p := 0; p < 8; p++ {
		emit("\tVMOVDQU32 %d(R9), Y%d", 32*p, 16+p)
	}
	for t := 0; t < nt; t++ {
		a := 8 + t
		emit("\tVPXORD Y%d, Y%d, Y%d", a, a, a)
		for p := 0; p < 8; p++ {
			emit("\tVPDPWSSD.BCST %d(R14), Y%d, Y%d", 4*(p*8+t), 16+p, a)
		}
	}
	emit("\tVMOVUPS (R10), Y24")
	if withMin {
		emit("\tVMOVUPS (R11), Y25")
	}
	emit("\tMOVQ acc+80(FP), AX")
	for t := 0; t < nt; t++ {
		a := 8 + t
		emit("\tVMULPS.BCST %d(R13), Y24, Y26", 4*t)
		if withMin {
			emit("\tVCVTDQ2PS Y%d, Y27", t)
			emit("\tVMULPS Y27, Y26, Y26")
			emit("\tVMULPS.BCST %d(R13), Y25, Y27", 4*t)
			emit("\tVCVTDQ2PS Y%d, Y28", a)
			emit("\tVMULPS Y28, Y27, Y27")
			emit("\tVSUBPS Y27, Y26, Y26")
		} else {
			emit("\tVPSUBD Y%d, Y%d, Y%d", a, t, t)
			emit("\tVCVTDQ2PS Y%d, Y27", t)
			emit("\tVMULPS Y27, Y26, Y26")
		}
		emit("\tVADDPS %d(AX), Y26, Y26", 32*t)
		emit("\tVMOVUPS Y26, %d(AX)", 32*t)
	}
	emit("\tADDQ $256, R9")
	emit("\tADDQ $32, R10")
	if withMin {
		emit("\tADDQ $32, R11")
	}
	emit("\tADDQ $32, R13")
	emit("\tADDQ $256, R14")
	emit("\tDECQ CX")
	emit("\tJNZ %ssb", name)
	emit("%sdone:", name)
	emit("\tVZEROUPPER")
	emit("\tRET")
}
