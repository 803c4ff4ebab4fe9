package kernels

import "github.com/muserhq/muser/infer/ggml"

//go:noescape
func q8_0Raw1AVX512(w *byte, idx *[8]int32, nb int, q *int8, qStride int, daT *float32, corrT *int32, acc *float32)

//go:noescape
func q8_0Raw2AVX512(w *byte, idx *[8]int32, nb int, q *int8, qStride int, daT *float32, corrT *int32, acc *float32)

//go:noescape
func q8_0Raw3AVX512(w *byte, idx *[8]int32, nb int, q *int8, qStride int, daT *float32, corrT *int32, acc *float32)

//go:noescape
func q8_0Raw4AVX512(w *byte, idx *[8]int32, nb int, q *int8, qStride int, daT *float32, corrT *int32, acc *float32)

//go:noescape
func q8_0Raw5AVX512(w *byte, idx *[8]int32, nb int, q *int8, qStride int, daT *float32, corrT *int32, acc *float32)

//go:noescape
func q8_0Raw6AVX512(w *byte, idx *[8]int32, nb int, q *int8, qStride int, daT *float32, corrT *int32, acc *float32)

//go:noescape
func q8_0Raw7AVX512(w *byte, idx *[8]int32, nb int, q *int8, qStride int, daT *float32, corrT *int32, acc *float32)

//go:noescape
func q8_0Raw8AVX512(w *byte, idx *[8]int32, nb int, q *int8, qStride int, daT *float32, corrT *int32, acc *float32)

// rawTKernel is a multi-token raw-block kernel: up to 8 tokens against an
// 8-row group, reading each weight block once (genQ8_0RawT).
type rawTKernel func(w *byte, idx *[8]int32, nb int, q *int8, qStride int, daT *float32, corrT *int32, acc *float32)

// rawTKernels[t][nt-1] is type t's multi-token raw-block kernel for nt
// tokens.
var rawTKernels = map[ggml.Type]*[8]rawTKernel{
	ggml.TypeQ8_0: {q8_0Raw1AVX512, q8_0Raw2AVX512, q8_0Raw3AVX512, q8_0Raw4AVX512,
		q8_0Raw5AVX512, q8_0Raw6AVX512, q8_0Raw7AVX512, q8_0Raw8AVX512},
}

// useRawT reports whether a batch of n tokens of type t takes the
// multi-token raw-block kernels.
func useRawT(t ggml.Type, n int) bool {
	return multiToken && isa >= ISAAVX512 && n >= rawTMinTokens && n <= rawTMaxTokens && rawTKernels[t] != nil
}

// rawMaxTokens returns the largest batch of type t that reads the weight
// blocks in place (raw-block kernels); larger batches unpack panels.
func rawMaxTokens(t ggml.Type) int {
	if multiToken && isa >= ISAAVX512 && rawTKernels[t] != nil {
		return rawTMaxTokens
	}
	return directMaxTokens
}

// rawTMinTokens is the smallest batch that takes the multi-token raw-block
// kernels; one token keeps the one-token kernel, whose horizontal
// reduction is cheaper than the shared in-register transpose when nothing
// shares it.
const rawTMinTokens = 2

// rawTMaxTokens is the largest batch that takes the multi-token raw-block
// kernels; larger batches unpack panels once per call and reuse them across
// tokens, which repays its cost only past this size (docs/benchmarks.md,
// infer/kernels, "Small batches").
const rawTMaxTokens = 32

// matmulRawT runs a multi-token raw-block kernel over whole 8-row groups
// of [r0,r1), tokens in groups of 8; a last partial row group takes the
// portable kernels, which compute the same bits. a must have been prepared
// by prepPanels (daT, corrT).
func matmulRawT(y []float32, m *Matrix, a *acts, r0, r1 int, kerns *[8]rawTKernel) {
	rb, rows, nb, cols := m.RowBytes, m.Rows, a.nb, m.Cols
	var idx [8]int32
	for i := range idx {
		idx[i] = int32(i * rb)
	}
	var acc [64]float32
	g0 := r0
	for ; g0+8 <= r1; g0 += 8 {
		w := &m.Data[g0*rb]
		for t0 := 0; t0 < a.n; t0 += 8 {
			nt := min(8, a.n-t0)
			clear(acc[:nt*8])
			base := (t0 / 8) * nb * 8
			kerns[nt-1](w, &idx, nb, &a.q[t0*cols], cols, &a.daT[base], &a.corrT[base], &acc[0])
			for t := 0; t < nt; t++ {
				copy(y[(t0+t)*rows+g0:(t0+t)*rows+g0+8], acc[t*8:t*8+8])
			}
		}
	}
	if g0 < r1 {
		matmulGeneric(y, m, a, g0, r1)
	}
}
