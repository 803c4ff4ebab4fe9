package main

import "fmt"

// row16 returns the address of byte disp of row r (0..15) of a 16-row
// group: rows 0-3 from SI, 4-7 from R14, 8-11 from AX, 12-15 from R12, at
// 0, 1, 2, 3 row strides (DX is the row stride, BX three strides).
func row16(r, disp int) string {
	base := [...]string{"SI", "R14", "AX", "R12"}[r/4]
	idx := [...]string{"", "(DX*1)", "(DX*2)", "(BX*1)"}[r%4]
	d := ""
	if disp != 0 {
		d = fmt.Sprint(disp)
	}
	return d + "(" + base + ")" + idx
}

// genQ8_0RawT writes the Q8_0 raw-block kernel for a 16-row group and nt
// tokens (1..8) that reads each weight block once for all of them. Per
// block it loads the 32 quant bytes of the 16 rows in place (for r < 4,
// register r holds rows r and r+4, register 4+r rows 8+r and 12+r), flips
// them to unsigned (w+128), and transposes the 16×8 dwords in registers so that
// vector K_k's lane j holds bytes 4k..4k+3 of row j — the transposed-panel
// layout, built on the fly instead of unpacked into memory. VNNI dots of
// the K_k with each token's broadcast activation bytes then leave every
// row's block sum in its own lane, with no horizontal reduction per token.
// Per token, exactly as in dotLegacy: isum = −128·Σa + Σ(w+128)·a (integer,
// exact in any order); p = (dw·da)·float32(isum); acc = acc + p.
//
// Arguments: w points at block 0 of row 0 of the group and idx holds the
// byte offsets of the 16 rows (idx[1] is the row stride); q, da and nc are
// the token group's activations interleaved by block (prepRawT): per block,
// nt×32 bytes, nt scales and nt values −128·Σa. acc holds nt×16 sums,
// row-minor, which the kernel adds to.
func genQ8_0RawT(nt int) {
	name := fmt.Sprintf("q8_0Raw16x%dAVX512", nt)
	emit("")
	emit("// func %s(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-56", name)
	emit("\tMOVQ w+0(FP), SI")
	emit("\tMOVQ idx+8(FP), AX")
	emit("\tMOVQ nb+16(FP), CX")
	emit("\tMOVQ q+24(FP), DI")
	emit("\tMOVQ da+32(FP), R11")
	emit("\tMOVQ nc+40(FP), R13")
	emit("\tVMOVDQU32 (AX), Z12")
	emit("\tMOVL 4(AX), DX")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (SI)(DX*4), R14")
	emit("\tLEAQ (R14)(DX*4), AX")
	emit("\tLEAQ (AX)(DX*4), R12")
	emit("\tMOVQ DX, R10") // prefetch pointer: two 16-row groups ahead
	emit("\tSHLQ $4, R10")
	emit("\tADDQ SI, R10")
	emit("\tMOVL $0x80808080, R8")
	emit("\tVPBROADCASTD R8, Z13")
	emit("\tMOVQ acc+48(FP), R8")
	for t := 0; t < nt; t++ {
		emit("\tVMOVUPS %d(R8), Z%d", 64*t, t)
	}
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", name)
	emit("%sloop:", name)
	for i := 0; i < 9; i++ {
		emit("\tPREFETCHT0 %d(R10)", 64*i)
	}
	emit("\tADDQ $544, R10")
	// Z(16+r) = rows r | r+4 (r < 4), Z(20+r) = rows 8+r | 12+r; unsigned.
	for r := 0; r < 4; r++ {
		emit("\tVMOVDQU32 %s, Y%d", row16(r, 2), 16+r)
		emit("\tVINSERTI64X4 $1, %s, Z%d, Z%d", row16(r+4, 2), 16+r, 16+r)
		emit("\tVMOVDQU32 %s, Y%d", row16(r+8, 2), 20+r)
		emit("\tVINSERTI64X4 $1, %s, Z%d, Z%d", row16(r+12, 2), 20+r, 20+r)
	}
	for r := 0; r < 8; r++ {
		emit("\tVPXORD Z13, Z%d, Z%d", 16+r, 16+r)
	}
	// Within each 128-bit lane, as for 8 rows: stage 1 interleaves dwords of
	// register pairs (Z24..Z31), stage 2 quadwords, leaving in Z(16+i) dword
	// i in lanes 0 and 2 and dword i+4 in lanes 1 and 3, for rows 0-3 (lanes
	// 0, 1) and 4-7 (lanes 2, 3); Z(20+i) likewise for rows 8-15.
	for p := 0; p < 4; p++ {
		emit("\tVPUNPCKLDQ Z%d, Z%d, Z%d", 17+2*p, 16+2*p, 24+2*p)
		emit("\tVPUNPCKHDQ Z%d, Z%d, Z%d", 17+2*p, 16+2*p, 25+2*p)
	}
	for h := 0; h < 2; h++ {
		t0 := 24 + 4*h
		emit("\tVPUNPCKLQDQ Z%d, Z%d, Z%d", t0+2, t0, 16+4*h)
		emit("\tVPUNPCKHQDQ Z%d, Z%d, Z%d", t0+2, t0, 17+4*h)
		emit("\tVPUNPCKLQDQ Z%d, Z%d, Z%d", t0+3, t0+1, 18+4*h)
		emit("\tVPUNPCKHQDQ Z%d, Z%d, Z%d", t0+3, t0+1, 19+4*h)
	}
	// Stage 3: K_i = lanes 0, 2 of Z(16+i) then lanes 0, 2 of Z(20+i) (rows
	// 0-3, 4-7, 8-11, 12-15); K_{4+i} the same from lanes 1, 3.
	for i := 0; i < 4; i++ {
		emit("\tVSHUFI32X4 $0x88, Z%d, Z%d, Z%d", 20+i, 16+i, kreg[i])
		emit("\tVSHUFI32X4 $0xdd, Z%d, Z%d, Z%d", 20+i, 16+i, kreg[4+i])
	}
	// dw of the 16 rows.
	emit("\tKXNORW K1, K1, K1")
	emit("\tVPGATHERDD (SI)(Z12*1), K1, Z14")
	emit("\tVPMOVDW Z14, Y14")
	emit("\tVCVTPH2PS Y14, Z14")
	for t := 0; t < nt; t++ {
		a := 8 + t%4
		emit("\tVPBROADCASTD %d(R13), Z%d", 4*t, a)
		for k := 0; k < 8; k++ {
			emit("\tVPDPBUSD.BCST %d(DI), Z%d, Z%d", 32*t+4*k, kreg[k], a)
		}
		emit("\tVCVTDQ2PS Z%d, Z%d", a, a)
		emit("\tVMULPS.BCST %d(R11), Z14, Z15", 4*t)
		emit("\tVMULPS Z%d, Z15, Z15", a)
		emit("\tVADDPS Z15, Z%d, Z%d", t, t)
	}
	for _, r := range []string{"SI", "R14", "AX", "R12"} {
		emit("\tADDQ $34, %s", r)
	}
	emit("\tADDQ $%d, DI", 32*nt)
	emit("\tADDQ $%d, R11", 4*nt)
	emit("\tADDQ $%d, R13", 4*nt)
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	emit("%sdone:", name)
	emit("\tMOVQ acc+48(FP), R8")
	for t := 0; t < nt; t++ {
		emit("\tVMOVUPS Z%d, %d(R8)", t, 64*t)
	}
	emit("\tVZEROUPPER")
	emit("\tRET")
}

// genQ8_0PackAMX writes q8_0PackAMX (infer/kernels/amx_amd64.go): nb Q8_0
// blocks of a 16-row group packed for the AMX kernel, block by block: the
// 8 vectors of transpose16x32 (signed, as stored) as tile rows 0..7 (512
// bytes), and the 16 rows' scales widened to float32 in dw.
func genQ8_0PackAMX() {
	emit("")
	emit("// func q8_0PackAMX(w *byte, idx *[16]int32, nb int, b *byte, dw *float32)")
	emit("TEXT ·q8_0PackAMX(SB), NOSPLIT, $0-40")
	emit("\tMOVQ w+0(FP), SI")
	emit("\tMOVQ idx+8(FP), AX")
	emit("\tMOVQ nb+16(FP), CX")
	emit("\tMOVQ b+24(FP), DI")
	emit("\tMOVQ dw+32(FP), R11")
	emit("\tVMOVDQU32 (AX), Z16")
	emit("\tMOVL 4(AX), DX")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (SI)(DX*4), R14")
	emit("\tLEAQ (R14)(DX*4), AX")
	emit("\tLEAQ (AX)(DX*4), R12")
	emit("\tTESTQ CX, CX")
	emit("\tJLE q8_0PackAMXdone")
	emit("q8_0PackAMXloop:")
	transpose16x32(2)
	for k := 0; k < 8; k++ {
		emit("\tVMOVDQU32 Z%d, %d(DI)", kreg[k], 64*k)
	}
	emit("\tKXNORW K1, K1, K1")
	emit("\tVPGATHERDD (SI)(Z16*1), K1, Z17")
	emit("\tVPMOVDW Z17, Y17")
	emit("\tVCVTPH2PS Y17, Z17")
	emit("\tVMOVUPS Z17, (R11)")
	for _, r := range []string{"SI", "R14", "AX", "R12"} {
		emit("\tADDQ $34, %s", r)
	}
	emit("\tADDQ $512, DI")
	emit("\tADDQ $64, R11")
	emit("\tDECQ CX")
	emit("\tJNZ q8_0PackAMXloop")
	emit("q8_0PackAMXdone:")
	emit("\tVZEROUPPER")
	emit("\tRET")
}

// kreg[k] is the register holding transposed vector K_k in genQ8_0RawT.
var kreg = [8]int{24, 26, 28, 30, 25, 27, 29, 31}
