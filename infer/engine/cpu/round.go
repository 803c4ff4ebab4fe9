package cpu

import (
	"math"

	"github.com/muserhq/muser/infer/ggml"
)

// roundF16 returns x rounded to the nearest binary16 value, ties to even,
// as a float32: bit for bit ggml.F16ToF32(ggml.F32ToF16(x)) (a test checks
// every sign and exponent with the rounding boundaries of the mantissa),
// without the detour through 16-bit patterns for the common cases.
func roundF16(x float32) float32 {
	w := math.Float32bits(x)
	abs := w & 0x7fffffff
	switch {
	case abs >= 0x38800000 && abs < 0x477ff000:
		// Normal binary16 range: keep 10 of the 23 mantissa bits, ties
		// to even. A carry into the exponent gives the right result.
		w += 0xfff + (w>>13)&1
		return math.Float32frombits(w &^ 0x1fff)
	case abs < 0x33000000:
		// Below half the smallest subnormal: ±0.
		return math.Float32frombits(w & 0x80000000)
	case abs < 0x38800000:
		// Subnormal binary16: a multiple of 2^-24. Scaling by powers of
		// two is exact here, and adding then subtracting 2^23 rounds a
		// value below 2^10 to an integer, ties to even.
		v := math.Float32frombits(abs) * 0x1p24
		v = float32(v+0x1p23) - 0x1p23
		return math.Float32frombits(math.Float32bits(v*0x1p-24) | w&0x80000000)
	}
	return ggml.F16ToF32(ggml.F32ToF16(x)) // overflow to ±Inf, Inf, NaN
}

// f32ToF16 is ggml.F32ToF16 (binary16 bits, ties to even) with the normal
// range inline; a test compares them on every rounding boundary.
func f32ToF16(x float32) uint16 {
	w := math.Float32bits(x)
	if abs := w & 0x7fffffff; abs >= 0x38800000 && abs < 0x477ff000 {
		abs += 0xfff + (abs>>13)&1
		return uint16(w>>16)&0x8000 | uint16((abs-0x38000000)>>13)
	}
	return ggml.F32ToF16(x)
}

// f32ToF16s converts src to binary16 bits in dst (len(dst) ≥ len(src)).
func f32ToF16s(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = f32ToF16(v)
	}
}
