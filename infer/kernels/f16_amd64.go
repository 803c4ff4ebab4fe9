package kernels

import "github.com/muserhq/muser/infer/ggml"

// f16Dot8x1AVX512 and bf16Dot8x1AVX512 run their 8 rows' chains one
// after the other; MatMul takes the leapfrog kernels (two chains in
// flight) on short rows and the lockstep ones (8 side by side) on long
// rows, all with the same bits, and the tests and benchmarks compare them.
//
//go:noescape
func f16Dot8x1AVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

//go:noescape
func f16Dot8x1LeapAVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

// f16Dot8x1LockAVX512 and bf16Dot8x1LockAVX512 run their 8 rows' chains
// side by side (the activations loaded once a step for all 8); same bits.
//
//go:noescape
func f16Dot8x1LockAVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

//go:noescape
func bf16Dot8x1LockAVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

//go:noescape
func bf16Dot8x1AVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

//go:noescape
func bf16Dot8x1LeapAVX512(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

// decodeKernel is a one-token kernel of f16_amd64.s (8 rows) or
// f16_avx2_amd64.s (4 rows): it leaves the rows' reduced sums, in the
// canonical order, in acc[0:8] (acc[0:4]).
type decodeKernel func(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

// decodeFloat maps the 16-bit float types to their one-token kernels.
var decodeFloat = map[ggml.Type]decodeKernel{
	ggml.TypeF16:  f16Dot8x1LeapAVX512,
	ggml.TypeBF16: bf16Dot8x1LeapAVX512,
}

// decodeFloatLong maps the 16-bit float types to the one-token kernels
// that rows of floatLockCols columns or more take instead of
// decodeFloat's.
var decodeFloatLong = map[ggml.Type]decodeKernel{
	ggml.TypeF16:  f16Dot8x1LockAVX512,
	ggml.TypeBF16: bf16Dot8x1LockAVX512,
}

// floatLockCols: one token against rows of this many columns or more takes
// a lockstep kernel (decodeFloatLong, bf16dLong), shorter rows a leapfrog
// one. Same bits. Measured (BenchmarkFloatDecode, the shipped kinds
// against kind=F16-leap and BF16-leap, Zen 5, 1 and 2 threads): the
// lockstep kernels read rows of 3,072 to 8,192 columns 4–25% faster (the
// leapfrog kernels' two chains read the activations at two places half a
// row apart), rows of 2,048 columns about as fast or slower, and rows of
// 896 and 1,024 columns 10–30% slower (eight short streams that the
// prefetch, a fixed distance ahead within each row, does not warm in
// time).
var floatLockCols = 3072

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
		matmulFloatN(y, m, a, g, r1, &floatSets{plain: &floatSet{lanes: [4]floatKernel{ks[0]}, reduced: [4]floatKernel{kr[0]}}}, 1)
	}
}

// f16Dot4x1SAVX2 and bf16Dot4x1SAVX2 run their 4 rows one after the
// other, the leapfrog kernels below two chains at a time (MatMul's).
//
//go:noescape
func f16Dot4x1SAVX2(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

//go:noescape
func bf16Dot4x1SAVX2(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

//go:noescape
func f16Dot4x1LeapAVX2(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

//go:noescape
func bf16Dot4x1LeapAVX2(w *byte, rowBytes int, x *float32, n16 int, acc *float32)

// decodeFloatAVX2 maps the 16-bit float types to their AVX2 one-token
// kernels (4 rows, f16_avx2_amd64.s).
var decodeFloatAVX2 = map[ggml.Type]decodeKernel{
	ggml.TypeF16:  f16Dot4x1LeapAVX2,
	ggml.TypeBF16: bf16Dot4x1LeapAVX2,
}

// matmulFloatDecodeAVX2 is matmulFloatDecode for the AVX2 kernels: 4 rows
// at a time; the rows past the last whole group of 4 take the portable
// code, which gives the same bits.
func matmulFloatDecodeAVX2(y []float32, m *Matrix, a *acts, r0, r1 int, k decodeKernel) {
	rb := m.RowBytes
	n16 := m.Cols / 16
	g := r0
	for ; g+4 <= r1; g += 4 {
		k(&m.Data[g*rb], rb, &a.f[0], n16, &y[g])
	}
	if g < r1 {
		matmulGeneric(y, m, a, g, r1)
	}
}
