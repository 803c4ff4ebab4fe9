package kernels

import "github.com/muserhq/muser/infer/ggml"

//go:noescape
func f16Dot4x1AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x2AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x3AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x4AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x1ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x2ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x3ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x4ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x1AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x2AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x3AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x4AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x1ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x2ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x3ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x4ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x1AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x2AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x3AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x4AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x1ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x2ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x3ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x4ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x1AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x2AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x3AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x4AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x1ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x2ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x3ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x4ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

// floatAccSets are the accumulating 4-row float kernels of each type
// (genFloat's "A" variants), for rows taken in column chunks; bf16fAccSet
// is BF16's fused one (bf16exact.go).
var (
	floatAccSets = map[ggml.Type]*floatSet{
		ggml.TypeF16:  {lanes: [4]floatKernel{f16Dot4x1AAVX512, f16Dot4x2AAVX512, f16Dot4x3AAVX512, f16Dot4x4AAVX512}, reduced: [4]floatKernel{f16Dot4x1ARAVX512, f16Dot4x2ARAVX512, f16Dot4x3ARAVX512, f16Dot4x4ARAVX512}},
		ggml.TypeF32:  {lanes: [4]floatKernel{f32Dot4x1AAVX512, f32Dot4x2AAVX512, f32Dot4x3AAVX512, f32Dot4x4AAVX512}, reduced: [4]floatKernel{f32Dot4x1ARAVX512, f32Dot4x2ARAVX512, f32Dot4x3ARAVX512, f32Dot4x4ARAVX512}},
		ggml.TypeBF16: {lanes: [4]floatKernel{bf16Dot4x1AAVX512, bf16Dot4x2AAVX512, bf16Dot4x3AAVX512, bf16Dot4x4AAVX512}, reduced: [4]floatKernel{bf16Dot4x1ARAVX512, bf16Dot4x2ARAVX512, bf16Dot4x3ARAVX512, bf16Dot4x4ARAVX512}},
	}
	bf16fAccSet = &floatSet{lanes: [4]floatKernel{bf16fDot4x1AAVX512, bf16fDot4x2AAVX512, bf16fDot4x3AAVX512, bf16fDot4x4AAVX512}, reduced: [4]floatKernel{bf16fDot4x1ARAVX512, bf16fDot4x2ARAVX512, bf16fDot4x3ARAVX512, bf16fDot4x4ARAVX512}}
)
