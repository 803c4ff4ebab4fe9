package kernels

import (
	"math"

	"github.com/muserhq/muser/infer/ggml"
)

// Activation quantization. Each token row is quantized on its own, so a
// token's quantized activations never depend on the batch it is in. The
// values are bit-identical to ggml's reference quantizers
// (quantize_row_q8_0_ref, quantize_row_q8_1_ref, quantize_row_q8_K_ref);
// they are kept in a struct-of-arrays layout the kernels read directly
// rather than in ggml's block structs.

// actKind is the activation format a weight type needs.
type actKind uint8

const (
	actF32  actKind = iota // F32 weights: activations as given
	actF16                 // F16 weights: activations rounded to f16
	actBF16                // BF16 weights: activations rounded to bf16
	actQ8_0                // Q4_0, Q5_0, Q8_0 weights
	actQ8_1                // Q4_1, Q5_1 weights
	actQ8_K                // K-quant weights
)

// acts holds n token rows of quantized activations of cols elements.
type acts struct {
	kind    actKind
	n, cols int
	nb      int         // blocks per row: cols/32 (Q8_0, Q8_1) or cols/256 (Q8_K)
	q       []int8      // n*cols quantized values
	d       []float32   // n*nb block scales (Q8_0/Q8_1: the f16 scale widened; Q8_K: the f32 scale)
	s       []float32   // n*nb (Q8_1 only): the f16 "d × Σq" widened
	bs      []int32     // sums of q: per 32 (Q8_0, Q8_1, n*nb) or per 16 (Q8_K, n*cols/16)
	f       []float32   // n*cols (float kinds): the activations after rounding to the weight's float type
	fr      []bf16Range // n (BF16): the exponent range of each token's rounded activations (bf16exact.go)
	bp      []uint16    // n*cols (BF16, where bf16PackWanted): the rounded activations as bf16 in the pair layout of the VDPBF16PS kernels; empty otherwise

	qu   []uint8 // Q8_0, Q8_1: q + 128 as unsigned bytes (the SIMD kernels' operand)
	bs16 []int16 // Q8_K: bs as int16, as ggml stores them (the SIMD kernels' operand)

	// Per group of 8 tokens, transposed for the panel kernels (arch code).
	daT   []float32
	corrT []int32
	saT   []float32
	bsT   []int32

	// Per group of 8 tokens, interleaved by block for the multi-token
	// raw-block kernels (arch code): qI the 32 bytes of each token, dI the
	// scales, ncI the values −128·Σq (Q8_0 weights, prepRawT); or qI the
	// 64 bytes of each NVFP4 block, dI its two Q8_0 scales, ncI −12·Σq per
	// sub-block (NVFP4 weights, prepNVFP4).
	qI  []int8
	dI  []float32
	ncI []int32

	// The AMX kernels' layouts (prepAMX): per group of 16 tokens,
	// [group][block][token] scales; per pair of groups, the values in tile
	// rows and [pair][block][token] scales.
	daA []float32
	qP  []int8
	daP []float32
}

// bsPer returns how many quantized values one entry of bs sums.
func (a *acts) bsPer() int {
	if a.kind == actQ8_K {
		return 16
	}
	return 32
}

// quantize fills a from x (n rows of cols floats), token t by token t.
// quantRow may be called concurrently for different t.
func (a *acts) reset(kind actKind, n, cols int) {
	a.kind, a.n, a.cols = kind, n, cols
	a.bp = a.bp[:0]
	switch kind {
	case actF32, actF16, actBF16:
		a.nb = 0
		a.f = grow(a.f, n*cols)
		if kind == actBF16 {
			a.fr = grow(a.fr, n)
			if bf16PackWanted(n, cols) {
				a.bp = grow(a.bp, n*cols)
			}
		}
	case actQ8_0, actQ8_1, actQ8_K:
		bsz := 32
		if kind == actQ8_K {
			bsz = 256
		}
		a.nb = cols / bsz
		a.q = grow(a.q, n*cols)
		a.d = grow(a.d, n*a.nb)
		a.bs = grow(a.bs, n*cols/a.bsPer())
		if kind == actQ8_1 {
			a.s = grow(a.s, n*a.nb)
		}
		if kind == actQ8_K {
			a.bs16 = grow(a.bs16, n*cols/16)
		} else {
			a.qu = grow(a.qu, n*cols)
		}
	}
}

// f16RoundSIMD rounds F16 weights' activations with RoundF16s (F16C where
// the CPU has it); off, with the table loop as before (same bits: a knob
// for benchmarks that compare the two in one run).
var f16RoundSIMD = true

// quantRow quantizes token row t of x.
func (a *acts) quantRow(x []float32, t int) {
	c := a.cols
	src := x[t*c : (t+1)*c]
	switch a.kind {
	case actF32:
		copy(a.f[t*c:], src)
	case actF16:
		dst := a.f[t*c : (t+1)*c]
		if f16RoundSIMD {
			// RoundF16s: f16Table[ggml.F32ToF16(v)] for each v, with F16C
			// where the CPU has it (the same bits, NaN included).
			copy(dst, src)
			RoundF16s(dst)
			return
		}
		for i, v := range src {
			dst[i] = f16Table[ggml.F32ToF16(v)]
		}
	case actBF16:
		dst := a.f[t*c : (t+1)*c]
		r, ok := roundBF16Arch(src, dst)
		if !ok {
			r = bf16RangeEmpty
			for i, v := range src {
				b := ggml.F32ToBF16(v)
				r = r.addBits(b)
				dst[i] = ggml.BF16ToF32(b)
			}
		}
		a.fr[t] = r
		if len(a.bp) > 0 {
			packBF16Pairs(a.bp[t*c:(t+1)*c], dst)
		}
	case actQ8_0, actQ8_1:
		nb := a.nb
		var s []float32
		if a.kind == actQ8_1 {
			s = a.s[t*nb : (t+1)*nb]
		}
		q, qu := a.q[t*c:(t+1)*c], a.qu[t*c:(t+1)*c]
		d, bs := a.d[t*nb:(t+1)*nb], a.bs[t*nb:(t+1)*nb]
		if quantQ8_0Arch(src, q, qu, d, bs, s) {
			return
		}
		quantQ8_0(src, q, d, bs, s)
		for i, v := range q {
			qu[i] = uint8(v) ^ 0x80
		}
	case actQ8_K:
		q, d := a.q[t*c:(t+1)*c], a.d[t*a.nb:(t+1)*a.nb]
		bs, bs16 := a.bs[t*c/16:(t+1)*c/16], a.bs16[t*c/16:(t+1)*c/16]
		if quantQ8_KArch(src, q, d, bs, bs16) {
			return
		}
		quantQ8_K(src, q, d, bs)
		for i, v := range bs {
			bs16[i] = int16(v)
		}
	}
}

// quantQ8_0 quantizes x in blocks of 32 as quantize_row_q8_0_ref does:
// d = amax/127 stored as f16, q = roundf(x × (1/d)) with d the unrounded
// scale. sums receives each block's Σq. If s is not nil it receives
// Q8_1's second field, f16(Σq × d), widened (quantize_row_q8_1_ref).
func quantQ8_0(x []float32, q []int8, d []float32, sums []int32, s []float32) {
	for b := range d {
		xb := x[b*32 : b*32+32 : b*32+32]
		var amax float32
		for _, v := range xb {
			av := abs32(v)
			if !(amax > av) { // MAX(amax, fabsf(v)) as ggml's macro evaluates it
				amax = av
			}
		}
		dd := amax / 127
		var id float32
		if dd != 0 {
			id = 1 / dd
		}
		d[b] = f16Table[ggml.F32ToF16(dd)]
		qb := q[b*32 : b*32+32 : b*32+32]
		sum := int32(0)
		for j := range qb {
			qq := roundAway(xb[j] * id)
			qb[j] = qq
			sum += int32(qq)
		}
		sums[b] = sum
		if s != nil {
			s[b] = f16Table[ggml.F32ToF16(float32(sum)*dd)]
		}
	}
}

// quantQ8_K quantizes x in blocks of 256 as quantize_row_q8_K_ref does:
// the element of largest magnitude maps to -127, q = nearest_int(-127/max
// × x) clamped to 127, d = 1/iscale in float32; bs receives the sums of
// each 16 consecutive values.
func quantQ8_K(x []float32, q []int8, d []float32, bs []int32) {
	for b := range d {
		xb := x[b*256 : b*256+256]
		qb := q[b*256 : b*256+256]
		var mx, amax float32
		for _, v := range xb {
			if av := abs32(v); av > amax {
				amax, mx = av, v
			}
		}
		if amax == 0 {
			d[b] = 0
			clear(qb)
			clear(bs[b*16 : b*16+16])
			continue
		}
		iscale := -127 / mx
		for j, v := range xb {
			qb[j] = int8(min(127, nearestInt(iscale*v)))
		}
		for g := 0; g < 16; g++ {
			sum := int32(0)
			for _, v := range qb[g*16 : g*16+16] {
				sum += int32(v)
			}
			bs[b*16+g] = sum
		}
		d[b] = 1 / iscale
	}
}

// abs32 is fabsf.
func abs32(v float32) float32 {
	return math.Float32frombits(math.Float32bits(v) &^ (1 << 31))
}

// roundAway is C's roundf (halves away from zero) followed by the
// conversion to int8 that ggml's quantizers make. v is within [-127.5,
// 127.5] for finite inputs; a non-finite v (only reachable from infinite
// or NaN activations, where ggml's C is undefined) gives 0 on every
// platform.
func roundAway(v float32) int8 {
	if !(abs32(v) <= 128) {
		return 0
	}
	t := int32(v)       // toward zero
	f := v - float32(t) // exact: t and v are within a factor of two, or t is 0
	if f >= 0.5 {
		t++
	} else if f <= -0.5 {
		t--
	}
	return int8(t)
}

// nearestInt is ggml's nearest_int: round to nearest, ties to even, by the
// 1.5×2^23 trick (valid for |v| < 2^22).
func nearestInt(v float32) int32 {
	val := v + 12582912
	return int32(math.Float32bits(val)&0x007fffff) - 0x00400000
}

// grow returns s resized to n elements, reusing its array when it is large
// enough.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// f16Table maps every f16 bit pattern to its float32 value
// (ggml.F16ToF32), so conversions in inner loops are one load.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = ggml.F16ToF32(uint16(i))
	}
	return &t
}()
