package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// dequantizer decodes whole blocks: len(src) is a multiple of the type size
// and len(dst) the matching number of elements.
type dequantizer func(src []byte, dst []float32)

// dequantizers lists the types Dequantize decodes.
var dequantizers = map[Type]dequantizer{
	TypeF32:   dequantF32,
	TypeF16:   dequantF16,
	TypeBF16:  dequantBF16,
	TypeQ4_0:  dequantQ4_0,
	TypeQ4_1:  dequantQ4_1,
	TypeQ5_0:  dequantQ5_0,
	TypeQ5_1:  dequantQ5_1,
	TypeQ8_0:  dequantQ8_0,
	TypeQ2_K:  dequantQ2_K,
	TypeQ3_K:  dequantQ3_K,
	TypeQ4_K:  dequantQ4_K,
	TypeQ5_K:  dequantQ5_K,
	TypeQ6_K:  dequantQ6_K,
	TypeQ8_K:  dequantQ8_K,
	TypeNVFP4: dequantNVFP4,
}

// Dequantize decodes len(dst) elements of type t from src into dst. src
// must hold exactly t.RowSize(len(dst)) bytes. The arithmetic is that of
// ggml's reference dequantizers (dequantize_row_* in ggml-quants.c,
// evaluated in float32 with every product and sum rounded, no fused
// multiply-add), so each value decodes to the same float32 bits.
func Dequantize(t Type, src []byte, dst []float32) error {
	fn, ok := dequantizers[t]
	if !ok {
		if !t.Known() {
			return &TypeError{Type: t, Op: "dequantize", Err: ErrUnknownType}
		}
		return &TypeError{Type: t, Op: "dequantize", Err: ErrUnsupported}
	}
	size, err := t.RowSize(len(dst))
	if err != nil {
		return &TypeError{Type: t, Op: "dequantize", Err: errorsUnwrapType(err)}
	}
	if len(src) != size {
		return &TypeError{Type: t, Op: "dequantize", Err: fmt.Errorf("%w: %d elements need %d bytes, got %d", ErrSize, len(dst), size, len(src))}
	}
	fn(src, dst)
	return nil
}

// errorsUnwrapType strips a *TypeError so that it is not nested twice.
func errorsUnwrapType(err error) error {
	if te, ok := err.(*TypeError); ok {
		return te.Err
	}
	return err
}

func dequantF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = f16at(src[2*i:])
	}
}

func dequantBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// The block decoders below mirror ggml's dequantize_row_* functions. In
// ggml's C every float operation rounds to float32; here each product that
// feeds an addition is wrapped in float32() so the compiler cannot fuse
// them into one multiply-add with a different rounding.

// f16at reads a little-endian binary16 at b[0:2] as float32.
func f16at(b []byte) float32 { return f16Table[uint16(b[0])|uint16(b[1])<<8] }

// f16Table holds F16ToF32 of every binary16 value.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = F16ToF32(uint16(i))
	}
	return &t
}()

// Q4_0: d (f16), qs[16]; element j is (nibble - 8) * d, low nibbles first.
func dequantQ4_0(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[18:], dst[32:] {
		d := f16at(src)
		qs := src[2:18]
		for j := 0; j < 16; j++ {
			dst[j] = float32(int(qs[j]&0x0f)-8) * d
			dst[j+16] = float32(int(qs[j]>>4)-8) * d
		}
	}
}

// Q4_1: d, m (f16), qs[16]; element j is nibble * d + m.
func dequantQ4_1(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[20:], dst[32:] {
		d, m := f16at(src), f16at(src[2:])
		qs := src[4:20]
		for j := 0; j < 16; j++ {
			dst[j] = float32(float32(qs[j]&0x0f)*d) + m
			dst[j+16] = float32(float32(qs[j]>>4)*d) + m
		}
	}
}

// Q5_0: d (f16), qh (u32: fifth bits), qs[16]; element is (q5 - 16) * d.
func dequantQ5_0(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[22:], dst[32:] {
		d := f16at(src)
		qh := binary.LittleEndian.Uint32(src[2:])
		qs := src[6:22]
		for j := 0; j < 16; j++ {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			dst[j] = float32(int32(qs[j]&0x0f|h0)-16) * d
			dst[j+16] = float32(int32(qs[j]>>4|h1)-16) * d
		}
	}
}

// Q5_1: d, m (f16), qh (u32), qs[16]; element is q5 * d + m.
func dequantQ5_1(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[24:], dst[32:] {
		d, m := f16at(src), f16at(src[2:])
		qh := binary.LittleEndian.Uint32(src[4:])
		qs := src[8:24]
		for j := 0; j < 16; j++ {
			h0 := byte(qh>>j<<4) & 0x10
			h1 := byte(qh>>(j+12)) & 0x10
			dst[j] = float32(float32(qs[j]&0x0f|h0)*d) + m
			dst[j+16] = float32(float32(qs[j]>>4|h1)*d) + m
		}
	}
}

// Q8_0: d (f16), qs[32] (int8); element is q * d.
func dequantQ8_0(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[34:], dst[32:] {
		d := f16at(src)
		qs := src[2:34]
		for j := 0; j < 32; j++ {
			dst[j] = float32(int8(qs[j])) * d
		}
	}
}

// Q2_K: scales[16] (4-bit scale | 4-bit min << 4), qs[64] (2-bit), d,
// dmin (f16). Element is d*scale * q - dmin*min.
func dequantQ2_K(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[84:], dst[QK_K:] {
		scales, q := src[0:16], src[16:80]
		d, dmin := f16at(src[80:]), f16at(src[82:])
		y := dst
		is := 0
		for n := 0; n < QK_K; n += 128 {
			shift := uint(0)
			for j := 0; j < 4; j++ {
				for half := 0; half < 2; half++ {
					sc := scales[is]
					is++
					dl := d * float32(sc&0x0f)
					ml := dmin * float32(sc>>4)
					qq := q[16*half : 16*half+16]
					for l := 0; l < 16; l++ {
						y[l] = float32(dl*float32(qq[l]>>shift&3)) - ml
					}
					y = y[16:]
				}
				shift += 2
			}
			q = q[32:]
		}
	}
}

// Q3_K: hmask[32] (high bits), qs[64] (low 2 bits), scales[12] (sixteen
// 6-bit scales), d (f16). Element is d*(scale-32) * (q - (high bit ? 0 : 4)).
func dequantQ3_K(src []byte, dst []float32) {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	var aux [4]uint32
	var scales [16]int8
	for ; len(dst) > 0; src, dst = src[110:], dst[QK_K:] {
		hm, q := src[0:32], src[32:96]
		sb := src[96:108]
		dAll := f16at(src[108:])
		aux[0] = binary.LittleEndian.Uint32(sb[0:])
		aux[1] = binary.LittleEndian.Uint32(sb[4:])
		aux[2] = binary.LittleEndian.Uint32(sb[8:])
		tmp := aux[2]
		aux[2] = (aux[0]>>4)&kmask2 | (tmp>>4&kmask1)<<4
		aux[3] = (aux[1]>>4)&kmask2 | (tmp>>6&kmask1)<<4
		aux[0] = aux[0]&kmask2 | (tmp>>0&kmask1)<<4
		aux[1] = aux[1]&kmask2 | (tmp>>2&kmask1)<<4
		for i := 0; i < 16; i++ {
			scales[i] = int8(aux[i/4] >> (8 * (i % 4)))
		}
		y := dst
		is := 0
		m := byte(1)
		for n := 0; n < QK_K; n += 128 {
			shift := uint(0)
			for j := 0; j < 4; j++ {
				for half := 0; half < 2; half++ {
					dl := dAll * float32(int(scales[is])-32)
					is++
					for l := 16 * half; l < 16*half+16; l++ {
						v := int(q[l] >> shift & 3)
						if hm[l]&m == 0 {
							v -= 4
						}
						y[l-16*half] = dl * float32(v)
					}
					y = y[16:]
				}
				shift += 2
				m <<= 1
			}
			q = q[32:]
		}
	}
}

// scaleMinK4 unpacks the 6-bit scale and min j of a Q4_K/Q5_K block from
// its 12 packed bytes (ggml's get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0x0f | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// Q4_K: d, dmin (f16), scales[12] (eight 6-bit scales and mins), qs[128].
// Element is d*scale * q - dmin*min.
func dequantQ4_K(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[144:], dst[QK_K:] {
		d, dmin := f16at(src), f16at(src[2:])
		scales, q := src[4:16], src[16:144]
		y := dst
		for j, is := 0, 0; j < QK_K; j, is = j+64, is+2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				y[l] = float32(d1*float32(q[l]&0x0f)) - m1
			}
			for l := 0; l < 32; l++ {
				y[32+l] = float32(d2*float32(q[l]>>4)) - m2
			}
			q, y = q[32:], y[64:]
		}
	}
}

// Q5_K: d, dmin (f16), scales[12], qh[32] (fifth bits), qs[128].
func dequantQ5_K(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[176:], dst[QK_K:] {
		d, dmin := f16at(src), f16at(src[2:])
		scales, qh, ql := src[4:16], src[16:48], src[48:176]
		y := dst
		u1, u2 := byte(1), byte(2)
		for j, is := 0, 0; j < QK_K; j, is = j+64, is+2 {
			sc, m := scaleMinK4(is, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(is+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			for l := 0; l < 32; l++ {
				v := int(ql[l] & 0x0f)
				if qh[l]&u1 != 0 {
					v += 16
				}
				y[l] = float32(d1*float32(v)) - m1
			}
			for l := 0; l < 32; l++ {
				v := int(ql[l] >> 4)
				if qh[l]&u2 != 0 {
					v += 16
				}
				y[32+l] = float32(d2*float32(v)) - m2
			}
			ql, y = ql[32:], y[64:]
			u1 <<= 2
			u2 <<= 2
		}
	}
}

// Q6_K: ql[128] (low 4 bits), qh[64] (high 2 bits), scales[16] (int8),
// d (f16). Element is d*scale * (q6 - 32).
func dequantQ6_K(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[210:], dst[QK_K:] {
		ql, qh, sc := src[0:128], src[128:192], src[192:208]
		d := f16at(src[208:])
		y := dst
		for n := 0; n < QK_K; n += 128 {
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int(int8(ql[l]&0x0f|(qh[l]>>0&3)<<4)) - 32
				q2 := int(int8(ql[l+32]&0x0f|(qh[l]>>2&3)<<4)) - 32
				q3 := int(int8(ql[l]>>4|(qh[l]>>4&3)<<4)) - 32
				q4 := int(int8(ql[l+32]>>4|(qh[l]>>6&3)<<4)) - 32
				y[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				y[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				y[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				y[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
			y, ql, qh, sc = y[128:], ql[64:], qh[32:], sc[8:]
		}
	}
}

// Q8_K: d (float32), qs[256] (int8), bsums[16] (int16, unused here).
func dequantQ8_K(src []byte, dst []float32) {
	for ; len(dst) > 0; src, dst = src[292:], dst[QK_K:] {
		d := math.Float32frombits(binary.LittleEndian.Uint32(src))
		qs := src[4 : 4+QK_K]
		for j := 0; j < QK_K; j++ {
			dst[j] = d * float32(int8(qs[j]))
		}
	}
}
