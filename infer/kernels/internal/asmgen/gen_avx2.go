package main

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
	emit("\tVMOVDQU (AX), Y12")
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
		emit("\tPREFETCHT0 %d(AX)", off)
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
	emit("\tVPCMPEQD Y14, Y14, Y14")
	emit("\tVPGATHERDD Y14, (SI)(Y12*1), Y2")
	emit("\tVPAND lo16<>(SB), Y2, Y3")
	emit("\tVPACKUSDW Y3, Y3, Y3")
	emit("\tVPERMQ $0x08, Y3, Y3")
	emit("\tVCVTPH2PS X3, Y3")
	emit("\tVBROADCASTSS (R11), Y5")
	emit("\tVMULPS Y5, Y3, Y3")
	emit("\tVMULPS Y1, Y3, Y3")
	if l.mOff >= 0 {
		emit("\tVPSRLD $16, Y2, Y4")
		emit("\tVPACKUSDW Y4, Y4, Y4")
		emit("\tVPERMQ $0x08, Y4, Y4")
		emit("\tVCVTPH2PS X4, Y4")
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
