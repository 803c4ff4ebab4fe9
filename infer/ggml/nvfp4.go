package ggml

import "math"

// NVFP4 (type 40) stores 64 values per 36-byte block, ggml's block_nvfp4:
//
//	offset  size  field
//	0       4     d[4]   one UE4M3 scale per sub-block of 16 values
//	4       32    qs[32] E2M1 codes, 4 bits each
//
// Sub-block s (values 16s..16s+15 of the block) has scale d[s] and the
// eight bytes qs[8s..8s+8): byte 8s+j holds value 16s+j in its low nibble
// and value 16s+j+8 in its high nibble.
//
// A code c (0..15) is the E2M1 number whose sign is bit 3, exponent bits
// 1-2 and mantissa bit 0. ggml keeps twice its value, an integer
// (E2M1Doubled: 0, 1, 2, 3, 4, 6, 8, 12 and their negatives; code 8, −0,
// is 0), and decodes a scale byte to half its UE4M3 value (UE4M3Half), so
// value = E2M1Doubled(c) · UE4M3Half(d[s]), a product that is exact in
// float32.

// e2m1Doubled is ggml's kvalues_mxfp4 (kvalues_fp4): twice the value of
// each E2M1 code.
var e2m1Doubled = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// E2M1Doubled returns twice the value of the E2M1 code c (its low four
// bits): 0, 1, 2, 3, 4, 6, 8 or 12 for codes 0-7 and their negatives for
// codes 8-15 (code 8, −0, gives 0). This is ggml's kvalues_mxfp4 table,
// shared by MXFP4 and NVFP4.
func E2M1Doubled(c byte) int8 { return e2m1Doubled[c&15] }

// ue4m3Half holds UE4M3Half of every byte.
var ue4m3Half = func() (t [256]float32) {
	for i := range t {
		t[i] = ue4m3HalfCompute(uint8(i))
	}
	return t
}()

// UE4M3Half returns half the value of the UE4M3 byte b, as ggml's
// ggml_ue4m3_to_fp32 does (the half undoes the doubling of E2M1Doubled).
// UE4M3 is unsigned: bits 3-6 are a biased exponent e (bias 7) and bits
// 0-2 a mantissa m; bit 7 is ignored. The value is m·2^−9 for e = 0
// (subnormal) and (1 + m/8)·2^(e−7) otherwise, so the result is
// m·2^−10 or (8 + m)·2^(e−11), exact in float32 and at most 240. The
// bytes 0x00, 0x80 and 0x7F (UE4M3's NaN) give 0; 0xFF, which ggml does
// not treat as NaN, gives 240.
func UE4M3Half(b byte) float32 { return ue4m3Half[b] }

func ue4m3HalfCompute(b uint8) float32 {
	if b == 0 || b == 0x7f {
		return 0
	}
	e := int(b >> 3 & 15)
	m := int(b & 7)
	if e == 0 {
		return float32(math.Ldexp(float64(m), -10))
	}
	return float32(math.Ldexp(float64(8+m), e-11))
}

// F32ToUE4M3 encodes x as a UE4M3 byte exactly as ggml's
// ggml_fp32_to_ue4m3 does, for NVFP4's quantizer:
//
//   - x ≤ 0 or NaN gives 0; x above 448 is taken as 448;
//   - x below 2^−6 (UE4M3's subnormal range) gives m = int(x·512 + 0.5)
//     computed in float32, clamped to at most 7, or 0 if m < 1;
//   - otherwise the exponent is x's, plus 7, and the mantissa x's top three
//     mantissa bits rounded up when the fourth is set (half away from
//     zero, carrying into the exponent); an exponent of 15 or more, from x
//     itself (x ≥ 256) or from that carry (x ≥ 248), gives 0x7E, 448, even
//     where rounding to nearest would give 256 (0x78).
//
// The result never exceeds 0x7E; it is 0 only for a scale that rounds to
// zero.
func F32ToUE4M3(x float32) byte {
	if !(x > 0) {
		return 0
	}
	if x > 448 {
		x = 448
	}
	bits := math.Float32bits(x)
	fexp := int(bits>>23&0xff) - 127
	fman := int(bits >> 20 & 7)
	e := fexp + 7
	if e <= 0 {
		// float32(x·512) is exact (a power-of-two scaling of a value
		// below 8); the addition of 0.5 rounds as ggml's C does.
		m := int(float32(x*512) + 0.5)
		if m > 7 {
			m = 7
		}
		if m < 1 {
			return 0
		}
		return byte(m)
	}
	if e >= 15 {
		return 0x7e
	}
	m := fman + int(bits>>19&1)
	if m > 7 {
		m = 0
		e++
		if e >= 15 {
			return 0x7e
		}
	}
	return byte(e<<3 | m)
}

// Dequantization: ggml's dequantize_row_nvfp4. Each value is the int8
// E2M1Doubled(code) converted to float32 times UE4M3Half(d[s]), one
// product, exact.
func dequantNVFP4(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[36:], dst[64:] {
		for s := 0; s < 4; s++ {
			d := ue4m3Half[src[s]]
			qs := src[4+8*s : 12+8*s]
			y := dst[16*s : 16*s+16]
			for j := 0; j < 8; j++ {
				y[j] = float32(e2m1Doubled[qs[j]&15]) * d
				y[j+8] = float32(e2m1Doubled[qs[j]>>4]) * d
			}
		}
	}
}

// Quantization: ggml's quantize_row_nvfp4_ref. Per sub-block of 16:
// amax = the largest |x| (NaN ignored), scale byte = F32ToUE4M3(amax/6),
// d = UE4M3Half(scale byte), and each value takes the code nvfp4Code(x, d).
func quantNVFP4(src []float32, dst []byte) {
	for ; len(src) > 0; src, dst = src[64:], dst[36:] {
		for s := 0; s < 4; s++ {
			x := src[16*s : 16*s+16]
			var amax float32
			for _, v := range x {
				if amax < abs32(v) {
					amax = abs32(v)
				}
			}
			sc := F32ToUE4M3(amax / 6)
			dst[s] = sc
			d := ue4m3Half[sc]
			qs := dst[4+8*s : 12+8*s]
			for j := 0; j < 8; j++ {
				qs[j] = nvfp4Code(x[j], d) | nvfp4Code(x[j+8], d)<<4
			}
		}
	}
}

// nvfp4Code is ggml's best_index_mxfp4: the code c whose value
// E2M1Doubled(c)·d is nearest to x, measured as the float32
// |E2M1Doubled(c)·d − x|, the lowest code winning ties: code 0 beats −0
// (code 8), and a value halfway between two neighbours takes the one of
// smaller magnitude. The product is exact; the difference is rounded to
// float32 as in ggml's C.
func nvfp4Code(x, d float32) byte {
	best := byte(0)
	bestErr := abs32(float32(float32(e2m1Doubled[0])*d) - x)
	for c := byte(1); c < 16; c++ {
		if err := abs32(float32(float32(e2m1Doubled[c])*d) - x); err < bestErr {
			best, bestErr = c, err
		}
	}
	return best
}
