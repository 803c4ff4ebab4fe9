package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// quantizer encodes whole blocks: len(src) is a multiple of the block size
// and len(dst) the matching number of bytes.
type quantizer func(src []float32, dst []byte)

// quantizers lists the types Quantize encodes.
var quantizers = map[Type]quantizer{
	TypeF32:   quantF32,
	TypeF16:   quantF16,
	TypeBF16:  quantBF16,
	TypeQ4_0:  quantQ4_0,
	TypeQ4_1:  quantQ4_1,
	TypeQ5_0:  quantQ5_0,
	TypeQ5_1:  quantQ5_1,
	TypeQ8_0:  quantQ8_0,
	TypeQ4_K:  quantQ4_K,
	TypeQ6_K:  quantQ6_K,
	TypeQ8_K:  quantQ8_K,
	TypeNVFP4: quantNVFP4,
}

// Quantize encodes src as type t into dst, which must be exactly
// t.RowSize(len(src)) bytes long. The block quantizers follow ggml's
// reference quantizers (quantize_row_*_ref in ggml-quants.c) step for
// step in float32 arithmetic, so they produce the same bytes for finite
// input. Non-finite input gives unspecified (but deterministic) bytes.
func Quantize(t Type, src []float32, dst []byte) error {
	fn, ok := quantizers[t]
	if !ok {
		if !t.Known() {
			return &TypeError{Type: t, Op: "quantize", Err: ErrUnknownType}
		}
		return &TypeError{Type: t, Op: "quantize", Err: ErrUnsupported}
	}
	size, err := t.RowSize(len(src))
	if err != nil {
		return &TypeError{Type: t, Op: "quantize", Err: errorsUnwrapType(err)}
	}
	if len(dst) != size {
		return &TypeError{Type: t, Op: "quantize", Err: fmt.Errorf("%w: %d elements need %d bytes, got %d", ErrSize, len(src), size, len(dst))}
	}
	fn(src, dst)
	return nil
}

func quantF32(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func quantF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
	}
}

func quantBF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
}

// The block encoders below follow ggml's quantize_row_*_ref functions
// operation by operation. Every float32 product that feeds an addition is
// wrapped in float32() so that it is rounded on its own, as in ggml's C.

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// roundInt rounds half away from zero, like C's roundf, and returns an
// int. It is exact for |x| < 2^31: x - trunc(x) is computed without
// rounding because trunc(x) shares x's exponent or a smaller one.
func roundInt(x float32) int {
	t := int32(x)
	f := x - float32(t)
	if f >= 0.5 {
		t++
	} else if f <= -0.5 {
		t--
	}
	return int(t)
}

// nearestInt is ggml's nearest_int: round to nearest, ties to even, by
// adding 1.5 * 2^23 and reading the mantissa. ggml asserts |x| <= 4194303;
// beyond that the result is meaningless but defined.
func nearestInt(x float32) int {
	v := x + 12582912
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// putF16 stores f as a little-endian binary16.
func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }

func quantQ4_0(src []float32, dst []byte) {
	for ; len(src) > 0; src, dst = src[32:], dst[18:] {
		var amax, max float32
		for _, v := range src[:32] {
			if amax < abs32(v) {
				amax, max = abs32(v), v
			}
		}
		d := max / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(dst, d)
		for j := 0; j < 16; j++ {
			x0 := float32(src[j] * id)
			x1 := float32(src[j+16] * id)
			xi0 := min(15, int8(x0+8.5))
			xi1 := min(15, int8(x1+8.5))
			dst[2+j] = uint8(xi0) | uint8(xi1)<<4
		}
	}
}

// minMax returns the smallest and largest of x, starting from FLT_MAX and
// -FLT_MAX as ggml does.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func quantQ4_1(src []float32, dst []byte) {
	for ; len(src) > 0; src, dst = src[32:], dst[20:] {
		lo, hi := minMax(src[:32])
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(dst, d)
		putF16(dst[2:], lo)
		for j := 0; j < 16; j++ {
			x0 := float32((src[j] - lo) * id)
			x1 := float32((src[j+16] - lo) * id)
			xi0 := min(15, int8(x0+0.5))
			xi1 := min(15, int8(x1+0.5))
			dst[4+j] = uint8(xi0) | uint8(xi1)<<4
		}
	}
}

func quantQ5_0(src []float32, dst []byte) {
	for ; len(src) > 0; src, dst = src[32:], dst[22:] {
		var amax, max float32
		for _, v := range src[:32] {
			if amax < abs32(v) {
				amax, max = abs32(v), v
			}
		}
		d := max / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(dst, d)
		var qh uint32
		for j := 0; j < 16; j++ {
			x0 := float32(src[j] * id)
			x1 := float32(src[j+16] * id)
			xi0 := uint8(min(31, int8(x0+16.5)))
			xi1 := uint8(min(31, int8(x1+16.5)))
			dst[6+j] = xi0&0x0f | (xi1&0x0f)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		binary.LittleEndian.PutUint32(dst[2:], qh)
	}
}

func quantQ5_1(src []float32, dst []byte) {
	for ; len(src) > 0; src, dst = src[32:], dst[24:] {
		lo, hi := minMax(src[:32])
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(dst, d)
		putF16(dst[2:], lo)
		var qh uint32
		for j := 0; j < 16; j++ {
			x0 := float32((src[j] - lo) * id)
			x1 := float32((src[j+16] - lo) * id)
			xi0 := uint8(x0 + 0.5)
			xi1 := uint8(x1 + 0.5)
			dst[8+j] = xi0&0x0f | (xi1&0x0f)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		binary.LittleEndian.PutUint32(dst[4:], qh)
	}
}

func quantQ8_0(src []float32, dst []byte) {
	for ; len(src) > 0; src, dst = src[32:], dst[34:] {
		var amax float32
		for _, v := range src[:32] {
			if a := abs32(v); a > amax {
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(dst, d)
		for j := 0; j < 32; j++ {
			dst[2+j] = uint8(int8(roundInt(float32(src[j] * id))))
		}
	}
}

func quantQ8_K(src []float32, dst []byte) {
	for ; len(src) > 0; src, dst = src[QK_K:], dst[292:] {
		var amax, max float32
		for _, v := range src[:QK_K] {
			if a := abs32(v); a > amax {
				amax, max = a, v
			}
		}
		if amax == 0 {
			clear(dst[:292])
			continue
		}
		iscale := -127 / max
		qs := dst[4 : 4+QK_K]
		for j := 0; j < QK_K; j++ {
			qs[j] = uint8(int8(min(127, nearestInt(float32(iscale*src[j])))))
		}
		for j := 0; j < QK_K/16; j++ {
			sum := 0
			for _, q := range qs[16*j : 16*j+16] {
				sum += int(int8(q))
			}
			binary.LittleEndian.PutUint16(dst[260+2*j:], uint16(int16(sum)))
		}
		binary.LittleEndian.PutUint32(dst, math.Float32bits(1/iscale))
	}
}

// makeQKX2Quants is ggml's make_qkx2_quants: it chooses a scale and a
// minimum for n values x quantized to [0, nmax], searching nstep+1
// candidate scales around the plain min/max one and keeping the one with
// the least weighted squared (or absolute, if useMAD) error. It fills L
// and returns the scale and the negated minimum.
func makeQKX2Quants(nmax int, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < n; i++ {
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		for i := range L[:n] {
			L[i] = 0
		}
		return 0, -lo
	}
	errOf := func(diff float32) float32 {
		if useMAD {
			return abs32(diff)
		}
		return float32(diff * diff)
	}
	iscale := float32(nmax) / (hi - lo)
	scale = 1 / iscale
	var bestError float32
	for i := 0; i < n; i++ {
		l := nearestInt(float32(iscale * (x[i] - lo)))
		L[i] = uint8(max(0, min(nmax, l)))
		diff := float32(float32(scale*float32(L[i]))+lo) - x[i]
		bestError += float32(weights[i] * errOf(diff))
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = float32(float32(rmin+float32(rdelta*float32(is)))+float32(nmax)) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := nearestInt(float32(iscale * (x[i] - lo)))
			l = max(0, min(nmax, l))
			Laux[i] = uint8(l)
			w := weights[i]
			fl := float32(l)
			wl := float32(w * fl)
			sumL += wl
			sumL2 += float32(wl * fl)
			sumXL += float32(wl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := 0; i < n; i++ {
				diff := float32(float32(thisScale*float32(Laux[i]))+thisMin) - x[i]
				curError += float32(weights[i] * errOf(diff))
			}
			if curError < bestError {
				copy(L[:n], Laux[:n])
				bestError = curError
				scale = thisScale
				lo = thisMin
			}
		}
	}
	return scale, -lo
}

func quantQ4_K(src []float32, dst []byte) {
	var (
		L       [QK_K]uint8
		Laux    [32]uint8
		weights [32]float32
		mins    [QK_K / 32]float32
		scales  [QK_K / 32]float32
	)
	for ; len(src) > 0; src, dst = src[QK_K:], dst[144:] {
		x := src[:QK_K]
		var maxScale, maxMin float32
		for j := 0; j < QK_K/32; j++ {
			xs := x[32*j : 32*j+32]
			var sumX2 float32
			for _, v := range xs {
				sumX2 += float32(v * v)
			}
			avX := float32(math.Sqrt(float64(sumX2 / 32)))
			for l, v := range xs {
				weights[l] = avX + abs32(v)
			}
			scales[j], mins[j] = makeQKX2Quants(15, xs, weights[:], L[32*j:32*j+32], Laux[:], -1, 0.1, 20, false)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		var invScale, invMin float32
		if maxScale > 0 {
			invScale = 63 / maxScale
		}
		if maxMin > 0 {
			invMin = 63 / maxMin
		}
		sc := dst[4:16]
		clear(sc)
		for j := 0; j < QK_K/32; j++ {
			ls := min(63, uint8(nearestInt(float32(invScale*scales[j]))))
			lm := min(63, uint8(nearestInt(float32(invMin*mins[j]))))
			if j < 4 {
				sc[j] = ls
				sc[j+4] = lm
			} else {
				sc[j+4] = ls&0x0f | (lm&0x0f)<<4
				sc[j-4] |= ls >> 4 << 6
				sc[j] |= lm >> 4 << 6
			}
		}
		putF16(dst, maxScale/63)
		putF16(dst[2:], maxMin/63)
		d16, dmin16 := f16at(dst), f16at(dst[2:])
		for j := 0; j < QK_K/32; j++ {
			s, m := scaleMinK4(j, sc)
			d := d16 * float32(s)
			if d == 0 {
				continue
			}
			dm := dmin16 * float32(m)
			for ii := 0; ii < 32; ii++ {
				l := nearestInt((x[32*j+ii] + dm) / d)
				L[32*j+ii] = uint8(max(0, min(15, l)))
			}
		}
		q := dst[16:144]
		for j := 0; j < QK_K; j += 64 {
			for l := 0; l < 32; l++ {
				q[l] = L[j+l] | L[j+l+32]<<4
			}
			q = q[32:]
		}
	}
}

// groupMaxEps is ggml's GROUP_MAX_EPS: a group whose largest magnitude is
// below it quantizes to zeros.
const groupMaxEps = 1e-15

// makeQXQuants is ggml's make_qx_quants for rmse_type 1 without
// importance weights (each value weighted by its square): it quantizes the
// n values x symmetrically to [-nmax, nmax-1], stores them offset by nmax
// in L, and returns the scale of the best of 19 candidate scalings around
// nmax/max, the one maximising (Σw·x·l)²/Σw·l².
func makeQXQuants(nmax int, x []float32, L []int8) float32 {
	var mx, amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	clamp := func(l int) int { return max(-nmax, min(nmax-1, l)) }
	sums := func(iscale float32, store bool) (sumLX, sumL2 float32) {
		for i, v := range x {
			l := clamp(nearestInt(float32(iscale * v)))
			if store {
				L[i] = int8(l + nmax)
			}
			w := float32(v * v)
			fl := float32(l)
			sumLX += float32(float32(w*v) * fl)
			sumL2 += float32(float32(w*fl) * fl)
		}
		return sumLX, sumL2
	}
	iscale := float32(-nmax) / mx
	sumLX, sumL2 := sums(iscale, true)
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := float32(scale * sumLX)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / mx
		sumLX, sumL2 = sums(iscale, false)
		if sumL2 > 0 && float32(sumLX*sumLX) > float32(best*sumL2) {
			sums(iscale, true)
			scale = sumLX / sumL2
			best = float32(scale * sumLX)
		}
	}
	return scale
}

// quantQ6_K is quantize_row_q6_K_ref: sixteen sub-blocks of 16 values,
// each with an int8 scale relative to the block's f16 d, values in
// [-32, 31] stored as 4 low bits (ql) and 2 high bits (qh) offset by 32.
func quantQ6_K(src []float32, dst []byte) {
	const size = 210 // ql[128] qh[64] scales[16] d
	var (
		L      [QK_K]int8
		scales [QK_K / 16]float32
	)
	for ; len(src) > 0; src, dst = src[QK_K:], dst[size:] {
		x := src[:QK_K]
		blk := dst[:size]
		var maxScale, maxAbs float32
		for ib := range scales {
			s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			scales[ib] = s
			if a := abs32(s); a > maxAbs {
				maxAbs, maxScale = a, s
			}
		}
		clear(blk)
		if maxAbs < groupMaxEps {
			continue
		}
		iscale := -128 / maxScale
		putF16(blk[208:], 1/iscale)
		sc := blk[192:208]
		for ib := range scales {
			sc[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
		}
		d16 := f16at(blk[208:])
		for j := range scales {
			d := float32(d16 * float32(int8(sc[j])))
			if d == 0 {
				continue
			}
			for ii := 0; ii < 16; ii++ {
				l := nearestInt(x[16*j+ii] / d)
				L[16*j+ii] = int8(max(-32, min(31, l)) + 32)
			}
		}
		ql, qh := blk[:128], blk[128:192]
		for j := 0; j < QK_K; j += 128 {
			for l := 0; l < 32; l++ {
				q1, q2 := byte(L[j+l]), byte(L[j+l+32])
				q3, q4 := byte(L[j+l+64]), byte(L[j+l+96])
				ql[l] = q1&0xf | q3&0xf<<4
				ql[l+32] = q2&0xf | q4&0xf<<4
				qh[l] = q1>>4 | q2>>4<<2 | q3>>4<<4 | q4>>4<<6
			}
			ql, qh = ql[64:], qh[32:]
		}
	}
}
