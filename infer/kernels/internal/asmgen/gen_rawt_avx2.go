package main

import "fmt"

// kConstantsAVX2 are the 32-byte constants of the AVX2 multi-token
// kernels (VEX has no broadcast operands): ka0f<>, ka30<>, ka03<>, ka3f<>,
// kaff<> (the word mask 0x00ff00ff), kalo16<> (0x0000ffff) in every dword,
// and kselw<>+32s (s = 0..3), the VPSHUFB control that copies byte s of
// each dword to both of its words, zero-extended.
func kConstantsAVX2() string {
	s := ""
	for _, c := range []struct {
		name string
		v    uint32
	}{{"ka0f", 0x0f0f0f0f}, {"ka30", 0x30303030}, {"ka03", 0x03030303}, {"ka3f", 0x3f3f3f3f}, {"kaff", 0x00ff00ff}, {"kalo16", 0x0000ffff}} {
		for w := 0; w < 8; w++ {
			s += fmt.Sprintf("DATA %s<>+%d(SB)/4, $0x%08x\n", c.name, 4*w, c.v)
		}
		s += fmt.Sprintf("GLOBL %s<>(SB), RODATA|NOPTR, $32\n", c.name)
	}
	for b := 0; b < 4; b++ {
		for w := 0; w < 8; w++ {
			v := 4*(w%4) + b
			s += fmt.Sprintf("DATA kselw<>+%d(SB)/4, $0x80%02x80%02x\n", 32*b+4*w, v, v)
		}
	}
	s += "GLOBL kselw<>(SB), RODATA|NOPTR, $128\n"
	return s
}

// transpose8x32AVX2 loads 32 bytes at disp of each of the 8 rows (row r
// into Yr) and transposes the 8×8 dwords so that Y(8+k) holds bytes
// 4k..4k+3 of row r in lane r. Clobbers Y0..Y15.
func transpose8x32AVX2(disp int) {
	for r := 0; r < 8; r++ {
		emit("\tVMOVDQU %s, Y%d", row(r, disp), r)
	}
	for p := 0; p < 4; p++ {
		emit("\tVPUNPCKLDQ Y%d, Y%d, Y%d", 2*p+1, 2*p, 8+2*p)
		emit("\tVPUNPCKHDQ Y%d, Y%d, Y%d", 2*p+1, 2*p, 9+2*p)
	}
	for h := 0; h < 2; h++ {
		t0 := 8 + 4*h
		emit("\tVPUNPCKLQDQ Y%d, Y%d, Y%d", t0+2, t0, 4*h)
		emit("\tVPUNPCKHQDQ Y%d, Y%d, Y%d", t0+2, t0, 4*h+1)
		emit("\tVPUNPCKLQDQ Y%d, Y%d, Y%d", t0+3, t0+1, 4*h+2)
		emit("\tVPUNPCKHQDQ Y%d, Y%d, Y%d", t0+3, t0+1, 4*h+3)
	}
	for i := 0; i < 4; i++ {
		emit("\tVPERM2I128 $0x20, Y%d, Y%d, Y%d", 4+i, i, 8+i)
		emit("\tVPERM2I128 $0x31, Y%d, Y%d, Y%d", 4+i, i, 12+i)
	}
}

// genQ4_KRawTAVX2 writes the AVX2 Q4_K multi-token raw-block kernel for an
// 8-row group and nt tokens (the arguments of genQ4_KRawT, with idx
// *[8]int32 and acc nt×8 floats). Per super-block: the rows' scales are
// gathered and unpacked lane-wise (as genQ4_KRawT); each 32-byte chunk j
// of quants is transposed in registers (Y(8+k) lane r = bytes 4k..4k+3 of
// row r) and split into low nibbles (group 2j, kept in registers) and high
// nibbles (group 2j+1, kept in the frame). Per token and group, VPMADDUBSW
// of the nibbles with broadcast activation bytes gives int16 pair sums
// that add up, over the group's 8 vectors, to sums of 16 products of at
// most 15·128, so they cannot overflow (16·15·128 = 30720); VPMADDWD by the
// row's scale in both words then gives sc_g·D_g in int32, added to isum.
// Then msum = Σ_g min_g·s_g (VPMADDWD of min pairs with the activation
// sums prepRawTK lays out), and per token, as in dotK: p = (dw·da)·
// float32(isum); p = p − (dmin·da)·float32(msum); acc = acc + p.
//
// Frame: the high nibbles at 0..255, the scale vectors SCa, SCb at 256 and
// 288, isum per token at 320+32t.
func genQ4_KRawTAVX2(nt int) {
	name := fmt.Sprintf("q4_KRaw8x%dAVX2", nt)
	emit("")
	emit("// func %s(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)", name)
	rawT8Start(name, 576, "ms", 144)
	// SCa = S0 & 3f; SCb = (S2 & 0f) | ((S0 >> 6) & 3) << 4.
	emit("\tVMOVDQU (R9), Y15")
	emit("\tVPCMPEQD Y14, Y14, Y14")
	emit("\tVPGATHERDD Y14, 4(SI)(Y15*1), Y0")
	emit("\tVPCMPEQD Y14, Y14, Y14")
	emit("\tVPGATHERDD Y14, 12(SI)(Y15*1), Y1")
	emit("\tVPSRLD $6, Y0, Y2")
	emit("\tVPAND ka03<>(SB), Y2, Y2")
	emit("\tVPSLLD $4, Y2, Y2")
	emit("\tVPAND ka0f<>(SB), Y1, Y1")
	emit("\tVPOR Y2, Y1, Y1")
	emit("\tVMOVDQU Y1, 288(SP)")
	emit("\tVPAND ka3f<>(SB), Y0, Y0")
	emit("\tVMOVDQU Y0, 256(SP)")
	emit("\tVPXOR Y0, Y0, Y0")
	for t := 0; t < nt; t++ {
		emit("\tVMOVDQU Y0, %d(SP)", 320+32*t)
	}
	for j := 0; j < 4; j++ {
		transpose8x32AVX2(16 + 32*j)
		emit("\tVMOVDQU ka0f<>(SB), Y0")
		for k := 0; k < 8; k++ {
			emit("\tVPSRLW $4, Y%d, Y1", 8+k)
			emit("\tVPAND Y0, Y1, Y1")
			emit("\tVMOVDQU Y1, %d(SP)", 32*k)
			emit("\tVPAND Y0, Y%d, Y%d", 8+k, 8+k)
		}
		for half := 0; half < 2; half++ {
			g := 2*j + half
			if half == 1 {
				for k := 0; k < 8; k++ {
					emit("\tVMOVDQU %d(SP), Y%d", 32*k, 8+k)
				}
			}
			emit("\tVMOVDQU %d(SP), Y5", 256+32*(g/4))
			emit("\tVPSHUFB kselw<>+%d(SB), Y5, Y5", 32*(g%4))
			for t := 0; t < nt; t++ {
				emit("\tVPXOR Y2, Y2, Y2")
				for k := 0; k < 8; k++ {
					emit("\tVPBROADCASTD %d(DI), Y3", 256*t+64*j+32*half+4*k)
					emit("\tVPMADDUBSW Y3, Y%d, Y4", 8+k)
					emit("\tVPADDW Y4, Y2, Y2")
				}
				emit("\tVPMADDWD Y5, Y2, Y2")
				emit("\tVPADDD %d(SP), Y2, Y2", 320+32*t)
				emit("\tVMOVDQU Y2, %d(SP)", 320+32*t)
			}
		}
	}
	// MNa = S1 & 3f (Y0); MNb = ((S2 >> 4) & 0f) | ((S1 >> 6) & 3) << 4 (Y1);
	// min pairs Y8 = (m0, m2), Y9 = (m1, m3), Y10 = (m4, m6), Y11 = (m5, m7).
	emit("\tVMOVDQU (R9), Y15")
	emit("\tVPCMPEQD Y14, Y14, Y14")
	emit("\tVPGATHERDD Y14, 8(SI)(Y15*1), Y0")
	emit("\tVPCMPEQD Y14, Y14, Y14")
	emit("\tVPGATHERDD Y14, 12(SI)(Y15*1), Y1")
	emit("\tVPCMPEQD Y14, Y14, Y14")
	emit("\tVPGATHERDD Y14, (SI)(Y15*1), Y2")
	emit("\tVPSRLD $4, Y1, Y1")
	emit("\tVPAND ka0f<>(SB), Y1, Y1")
	emit("\tVPSRLD $6, Y0, Y3")
	emit("\tVPAND ka03<>(SB), Y3, Y3")
	emit("\tVPSLLD $4, Y3, Y3")
	emit("\tVPOR Y3, Y1, Y1")
	emit("\tVPAND ka3f<>(SB), Y0, Y0")
	emit("\tVPAND kaff<>(SB), Y0, Y8")
	emit("\tVPSRLD $8, Y0, Y9")
	emit("\tVPAND kaff<>(SB), Y9, Y9")
	emit("\tVPAND kaff<>(SB), Y1, Y10")
	emit("\tVPSRLD $8, Y1, Y11")
	emit("\tVPAND kaff<>(SB), Y11, Y11")
	// dw (Y12) and dmin (Y13).
	emit("\tVPAND kalo16<>(SB), Y2, Y3")
	emit("\tVPACKUSDW Y3, Y3, Y3")
	emit("\tVPERMQ $0x08, Y3, Y3")
	emit("\tVCVTPH2PS X3, Y12")
	emit("\tVPSRLD $16, Y2, Y4")
	emit("\tVPACKUSDW Y4, Y4, Y4")
	emit("\tVPERMQ $0x08, Y4, Y4")
	emit("\tVCVTPH2PS X4, Y13")
	for t := 0; t < nt; t++ {
		for p := 0; p < 4; p++ {
			emit("\tVPBROADCASTD %d(R13), Y0", 32*t+4*p)
			if p == 0 {
				emit("\tVPMADDWD Y0, Y8, Y1")
			} else {
				emit("\tVPMADDWD Y0, Y%d, Y0", 8+p)
				emit("\tVPADDD Y0, Y1, Y1")
			}
		}
		emit("\tVBROADCASTSS %d(R11), Y0", 4*t)
		emit("\tVMULPS Y0, Y12, Y2")
		emit("\tVCVTDQ2PS %d(SP), Y3", 320+32*t)
		emit("\tVMULPS Y3, Y2, Y2")
		emit("\tVMULPS Y0, Y13, Y4")
		emit("\tVCVTDQ2PS Y1, Y1")
		emit("\tVMULPS Y1, Y4, Y4")
		emit("\tVSUBPS Y4, Y2, Y2")
		emit("\tVADDPS %d(R8), Y2, Y2", 32*t)
		emit("\tVMOVUPS Y2, %d(R8)", 32*t)
	}
	emit("\tADDQ $144, SI")
	emit("\tADDQ $144, R14")
	emit("\tADDQ $%d, DI", 256*nt)
	emit("\tADDQ $%d, R11", 4*nt)
	emit("\tADDQ $%d, R13", 32*nt)
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	emit("%sdone:", name)
	emit("\tVZEROUPPER")
	emit("\tRET")
}

// kConstantsQ5AVX2 are the 32-byte constants of the AVX2 Q5_0 kernel:
// kaqsel<>+32s (s = 0..3), the VPSHUFB control that copies byte s of each
// dword to all four of its bytes; kaqbits<> the byte masks 1<<(b mod 8)
// of bits 0..3 (first 32 bytes) and 4..7 (next 32) of a fifth-bit byte;
// ka10<> 0x10 in every byte; kaone<> the int16 1s.
func kConstantsQ5AVX2() string {
	s := ""
	for b := 0; b < 4; b++ {
		for w := 0; w < 8; w++ {
			v := 4*(w%4) + b
			s += fmt.Sprintf("DATA kaqsel<>+%d(SB)/4, $0x%02x%02x%02x%02x\n", 32*b+4*w, v, v, v, v)
		}
	}
	s += "GLOBL kaqsel<>(SB), RODATA|NOPTR, $128\n"
	for w := 0; w < 16; w++ {
		v := uint32(0x08040201)
		if w >= 8 {
			v = 0x80402010
		}
		s += fmt.Sprintf("DATA kaqbits<>+%d(SB)/4, $0x%08x\n", 4*w, v)
	}
	s += "GLOBL kaqbits<>(SB), RODATA|NOPTR, $64\n"
	for _, c := range []struct {
		name string
		v    uint32
	}{{"ka10", 0x10101010}, {"kaone", 0x00010001}} {
		for w := 0; w < 8; w++ {
			s += fmt.Sprintf("DATA %s<>+%d(SB)/4, $0x%08x\n", c.name, 4*w, c.v)
		}
		s += fmt.Sprintf("GLOBL %s<>(SB), RODATA|NOPTR, $32\n", c.name)
	}
	return s
}

// genQ5_0RawTAVX2 writes the AVX2 Q5_0 multi-token raw-block kernel for an
// 8-row group and nt tokens (the arguments of genQ5_0RawT, with idx
// *[8]int32 and acc nt×8 floats). Per block: the rows' 16 quant bytes are
// transposed in registers (Y_k lane r = bytes 4k..4k+3 of row r, row r in
// 128-bit lane r/4), split into low nibbles (values 4k..) and high nibbles
// (values 16+4k..), and each value's fifth bit (the gathered qh, copied to
// its value's byte by VPSHUFB, masked and compared) adds 16: V holds the
// unsigned values q+16 ≤ 31, 8 vectors. Per token, VPMADDUBSW of V with
// broadcast activation bytes gives int16 pair sums; four of them add up to
// sums of 8 products of at most 31·128 (31744: no saturation), which
// VPMADDWD by 1s widens; as in dotLegacy: isum = −16·Σa + Σ(q+16)·a;
// p = (dw·da)·float32(isum); acc = acc + p (acc in memory).
func genQ5_0RawTAVX2(nt int) {
	name := fmt.Sprintf("q5_0Raw8x%dAVX2", nt)
	emit("")
	emit("// func %s(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)", name)
	rawT8Start(name, 0, "nc", 22)
	// Y0..Y3: rows i | i+4, transposed within each 128-bit lane (Y4..Y7
	// scratch) into Y0..Y3 = bytes 4k.. of every row.
	for i := 0; i < 4; i++ {
		emit("\tVMOVDQU %s, X%d", row(i, 6), i)
		emit("\tVINSERTI128 $1, %s, Y%d, Y%d", row(i+4, 6), i, i)
	}
	emit("\tVPUNPCKLDQ Y1, Y0, Y4")
	emit("\tVPUNPCKHDQ Y1, Y0, Y5")
	emit("\tVPUNPCKLDQ Y3, Y2, Y6")
	emit("\tVPUNPCKHDQ Y3, Y2, Y7")
	emit("\tVPUNPCKLQDQ Y6, Y4, Y0")
	emit("\tVPUNPCKHQDQ Y6, Y4, Y1")
	emit("\tVPUNPCKLQDQ Y7, Y5, Y2")
	emit("\tVPUNPCKHQDQ Y7, Y5, Y3")
	// Fifth bits (Y4) and dw (Y6).
	emit("\tVMOVDQU (R9), Y7")
	emit("\tVPCMPEQD Y5, Y5, Y5")
	emit("\tVPGATHERDD Y5, 2(SI)(Y7*1), Y4")
	gatherScales8()
	for k := 0; k < 4; k++ {
		for half := 0; half < 2; half++ {
			v := 8 + k + 4*half
			if half == 0 {
				emit("\tVPAND ka0f<>(SB), Y%d, Y%d", k, v)
			} else {
				emit("\tVPSRLW $4, Y%d, Y%d", k, v)
				emit("\tVPAND ka0f<>(SB), Y%d, Y%d", v, v)
			}
			emit("\tVPSHUFB kaqsel<>+%d(SB), Y4, Y5", 32*(2*half+k/2))
			emit("\tVPAND kaqbits<>+%d(SB), Y5, Y5", 32*(k%2))
			emit("\tVPCMPEQB kaqbits<>+%d(SB), Y5, Y5", 32*(k%2))
			emit("\tVPAND ka10<>(SB), Y5, Y5")
			emit("\tVPOR Y5, Y%d, Y%d", v, v)
		}
	}
	emit("\tVMOVDQU kaone<>(SB), Y7")
	for t := 0; t < nt; t++ {
		emit("\tVPBROADCASTD %d(R13), Y1", 4*t)
		for half := 0; half < 2; half++ {
			emit("\tVPXOR Y2, Y2, Y2")
			for k := 0; k < 4; k++ {
				emit("\tVPBROADCASTD %d(DI), Y3", 32*t+16*half+4*k)
				emit("\tVPMADDUBSW Y3, Y%d, Y4", 8+k+4*half)
				emit("\tVPADDW Y4, Y2, Y2")
			}
			emit("\tVPMADDWD Y7, Y2, Y2")
			emit("\tVPADDD Y2, Y1, Y1")
		}
		legacyTokenStep(t, 1)
	}
	emit("\tADDQ $22, SI")
	emit("\tADDQ $22, R14")
	emit("\tADDQ $%d, DI", 32*nt)
	emit("\tADDQ $%d, R11", 4*nt)
	emit("\tADDQ $%d, R13", 4*nt)
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	emit("%sdone:", name)
	emit("\tVZEROUPPER")
	emit("\tRET")
}

// transpose8x16AVX2 loads 16 bytes at disp of each of the 8 rows into
// Y(dst+i), i < 4 (low 128-bit lane row i, high lane row i+4), and
// transposes each lane's 4×4 dwords so that Y(dst+k) holds bytes
// 4k..4k+3 of row r in lane r. Y(tmp)..Y(tmp+3) are scratch.
func transpose8x16AVX2(disp, dst, tmp int) {
	for i := 0; i < 4; i++ {
		emit("\tVMOVDQU %s, X%d", row(i, disp), dst+i)
		emit("\tVINSERTI128 $1, %s, Y%d, Y%d", row(i+4, disp), dst+i, dst+i)
	}
	emit("\tVPUNPCKLDQ Y%d, Y%d, Y%d", dst+1, dst, tmp)
	emit("\tVPUNPCKHDQ Y%d, Y%d, Y%d", dst+1, dst, tmp+1)
	emit("\tVPUNPCKLDQ Y%d, Y%d, Y%d", dst+3, dst+2, tmp+2)
	emit("\tVPUNPCKHDQ Y%d, Y%d, Y%d", dst+3, dst+2, tmp+3)
	emit("\tVPUNPCKLQDQ Y%d, Y%d, Y%d", tmp+2, tmp, dst)
	emit("\tVPUNPCKHQDQ Y%d, Y%d, Y%d", tmp+2, tmp, dst+1)
	emit("\tVPUNPCKLQDQ Y%d, Y%d, Y%d", tmp+3, tmp+1, dst+2)
	emit("\tVPUNPCKHQDQ Y%d, Y%d, Y%d", tmp+3, tmp+1, dst+3)
}

// genQ6_KRawTAVX2 writes the AVX2 Q6_K multi-token raw-block kernel for an
// 8-row group and nt tokens (the arguments of genQ6_KRawT, with idx
// *[8]int32 and acc nt×8 floats). The layout work is genQ6_KRawT's on
// 8 rows: the scales transposed once per super-block (kept in the
// frame), and per 16-value range of each half, ql (A, then B) and qh (H)
// transposed and merged into the four groups' unsigned 6-bit values q ≤
// 63 (4 vectors per group). Per token and group, VPMADDUBSW of q with
// broadcast activation bytes gives int16 pair sums; two of them add to
// sums of 4 products of at most 63·128 (32256: no saturation), and
// VPMADDWD by the row's signed scale in both words gives sc_g·(that sum)
// in int32, added to isum. Then, as in genQ6_KRawT, isum = isum −
// 32·Σ_g sc_g·bs_g; p = (d·da)·float32(isum); acc = acc + p.
//
// Frame: the transposed scales S_k at 32k, isum per token at 128+32t.
func genQ6_KRawTAVX2(nt int) {
	name := fmt.Sprintf("q6_KRaw8x%dAVX2", nt)
	isum := func(t int) string { return fmt.Sprintf("%d(SP)", 128+32*t) }
	emit("")
	emit("// func %s(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)", name)
	rawT8Start(name, 384, "ms", 210)
	transpose8x16AVX2(192, 0, 4)
	for k := 0; k < 4; k++ {
		emit("\tVMOVDQU Y%d, %d(SP)", k, 32*k)
	}
	emit("\tVPXOR Y0, Y0, Y0")
	for t := 0; t < nt; t++ {
		emit("\tVMOVDQU Y0, %s", isum(t))
	}
	// group emits one group's dots: val(k) builds value vector k into
	// Y(8+k) (Y12 scratch); activations at byte pos+4k of each token.
	group := func(g, pos int, val func(k int)) {
		for k := 0; k < 4; k++ {
			val(k)
		}
		emit("\tVMOVDQU %d(SP), Y15", 32*(g/4))
		emit("\tVPSHUFB kselw<>+%d(SB), Y15, Y15", 32*(g%4))
		emit("\tVPSLLW $8, Y15, Y15")
		emit("\tVPSRAW $8, Y15, Y15")
		for t := 0; t < nt; t++ {
			emit("\tVPBROADCASTD %d(DI), Y13", 256*t+pos)
			emit("\tVPMADDUBSW Y13, Y8, Y12")
			emit("\tVPBROADCASTD %d(DI), Y14", 256*t+pos+4)
			emit("\tVPMADDUBSW Y14, Y9, Y14")
			emit("\tVPADDW Y14, Y12, Y12")
			emit("\tVPMADDWD Y15, Y12, Y12")
			emit("\tVPBROADCASTD %d(DI), Y13", 256*t+pos+8)
			emit("\tVPMADDUBSW Y13, Y10, Y13")
			emit("\tVPBROADCASTD %d(DI), Y14", 256*t+pos+12)
			emit("\tVPMADDUBSW Y14, Y11, Y14")
			emit("\tVPADDW Y14, Y13, Y13")
			emit("\tVPMADDWD Y15, Y13, Y13")
			emit("\tVPADDD Y13, Y12, Y12")
			emit("\tVPADDD %s, Y12, Y12", isum(t))
			emit("\tVMOVDQU Y12, %s", isum(t))
		}
	}
	for n := 0; n < 2; n++ {
		for i := 0; i < 2; i++ {
			transpose8x16AVX2(64*n+16*i, 0, 8)     // A
			transpose8x16AVX2(128+32*n+16*i, 4, 8) // H
			group(8*n+i, 128*n+16*i, func(k int) { // (A & 0f) | ((H << 4) & 30)
				emit("\tVPSLLW $4, Y%d, Y%d", 4+k, 8+k)
				emit("\tVPAND ka30<>(SB), Y%d, Y%d", 8+k, 8+k)
				emit("\tVPAND ka0f<>(SB), Y%d, Y12", k)
				emit("\tVPOR Y12, Y%d, Y%d", 8+k, 8+k)
			})
			group(8*n+4+i, 128*n+64+16*i, func(k int) { // ((A >> 4) & 0f) | (H & 30)
				emit("\tVPSRLW $4, Y%d, Y12", k)
				emit("\tVPAND ka0f<>(SB), Y12, Y12")
				emit("\tVPAND ka30<>(SB), Y%d, Y%d", 4+k, 8+k)
				emit("\tVPOR Y12, Y%d, Y%d", 8+k, 8+k)
			})
			transpose8x16AVX2(64*n+32+16*i, 0, 8)       // B
			group(8*n+2+i, 128*n+32+16*i, func(k int) { // (B & 0f) | ((H << 2) & 30)
				emit("\tVPSLLW $2, Y%d, Y%d", 4+k, 8+k)
				emit("\tVPAND ka30<>(SB), Y%d, Y%d", 8+k, 8+k)
				emit("\tVPAND ka0f<>(SB), Y%d, Y12", k)
				emit("\tVPOR Y12, Y%d, Y%d", 8+k, 8+k)
			})
			group(8*n+6+i, 128*n+96+16*i, func(k int) { // ((B >> 4) & 0f) | ((H >> 2) & 30)
				emit("\tVPSRLW $2, Y%d, Y%d", 4+k, 8+k)
				emit("\tVPAND ka30<>(SB), Y%d, Y%d", 8+k, 8+k)
				emit("\tVPSRLW $4, Y%d, Y12", k)
				emit("\tVPAND ka0f<>(SB), Y12, Y12")
				emit("\tVPOR Y12, Y%d, Y%d", 8+k, 8+k)
			})
		}
	}
	// Scale pairs: Y(4+k) = (sc 4k, sc 4k+2), Y(k) = (sc 4k+1, sc 4k+3).
	for k := 0; k < 4; k++ {
		emit("\tVMOVDQU %d(SP), Y%d", 32*k, k)
		emit("\tVPSLLW $8, Y%d, Y%d", k, 4+k)
		emit("\tVPSRAW $8, Y%d, Y%d", 4+k, 4+k)
		emit("\tVPSRAW $8, Y%d, Y%d", k, k)
	}
	// d of the 8 rows (Y8): the high half of the dword at 206.
	emit("\tVMOVDQU (R9), Y9")
	emit("\tVPCMPEQD Y10, Y10, Y10")
	emit("\tVPGATHERDD Y10, 206(SI)(Y9*1), Y8")
	emit("\tVPSRLD $16, Y8, Y8")
	emit("\tVPACKUSDW Y8, Y8, Y8")
	emit("\tVPERMQ $0x08, Y8, Y8")
	emit("\tVCVTPH2PS X8, Y8")
	for t := 0; t < nt; t++ {
		emit("\tVPXOR Y12, Y12, Y12")
		for k := 0; k < 4; k++ {
			emit("\tVPBROADCASTD %d(R13), Y13", 32*t+8*k)
			emit("\tVPMADDWD Y13, Y%d, Y13", 4+k)
			emit("\tVPADDD Y13, Y12, Y12")
			emit("\tVPBROADCASTD %d(R13), Y13", 32*t+8*k+4)
			emit("\tVPMADDWD Y13, Y%d, Y13", k)
			emit("\tVPADDD Y13, Y12, Y12")
		}
		emit("\tVPSLLD $5, Y12, Y12")
		emit("\tVMOVDQU %s, Y13", isum(t))
		emit("\tVPSUBD Y12, Y13, Y13")
		emit("\tVCVTDQ2PS Y13, Y13")
		emit("\tVBROADCASTSS %d(R11), Y14", 4*t)
		emit("\tVMULPS Y14, Y8, Y14")
		emit("\tVMULPS Y13, Y14, Y14")
		emit("\tVADDPS %d(R8), Y14, Y14", 32*t)
		emit("\tVMOVUPS Y14, %d(R8)", 32*t)
	}
	emit("\tADDQ $210, SI")
	emit("\tADDQ $210, R14")
	emit("\tADDQ $%d, DI", 256*nt)
	emit("\tADDQ $%d, R11", 4*nt)
	emit("\tADDQ $%d, R13", 32*nt)
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	emit("%sdone:", name)
	emit("\tVZEROUPPER")
	emit("\tRET")
}

// genQ8_0RawTAVX2 writes the AVX2 Q8_0 multi-token raw-block kernel for an
// 8-row group and nt tokens (the arguments of genQ5_0RawTAVX2; nc is not
// read). Per block: the 8 rows' 32 quant bytes are transposed in registers
// (transpose8x32AVX2: vector k lane r = bytes 4k..4k+3 of row r), kept
// signed in the frame and as magnitudes in Y8..Y15. Per token and k: the
// broadcast activation bytes take the weights' signs (VPSIGNB), so that
// VPMADDUBSW of |w| (at most 128) with a·sgn(w) (|a| ≤ 127) gives int16
// pair sums w·a + w'·a' of at most 32512 (no saturation), which VPMADDWD by
// 1s widens; isum = Σ w·a exactly, and as in dotLegacy:
// p = (dw·da)·float32(isum); acc = acc + p (acc in memory).
func genQ8_0RawTAVX2(nt int) {
	name := fmt.Sprintf("q8_0Raw8x%dAVX2", nt)
	emit("")
	emit("// func %s(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)", name)
	rawT8Start(name, 256, "", 34)
	transpose8x32AVX2(2)
	for k := 0; k < 8; k++ {
		emit("\tVMOVDQU Y%d, w%d-%d(SP)", 8+k, k, 256-32*k)
		emit("\tVPABSB Y%d, Y%d", 8+k, 8+k)
	}
	// dw of the 8 rows (Y6), then the int16 1s (Y7).
	emit("\tVMOVDQU (R9), Y7")
	gatherScales8()
	emit("\tVMOVDQU kaone<>(SB), Y7")
	for t := 0; t < nt; t++ {
		for k := 0; k < 8; k++ {
			emit("\tVPBROADCASTD %d(DI), Y1", 32*t+4*k)
			emit("\tVPSIGNB w%d-%d(SP), Y1, Y1", k, 256-32*k)
			if k == 0 {
				emit("\tVPMADDUBSW Y1, Y8, Y0")
				emit("\tVPMADDWD Y7, Y0, Y0")
				continue
			}
			emit("\tVPMADDUBSW Y1, Y%d, Y2", 8+k)
			emit("\tVPMADDWD Y7, Y2, Y2")
			emit("\tVPADDD Y2, Y0, Y0")
		}
		legacyTokenStep(t, 0)
	}
	emit("\tADDQ $34, SI")
	emit("\tADDQ $34, R14")
	emit("\tADDQ $%d, DI", 32*nt)
	emit("\tADDQ $%d, R11", 4*nt)
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	emit("%sdone:", name)
	emit("\tVZEROUPPER")
	emit("\tRET")
}

// gatherScales8 gathers the f16 scales at the start of the current block
// of the 8 rows (offsets in Y7) and widens them into Y6 (Y5 is scratch).
func gatherScales8() {
	emit("\tVPCMPEQD Y5, Y5, Y5")
	emit("\tVPGATHERDD Y5, (SI)(Y7*1), Y6")
	emit("\tVPAND kalo16<>(SB), Y6, Y6")
	emit("\tVPACKUSDW Y6, Y6, Y6")
	emit("\tVPERMQ $0x08, Y6, Y6")
	emit("\tVCVTPH2PS X6, Y6")
}

// legacyTokenStep emits the float steps of token t of an AVX2 multi-token
// kernel of a 32-value block type, isum in Y(isum), dw in Y6, da at R11
// and acc at R8: p = (dw·da)·float32(isum); acc = acc + p.
func legacyTokenStep(t, isum int) {
	emit("\tVCVTDQ2PS Y%d, Y%d", isum, isum)
	emit("\tVBROADCASTSS %d(R11), Y3", 4*t)
	emit("\tVMULPS Y3, Y6, Y3")
	emit("\tVMULPS Y%d, Y3, Y3", isum)
	emit("\tVADDPS %d(R8), Y3, Y3", 32*t)
	emit("\tVMOVUPS Y3, %d(R8)", 32*t)
}

// rawT8Start emits an AVX2 multi-token kernel's entry up to the top of
// its block loop: the TEXT line (frame bytes of locals), the arguments
// (w in SI, idx in R9, nb in CX, q in DI, da in R11, the sixth argument,
// named sixth, in R13 unless sixth is "", acc in R8), the 8 rows' bases
// and strides for row(), and the loop's linear prefetch two 8-row groups
// ahead (R10) over blockBytes per row.
func rawT8Start(name string, frame int, sixth string, blockBytes int) {
	emit("TEXT ·%s(SB), NOSPLIT, $%d-56", name, frame)
	emit("\tMOVQ w+0(FP), SI")
	emit("\tMOVQ idx+8(FP), R9")
	emit("\tMOVQ nb+16(FP), CX")
	emit("\tMOVQ q+24(FP), DI")
	emit("\tMOVQ da+32(FP), R11")
	if sixth != "" {
		emit("\tMOVQ %s+40(FP), R13", sixth)
	}
	emit("\tMOVQ acc+48(FP), R8")
	emit("\tMOVL 4(R9), DX")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (SI)(DX*4), R14")
	emit("\tMOVQ DX, R10")
	emit("\tSHLQ $4, R10")
	emit("\tADDQ SI, R10")
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", name)
	emit("%sloop:", name)
	for off := 0; off < 8*blockBytes; off += 64 {
		emit("\tPREFETCHT0 %d(R10)", off)
	}
	emit("\tADDQ $%d, R10", 8*blockBytes)
}
