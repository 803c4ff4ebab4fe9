package main

import "fmt"

// genFloat writes the 4-row × nt-token kernels for a float weight type
// ("F16", "F32", "BF16"). Lane l of accumulator (r,t) is the canonical
// order's acc[l] for row r and token t; the kernel leaves the 16 lanes in
// memory (acc[(r*nt+t)*16+l]) — or, the "R" variants for column counts
// that are a multiple of 16, reduces them by the tree and stores
// acc[r*nt+t] — and Go adds the columns past the last whole
// 16 and runs the fixed reduction tree. F16 products are exact in float32,
// so a fused multiply-add equals the canonical multiply-then-add; F32 and
// BF16 multiply and add separately. "BF16F" is BF16 with fused
// multiply-adds, for callers that have checked that every product of the
// call is exact in float32 (matmulFloatAVX512: bf16 × bf16 has at most 16
// significant bits, so only a product outside float32's normal range can
// round), where it gives the same bits.
//
// With accIn (the "A" variants, for rows taken in column chunks) the
// kernel starts from the lane sums that the previous chunk's kernel left
// at acc instead of from zero.
func genFloat(typ string, nt int, reduce, accIn bool) {
	suffix := ""
	if accIn {
		suffix = "A"
	}
	if reduce {
		suffix += "R"
	}
	name := fmt.Sprintf("%sDot4x%d%sAVX512", map[string]string{"F16": "f16", "F32": "f32", "BF16": "bf16", "BF16F": "bf16f"}[typ], nt, suffix)
	step := 32 // weight bytes per 16 columns
	if typ == "F32" {
		step = 64
	}
	emit("")
	emit("// func %s(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)", name)
	emit("TEXT ·%s(SB), NOSPLIT, $0-48", name)
	emit("\tMOVQ w+0(FP), SI")
	emit("\tMOVQ rowBytes+8(FP), DX")
	emit("\tMOVQ x+16(FP), DI")
	emit("\tMOVQ xStride+24(FP), R8")
	emit("\tMOVQ n16+32(FP), CX")
	emit("\tLEAQ (DX)(DX*2), BX")
	emit("\tLEAQ (R8)(R8*2), R9")
	emit("\tLEAQ (SI)(DX*8), AX") // prefetch pointer: two 4-row groups ahead, linear
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
	xaddr := func(t int, disp int) string {
		return fmt.Sprintf("%d(DI)%s", disp, [...]string{"", "(R8*1)", "(R8*2)", "(R9*1)"}[t])
	}
	emit("\tTESTQ CX, CX")
	emit("\tJLE %sdone", name)
	emit("%sloop:", name)
	for off := 0; off < 4*step; off += 64 {
		emit("\tPREFETCHT0 %d(AX)", off)
	}
	emit("\tADDQ $%d, AX", 4*step)
	for r := 0; r < 4; r++ {
		switch typ {
		case "F16":
			emit("\tVCVTPH2PS %s, Z%d", row(r, 0), 16+r)
		case "F32":
			emit("\tVMOVUPS %s, Z%d", row(r, 0), 16+r)
		case "BF16", "BF16F":
			emit("\tVPMOVZXWD %s, Z%d", row(r, 0), 16+r)
			emit("\tVPSLLD $16, Z%d, Z%d", 16+r, 16+r)
		}
	}
	for t := 0; t < nt; t++ {
		emit("\tVMOVUPS %s, Z%d", xaddr(t, 0), 20+t)
	}
	tmp := 24
	for r := 0; r < 4; r++ {
		for t := 0; t < nt; t++ {
			a := r*4 + t
			if typ == "F16" || typ == "BF16F" {
				emit("\tVFMADD231PS Z%d, Z%d, Z%d", 20+t, 16+r, a)
			} else {
				emit("\tVMULPS Z%d, Z%d, Z%d", 20+t, 16+r, tmp)
				emit("\tVADDPS Z%d, Z%d, Z%d", tmp, a, a)
				tmp++
				if tmp == 32 {
					tmp = 24
				}
			}
		}
	}
	emit("\tADDQ $%d, SI", step)
	emit("\tADDQ $64, DI")
	emit("\tDECQ CX")
	emit("\tJNZ %sloop", name)
	emit("%sdone:", name)
	floatStore(nt, reduce)
}

// floatStore writes the end of a 4-row × nt-token float kernel whose
// accumulator (r,t) is Z(r·4+t): the 16 lanes of each to acc, or with
// reduce each one's fixed tree (+8, +4, +2, +1) to acc[r·nt+t]; Z24 is
// free scratch by then.
func floatStore(nt int, reduce bool) {
	emit("\tMOVQ acc+40(FP), AX")
	for r := 0; r < 4; r++ {
		for t := 0; t < nt; t++ {
			a := r*4 + t
			if !reduce {
				emit("\tVMOVUPS Z%d, %d(AX)", a, (r*nt+t)*64)
				continue
			}
			emit("\tVEXTRACTF32X8 $1, Z%d, Y24", a)
			emit("\tVADDPS Y24, Y%d, Y%d", a, a)
			emit("\tVEXTRACTF32X4 $1, Y%d, X24", a)
			emit("\tVADDPS X24, X%d, X%d", a, a)
			emit("\tVMOVHLPS X%d, X%d, X24", a, a)
			emit("\tVADDPS X24, X%d, X%d", a, a)
			emit("\tVMOVSHDUP X%d, X24", a)
			emit("\tVADDSS X24, X%d, X%d", a, a)
			emit("\tVMOVSS X%d, %d(AX)", a, (r*nt+t)*4)
		}
	}
	emit("\tVZEROUPPER")
	emit("\tRET")
}
