package main

import "fmt"

// nvfp4Constants writes the NVFP4 kernels' read-only data: nv4tab<>, the
// 16 E2M1 codes' doubled values plus 12 (so that they are unsigned: 12 13
// 14 15 16 18 20 24 12 11 10 9 8 6 4 0) in each 128-bit lane, for
// VPSHUFB; nv4c<>, the scalars of the UE4M3 decode: 0xFF, 0x7F, the
// float32 exponent bias shift 119<<23, 2^−10 (float32) and 0x78.
func nvfp4Constants() {
	tab := []int{12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0}
	for l := 0; l < 4; l++ {
		for w := 0; w < 4; w++ {
			v := tab[4*w] | tab[4*w+1]<<8 | tab[4*w+2]<<16 | tab[4*w+3]<<24
			emit("DATA nv4tab<>+%d(SB)/4, $0x%08x", 16*l+4*w, v)
		}
	}
	emit("GLOBL nv4tab<>(SB), RODATA|NOPTR, $64")
	for i, v := range []uint32{0xff, 0x7f, 119 << 23, 0x3a800000, 0x78} {
		emit("DATA nv4c<>+%d(SB)/4, $0x%08x", 4*i, v)
	}
	emit("GLOBL nv4c<>(SB), RODATA|NOPTR, $20")
	emit("")
}

// genNVFP4RawT writes the NVFP4 raw-block kernel for a 16-row group and nt
// tokens (1..8), which reads each weight block once for all of them, in
// the way of genQ8_0RawT.
//
// Per block: the 16 rows' four scale bytes are gathered and decoded to
// float32 (UE4M3Half: bits (v<<20) + 119<<23 for a normal byte v&0x7F,
// float32(v)·2^−10 for a subnormal one, 0 for 0x7F) into Z8..Z11, one
// register per sub-block, lane j = row j. The 32 packed quant bytes of the
// 16 rows are transposed as in genQ8_0RawT, so that P_k's lane j holds
// bytes 4k..4k+3 of row j: four low nibbles, values 4m..4m+3 of sub-block
// s = k/2 (m = k mod 2), and four high nibbles, values 8+4m..8+4m+3. Each
// P_k is split into those two (AND 0x0F; shift by 4, AND 0x0F) and mapped
// through nv4tab to unsigned values v+12, giving the VNNI operands of
// sub-block s against activation bytes 16s+4m and 16s+8+4m. Sub-blocks 0
// and 1 are split and used first, then 2 and 3, so that the registers
// suffice. For each token and sub-block, exactly as dotNVFP4:
// isum = −12·Σa + Σ(v+12)·a (integer, exact in any order); t = ws·da;
// p = t·float32(isum); acc = acc + p, sub-blocks in order.
//
// Arguments: w points at block 0 of row 0 of the group and idx holds the
// byte offsets of the 16 rows (idx[1] is the row stride); q, da and nc are
// the token group's activations interleaved by block (prepNVFP4): per
// block, nt×64 bytes, nt×2 Q8_0 scales (blocks 2b and 2b+1) and nt×4
// values −12·Σa (one per sub-block). acc holds nt×16 sums, row-minor,
// which the kernel adds to.
func genNVFP4RawT(nt int) {
	name := fmt.Sprintf("nvfp4Raw16x%dAVX512", nt)
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
	emit("\tSHLQ $5, R10")
	emit("\tADDQ SI, R10")
	emit("\tMOVL $0x0f0f0f0f, R8")
	emit("\tVPBROADCASTD R8, Z15")
	emit("\tVMOVDQU32 nv4tab<>(SB), Z13")
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
	emit("\tADDQ $576, R10")

	// Scales: Z14 lane j = the four scale bytes of row j.
	emit("\tKXNORW K1, K1, K1")
	emit("\tVPGATHERDD (SI)(Z12*1), K1, Z14")
	for s := 0; s < 4; s++ {
		x, v, n, f := 16+4*s, 17+4*s, 18+4*s, 19+4*s
		if s == 0 {
			emit("\tVPANDD.BCST nv4c<>+0(SB), Z14, Z%d", x)
		} else {
			emit("\tVPSRLD $%d, Z14, Z%d", 8*s, x)
			if s < 3 {
				emit("\tVPANDD.BCST nv4c<>+0(SB), Z%d, Z%d", x, x)
			}
		}
		emit("\tVPANDD.BCST nv4c<>+4(SB), Z%d, Z%d", x, v)  // v = x & 0x7F
		emit("\tVPSLLD $20, Z%d, Z%d", v, n)                // normal: (v << 20)
		emit("\tVPADDD.BCST nv4c<>+8(SB), Z%d, Z%d", n, n)  // + 119<<23
		emit("\tVCVTDQ2PS Z%d, Z%d", v, f)                  // subnormal: float32(v)
		emit("\tVMULPS.BCST nv4c<>+12(SB), Z%d, Z%d", f, f) // · 2^−10
		emit("\tVPTESTNMD.BCST nv4c<>+16(SB), Z%d, K2", v)  // exponent 0
		emit("\tVMOVAPS Z%d, K2, Z%d", f, n)                // take the subnormal value
		emit("\tVPCMPD.BCST $4, nv4c<>+4(SB), Z%d, K3", x)  // byte != 0x7F
		emit("\tVMOVAPS.Z Z%d, K3, Z%d", n, 8+s)            // 0x7F (NaN) reads 0
	}

	// Z(16+r) = rows r | r+4 (r < 4), Z(20+r) = rows 8+r | 12+r: the 32
	// packed quant bytes; then the transposition of genQ8_0RawT, leaving
	// P_k in kreg[k].
	for r := 0; r < 4; r++ {
		emit("\tVMOVDQU32 %s, Y%d", row16(r, 4), 16+r)
		emit("\tVINSERTI64X4 $1, %s, Z%d, Z%d", row16(r+4, 4), 16+r, 16+r)
		emit("\tVMOVDQU32 %s, Y%d", row16(r+8, 4), 20+r)
		emit("\tVINSERTI64X4 $1, %s, Z%d, Z%d", row16(r+12, 4), 20+r, 20+r)
	}
	for p := 0; p < 4; p++ {
		emit("\tVPUNPCKLDQ Z%d, Z%d, Z%d", 17+2*p, 16+2*p, 24+2*p)
		emit("\tVPUNPCKHDQ Z%d, Z%d, Z%d", 17+2*p, 16+2*p, 25+2*p)
	}
	for g := 0; g < 2; g++ {
		t0 := 24 + 4*g
		emit("\tVPUNPCKLQDQ Z%d, Z%d, Z%d", t0+2, t0, 16+4*g)
		emit("\tVPUNPCKHQDQ Z%d, Z%d, Z%d", t0+2, t0, 17+4*g)
		emit("\tVPUNPCKLQDQ Z%d, Z%d, Z%d", t0+3, t0+1, 18+4*g)
		emit("\tVPUNPCKHQDQ Z%d, Z%d, Z%d", t0+3, t0+1, 19+4*g)
	}
	for i := 0; i < 4; i++ {
		emit("\tVSHUFI32X4 $0x88, Z%d, Z%d, Z%d", 20+i, 16+i, kreg[i])
		emit("\tVSHUFI32X4 $0xdd, Z%d, Z%d, Z%d", 20+i, 16+i, kreg[4+i])
	}

	for h := 0; h < 2; h++ {
		// Split P_k, k = 4h..4h+3, into Z(16+2i) (low nibbles) and
		// Z(17+2i) (high nibbles), i = k − 4h, as unsigned values. In the
		// first half P_4..P_7 stay live, so the token work's temporaries
		// are the registers of P_0..P_3.
		for i := 0; i < 4; i++ {
			pk, lo, hi := kreg[4*h+i], 16+2*i, 17+2*i
			emit("\tVPANDD Z15, Z%d, Z%d", pk, lo)
			emit("\tVPSRLD $4, Z%d, Z%d", pk, hi)
			emit("\tVPANDD Z15, Z%d, Z%d", hi, hi)
			emit("\tVPSHUFB Z%d, Z13, Z%d", lo, lo)
			emit("\tVPSHUFB Z%d, Z13, Z%d", hi, hi)
		}
		temps := []int{kreg[0], kreg[1], kreg[2], kreg[3]}
		if h == 1 {
			temps = []int{24, 25, 26, 27, 28, 29, 30, 31}
		}
		nTemp := len(temps) / 2
		// Per token, sub-blocks 2h and 2h+1 in order.
		for t := 0; t < nt; t++ {
			for sp := 0; sp < 2; sp++ {
				s := 2*h + sp
				u := (2*t + sp) % nTemp
				a, tmp := temps[2*u], temps[2*u+1]
				emit("\tVPBROADCASTD %d(R13), Z%d", 16*t+4*s, a) // −12·Σa
				for m := 0; m < 2; m++ {
					i := 2*sp + m // P_{4h+i}: sub-block s, values 4m..
					emit("\tVPDPBUSD.BCST %d(DI), Z%d, Z%d", 64*t+16*s+4*m, 16+2*i, a)
					emit("\tVPDPBUSD.BCST %d(DI), Z%d, Z%d", 64*t+16*s+8+4*m, 17+2*i, a)
				}
				emit("\tVCVTDQ2PS Z%d, Z%d", a, a)
				emit("\tVMULPS.BCST %d(R11), Z%d, Z%d", 8*t+4*h, 8+s, tmp) // t = ws·da
				emit("\tVMULPS Z%d, Z%d, Z%d", a, tmp, tmp)                // p = t·float32(isum)
				emit("\tVADDPS Z%d, Z%d, Z%d", tmp, t, t)                  // acc = acc + p
			}
		}
	}
	for _, r := range []string{"SI", "R14", "AX", "R12"} {
		emit("\tADDQ $36, %s", r)
	}
	emit("\tADDQ $%d, DI", 64*nt)
	emit("\tADDQ $%d, R11", 8*nt)
	emit("\tADDQ $%d, R13", 16*nt)
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
