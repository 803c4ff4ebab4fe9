package kernels

import "github.com/muserhq/muser/infer/ggml"

//go:noescape
func f16Dot8x1AVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

//go:noescape
func bf16Dot8x1AVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

// decodeKernel is an 8-row, one-token kernel of f16_amd64.s: it leaves the
// 8 rows' reduced sums, in the canonical order, in acc[0:8].
type decodeKernel func(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

// decodeFloat maps the 16-bit float types to their one-token kernels.
var decodeFloat = map[ggml.Type]decodeKernel{
	ggml.TypeF16:  f16Dot8x1AVX512,
	ggml.TypeBF16: bf16Dot8x1AVX512,
}

// floatDecode8 enables the one-token kernels of f16_amd64.s; off, one token
// takes the 4-row kernels as before they existed (same bits: a knob for
// benchmarks that compare the two in one run).
var floatDecode8 = true

// matmulFloatDecode computes one token against rows [r0,r1) of a 16-bit
// float matrix whose columns are a whole number of 16, 8 rows at a time;
// the rows past the last whole group of 8 take the 4-row kernels. Both give
// the canonical bits.
func matmulFloatDecode(y []float32, m *Matrix, a *acts, r0, r1 int, k decodeKernel) {
	rb := m.RowBytes
	n16 := m.Cols / 16
	g := r0
	for ; g+8 <= r1; g += 8 {
		k(&m.Data[g*rb], rb, &a.f[0], n16, &y[g])
	}
	if g < r1 {
		ks, kr := floatKernels[m.Type], floatKernelsR[m.Type]
		matmulFloatN(y, m, a, g, r1, &[4]floatKernel{ks[0]}, &[4]floatKernel{kr[0]}, 1)
	}
}

//go:noescape
func f16DotRows2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)

//go:noescape
func f16DotRows3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)

//go:noescape
func f16DotRows4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)

//go:noescape
func bf16DotRows2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)

//go:noescape
func bf16DotRows3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)

//go:noescape
func bf16DotRows4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)

// rowsKernel is a few-token kernel of f16n_amd64.s: rows consecutive rows
// against nt tokens (xStride and yStride in bytes), each result stored in
// place in y.
type rowsKernel func(w *byte, rowBytes int, x *float32, xStride int, n16 int, rows int, y *float32, yStride int)

// fewFloat[type][nt-2] is the nt-token kernel of f16n_amd64.s.
var fewFloat = map[ggml.Type][3]rowsKernel{
	ggml.TypeF16:  {f16DotRows2AVX512, f16DotRows3AVX512, f16DotRows4AVX512},
	ggml.TypeBF16: {bf16DotRows2AVX512, bf16DotRows3AVX512, bf16DotRows4AVX512},
}

// matmulFloatFew computes 2 to 4 tokens against rows [r0,r1) of a 16-bit
// float matrix whose columns are a whole number of 16, in one pass over
// the rows.
func matmulFloatFew(y []float32, m *Matrix, a *acts, r0, r1 int) {
	k := fewFloat[m.Type][a.n-2]
	k(&m.Data[r0*m.RowBytes], m.RowBytes, &a.f[0], m.Cols*4, m.Cols/16, r1-r0, &y[r0], m.Rows*4)
}
