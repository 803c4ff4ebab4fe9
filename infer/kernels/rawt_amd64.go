package kernels

import (
	"math"

	"github.com/muserhq/muser/infer/ggml"
)

//go:noescape
func q8_0Raw16x1AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw16x2AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw16x3AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw16x4AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw16x5AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw16x6AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw16x7AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw16x8AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

// rawTKernel is a multi-token raw-block kernel: up to 8 tokens against a
// 16-row group, reading each weight block once (genQ8_0RawT).
type rawTKernel func(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

// rawTKernels[t][nt-1] is type t's multi-token raw-block kernel for nt
// tokens.
var rawTKernels = map[ggml.Type]*[8]rawTKernel{
	ggml.TypeQ8_0: {q8_0Raw16x1AVX512, q8_0Raw16x2AVX512, q8_0Raw16x3AVX512, q8_0Raw16x4AVX512,
		q8_0Raw16x5AVX512, q8_0Raw16x6AVX512, q8_0Raw16x7AVX512, q8_0Raw16x8AVX512},
	ggml.TypeQ4_K: {q4_KRaw16x1AVX512, q4_KRaw16x2AVX512, q4_KRaw16x3AVX512, q4_KRaw16x4AVX512,
		q4_KRaw16x5AVX512, q4_KRaw16x6AVX512, q4_KRaw16x7AVX512, q4_KRaw16x8AVX512},
	ggml.TypeQ5_0: {q5_0Raw16x1AVX512, q5_0Raw16x2AVX512, q5_0Raw16x3AVX512, q5_0Raw16x4AVX512,
		q5_0Raw16x5AVX512, q5_0Raw16x6AVX512, q5_0Raw16x7AVX512, q5_0Raw16x8AVX512},
	ggml.TypeQ6_K: {q6_KRaw16x1AVX512, q6_KRaw16x2AVX512, q6_KRaw16x3AVX512, q6_KRaw16x4AVX512,
		q6_KRaw16x5AVX512, q6_KRaw16x6AVX512, q6_KRaw16x7AVX512, q6_KRaw16x8AVX512},
}

// useRawT reports whether a batch of n tokens of type t takes the
// multi-token raw-block kernels.
func useRawT(t ggml.Type, n int) bool {
	return multiToken && isa >= ISAAVX512 && n >= rawTMinTokens && n <= rawTMaxTokens(t) && rawTKernels[t] != nil
}

// rawMaxTokens returns the largest batch of type t that reads the weight
// blocks in place (raw-block kernels); larger batches unpack panels.
func rawMaxTokens(t ggml.Type) int {
	if multiToken && isa >= ISAAVX512 && rawTKernels[t] != nil {
		return rawTMaxTokens(t)
	}
	return directMaxTokens
}

// rawTMinTokens is the smallest batch that takes the multi-token raw-block
// kernels; one token keeps the one-token kernel, whose horizontal
// reduction is cheaper than the shared in-register transpose when nothing
// shares it.
const rawTMinTokens = 2

// rawTMaxTokens returns the largest batch of type t that takes the
// multi-token raw-block kernels: for Q8_0 every batch, as they beat
// unpacking panels at every size measured, up to 512 tokens; for Q4_K,
// Q6_K and Q5_0 rawTMaxTokensQ4KM (docs/benchmarks.md, infer/kernels,
// "Small batches").
func rawTMaxTokens(t ggml.Type) int {
	if t == ggml.TypeQ8_0 {
		return math.MaxInt
	}
	return rawTMaxTokensQ4KM
}

// rawTMaxTokensQ4KM is the largest batch of Q4_K, Q6_K or Q5_0 weights
// that takes the multi-token raw-block kernels; larger batches unpack
// panels. The multi-token kernels stream every token's activations past
// each 16-row group, which at 512 tokens no longer stays in L2; panels
// unpack 1024 columns at a time and keep them in L1. Measured: multi-token
// faster at every n up to 128, even or slower at 512.
const rawTMaxTokensQ4KM = 128

// prepRawT lays a's Q8_0 activations out for the multi-token raw-block
// kernels of weight type t (Q8_0 or Q5_0): tokens in groups of 8 (the last
// group holding the rest), and within group g of nt tokens, block b of
// token t at qI[(8g·nb + b·nt + t)·32], its scale at dI[8g·nb + b·nt + t]
// and −bias·Σq at ncI[same], bias being the offset that makes t's values
// unsigned (128 for Q8_0, 16 for Q5_0).
func prepRawT(a *acts, t ggml.Type) {
	nb, bias := a.nb, legacyBias(t)
	a.qI = grow(a.qI, a.n*a.cols)
	a.dI = grow(a.dI, a.n*nb)
	a.ncI = grow(a.ncI, a.n*nb)
	for t0 := 0; t0 < a.n; t0 += 8 {
		nt := min(8, a.n-t0)
		for t := 0; t < nt; t++ {
			tok := t0 + t
			for b := 0; b < nb; b++ {
				i := t0*nb + b*nt + t
				copy(a.qI[i*32:i*32+32], a.q[tok*a.cols+b*32:tok*a.cols+b*32+32])
				a.dI[i] = a.d[tok*nb+b]
				a.ncI[i] = -bias * a.bs[tok*nb+b]
			}
		}
	}
}

// matmulRawT runs a multi-token raw-block kernel over whole 16-row groups
// of [r0,r1), tokens in groups of 8; the rows after the last whole group
// take the one-token raw-block kernel (which leaves a last partial 8-row
// group to the portable kernels); all compute the same bits. a must have
// been prepared by prepRawT (Q8_0) or prepRawTK (Q4_K, Q6_K).
func matmulRawT(y []float32, m *Matrix, a *acts, r0, r1 int, kerns *[8]rawTKernel, one rawKernel) {
	rb, rows, nb := m.RowBytes, m.Rows, a.nb
	var idx [16]int32
	for i := range idx {
		idx[i] = int32(i * rb)
	}
	var acc [8 * 16]float32
	// Per (block, token) entry: qs values in qI, nc values in ncI (one
	// −128·Σq for Q8_0; eight dwords of sum pairs for the K-quants,
	// prepRawTK).
	qs, nc := a.cols/nb, 1
	if a.kind == actQ8_K {
		nc = 8
	}
	g0 := r0
	for ; g0+16 <= r1; g0 += 16 {
		w := &m.Data[g0*rb]
		for t0 := 0; t0 < a.n; t0 += 8 {
			nt := min(8, a.n-t0)
			clear(acc[:nt*16])
			i := t0 * nb
			kerns[nt-1](w, &idx, nb, &a.qI[i*qs], &a.dI[i], &a.ncI[i*nc], &acc[0])
			for t := 0; t < nt; t++ {
				copy(y[(t0+t)*rows+g0:(t0+t)*rows+g0+16], acc[t*16:t*16+16])
			}
		}
	}
	if g0 < r1 {
		matmulRaw(y, m, a, g0, r1, one)
	}
}
