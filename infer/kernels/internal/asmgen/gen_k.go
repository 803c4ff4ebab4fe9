package main

import "fmt"

// prologue loads the arguments every raw-block kernel shares:
// (w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs, acc *float32).
// SI and R14 address rows 0 and 4, DX is the row stride and BX three
// strides; CX counts blocks, DI walks the activations, R11 their scales,
// R12 their block sums; Y15 holds the accumulators.
func prologue(name, doc string) {
	emit("")
	emit("// func %s(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs unsafe.Pointer, acc *float32)", name)
	emit("//")
	emit("// %s", doc)
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
	// The prefetch pointer sweeps the 8-row group two groups ahead (rows
	// are contiguous, so a group is one linear range).
	emit("\tMOVQ DX, AX")
	emit("\tSHLQ $4, AX")
	emit("\tADDQ SI, AX")
	emit("\tMOVQ AX, pf-8(SP)")
	emit("\tMOVQ acc+48(FP), AX")
	emit("\tVMOVUPS (AX), Y15")
}

// linearPrefetch prefetches the next 8·blockBytes bytes of the group two
// groups ahead (decodePrefetch) and advances the pointer kept at pf-8(SP).
// It clobbers R13.
func linearPrefetch(blockBytes int) {
	n := 8 * blockBytes
	emit("\tMOVQ pf-8(SP), R13")
	for off := 0; off < n; off += 64 {
		emit("\t%s %d(R13)", decodePrefetch, off)
	}
	emit("\tADDQ $%d, R13", n)
	emit("\tMOVQ R13, pf-8(SP)")
}

func epilogue(label string) {
	emit("%s:", label)
	emit("\tMOVQ acc+48(FP), AX")
	emit("\tVMOVUPS Y15, (AX)")
	emit("\tVZEROUPPER")
	emit("\tRET")
}

// sum4 leaves in a, per 128-bit half, the sums of the four dwords of that
// half of each of a, b, c, d (dword k of the half: vector k's sum) by
// unpacks and adds: the work of two levels of VPHADDD, which it replaces
// in the Q4_K and Q5_K kernels, AVX-512 and AVX2 (measured faster there on
// Zen 4: 1.2× and 1.07× the one-thread compute rate; the other
// kernels measured the same either way and keep REDUCE8); c and t are
// clobbered.
func sum4(a, b, c, d, t string) {
	emit("\tVPUNPCKLDQ %s, %s, %s", b, a, t)
	emit("\tVPUNPCKHDQ %s, %s, %s", b, a, a)
	emit("\tVPADDD %s, %s, %s", t, a, a)
	emit("\tVPUNPCKLDQ %s, %s, %s", d, c, t)
	emit("\tVPUNPCKHDQ %s, %s, %s", d, c, c)
	emit("\tVPADDD %s, %s, %s", t, c, c)
	emit("\tVPUNPCKLQDQ %s, %s, %s", c, a, t)
	emit("\tVPUNPCKHQDQ %s, %s, %s", c, a, a)
	emit("\tVPADDD %s, %s, %s", t, a, a)
}

// reduce8 is the REDUCE8 macro (row r's total in dword r of Y1, from the
// eight dwords of each of Y0..Y7) with sum4 in place of the VPHADDD
// levels; it clobbers Y0, Y2..Y7 and t (outside Y0..Y7).
func reduce8(t string) {
	sum4("Y0", "Y1", "Y2", "Y3", t)
	sum4("Y4", "Y5", "Y6", "Y7", "Y1")
	emit("\tVPERM2I128 $0x20, Y4, Y0, Y1")
	emit("\tVPERM2I128 $0x31, Y4, Y0, Y2")
	emit("\tVPADDD Y2, Y1, Y1")
}

func zero8() {
	for i := 0; i < 8; i++ {
		emit("\tVPXOR Y%d, Y%d, Y%d", i, i, i)
	}
}

// packScales loads the f16 at byte disp of each row's current block into
// word r of x, by scalar loads packed in R8 (rows 0-3) and R10 (rows 4-7)
// with R9 as scratch: on Zen 4 this measured faster than VPGATHERDD, whose
// cost is a quarter of the one-token Q8_0 kernel's. Clobbers R8-R10.
func packScales(disp int, x string) {
	for half, dst := range []string{"R8", "R10"} {
		for k := 0; k < 4; k++ {
			r := 4*half + k
			if k == 0 {
				emit("\tMOVWLZX %s, %s", row(r, disp), dst)
				continue
			}
			emit("\tMOVWLZX %s, R9", row(r, disp))
			emit("\tSHLQ $%d, R9", 16*k)
			emit("\tORQ R9, %s", dst)
		}
	}
	emit("\tVMOVQ R8, %s", x)
	emit("\tVPINSRQ $1, R10, %s, %s", x, x)
}

// gatherScales loads the 32 bits at byte disp of each row's current block
// into Y2 (idx is reloaded into Y11).
func gatherScales(disp int) {
	emit("\tMOVQ idx+8(FP), AX")
	emit("\tVMOVDQU (AX), Y11")
	emit("\tKXNORB K1, K1, K1")
	emit("\tVPGATHERDD %d(SI)(Y11*1), K1, Y2", disp)
}

// genQ4K writes the Q4_K raw-block kernel. Per super-block and row: the
// eight 6-bit scales and mins are unpacked in general registers (ggml's
// get_scale_min_k4, four words at a time); each 32-group's Σu·a is a VNNI
// dot (lanes 4 bytes each) reduced so that lane g holds group g; lane-wise
// scales and mins times the activations' group sums give two vectors per
// row, reduced across rows into S and M (lane = row).
func genQ4K(five bool) {
	name, lbl, bb, qsOff := "q4_KDot8AVX512", "q4k", 144, 16
	if five {
		name, lbl, bb, qsOff = "q5_KDot8AVX512", "q5k", 176, 48
	}
	prologue(name, name[:4]+" on raw blocks: p = (dw·da)·float32(S) − (dmin·da)·float32(M); acc = acc + p.")
	emit("\tMOVL $0x0f0f0f0f, R8")
	emit("\tVPBROADCASTD R8, Y13")
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", lbl)
	emit("%sloop:", lbl)
	linearPrefetch(bb)
	emit("\tMOVL $0x00010001, R8")
	emit("\tVPBROADCASTD R8, Y12")
	emit("\tVPMADDWD (R12), Y12, Y14") // Σa per group of 32
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
		emit("\tORL R13, AX")          // scales 4..7
		emit("\tANDL $0x3f3f3f3f, R8") // scales 0..3
		emit("\tMOVL R10, R13")
		emit("\tSHRL $4, R13")
		emit("\tANDL $0x0f0f0f0f, R13")
		emit("\tMOVL R9, R10")
		emit("\tSHRL $6, R10")
		emit("\tANDL $0x03030303, R10")
		emit("\tSHLL $4, R10")
		emit("\tORL R10, R13")         // mins 4..7
		emit("\tANDL $0x3f3f3f3f, R9") // mins 0..3
		emit("\tSHLQ $32, AX")
		emit("\tORQ AX, R8")
		emit("\tSHLQ $32, R13")
		emit("\tORQ R13, R9")
		emit("\tVMOVQ R8, X8")
		emit("\tVPMOVZXBD X8, Y8")
		emit("\tVMOVQ R9, X9")
		emit("\tVPMOVZXBD X9, Y9")
		zero8()
		if five {
			emit("\tVMOVDQU %s, Y12", row(r, 16)) // the fifth bits
		}
		for c := 0; c < 4; c++ {
			emit("\tVMOVDQU %s, Y10", row(r, qsOff+32*c))
			emit("\tVPANDD Y13, Y10, Y11")
			if five {
				emit("\tVPTESTMB bit5<>+%d(SB), Y12, K2", 32*(2*c))
				emit("\tVPADDB c10<>(SB), Y11, K2, Y11")
			}
			emit("\tVPDPBUSD %d(DI), Y11, Y%d", 64*c, 2*c)
			emit("\tVPSRLW $4, Y10, Y10")
			emit("\tVPANDD Y13, Y10, Y10")
			if five {
				emit("\tVPTESTMB bit5<>+%d(SB), Y12, K3", 32*(2*c+1))
				emit("\tVPADDB c10<>(SB), Y10, K3, Y10")
			}
			emit("\tVPDPBUSD %d(DI), Y10, Y%d", 64*c+32, 2*c+1)
		}
		reduce8("Y10")
		emit("\tVPMULLD Y8, Y1, Y1")
		emit("\tVMOVDQA64 Y1, Y%d", 16+r)
		emit("\tVPMULLD Y9, Y14, Y10")
		emit("\tVMOVDQA64 Y10, Y%d", 24+r)
	}
	for r := 0; r < 8; r++ {
		emit("\tVMOVDQA64 Y%d, Y%d", 16+r, r)
	}
	reduce8("Y10")
	emit("\tVMOVDQA64 Y1, Y16")
	for r := 0; r < 8; r++ {
		emit("\tVMOVDQA64 Y%d, Y%d", 24+r, r)
	}
	reduce8("Y10")      // Y1 = M
	packScales(0, "X3") // d
	packScales(2, "X4") // dmin
	emit("\tVCVTPH2PS X3, Y3")
	emit("\tVCVTPH2PS X4, Y4")
	emit("\tVBROADCASTSS (R11), Y5")
	emit("\tVMULPS Y5, Y3, Y3")
	emit("\tVCVTDQ2PS Y16, Y6")
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

// genQ6K writes the Q6_K raw-block kernel. Per super-block and row the 6-bit
// values are rebuilt from ql/qh with shifts, masks and a ternary-logic merge
// (gfni: GF(2) affine byte transforms in place of the shift-and-mask
// pairs, q6_KDot8GFNI), dotted with the activations (VNNI), summed per
// group of 16 (two levels of horizontal adds leave groups in the order
// 0,2,4,6,1,3,5,7 | 8,10,...), less 32·Σa of each group (computed once per
// super-block for all rows), multiplied by the signed scales permuted to
// match and summed: Σ sc·(Σ q·a − 32·Σa), an exact integer either way.
func genQ6K(gfni bool) {
	name, lbl := "q6_KDot8AVX512", "q6k"
	if gfni {
		name, lbl = "q6_KDot8GFNI", "q6kg"
	}
	prologue(name, "Q6_K on raw blocks: isum = Σ_h sc_h·Σ (q−32)·a; p = (d·da)·float32(isum); acc = acc + p.")
	emit("\tMOVL $0x0f0f0f0f, R8")
	emit("\tVPBROADCASTD R8, Y13")
	emit("\tMOVL $0x30303030, R8")
	emit("\tVPBROADCASTD R8, Y12")
	// permutation [0,2,4,6,1,3,5,7] for VPERMD
	emit("\tMOVQ $0x0000000600000004, R8")
	emit("\tVMOVQ R8, X28")
	emit("\tMOVQ $0x0000000200000000, R8")
	emit("\tVMOVQ R8, X29")
	emit("\tVPUNPCKLQDQ X28, X29, X28") // [0,2,4,6]
	emit("\tMOVL $1, R8")
	emit("\tVPBROADCASTD R8, X29")
	emit("\tVPADDD X29, X28, X29") // [1,3,5,7]
	emit("\tVINSERTI32X4 $1, X29, Y28, Y28")
	if gfni {
		// GF(2) bit matrices for VGF2P8AFFINEQB: output bit i of a byte is
		// the parity of (matrix byte 7−i) & input byte. Y27: bits 0,1 to
		// 4,5; Y29: bits 2,3 to 4,5; Y31: bits 4..7 to 0..3 (x>>4 within
		// the byte). The other output bits are 0.
		emit("\tMOVQ $0x0000000001020000, R8")
		emit("\tVPBROADCASTQ R8, Y27")
		emit("\tMOVQ $0x0000000004080000, R8")
		emit("\tVPBROADCASTQ R8, Y29")
		emit("\tMOVQ $0x1020408000000000, R8")
		emit("\tVPBROADCASTQ R8, Y31")
	}
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", lbl)
	emit("%sloop:", lbl)
	linearPrefetch(210)
	// 32·Σa per group of 16 as int32, in the order the per-row group sums
	// take below (0,2,4,6,1,3,5,7 | 8,10,...): each row subtracts them from
	// its group sums before the scales multiply, Σ sc·(Σ q·a − 32·Σa).
	emit("\tVPMOVSXWD (R12), Y14")
	emit("\tVPMOVSXWD 16(R12), Y26")
	emit("\tVPSLLD $5, Y14, Y14")
	emit("\tVPSLLD $5, Y26, Y26")
	emit("\tVPERMD Y14, Y28, Y14")
	emit("\tVPERMD Y26, Y28, Y26")
	for r := 0; r < 8; r++ {
		zero8()
		for h := 0; h < 2; h++ {
			emit("\tVMOVDQU %s, Y8", row(r, 64*h))
			emit("\tVMOVDQU %s, Y9", row(r, 64*h+32))
			emit("\tVMOVDQU %s, Y10", row(r, 128+32*h))
			if gfni {
				// v0 = (A & 0F) | ((H bits 0,1) << 4)
				emit("\tVGF2P8AFFINEQB $0, Y27, Y10, Y11")
				emit("\tVPTERNLOGD $0xF8, Y13, Y8, Y11") // Y11 = Y11 | (Y8 & Y13)
				emit("\tVPDPBUSD %d(DI), Y11, Y%d", 128*h, 4*h)
				// v1 = (B & 0F) | ((H bits 2,3) << 2)
				emit("\tVGF2P8AFFINEQB $0, Y29, Y10, Y11")
				emit("\tVPTERNLOGD $0xF8, Y13, Y9, Y11")
				emit("\tVPDPBUSD %d(DI), Y11, Y%d", 128*h+32, 4*h+1)
				// v2 = (A >> 4 within the byte) | (H & 30)
				emit("\tVGF2P8AFFINEQB $0, Y31, Y8, Y11")
				emit("\tVPTERNLOGD $0xF8, Y12, Y10, Y11")
				emit("\tVPDPBUSD %d(DI), Y11, Y%d", 128*h+64, 4*h+2)
				// v3 = (B >> 4 within the byte) | ((H>>2) & 30)
				emit("\tVGF2P8AFFINEQB $0, Y31, Y9, Y11")
				emit("\tVPSRLW $2, Y10, Y10")
				emit("\tVPTERNLOGD $0xF8, Y12, Y10, Y11")
				emit("\tVPDPBUSD %d(DI), Y11, Y%d", 128*h+96, 4*h+3)
				continue
			}
			// v0 = (A & 0F) | ((H<<4) & 30)
			emit("\tVPSLLW $4, Y10, Y11")
			emit("\tVPANDD Y12, Y11, Y11")
			emit("\tVPTERNLOGD $0xF8, Y13, Y8, Y11") // Y11 = Y11 | (Y8 & Y13)
			emit("\tVPDPBUSD %d(DI), Y11, Y%d", 128*h, 4*h)
			// v1 = (B & 0F) | ((H<<2) & 30)
			emit("\tVPSLLW $2, Y10, Y11")
			emit("\tVPANDD Y12, Y11, Y11")
			emit("\tVPTERNLOGD $0xF8, Y13, Y9, Y11")
			emit("\tVPDPBUSD %d(DI), Y11, Y%d", 128*h+32, 4*h+1)
			// v2 = ((A>>4) & 0F) | (H & 30)
			emit("\tVPSRLW $4, Y8, Y8")
			emit("\tVPANDD Y12, Y10, Y11")
			emit("\tVPTERNLOGD $0xF8, Y13, Y8, Y11")
			emit("\tVPDPBUSD %d(DI), Y11, Y%d", 128*h+64, 4*h+2)
			// v3 = ((B>>4) & 0F) | ((H>>2) & 30)
			emit("\tVPSRLW $4, Y9, Y9")
			emit("\tVPSRLW $2, Y10, Y11")
			emit("\tVPANDD Y12, Y11, Y11")
			emit("\tVPTERNLOGD $0xF8, Y13, Y9, Y11")
			emit("\tVPDPBUSD %d(DI), Y11, Y%d", 128*h+96, 4*h+3)
		}
		emit("\tVPHADDD Y1, Y0, Y0")
		emit("\tVPHADDD Y3, Y2, Y2")
		emit("\tVPHADDD Y5, Y4, Y4")
		emit("\tVPHADDD Y7, Y6, Y6")
		emit("\tVPHADDD Y2, Y0, Y0")
		emit("\tVPHADDD Y6, Y4, Y4")
		emit("\tVPSUBD Y14, Y0, Y0")
		emit("\tVPSUBD Y26, Y4, Y4")
		emit("\tVPMOVSXBD %s, Y24", row(r, 192))
		emit("\tVPERMD Y24, Y28, Y24")
		emit("\tVPMOVSXBD %s, Y25", row(r, 200))
		emit("\tVPERMD Y25, Y28, Y25")
		emit("\tVPMULLD Y24, Y0, Y0")
		emit("\tVPMULLD Y25, Y4, Y4")
		emit("\tVPADDD Y4, Y0, Y0")
		emit("\tVMOVDQA64 Y0, Y%d", 16+r)
	}
	for r := 0; r < 8; r++ {
		emit("\tVMOVDQA64 Y%d, Y%d", 16+r, r)
	}
	emit("\tREDUCE8")
	packScales(208, "X3")
	emit("\tVCVTPH2PS X3, Y3")
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

var _ = fmt.Sprint
