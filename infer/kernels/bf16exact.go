package kernels

import (
	"encoding/binary"
	"math"
	"sync"
)

// Exact bf16 products. A bf16 value has at most 8 significant bits, so the
// product of two of them has at most 16 and is exact in float32 (24 bits)
// unless it leaves float32's normal range: below 2^−126 it may round to a
// subnormal, at or above 2^128 it overflows. Where every product of a call
// is known to lie in that range, a fused multiply-add (one rounding of
// acc + w·x) gives exactly the canonical multiply-then-add (the product's
// rounding changes nothing), bit for bit, signed zeros included; the
// exponent ranges below decide that for a tile of weights and a token's
// activations (which BF16 weights take rounded to bf16).

// bf16Range is the exponent-field range of a set of bf16 values (or of
// float32 values that are bf16 values): the low 16 bits hold the smallest
// exponent field of a value whose magnitude is not zero (0xFFFF if there
// is none), the high 16 bits the largest exponent field of any value (255
// for an infinity or NaN).
type bf16Range uint32

// bf16RangeEmpty is the range of no values; join extends it.
const bf16RangeEmpty bf16Range = 0xFFFF

// join returns the range of the union of the two sets.
func (r bf16Range) join(s bf16Range) bf16Range {
	return bf16Range(min(uint32(r)&0xFFFF, uint32(s)&0xFFFF) | max(uint32(r)>>16, uint32(s)>>16)<<16)
}

// addBits extends r by the bf16 value with bits b.
func (r bf16Range) addBits(b uint16) bf16Range {
	e := uint32(b>>7) & 0xFF
	lo, hi := uint32(r)&0xFFFF, max(uint32(r)>>16, e)
	if b&0x7FFF != 0 {
		lo = min(lo, e)
	}
	return bf16Range(lo | hi<<16)
}

// bf16RowsRange returns the range of the bf16 values in b (little-endian
// pairs of bytes), in portable Go.
func bf16RowsRange(b []byte) bf16Range {
	r := bf16RangeEmpty
	for i := 0; i+1 < len(b); i += 2 {
		r = r.addBits(binary.LittleEndian.Uint16(b[i:]))
	}
	return r
}

// bf16ProductsExact reports whether every product w·x of a value w of the
// set of range rw and a value x of the set of range rx is exact in float32:
// neither set holds an infinity or NaN, and every product of two non-zero
// values lies in [2^−126, 2^128). A non-zero bf16 value with exponent
// field e is at least 2^(e−127) (2^−133 for e = 0, a subnormal) and below
// 2^(max(e,1)−126). A product with a zero factor is ±0, which is exact.
func bf16ProductsExact(rw, rx bf16Range) bool {
	wlo, whi := int(rw&0xFFFF), int(rw>>16)
	xlo, xhi := int(rx&0xFFFF), int(rx>>16)
	if whi == 255 || xhi == 255 {
		return false
	}
	if wlo == 0xFFFF || xlo == 0xFFFF {
		return true
	}
	low := func(e int) int {
		if e == 0 {
			return -133
		}
		return e - 127
	}
	high := func(e int) int { return max(e, 1) - 126 }
	return low(wlo)+low(xlo) >= -126 && high(whi)+high(xhi) <= 128
}

// bf16DotExact reports whether the BF16 kernels on VDPBF16PS give the
// canonical bits for every product w·x of a value w of the set of range rw
// and a value x of the set of range rx, and every sum of such products
// (genBF16Dot in internal/asmgen). The instruction adds each exact product
// with one rounding, as a fused multiply-add, but takes subnormal inputs
// as zero and flushes subnormal results to zero. So, beyond the finite
// range of bf16ProductsExact: no non-zero value is subnormal, and the
// smallest exponent fields add up to at least 142. A normal bf16 value
// with exponent field e is a multiple of 2^(e−134), so every product is
// then a multiple of 2^−126, and so is every sum of them and every
// rounding of such a sum (a float32 below 2^(k+24) that is a multiple of
// 2^k is exact): a non-zero sum is never below 2^−126, never subnormal.
func bf16DotExact(rw, rx bf16Range) bool {
	if !bf16ProductsExact(rw, rx) {
		return false
	}
	wlo, xlo := int(rw&0xFFFF), int(rx&0xFFFF)
	if wlo == 0xFFFF || xlo == 0xFFFF {
		return true // every product is ±0
	}
	return wlo >= 1 && xlo >= 1 && wlo+xlo >= 142
}

// packBF16Pairs writes the values of x (float32 values that are bf16
// values) to dst as bf16 in the pair layout of the VDPBF16PS kernels: of
// each 32 columns from 32m, word 32m+2l+1 is column 32m+l and word 32m+2l
// column 32m+l+16, so that lane l adds column l, then column l+16 (the
// canonical order). len(x) is a multiple of 32.
func packBF16Pairs(dst []uint16, x []float32) {
	for m := 0; m+32 <= len(x); m += 32 {
		for l := 0; l < 16; l++ {
			dst[m+2*l+1] = uint16(math.Float32bits(x[m+l]) >> 16)
			dst[m+2*l] = uint16(math.Float32bits(x[m+l+16]) >> 16)
		}
	}
}

// bf16Cache is a BF16 matrix's exponent range, computed once (by scan)
// when a kernel first asks for it.
type bf16Cache struct {
	once sync.Once
	r    bf16Range
}

// rangeOf returns the range of the bf16 values in data, scanning them
// with scan the first time.
func (c *bf16Cache) rangeOf(data []byte, scan func([]byte) bf16Range) bf16Range {
	c.once.Do(func() { c.r = scan(data) })
	return c.r
}
