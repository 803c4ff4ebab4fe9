package ggml

import "math"

// F16ToF32 converts an IEEE 754 binary16 value to float32. The conversion is
// exact for every finite value and infinity. A NaN keeps its sign and
// payload and is made quiet, as ggml's reference conversion does on
// hardware that quiets signalling NaNs.
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		bits := sign | 0x7f800000 | mant<<13
		if mant != 0 {
			bits |= 0x00400000
		}
		return math.Float32frombits(bits)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0:
		return math.Float32frombits(sign)
	default:
		// Subnormal: mant × 2^-24, exact in float32.
		v := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
}

// F32ToF16 converts a float32 to IEEE 754 binary16, rounding to nearest
// with ties to even. Values too large become infinity; values too small
// become (signed) zero or a subnormal. Every NaN becomes the quiet NaN
// 0x7E00 with the input's sign, as ggml's reference conversion
// (ggml_compute_fp32_to_fp16) gives.
func F32ToF16(f float32) uint16 {
	w := math.Float32bits(f)
	sign := uint16(w>>16) & 0x8000
	abs := w & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		return sign | 0x7e00
	case abs >= 0x477ff000: // rounds to 65520 or more: infinity
		return sign | 0x7c00
	case abs >= 0x38800000: // normal binary16 range (2^-14 and up)
		// Rebias the exponent (127 → 15) and round the 13 dropped bits.
		h := (abs - 0x38000000) >> 13
		rest := abs & 0x1fff
		if rest > 0x1000 || rest == 0x1000 && h&1 == 1 {
			h++ // may carry into the exponent, which is still correct
		}
		return sign | uint16(h)
	case abs < 0x33000000: // below 2^-25: rounds to zero
		return sign
	default: // subnormal binary16
		exp := abs >> 23 // 102 ... 112
		mant := abs&0x7fffff | 0x800000
		shift := 126 - exp // value = mant × 2^(exp-150); in units of 2^-24: mant >> (126-exp)
		h := mant >> shift
		rest := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rest > half || rest == half && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
}

// BF16ToF32 converts a bfloat16 value (the top half of a float32) to
// float32. The conversion is exact.
func BF16ToF32(h uint16) float32 {
	return math.Float32frombits(uint32(h) << 16)
}

// F32ToBF16 converts a float32 to bfloat16, rounding to nearest with ties
// to even, as ggml's reference conversion (ggml_compute_fp32_to_bf16)
// does: subnormals are kept, and a NaN keeps its sign and top payload bits
// and is made quiet.
func F32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	return uint16((u + 0x7fff + (u>>16)&1) >> 16)
}
