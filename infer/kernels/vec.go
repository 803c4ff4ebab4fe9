package kernels

import (
	"math"

	"github.com/muserhq/muser/infer/ggml"
)

// The vector helpers of the forward pass. Each is deterministic: the same
// inputs give the same bits on every CPU and instruction-set variant. Where
// a helper reduces (sums) it does so in a fixed order documented on it.

// RMSNorm sets dst[i] = (x[i]·scale)·weight[i] with scale =
// 1/sqrt(mean(x²) + eps), as ggml's rms_norm followed by the weight
// multiply: squares are rounded to float32 and summed in float64 in index
// order; mean+eps is rounded to float32 before the square root. dst may be
// x. len(weight) and len(dst) must be at least len(x).
func RMSNorm(dst, x, weight []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(float32(v * v))
	}
	mean := sum / float64(len(x))
	s := 1 / float32(math.Sqrt(float64(float32(mean+float64(eps)))))
	weight = weight[:len(x)]
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = float32(v*s) * weight[i]
	}
}

// SiLUMul sets dst[i] = silu(gate[i])·up[i], silu(g) = g/(1+exp(-g)) in
// float32 with Exp32. dst may alias gate or up.
func SiLUMul(dst, gate, up []float32) {
	up = up[:len(gate)]
	dst = dst[:len(gate)]
	done := siluMulArch(dst, gate, up)
	for i := done; i < len(gate); i++ {
		g := gate[i]
		dst[i] = (g / (1 + Exp32(-g))) * up[i]
	}
}

// Softmax replaces x by softmax(x): e[i] = Exp32(x[i]-max); the e[i] are
// summed in float64 with 8 accumulators (element i into accumulator
// i mod 8, in index order) reduced by the tree +4, +2, +1; then each e[i]
// is multiplied by float32(1/sum). An empty x is left alone.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	mx, nan, ok := maxNaNArch(x)
	if !ok || nan { // a NaN: the sequential scan's maximum, exactly
		mx, nan = x[0], x[0] != x[0]
		for _, v := range x[1:] {
			if v > mx {
				mx = v
			}
			nan = nan || v != v
		}
	}
	var sums [8]float64
	done := 0
	if !nan { // the assembly's NaN payloads could differ; NaN rows stay in Go
		done = softmaxExpArch(x, mx, &sums)
	}
	for i := done; i < len(x); i++ {
		e := Exp32(x[i] - mx)
		x[i] = e
		sums[i%8] += float64(e)
	}
	for h := 4; h >= 1; h /= 2 {
		for l := 0; l < h; l++ {
			sums[l] += sums[l+h]
		}
	}
	Scale(x, float32(1/sums[0]))
}

// Dot returns Σ a[i]·b[i] over len(a) elements in the canonical float
// order: products rounded to float32, element i added to accumulator i mod
// 16, the 16 accumulators summed by a fixed tree (doc.go).
func Dot(a, b []float32) float32 {
	if v, ok := dotArch(a, b); ok {
		return v
	}
	return dotF32(a, b)
}

// DotF16 is Dot with a given as f16 bit patterns (a row of an f16 K cache).
func DotF16(a []uint16, b []float32) float32 {
	if v, ok := dotF16Arch(a, b); ok {
		return v
	}
	return dotF16F32(a, b)
}

// AXPY sets y[i] = y[i] + a·x[i] (the product rounded to float32) for i <
// len(x).
func AXPY(y []float32, a float32, x []float32) {
	y = y[:len(x)]
	done := axpyArch(y, a, x)
	for i, v := range x[done:] {
		i += done
		y[i] = y[i] + float32(a*v)
	}
}

// AXPYF16 is AXPY with x given as f16 bit patterns (a row of an f16 V
// cache).
func AXPYF16(y []float32, a float32, x []uint16) {
	y = y[:len(x)]
	done := axpyF16Arch(y, a, x)
	for i, v := range x[done:] {
		i += done
		y[i] = y[i] + float32(a*f16Table[v])
	}
}

// DotF16Rows sets dst[j] = DotF16(k[j*stride:j*stride+len(q)], q) for j <
// len(dst): the scores of a query against len(dst) rows of an f16 K cache
// (row j at k[j*stride:]), with exactly DotF16's bits, in one call.
func DotF16Rows(dst []float32, k []uint16, stride int, q []float32) {
	if len(dst) == 0 {
		return
	}
	_ = k[(len(dst)-1)*stride+len(q)-1] // bounds, once
	if dotF16RowsArch(dst, k, stride, q) {
		return
	}
	for j := range dst {
		dst[j] = DotF16(k[j*stride:j*stride+len(q)], q)
	}
}

// AXPYF16Rows does AXPYF16(y, a[j], v[j*stride:j*stride+len(y)]) for j = 0,
// 1, … len(a)-1 in order — the weighted sum of rows of an f16 V cache —
// with exactly those calls' bits, in one call.
func AXPYF16Rows(y []float32, a []float32, v []uint16, stride int) {
	if len(a) == 0 || len(y) == 0 {
		return
	}
	_ = v[(len(a)-1)*stride+len(y)-1] // bounds, once
	if axpyF16RowsArch(y, a, v, stride) {
		return
	}
	for j, s := range a {
		AXPYF16(y, s, v[j*stride:j*stride+len(y)])
	}
}

// F32ToF16 converts src to f16 bit patterns in dst, rounding to nearest
// even exactly as ggml.F32ToF16.
func F32ToF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = ggml.F32ToF16(v)
	}
}

// F16ToF32 widens the f16 bit patterns of src into dst, exactly as
// ggml.F16ToF32.
func F16ToF32(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = f16Table[v]
	}
}

// Add sets dst[i] = a[i] + b[i] for i < len(a).
func Add(dst, a, b []float32) {
	b = b[:len(a)]
	dst = dst[:len(a)]
	for i, v := range a {
		dst[i] = v + b[i]
	}
}

// Scale sets x[i] = x[i]·s.
func Scale(x []float32, s float32) {
	for i := scaleArch(x, s); i < len(x); i++ {
		x[i] *= s
	}
}

// Exp32 returns e^x rounded to float32, computed with float64 operations
// only (no fused multiply-add, no assembly), so that every CPU gives the
// same bits. Its error is below 0.51 ulp of float32.
func Exp32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.72284:
		return float32(math.Inf(1))
	case x < -104:
		return 0
	}
	xd := float64(x)
	k := math.Floor(float64(xd*exp32Log2e) + 0.5)
	r := float64(xd-float64(k*exp32Ln2hi)) - float64(k*exp32Ln2lo)
	// e^r for |r| ≤ 0.35 by Horner on the Taylor series to r^11.
	p := exp32Poly0
	for _, c := range exp32Poly {
		p = float64(p*r) + c
	}
	// Scale by 2^k in two steps so that 2^k itself never overflows or
	// underflows (k is within [-150, 128]).
	k1 := int(k) / 2
	k2 := int(k) - k1
	p = float64(p * math.Float64frombits(uint64(1023+k1)<<52))
	p = float64(p * math.Float64frombits(uint64(1023+k2)<<52))
	return float32(p)
}

// Exp32's constants (shared with the assembly).
const (
	exp32Log2e = 1.4426950408889634
	exp32Ln2hi = 6.93147180369123816490e-01 // ln2 rounded to 32 bits: k·ln2hi is exact
	exp32Ln2lo = 1.90821492927058770002e-10
	exp32Poly0 = 1.0 / 39916800
)

// exp32Poly are the Taylor coefficients 1/10! … 1/1!, 1 in Horner order.
var exp32Poly = [11]float64{1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1, 1}
