package kernels

import "github.com/muserhq/muser/infer/ggml"

// AVX2 float kernels for batches: 2 rows × up to 3 tokens (genFloatAVX2N),
// each half-row of weights widened once for every token of the call. 2 × 3
// is what 16 registers hold: 12 accumulators of 8 lanes (two per
// canonical 16-lane accumulator), the widened weights and a product.

//go:noescape
func f16Dot2x1AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot2x1RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot2x2AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot2x2RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot2x3AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot2x3RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot2x1AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot2x1RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot2x2AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot2x2RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot2x3AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot2x3RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot2x1AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot2x1RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot2x2AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot2x2RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot2x3AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot2x3RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

// floatAVX2Tokens is the most tokens an AVX2 batch kernel takes at a time.
const floatAVX2Tokens = 3

// floatAVX2Batch maps the float types to their AVX2 batch kernels.
var floatAVX2Batch = map[ggml.Type]*floatSets{
	ggml.TypeF16: {
		rows:  2,
		plain: &floatSet{lanes: [4]floatKernel{f16Dot2x1AVX2, f16Dot2x2AVX2, f16Dot2x3AVX2}, reduced: [4]floatKernel{f16Dot2x1RAVX2, f16Dot2x2RAVX2, f16Dot2x3RAVX2}},
	},
	ggml.TypeF32: {
		rows:  2,
		plain: &floatSet{lanes: [4]floatKernel{f32Dot2x1AVX2, f32Dot2x2AVX2, f32Dot2x3AVX2}, reduced: [4]floatKernel{f32Dot2x1RAVX2, f32Dot2x2RAVX2, f32Dot2x3RAVX2}},
	},
	ggml.TypeBF16: {
		rows:  2,
		plain: &floatSet{lanes: [4]floatKernel{bf16Dot2x1AVX2, bf16Dot2x2AVX2, bf16Dot2x3AVX2}, reduced: [4]floatKernel{bf16Dot2x1RAVX2, bf16Dot2x2RAVX2, bf16Dot2x3RAVX2}},
	},
}
