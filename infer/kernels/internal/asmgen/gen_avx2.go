package main

import "fmt"

// genLegacyAVX2 writes the AVX2 (VEX only, 16 registers) raw-block kernel
// for a nibble format: the same arithmetic as genLegacy, with the fifth bits
// spread to bytes by a shuffle and compare (no mask registers), the dots by
// VPMADDUBSW and VPMADDWD (values ≤ 31, so the int16 pairs cannot
// saturate), and the f16 scales narrowed by a pack and permute.
func genLegacyAVX2(l legacy) {
	name := l.name[:4] + "Dot8AVX2"
	doc := "p = (dw·da)·float32(isum); acc = acc + p (isum = Σ u·a − offset·Σa)."
	if l.mOff >= 0 {
		doc = "p = (dw·da)·float32(Σ u·a); p = p + mw·sa; acc = acc + p (bs carries sa)."
	}
	emit("")
	emit("// func %s(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs unsafe.Pointer, acc *float32)", name)
	emit("//")
	emit("// %s on raw blocks, AVX2: %s", l.name[:4], doc)
	emit("TEXT ·%s(SB), NOSPLIT, $8-56", name)
	emit("\tMOVQ w+0(FP), SI")
	emit("\tMOVQ idx+8(FP), AX")
	emit("\tMOVQ nb+16(FP), CX")
	emit("\tMOVQ q+24(FP), DI")
	emit("\tMOVQ da+32(FP), R11")
	emit("\tMOVQ bs+40(FP), R12")
	emit("\tMOVL 4(AX), DX")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (SI)(DX*4), R14")
	emit("\tMOVQ DX, AX")
	emit("\tSHLQ $4, AX")
	emit("\tADDQ SI, AX")
	emit("\tMOVQ AX, pf-8(SP)")
	emit("\tMOVQ acc+48(FP), AX")
	emit("\tVMOVUPS (AX), Y15")
	emit("\tMOVL $0x00010001, R8")
	emit("\tMOVQ R8, X11")
	emit("\tVPBROADCASTD X11, Y11")
	emit("\tMOVL $0x0f0f0f0f, R8")
	emit("\tMOVQ R8, X13")
	emit("\tVPBROADCASTD X13, Y13")
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", name)
	emit("%sloop:", name)
	emit("\tMOVQ pf-8(SP), AX")
	for off := 0; off < 8*l.blockBytes; off += 64 {
		emit("\t%s %d(AX)", decodePrefetch, off)
	}
	emit("\tADDQ $%d, AX", 8*l.blockBytes)
	emit("\tMOVQ AX, pf-8(SP)")
	emit("\tVMOVDQU (DI), Y8")
	for r := 0; r < 8; r++ {
		emit("\tVMOVDQU %s, X9", row(r, l.qsOff))
		emit("\tVPSRLW $4, X9, X10")
		emit("\tVINSERTI128 $1, X10, Y9, Y9")
		emit("\tVPAND Y13, Y9, Y9")
		if l.qhOff >= 0 {
			emit("\tVPBROADCASTD %s, Y10", row(r, l.qhOff))
			emit("\tVPSHUFB qhshuf<>(SB), Y10, Y10")
			emit("\tVPAND qhbits<>(SB), Y10, Y10")
			emit("\tVPCMPEQB qhbits<>(SB), Y10, Y10")
			emit("\tVPAND c10<>(SB), Y10, Y10")
			emit("\tVPOR Y10, Y9, Y9")
		}
		emit("\tVPMADDUBSW Y8, Y9, Y9")
		emit("\tVPMADDWD Y11, Y9, Y%d", r)
	}
	emit("\tREDUCE8")
	if l.biasShift > 0 {
		emit("\tVPBROADCASTD (R12), Y2")
		emit("\tVPSLLD $%d, Y2, Y2", l.biasShift)
		emit("\tVPSUBD Y2, Y1, Y1")
	}
	emit("\tVCVTDQ2PS Y1, Y1")
	avx2Scales(0, l.mOff >= 0) // d (and the min)
	emit("\tVBROADCASTSS (R11), Y5")
	emit("\tVMULPS Y5, Y3, Y3")
	emit("\tVMULPS Y1, Y3, Y3")
	if l.mOff >= 0 {
		emit("\tVBROADCASTSS (R12), Y6")
		emit("\tVMULPS Y6, Y4, Y4")
		emit("\tVADDPS Y4, Y3, Y3")
	}
	emit("\tVADDPS Y3, Y15, Y15")
	emit("\tADDQ $%d, SI", l.blockBytes)
	emit("\tADDQ $%d, R14", l.blockBytes)
	emit("\tADDQ $32, DI")
	emit("\tADDQ $4, R11")
	emit("\tADDQ $4, R12")
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	epilogue(name + "done")
}

// avx2Prologue is prologue for the AVX2 K-quant kernels, whose frame also
// holds per-row vectors (vs, vm) that AVX-512 keeps in registers 16-31.
func avx2Prologue(name, doc string) {
	emit("")
	emit("// func %s(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32)", name)
	emit("//")
	emit("// %s", doc)
	emit("TEXT ·%s(SB), NOSPLIT, $584-56", name)
	emit("\tMOVQ w+0(FP), SI")
	emit("\tMOVQ idx+8(FP), AX")
	emit("\tMOVQ nb+16(FP), CX")
	emit("\tMOVQ q+24(FP), DI")
	emit("\tMOVQ da+32(FP), R11")
	emit("\tMOVQ bs+40(FP), R12")
	emit("\tMOVL 4(AX), DX")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (SI)(DX*4), R14")
	emit("\tMOVQ DX, AX")
	emit("\tSHLQ $4, AX")
	emit("\tADDQ SI, AX")
	emit("\tMOVQ AX, pf-8(SP)")
	emit("\tMOVQ acc+48(FP), AX")
	emit("\tVMOVUPS (AX), Y15")
	emit("\tMOVL $0x00010001, R8")
	emit("\tMOVQ R8, X12")
	emit("\tVPBROADCASTD X12, Y12")
	emit("\tMOVL $0x0f0f0f0f, R8")
	emit("\tMOVQ R8, X13")
	emit("\tVPBROADCASTD X13, Y13")
}

// Frame slots of the AVX2 K kernels: vs[r] and vm[r] (32 bytes each) and
// the activations' group sums.
func vs(r int) string { return fmt.Sprintf("vs-%d(SP)", 584-32*r) }
func vm(r int) string { return fmt.Sprintf("vm-%d(SP)", 328-32*r) }

const asumSlot = "asum-72(SP)"

// avx2Prefetch is linearPrefetch keeping the pointer at pf-8(SP) in AX.
func avx2Prefetch(blockBytes int) {
	emit("\tMOVQ pf-8(SP), AX")
	for off := 0; off < 8*blockBytes; off += 64 {
		emit("\t%s %d(AX)", decodePrefetch, off)
	}
	emit("\tADDQ $%d, AX", 8*blockBytes)
	emit("\tMOVQ AX, pf-8(SP)")
}

// avx2Scales leaves the f16 at disp of each row's block as float32 in Y3
// (and the one at disp+2 in Y4 when both is set), by packScales. Clobbers
// R8-R10.
func avx2Scales(disp int, both bool) {
	packScales(disp, "X3")
	emit("\tVCVTPH2PS X3, Y3")
	if both {
		packScales(disp+2, "X4")
		emit("\tVCVTPH2PS X4, Y4")
	}
}

// genQ4KAVX2 writes the AVX2 raw-block Q4_K (or Q5_K) kernel: genQ4K's
// arithmetic with VPMADDUBSW/VPMADDWD dots and the per-row vectors kept in
// the frame.
func genQ4KAVX2(five bool) {
	name, lbl, bb, qsOff := "q4_KDot8AVX2", "q4ka2", 144, 16
	if five {
		name, lbl, bb, qsOff = "q5_KDot8AVX2", "q5ka2", 176, 48
	}
	avx2Prologue(name, name[:4]+" on raw blocks, AVX2: p = (dw·da)·float32(S) − (dmin·da)·float32(M); acc = acc + p.")
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", lbl)
	emit("%sloop:", lbl)
	avx2Prefetch(bb)
	emit("\tVPMADDWD (R12), Y12, Y14") // Σa per group of 32
	emit("\tVMOVDQU Y14, %s", asumSlot)
	for r := 0; r < 8; r++ {
		emit("\tMOVL %s, R8", row(r, 4))
		emit("\tMOVL %s, R9", row(r, 8))
		emit("\tMOVL %s, R10", row(r, 12))
		emit("\tMOVL R10, AX")
		emit("\tANDL $0x0f0f0f0f, AX")
		emit("\tMOVL R8, R13")
		emit("\tSHRL $6, R13")
		emit("\tANDL $0x03030303, R13")
		emit("\tSHLL $4, R13")
		emit("\tORL R13, AX")
		emit("\tANDL $0x3f3f3f3f, R8")
		emit("\tMOVL R10, R13")
		emit("\tSHRL $4, R13")
		emit("\tANDL $0x0f0f0f0f, R13")
		emit("\tMOVL R9, R10")
		emit("\tSHRL $6, R10")
		emit("\tANDL $0x03030303, R10")
		emit("\tSHLL $4, R10")
		emit("\tORL R10, R13")
		emit("\tANDL $0x3f3f3f3f, R9")
		emit("\tSHLQ $32, AX")
		emit("\tORQ AX, R8")
		emit("\tSHLQ $32, R13")
		emit("\tORQ R13, R9")
		emit("\tVMOVQ R8, X8")
		emit("\tVPMOVZXBD X8, Y8")
		emit("\tVMOVQ R9, X9")
		emit("\tVPMOVZXBD X9, Y9")
		emit("\tVPMULLD %s, Y9, Y9", asumSlot)
		emit("\tVMOVDQU Y9, %s", vm(r))
		if five {
			emit("\tVMOVDQU %s, Y14", row(r, 16))
		}
		for c := 0; c < 4; c++ {
			for half := 0; half < 2; half++ {
				g := 2*c + half
				emit("\tVMOVDQU %s, Y10", row(r, qsOff+32*c))
				if half == 1 {
					emit("\tVPSRLW $4, Y10, Y10")
				}
				emit("\tVPAND Y13, Y10, Y10")
				if five {
					emit("\tVPAND bit5<>+%d(SB), Y14, Y9", 32*g)
					emit("\tVPCMPEQB bit5<>+%d(SB), Y9, Y9", 32*g)
					emit("\tVPAND c10<>(SB), Y9, Y9")
					emit("\tVPOR Y9, Y10, Y10")
				}
				emit("\tVPMADDUBSW %d(DI), Y10, Y10", 32*g)
				emit("\tVPMADDWD Y12, Y10, Y%d", g)
			}
		}
		reduce8("Y10")
		emit("\tVPMULLD Y8, Y1, Y1")
		emit("\tVMOVDQU Y1, %s", vs(r))
	}
	for r := 0; r < 8; r++ {
		emit("\tVMOVDQU %s, Y%d", vs(r), r)
	}
	reduce8("Y9")
	emit("\tVMOVDQA Y1, Y10") // S
	for r := 0; r < 8; r++ {
		emit("\tVMOVDQU %s, Y%d", vm(r), r)
	}
	reduce8("Y9") // M
	avx2Scales(0, true)
	emit("\tVBROADCASTSS (R11), Y5")
	emit("\tVMULPS Y5, Y3, Y3")
	emit("\tVCVTDQ2PS Y10, Y6")
	emit("\tVMULPS Y6, Y3, Y3")
	emit("\tVMULPS Y5, Y4, Y4")
	emit("\tVCVTDQ2PS Y1, Y7")
	emit("\tVMULPS Y7, Y4, Y4")
	emit("\tVSUBPS Y4, Y3, Y3")
	emit("\tVADDPS Y3, Y15, Y15")
	emit("\tADDQ $%d, SI", bb)
	emit("\tADDQ $%d, R14", bb)
	emit("\tADDQ $256, DI")
	emit("\tADDQ $4, R11")
	emit("\tADDQ $32, R12")
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", lbl)
	epilogue(lbl + "done")
}

// genQ6KAVX2 writes the AVX2 raw-block Q6_K kernel (genQ6K's arithmetic).
func genQ6KAVX2() {
	name, lbl := "q6_KDot8AVX2", "q6ka2"
	avx2Prologue(name, "Q6_K on raw blocks, AVX2: isum = Σ_h sc_h·Σ (q−32)·a; p = (d·da)·float32(isum); acc = acc + p.")
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", lbl)
	emit("%sloop:", lbl)
	avx2Prefetch(210)
	for r := 0; r < 8; r++ {
		for h := 0; h < 2; h++ {
			emit("\tVMOVDQU %s, Y10", row(r, 128+32*h)) // H
			for j := 0; j < 4; j++ {
				src := 64*h + 32*(j%2) // A for j = 0, 2; B for j = 1, 3
				emit("\tVMOVDQU %s, Y8", row(r, src))
				if j >= 2 {
					emit("\tVPSRLW $4, Y8, Y8")
				}
				emit("\tVPAND Y13, Y8, Y8")
				switch j {
				case 0:
					emit("\tVPSLLW $4, Y10, Y11")
				case 1:
					emit("\tVPSLLW $2, Y10, Y11")
				case 2:
					emit("\tVMOVDQA Y10, Y11")
				case 3:
					emit("\tVPSRLW $2, Y10, Y11")
				}
				emit("\tVPAND c30<>(SB), Y11, Y11")
				emit("\tVPOR Y11, Y8, Y8")
				emit("\tVPMADDUBSW %d(DI), Y8, Y8", 128*h+32*j)
				emit("\tVPMADDWD Y12, Y8, Y%d", 4*h+j)
			}
		}
		emit("\tVPHADDD Y1, Y0, Y0")
		emit("\tVPHADDD Y3, Y2, Y2")
		emit("\tVPHADDD Y5, Y4, Y4")
		emit("\tVPHADDD Y7, Y6, Y6")
		emit("\tVPHADDD Y2, Y0, Y0")
		emit("\tVPHADDD Y6, Y4, Y4")
		emit("\tVMOVDQU perm0246<>(SB), Y9")
		emit("\tVPMOVSXBD %s, Y8", row(r, 192))
		emit("\tVPERMD Y8, Y9, Y8")
		emit("\tVPMULLD Y8, Y0, Y0")
		emit("\tVPMOVSXBD %s, Y8", row(r, 200))
		emit("\tVPERMD Y8, Y9, Y8")
		emit("\tVPMULLD Y8, Y4, Y4")
		emit("\tVPADDD Y4, Y0, Y0")
		emit("\tVPMOVSXBW %s, Y8", row(r, 192))
		emit("\tVPMADDWD (R12), Y8, Y8")
		emit("\tVPSLLD $5, Y8, Y8")
		emit("\tVPSUBD Y8, Y0, Y0")
		emit("\tVMOVDQU Y0, %s", vs(r))
	}
	for r := 0; r < 8; r++ {
		emit("\tVMOVDQU %s, Y%d", vs(r), r)
	}
	emit("\tREDUCE8")
	avx2Scales(208, false) // d
	emit("\tVBROADCASTSS (R11), Y5")
	emit("\tVMULPS Y5, Y3, Y3")
	emit("\tVCVTDQ2PS Y1, Y1")
	emit("\tVMULPS Y1, Y3, Y3")
	emit("\tVADDPS Y3, Y15, Y15")
	emit("\tADDQ $210, SI")
	emit("\tADDQ $210, R14")
	emit("\tADDQ $256, DI")
	emit("\tADDQ $4, R11")
	emit("\tADDQ $32, R12")
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", lbl)
	epilogue(lbl + "done")
}

// genFloatAVX2 writes the AVX2 float kernel for 4 rows × 1 token: the 16
// canonical lanes of row r are Y(2r) (lanes 0-7) and Y(2r+1) (lanes 8-15).
// With reduce it runs the fixed tree and stores acc[r], otherwise it stores
// the 16 lanes at acc[16r].
func genFloatAVX2(typ string, reduce bool) {
	suffix := ""
	if reduce {
		suffix = "R"
	}
	name := fmt.Sprintf("%sDot4x1%sAVX2", map[string]string{"F16": "f16", "F32": "f32", "BF16": "bf16"}[typ], suffix)
	step := 32
	if typ == "F32" {
		step = 64
	}
	half := step / 2
	emit("")
	emit("// func %s(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	emit("\tMOVQ w+0(FP), SI")
	emit("\tMOVQ rowBytes+8(FP), DX")
	emit("\tMOVQ x+16(FP), DI")
	emit("\tMOVQ n16+32(FP), CX")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (SI)(DX*8), AX")
	for i := 0; i < 8; i++ {
		emit("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", name)
	emit("%sloop:", name)
	for off := 0; off < 4*step; off += 64 {
		emit("\tPREFETCHT0 %d(AX)", off)
	}
	emit("\tADDQ $%d, AX", 4*step)
	emit("\tVMOVUPS (DI), Y12")
	emit("\tVMOVUPS 32(DI), Y13")
	for r := 0; r < 4; r++ {
		for h := 0; h < 2; h++ {
			w := 8 + h
			switch typ {
			case "F16":
				emit("\tVCVTPH2PS %s, Y%d", row(r, h*half), w)
			case "F32":
				emit("\tVMOVUPS %s, Y%d", row(r, h*half), w)
			case "BF16":
				emit("\tVPMOVZXWD %s, Y%d", row(r, h*half), w)
				emit("\tVPSLLD $16, Y%d, Y%d", w, w)
			}
			a := 2*r + h
			if typ == "F16" {
				emit("\tVFMADD231PS Y%d, Y%d, Y%d", 12+h, w, a)
			} else {
				emit("\tVMULPS Y%d, Y%d, Y%d", 12+h, w, w)
				emit("\tVADDPS Y%d, Y%d, Y%d", w, a, a)
			}
		}
	}
	floatAVX2End(name, step, 4, reduce, 10)
}

// genFloatAVX2N writes the AVX2 float kernel for 2 rows × nt tokens (nt ≤
// 3): the 16 canonical lanes of row r and token t are Y(2(r·nt+t))
// (lanes 0-7) and Y(2(r·nt+t)+1) (lanes 8-15); each half-row of weights is
// widened once (Y12) for every token, whose activations are read as
// memory operands (x + t·xStride). With reduce it runs the fixed tree and
// stores acc[r·nt+t], otherwise the 16 lanes at acc[16(r·nt+t)] — the
// layout of the 4-row kernels with 2 rows.
func genFloatAVX2N(typ string, nt int, reduce bool) {
	suffix := ""
	if reduce {
		suffix = "R"
	}
	name := fmt.Sprintf("%sDot2x%d%sAVX2", map[string]string{"F16": "f16", "F32": "f32", "BF16": "bf16"}[typ], nt, suffix)
	step := 32
	if typ == "F32" {
		step = 64
	}
	half := step / 2
	emit("")
	emit("// func %s(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	emit("\tMOVQ w+0(FP), SI")
	emit("\tMOVQ rowBytes+8(FP), DX")
	emit("\tMOVQ x+16(FP), DI")
	emit("\tMOVQ xStride+24(FP), R8")
	emit("\tMOVQ n16+32(FP), CX")
	emit("\tLEAQ (SI)(DX*4), AX") // prefetch pointer: two 2-row groups ahead, linear
	for i := 0; i < 4*nt; i++ {
		emit("\tVXORPS Y%d, Y%d, Y%d", i, i, i)
	}
	xaddr := func(t, disp int) string {
		return fmt.Sprintf("%d(DI)%s", disp, [...]string{"", "(R8*1)", "(R8*2)"}[t])
	}
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", name)
	emit("%sloop:", name)
	for off := 0; off < 2*step; off += 64 {
		emit("\tPREFETCHT0 %d(AX)", off)
	}
	emit("\tADDQ $%d, AX", 2*step)
	for r := 0; r < 2; r++ {
		for h := 0; h < 2; h++ {
			switch typ {
			case "F16":
				emit("\tVCVTPH2PS %s, Y12", row(r, h*half))
			case "F32":
				emit("\tVMOVUPS %s, Y12", row(r, h*half))
			case "BF16":
				emit("\tVPMOVZXWD %s, Y12", row(r, h*half))
				emit("\tVPSLLD $16, Y12, Y12")
			}
			for t := 0; t < nt; t++ {
				a := 2*(r*nt+t) + h
				if typ == "F16" {
					emit("\tVFMADD231PS %s, Y12, Y%d", xaddr(t, 32*h), a)
				} else {
					emit("\tVMULPS %s, Y12, Y13", xaddr(t, 32*h))
					emit("\tVADDPS Y13, Y%d, Y%d", a, a)
				}
			}
		}
	}
	floatAVX2End(name, step, 2*nt, reduce, 14)
}

// floatAVX2End emits the end of an AVX2 float kernel's column loop (step
// weight bytes and 64 activation bytes per 16 columns) and the store of
// its outs accumulators, output o in Y(2o) (lanes 0-7) and Y(2o+1)
// (lanes 8-15): the 16 lanes at acc[16o], or with reduce the fixed tree
// +8, +4, +2, +1 (X(tmp) scratch) and acc[o].
func floatAVX2End(name string, step, outs int, reduce bool, tmp int) {
	emit("\tADDQ $%d, SI", step)
	emit("\tADDQ $64, DI")
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	emit("%sdone:", name)
	emit("\tMOVQ acc+40(FP), AX")
	for o := 0; o < outs; o++ {
		lo, hi := 2*o, 2*o+1
		if !reduce {
			emit("\tVMOVUPS Y%d, %d(AX)", lo, 64*o)
			emit("\tVMOVUPS Y%d, %d(AX)", hi, 64*o+32)
			continue
		}
		emit("\tVADDPS Y%d, Y%d, Y%d", hi, lo, lo)
		emit("\tVEXTRACTF128 $1, Y%d, X%d", lo, tmp)
		emit("\tVADDPS X%d, X%d, X%d", tmp, lo, lo)
		emit("\tVMOVHLPS X%d, X%d, X%d", lo, lo, tmp)
		emit("\tVADDPS X%d, X%d, X%d", tmp, lo, lo)
		emit("\tVMOVSHDUP X%d, X%d", lo, tmp)
		emit("\tVADDSS X%d, X%d, X%d", tmp, lo, lo)
		emit("\tVMOVSS X%d, %d(AX)", lo, 4*o)
	}
	emit("\tVZEROUPPER")
	emit("\tRET")
}
