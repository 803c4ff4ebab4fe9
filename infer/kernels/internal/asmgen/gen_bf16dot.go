package main

import "fmt"

// The BF16 kernels on VDPBF16PS (AVX512_BF16). For each 32-bit lane i the
// instruction computes, with round-to-nearest-even, inputs that are
// subnormal taken as zero and results that would be subnormal flushed to
// zero (Intel SDM):
//
//	acc[i] = acc[i] + a.bf16[2i+1]·b.bf16[2i+1]   (one rounding)
//	acc[i] = acc[i] + a.bf16[2i]·b.bf16[2i]       (one rounding)
//
// A bf16 × bf16 product has at most 16 significant bits, so each step is
// the canonical "product rounded, then added" wherever the product is
// exact in float32 and neither the operands nor any sum are subnormal
// (bf16DotExact checks that). Lane l of the canonical order adds columns
// l, l+16, l+32, … in that order, so every 32 columns are laid out as
// pairs (word 2l+1 = column l, word 2l = column l+16): the kernel permutes
// each 64-byte weight load with VPERMW, and the activations come packed in
// that order already (acts.bp).

// bf16dPerm writes the VPERMW index that takes 32 bf16 columns to the
// pair layout (destination word 2l+1 is source word l, word 2l is word
// l+16), a package symbol that f16_amd64.s's one-token kernel loads too.
func bf16dPerm() {
	for w := 0; w < 32; w += 2 {
		lo, hi := w/2+16, w/2 // words w (even) and w+1 (odd)
		emit("DATA ·bf16dPerm+%d(SB)/4, $0x%04x%04x", 2*w, hi, lo)
	}
	emit("GLOBL ·bf16dPerm(SB), RODATA|NOPTR, $64")
}

// evexDPBF16PS returns the bytes of VDPBF16PS zmm(src2), zmm(src1),
// zmm(dst) (Go operand order; Intel: vdpbf16ps dst, src1, src2), which
// the Go assembler does not know: EVEX.512.F3.0F38.W0 52 /r, all operands
// registers.
func evexDPBF16PS(src2, src1, dst int) string {
	inv := func(b int) int { return 1 - b&1 }
	p0 := inv(dst>>3)<<7 | inv(src2>>4)<<6 | inv(src2>>3)<<5 | inv(dst>>4)<<4 | 0b10
	p1 := 0<<7 | (^src1&15)<<3 | 1<<2 | 0b10
	p2 := 0b10<<5 | inv(src1>>4)<<3
	modrm := 0b11<<6 | (dst&7)<<3 | src2&7
	return fmt.Sprintf("BYTE $0x62; BYTE $0x%02x; BYTE $0x%02x; BYTE $0x%02x; BYTE $0x52; BYTE $0x%02x // VDPBF16PS Z%d, Z%d, Z%d",
		p0, p1, p2, modrm, src2, src1, dst)
}

// genBF16Dot writes the 4-row × nt-token BF16 kernel on VDPBF16PS, with
// genFloat's arguments and results (the lanes, or with reduce their tree;
// with accIn starting from acc), except that x points to the tokens'
// packed bf16 activations in the pair layout (xStride in bytes) and n16
// must be even: the loop takes 32 columns at a time.
func genBF16Dot(nt int, reduce, accIn bool) {
	suffix := ""
	if accIn {
		suffix = "A"
	}
	if reduce {
		suffix += "R"
	}
	name := fmt.Sprintf("bf16dDot4x%d%sAVX512", nt, suffix)
	emit("")
	emit("// func %s(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	emit("\tMOVQ w+0(FP), SI")
	emit("\tMOVQ rowBytes+8(FP), DX")
	emit("\tMOVQ x+16(FP), DI")
	emit("\tMOVQ xStride+24(FP), R8")
	emit("\tMOVQ n16+32(FP), CX")
	emit("\tSHRQ $1, CX")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (R8)(R8*2), R9")
	emit("\tLEAQ (SI)(DX*8), AX") // prefetch pointer: two 4-row groups ahead, linear
	emit("\tVMOVDQU16 ·bf16dPerm(SB), Z24")
	if accIn {
		emit("\tMOVQ acc+40(FP), R10")
	}
	for r := 0; r < 4; r++ {
		for t := 0; t < nt; t++ {
			if accIn {
				emit("\tVMOVUPS %d(R10), Z%d", (r*nt+t)*64, r*4+t)
				continue
			}
			emit("\tVPXORD Z%d, Z%d, Z%d", r*4+t, r*4+t, r*4+t)
		}
	}
	xaddr := func(t int) string {
		return "(DI)" + [...]string{"", "(R8*1)", "(R8*2)", "(R9*1)"}[t]
	}
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", name)
	emit("%sloop:", name)
	for off := 0; off < 4*64; off += 64 {
		emit("\tPREFETCHT0 %d(AX)", off)
	}
	emit("\tADDQ $256, AX")
	for r := 0; r < 4; r++ {
		emit("\tVPERMW %s, Z24, Z%d", row(r, 0), 16+r)
	}
	for t := 0; t < nt; t++ {
		emit("\tVMOVDQU16 %s, Z%d", xaddr(t), 20+t)
	}
	for r := 0; r < 4; r++ {
		for t := 0; t < nt; t++ {
			emit("\t%s", evexDPBF16PS(20+t, 16+r, r*4+t))
		}
	}
	emit("\tADDQ $64, SI")
	emit("\tADDQ $64, DI")
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	emit("%sdone:", name)
	floatStore(nt, reduce)
}
