package main

// legacy describes a 32-element block format with 4-bit (plus an optional
// fifth bit) values.
type legacy struct {
	name       string
	blockBytes int
	mOff       int // offset of the f16 min (Q4_1, Q5_1), or -1
	qhOff      int // offset of the 32 fifth bits (Q5_0, Q5_1), or -1
	qsOff      int // offset of the 16 nibble bytes
	biasShift  int // the value is u − (1<<biasShift); 0 for none
}

var legacies = []legacy{
	{"q4_0Dot8AVX512", 18, -1, -1, 2, 3},
	{"q4_1Dot8AVX512", 20, 2, -1, 4, 0},
	{"q5_0Dot8AVX512", 22, -1, 2, 6, 4},
	{"q5_1Dot8AVX512", 24, 2, 4, 8, 0},
}

// genLegacy writes a raw-block kernel for a nibble format: each row's 32
// unsigned values are rebuilt in a register (low nibbles are elements
// 0-15, high nibbles 16-31, the fifth bits added under a mask), dotted with
// the signed activations by VNNI, reduced so that lane r is row r, and
// corrected by the offset times the activations' block sum. Types with a
// min get the Q8_1 activations' s in the bs argument.
func genLegacy(l legacy) {
	doc := "p = (dw·da)·float32(isum); acc = acc + p (isum = Σ u·a − offset·Σa)."
	if l.mOff >= 0 {
		doc = "p = (dw·da)·float32(Σ u·a); p = p + mw·sa; acc = acc + p (bs carries sa)."
	}
	prologue(l.name, l.name[:4]+" on raw blocks: "+doc)
	emit("\tMOVL $0x0f0f0f0f, R8")
	emit("\tVPBROADCASTD R8, Y13")
	emit("\tMOVL $0x10101010, R8")
	emit("\tVPBROADCASTD R8, Y12")
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", l.name)
	emit("%sloop:", l.name)
	linearPrefetch(l.blockBytes)
	for r := 0; r < 8; r++ {
		emit("\tVMOVDQU %s, X10", row(r, l.qsOff))
		emit("\tVPSRLW $4, X10, X11")
		emit("\tVINSERTI128 $1, X11, Y10, Y10")
		emit("\tVPANDD Y13, Y10, Y%d", 16+r)
		if l.qhOff >= 0 {
			emit("\tKMOVD %s, K2", row(r, l.qhOff))
			emit("\tVPADDB Y12, Y%d, K2, Y%d", 16+r, 16+r)
		}
	}
	emit("\tVMOVDQU (DI), Y14")
	zero8()
	for r := 0; r < 8; r++ {
		emit("\tVPDPBUSD Y14, Y%d, Y%d", 16+r, r)
	}
	emit("\tREDUCE8")
	if l.biasShift > 0 {
		emit("\tVPBROADCASTD (R12), Y2")
		emit("\tVPSLLD $%d, Y2, Y2", l.biasShift)
		emit("\tVPSUBD Y2, Y1, Y1")
	}
	emit("\tVCVTDQ2PS Y1, Y1")
	if l.mOff >= 0 {
		gatherScales(0) // the scales and mins
		emit("\tVPMOVDW Y2, X3")
	} else {
		packScales(0, "X3")
	}
	emit("\tVCVTPH2PS X3, Y3")
	emit("\tVBROADCASTSS (R11), Y5")
	emit("\tVMULPS Y5, Y3, Y3")
	emit("\tVMULPS Y1, Y3, Y3")
	if l.mOff >= 0 {
		emit("\tVPSRLD $16, Y2, Y2")
		emit("\tVPMOVDW Y2, X4")
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
	emit("\tJNZ %sloop", l.name)
	epilogue(l.name + "done")
}
