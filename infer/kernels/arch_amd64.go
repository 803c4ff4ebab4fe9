package kernels

//go:generate go run ./internal/asmgen -out matmul_amd64.s

import (
	"sync"
	"unsafe"

	"github.com/muserhq/muser/infer/ggml"
	"golang.org/x/sys/cpu"
)

var bestISA = func() ISA {
	x := cpu.X86
	avx512 := x.HasAVX512F && x.HasAVX512BW && x.HasAVX512DQ && x.HasAVX512VL && x.HasAVX512VNNI && x.HasAVX2 && x.HasFMA && x.HasF16C
	switch {
	case avx512 && hasAMX:
		return ISAAMX
	case avx512:
		return ISAAVX512
	case x.HasAVX2 && x.HasFMA && x.HasF16C:
		return ISAAVX2
	}
	return ISAGeneric
}()

//go:noescape
func q8_0Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)

//go:noescape
func q4_KDot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32)

//go:noescape
func q5_KDot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32)

//go:noescape
func q6_KDot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32)

//go:noescape
func q4_0Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)

//go:noescape
func q5_0Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)

//go:noescape
func q4_1Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *float32, acc *float32)

//go:noescape
func q5_1Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *float32, acc *float32)

//go:noescape
func f16Dot4x1AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x1AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x1AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func legacyPanel1AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func legacyMinPanel1AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func kPanel16x1AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel16x1AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kPanel32x1AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel32x1AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func legacyPanel2AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func legacyMinPanel2AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func kPanel16x2AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel16x2AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kPanel32x2AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel32x2AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func legacyPanel3AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func legacyMinPanel3AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func kPanel16x3AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel16x3AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kPanel32x3AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel32x3AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func legacyPanel4AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func legacyMinPanel4AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func kPanel16x4AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel16x4AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kPanel32x4AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel32x4AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func legacyPanel5AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func legacyMinPanel5AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func kPanel16x5AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel16x5AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kPanel32x5AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel32x5AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func legacyPanel6AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func legacyMinPanel6AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func kPanel16x6AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel16x6AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kPanel32x6AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel32x6AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func legacyPanel7AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func legacyMinPanel7AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func kPanel16x7AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel16x7AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kPanel32x7AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel32x7AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func legacyPanel8AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func legacyMinPanel8AVX512(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

//go:noescape
func kPanel16x8AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel16x8AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kPanel32x8AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func kMinPanel32x8AVX512(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

//go:noescape
func f16Dot4x1RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x2RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x3RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x4RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x1RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x2RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x3RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x4RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x1RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x2RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x3RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x4RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

// archPrepare readies a for the implementation pickImpl chose.
func archPrepare(a *acts, t ggml.Type) {
	if useRawTAVX2(t, a.n) {
		if t == ggml.TypeQ5_0 || t == ggml.TypeQ8_0 {
			prepRawT(a, t)
		} else {
			prepRawTK(a, t)
		}
		return
	}
	if isa < ISAAVX512 {
		return
	}
	k := kernelFor(t)
	raw := archRaw(t)
	if t == ggml.TypeNVFP4 {
		prepNVFP4(a)
		return
	}
	if useAMX(t, a.n) {
		prepAMX(a)
		return
	}
	if useRawT(t, a.n) {
		if k.block == 256 {
			prepRawTK(a, t)
		} else {
			prepRawT(a, t)
		}
		return
	}
	if (k.block == 32 || k.block == 256) && (a.n > rawMaxTokens(t) || !raw) {
		prepPanels(a, t)
	}
}

//go:noescape
func q4_0Dot8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)

//go:noescape
func q5_0Dot8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)

//go:noescape
func q4_1Dot8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *float32, acc *float32)

//go:noescape
func q5_1Dot8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *float32, acc *float32)

//go:noescape
func q4_KDot8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32)

//go:noescape
func q5_KDot8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32)

//go:noescape
func q6_KDot8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32)

//go:noescape
func q8_0Dot8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)

// archRaw reports whether t has AVX-512 raw-block kernels (otherwise it
// takes panels at every batch size).
func archRaw(t ggml.Type) bool {
	k := kernelFor(t)
	return k.block == 32 || t == ggml.TypeQ4_K || t == ggml.TypeQ5_K || t == ggml.TypeQ6_K
}

// archImpl returns the SIMD implementation for t under the current
// variant, or nil to use the portable one.
func archImpl(t ggml.Type) matmulImpl {
	if isa == ISAAVX2 {
		return archImplAVX2(t)
	}
	if isa < ISAAVX512 {
		return nil
	}
	switch k := kernelFor(t); k.block {
	case 1:
		return matmulFloatAVX512
	case 64:
		return matmulNVFP4AVX512
	case 32:
		return func(y []float32, m *Matrix, a *acts, r0, r1 int) {
			if useAMX(t, a.n) {
				matmulQ8_0AMX(y, m, a, r0, r1)
				return
			}
			if a.n > rawMaxTokens(t) {
				matmulLegacyAVX512(y, m, a, r0, r1)
				return
			}
			if useRawT(t, a.n) {
				matmulRawT(y, m, a, r0, r1, rawTKernels[t], legacyRaw[t])
				return
			}
			matmulRaw(y, m, a, r0, r1, legacyRaw[t])
		}
	case 256:
		switch t {
		case ggml.TypeQ4_K:
			return matmulQ4_KAVX512
		case ggml.TypeQ5_K:
			return matmulQ5_KAVX512
		case ggml.TypeQ6_K:
			return matmulQ6_KAVX512
		}
		return matmulKAVX512
	}
	return nil
}

// chunkCols is how many weight columns of an 8-row group are unpacked at a
// time: small enough that the panel stays in L1 while every token of the
// call streams past it.
const chunkCols = 1024

// rawKernel is a raw-block lane-per-row kernel: one token against an
// 8-row group, blocks [0,nb).
type rawKernel func(w *byte, idx *[8]int32, nb int, t int, a *acts, acc *float32)

// legacyRaw maps the 32-element block types to their raw-block kernels.
var legacyRaw = map[ggml.Type]rawKernel{
	ggml.TypeQ8_0: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q8_0Dot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs[t*nb], acc)
	},
	ggml.TypeQ4_0: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q4_0Dot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs[t*nb], acc)
	},
	ggml.TypeQ5_0: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q5_0Dot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs[t*nb], acc)
	},
	ggml.TypeQ4_1: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q4_1Dot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.s[t*nb], acc)
	},
	ggml.TypeQ5_1: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q5_1Dot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.s[t*nb], acc)
	},
}

// kRaw maps the K-quants with raw-block kernels to them.
var kRaw = map[ggml.Type]rawKernel{
	ggml.TypeQ4_K: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q4_KDot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs16[t*a.cols/16], acc)
	},
	ggml.TypeQ5_K: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q5_KDot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs16[t*a.cols/16], acc)
	},
	ggml.TypeQ6_K: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q6KDot8(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs16[t*a.cols/16], acc)
	},
}

func matmulQ4_KAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	matmulKRawAVX512(y, m, a, r0, r1, ggml.TypeQ4_K)
}

func matmulQ5_KAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	matmulKRawAVX512(y, m, a, r0, r1, ggml.TypeQ5_K)
}

func matmulQ6_KAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	matmulKRawAVX512(y, m, a, r0, r1, ggml.TypeQ6_K)
}

// matmulKRawAVX512 runs a K-quant with raw-block kernels: the multi-token
// ones where useRawT says so, the one-token one per token up to
// directMaxTokens, panels above.
func matmulKRawAVX512(y []float32, m *Matrix, a *acts, r0, r1 int, t ggml.Type) {
	switch {
	case useRawT(t, a.n):
		matmulRawT(y, m, a, r0, r1, rawTKernels[t], kRaw[t])
	case a.n > directMaxTokens:
		matmulKAVX512(y, m, a, r0, r1)
	default:
		matmulRaw(y, m, a, r0, r1, kRaw[t])
	}
}

// matmulRaw runs a raw-block kernel over whole 8-row groups of [r0,r1);
// a last partial group (which the kernel cannot read past the matrix for)
// takes the portable kernels, which compute the same bits.
func matmulRaw(y []float32, m *Matrix, a *acts, r0, r1 int, kern rawKernel) {
	matmulRawTokens(y, m, a, r0, r1, 0, kern)
}

// matmulRawTokens is matmulRaw for the tokens from t0 on.
func matmulRawTokens(y []float32, m *Matrix, a *acts, r0, r1, t0 int, kern rawKernel) {
	if t0 >= a.n {
		return
	}
	rb, rows, nb := m.RowBytes, m.Rows, a.nb
	var idx [8]int32
	for i := range idx {
		idx[i] = int32(i * rb)
	}
	var acc [8]float32
	g0 := r0
	for ; g0+8 <= r1; g0 += 8 {
		w := &m.Data[g0*rb]
		for t := t0; t < a.n; t++ {
			acc = [8]float32{}
			kern(w, &idx, nb, t, a, &acc[0])
			copy(y[t*rows+g0:t*rows+g0+8], acc[:])
		}
	}
	if g0 < r1 {
		matmulGenericTokens(y, m, a, g0, r1, t0)
	}
}

// floatKernelsR are the float kernels that also reduce (whole multiples
// of 16 columns).
var floatKernelsR = map[ggml.Type][4]func(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32){
	ggml.TypeF16:  {f16Dot4x1RAVX512, f16Dot4x2RAVX512, f16Dot4x3RAVX512, f16Dot4x4RAVX512},
	ggml.TypeF32:  {f32Dot4x1RAVX512, f32Dot4x2RAVX512, f32Dot4x3RAVX512, f32Dot4x4RAVX512},
	ggml.TypeBF16: {bf16Dot4x1RAVX512, bf16Dot4x2RAVX512, bf16Dot4x3RAVX512, bf16Dot4x4RAVX512},
}

// floatKernels[type][nt-1] is the 4-row × nt-token float kernel.
var floatKernels = map[ggml.Type][4]func(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32){
	ggml.TypeF16:  {f16Dot4x1AVX512, f16Dot4x2AVX512, f16Dot4x3AVX512, f16Dot4x4AVX512},
	ggml.TypeF32:  {f32Dot4x1AVX512, f32Dot4x2AVX512, f32Dot4x3AVX512, f32Dot4x4AVX512},
	ggml.TypeBF16: {bf16Dot4x1AVX512, bf16Dot4x2AVX512, bf16Dot4x3AVX512, bf16Dot4x4AVX512},
}

// floatKernel is a 4-row float kernel over up to 4 tokens (see genFloat).
type floatKernel func(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

// matmulFloatAVX512 runs the AVX-512 float kernels. A BF16 batch takes
// the fused-multiply-add kernels for the tokens whose every product with
// the tile's weights is exact (bf16ExactTokens), which gives the same bits.
func matmulFloatAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	if k, ok := decodeFloat[m.Type]; ok && floatDecode8 && a.n == 1 && m.Cols%16 == 0 {
		if bf16DotDecode(m, a) {
			matmulBF16DotDecode(y, m, a, r0, r1)
			return
		}
		if kl, ok := decodeFloatLong[m.Type]; ok && m.Cols >= floatLockCols {
			k = kl
		}
		matmulFloatDecode(y, m, a, r0, r1, k)
		return
	}
	ks, kr := floatKernels[m.Type], floatKernelsR[m.Type]
	var plain floatSet
	for i := range ks {
		plain.lanes[i], plain.reduced[i] = ks[i], kr[i]
	}
	sets := floatSets{plain: &plain, plainAcc: floatAccSets[m.Type]}
	if exact := bf16ExactTokens(m, a, r0, r1); exact != nil {
		sets.fast, sets.fastAcc, sets.useFast = &bf16fKernels, bf16fAccSet, exact
		if len(a.bp) > 0 {
			sets.fast, sets.fastAcc, sets.fastPacked = &bf16dKernels, &bf16dAccKernels, true
		}
	}
	matmulFloatN(y, m, a, r0, r1, &sets, 4)
}

// matmulFloat runs a one-token float kernel pair (AVX2).
func matmulFloat(y []float32, m *Matrix, a *acts, r0, r1 int, lanesK, reducedK floatKernel) {
	matmulFloatN(y, m, a, r0, r1, &floatSets{plain: &floatSet{lanes: [4]floatKernel{lanesK}, reduced: [4]floatKernel{reducedK}}}, 1)
}

// floatSet is one kind of 4-row float kernel, by token count 1..4: lanes
// leaves the 16 canonical lane sums of each row and token at acc, reduced
// sums them by the fixed tree and leaves one float per row and token.
type floatSet struct{ lanes, reduced [4]floatKernel }

// floatSets are the kernels matmulFloatN may use: plain, or fast for the
// tokens where useFast reports true (kernels that give the same bits for
// those tokens); plainAcc and fastAcc are their accumulating versions, for
// rows taken in column chunks (nil: rows are taken whole).
type floatSets struct {
	plain, plainAcc, fast, fastAcc *floatSet
	useFast                        func(t0, nt int) bool
	rows                           int  // rows a kernel call computes (0: 4)
	fastPacked                     bool // the fast kernels take acts.bp (the VDPBF16PS kernels), 32 columns a step
}

// floatChunkMin16 and floatChunk16 (in steps of 16 columns): batches of
// more than 4 tokens take rows of floatChunkMin16 steps or more in chunks
// of floatChunk16 steps, so that a chunk of 4 tokens' activations stays
// in L1 while the tile's row quads use it, instead of each quad streaming
// whole rows of activations from L2. Each lane's additions stay in column
// order, so the bits do not change.
var (
	floatChunkMin16 = 256
	floatChunk16    = 32
)

// matmulFloatN runs float kernels over groups of 4 rows (sets.rows, if
// set) and up to maxT tokens: the lanes kernel leaves the 16 canonical
// lane sums, Go adds the columns past the last whole 16 (into lane c mod
// 16) and reduces by the fixed tree; when the columns are a whole number
// of 16, the reduced kernel does the tree itself. Rows past the last whole
// group take the portable path.
func matmulFloatN(y []float32, m *Matrix, a *acts, r0, r1 int, sets *floatSets, maxT int) {
	rb, rows, cols := m.RowBytes, m.Rows, m.Cols
	n16 := cols / 16
	esize := rb / cols
	gr := sets.rows
	if gr == 0 {
		gr = 4
	}
	gEnd := r0 + (r1-r0)/gr*gr
	nq := (gEnd - r0) / gr
	chunk := n16
	var bufs [8][4 * 4 * lanes]float32
	if sets.plainAcc != nil && a.n > 4 && nq <= len(bufs) && n16 >= floatChunkMin16 {
		chunk = floatChunk16
		if sets.fastPacked {
			chunk += chunk % 2 // the packed kernels step 32 columns
		}
	}
	// Tokens outer, column chunks, then row quads inner: the tile's weights
	// stay in cache while the tokens' activations are used by every quad.
	for t0 := 0; t0 < a.n; t0 += maxT {
		nt := min(maxT, a.n-t0)
		ks, ka := sets.plain, sets.plainAcc
		packed := false
		if sets.useFast != nil && gEnd > r0 && sets.useFast(t0, nt) {
			ks, ka, packed = sets.fast, sets.fastAcc, sets.fastPacked
		}
		// One pass when the rows are not chunked (chunk = n16, 0 for rows
		// shorter than 16 columns, whose kernel call only clears the lanes).
		for c0 := 0; ; c0 += chunk {
			nc := min(chunk, n16-c0)
			last := c0+nc >= n16
			set := ks
			if c0 > 0 {
				set = ka
			}
			k := set.lanes[nt-1]
			if last && cols%16 == 0 {
				k = set.reduced[nt-1]
			}
			for q := 0; q < nq; q++ {
				g0 := r0 + gr*q
				buf := &bufs[q%len(bufs)]
				x, xs := &a.f[t0*cols+c0*16], cols*4
				if packed {
					x, xs = (*float32)(unsafe.Pointer(&a.bp[t0*cols+c0*16])), cols*2
				}
				k(&m.Data[g0*rb+c0*16*esize], rb, x, xs, nc, &buf[0])
				if !last {
					continue
				}
				if cols%16 == 0 {
					for r := 0; r < gr; r++ {
						for t := 0; t < nt; t++ {
							y[(t0+t)*rows+g0+r] = buf[r*nt+t]
						}
					}
					continue
				}
				for r := 0; r < gr; r++ {
					row := m.row(g0 + r)
					for t := 0; t < nt; t++ {
						acc := (*[lanes]float32)(buf[(r*nt+t)*lanes:])
						x := a.f[(t0+t)*cols : (t0+t+1)*cols]
						for c := n16 * 16; c < cols; c++ {
							acc[c%lanes] = acc[c%lanes] + float32(floatAt(m.Type, row, c, esize)*x[c])
						}
						y[(t0+t)*rows+g0+r] = reduceLanes(acc)
					}
				}
			}
			if last {
				break
			}
		}
	}
	if gEnd < r1 {
		matmulGeneric(y, m, a, gEnd, r1)
	}
}

type legacyPanelFunc func(u *uint8, dw, mw *float32, nb int, q *int8, qStride int, daT *float32, corrT *int32, saT *float32, acc *float32)

type kPanelFunc func(u *uint8, sc *int32, mn *int16, dw, dm *float32, nsb int, q *int8, qStride int, daT *float32, bsT *int32, acc *float32)

// The transposed-panel kernels, by token count 1..8.
var (
	legacyPanels    = [8]legacyPanelFunc{legacyPanel1AVX512, legacyPanel2AVX512, legacyPanel3AVX512, legacyPanel4AVX512, legacyPanel5AVX512, legacyPanel6AVX512, legacyPanel7AVX512, legacyPanel8AVX512}
	legacyMinPanels = [8]legacyPanelFunc{legacyMinPanel1AVX512, legacyMinPanel2AVX512, legacyMinPanel3AVX512, legacyMinPanel4AVX512, legacyMinPanel5AVX512, legacyMinPanel6AVX512, legacyMinPanel7AVX512, legacyMinPanel8AVX512}
	kPanels16       = [8]kPanelFunc{kPanel16x1AVX512, kPanel16x2AVX512, kPanel16x3AVX512, kPanel16x4AVX512, kPanel16x5AVX512, kPanel16x6AVX512, kPanel16x7AVX512, kPanel16x8AVX512}
	kPanels32       = [8]kPanelFunc{kPanel32x1AVX512, kPanel32x2AVX512, kPanel32x3AVX512, kPanel32x4AVX512, kPanel32x5AVX512, kPanel32x6AVX512, kPanel32x7AVX512, kPanel32x8AVX512}
	kMinPanels16    = [8]kPanelFunc{kMinPanel16x1AVX512, kMinPanel16x2AVX512, kMinPanel16x3AVX512, kMinPanel16x4AVX512, kMinPanel16x5AVX512, kMinPanel16x6AVX512, kMinPanel16x7AVX512, kMinPanel16x8AVX512}
	kMinPanels32    = [8]kPanelFunc{kMinPanel32x1AVX512, kMinPanel32x2AVX512, kMinPanel32x3AVX512, kMinPanel32x4AVX512, kMinPanel32x5AVX512, kMinPanel32x6AVX512, kMinPanel32x7AVX512, kMinPanel32x8AVX512}
)

// panel is an 8-row group of weights unpacked for the transposed-panel
// kernels. u holds unsigned values (the centred value plus the type's
// offset) so that, per block of 32 (legacy) or super-block of 256
// (K-quants), vector k's lane j is bytes 4k..4k+3 of row j. sc holds each
// group's integer scale per row ([super-block][group][row]int32), mn the
// int16 "mins" per group of 16 in pairs ([super-block][pair][row][2]),
// dw and mw the float scales per [block][row].
type panel struct {
	u      []uint8
	sc     []int32
	mn     []int16
	dw, mw []float32
	acc    []float32
	row    unpacked
}

var panelPool = sync.Pool{New: func() any { return new(panel) }}

// legacyBias is the offset that makes a 32-element block type's centred
// values unsigned.
func legacyBias(t ggml.Type) int32 {
	switch t {
	case ggml.TypeQ8_0:
		return 128
	case ggml.TypeQ4_0:
		return 8
	case ggml.TypeQ5_0:
		return 16
	}
	return 0
}

// prepPanels fills a's token-group-transposed activation scales for the
// panel kernels: for token group g (8 tokens, zero-padded) and block b,
// entry [g][b][t]. Legacy: da, bias·Σq, sa. K-quants: da and the block
// sums as int16 pairs [g][b][pair][t].
func prepPanels(a *acts, t ggml.Type) {
	ng := (a.n + 7) / 8
	nb := a.nb
	a.daT = grow(a.daT, ng*nb*8)
	clear(a.daT)
	k := kernelFor(t)
	if k.block == 32 {
		bias := legacyBias(t)
		a.corrT = grow(a.corrT, ng*nb*8)
		clear(a.corrT)
		if k.hasMin {
			a.saT = grow(a.saT, ng*nb*8)
			clear(a.saT)
		}
		for tok := 0; tok < a.n; tok++ {
			g, ti := tok/8, tok%8
			for b := 0; b < nb; b++ {
				i := (g*nb+b)*8 + ti
				a.daT[i] = a.d[tok*nb+b]
				a.corrT[i] = bias * a.bs[tok*nb+b]
				if k.hasMin {
					a.saT[i] = a.s[tok*nb+b]
				}
			}
		}
		return
	}
	a.bsT = grow(a.bsT, ng*nb*64)
	clear(a.bsT)
	for tok := 0; tok < a.n; tok++ {
		g, ti := tok/8, tok%8
		for b := 0; b < nb; b++ {
			a.daT[(g*nb+b)*8+ti] = a.d[tok*nb+b]
			bs := a.bs16[(tok*nb+b)*16:]
			for p := 0; p < 8; p++ {
				a.bsT[((g*nb+b)*8+p)*8+ti] = int32(uint32(uint16(bs[2*p])) | uint32(uint16(bs[2*p+1]))<<16)
			}
		}
	}
}

func matmulLegacyAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	k := kernelFor(m.Type)
	pn := panelPool.Get().(*panel)
	defer panelPool.Put(pn)
	n, cols, rows := a.n, m.Cols, m.Rows
	nbAll := cols / 32
	ts := m.Type.TypeSize()
	chunk := chunkCols / 32
	bias := legacyBias(m.Type)
	kerns := &legacyPanels
	if k.hasMin {
		kerns = &legacyMinPanels
	}
	ngroups := (n + 7) / 8
	per := ngroups * 64
	pn.acc = grow(pn.acc, panelStoreGroups*per)
	pn.u = grow(pn.u, chunk*256)
	pn.dw = grow(pn.dw, chunk*8)
	pn.mw = grow(pn.mw, chunk*8)
	for g0 := r0; g0 < r1; g0 += 8 {
		q := (g0 - r0) / 8 % panelStoreGroups
		if q == 0 {
			clear(pn.acc)
		}
		acc := pn.acc[q*per:]
		for c0 := 0; c0 < nbAll; c0 += chunk {
			nb := min(chunk, nbAll-c0)
			k.alloc(&pn.row, nb*32)
			for j := 0; j < 8; j++ {
				r := min(g0+j, rows-1)
				if fillLegacyFast(m.Type, m.row(r)[c0*ts:(c0+nb)*ts], nb, j, pn) {
					continue
				}
				k.unpack(m.row(r)[c0*ts:(c0+nb)*ts], &pn.row)
				for b := 0; b < nb; b++ {
					src := pn.row.u[b*32 : b*32+32]
					dst := pn.u[b*256:]
					for kk := 0; kk < 8; kk++ {
						for i := 0; i < 4; i++ {
							dst[kk*32+j*4+i] = uint8(int32(src[4*kk+i]) + bias)
						}
					}
					pn.dw[b*8+j] = pn.row.bd[b]
					pn.mw[b*8+j] = pn.row.bm[b]
				}
			}
			for tg := 0; tg < ngroups; tg++ {
				nt := min(8, n-tg*8)
				base := (tg*nbAll + c0) * 8
				var sa *float32
				if k.hasMin {
					sa = &a.saT[base]
				}
				kerns[nt-1](&pn.u[0], &pn.dw[0], &pn.mw[0], nb, &a.q[tg*8*cols+c0*32], cols,
					&a.daT[base], &a.corrT[base], sa, &acc[tg*64])
			}
		}
		storePanelRows(y, pn.acc, n, rows, r0, g0, r1)
	}
}

// panelStoreGroups is how many 8-row groups the panel drivers keep sums
// of before storePanelRows writes them.
const panelStoreGroups = 8

// storePanelRows writes to y, once the 8-row group at g0 of the work item
// of rows [r0,r1) is done and it is the last of its run of
// panelStoreGroups groups (or of the item), the sums of that run's
// groups: acc holds group q's (q counted from the run's first) at
// [q·per + t·8 + j] for token t and row j, per = 64·⌈n/8⌉. Each token's
// rows of the run are one contiguous stretch of y, written in one go.
// Written a group at a time instead (8 floats per token, a stride of the
// matrix's rows apart: 4 KiB at 1,024 rows, which puts every token's
// line in one cache set), each line of y was fetched once per group.
func storePanelRows(y, acc []float32, n, rows, r0, g0, r1 int) {
	q := (g0 - r0) / 8 % panelStoreGroups
	if q != panelStoreGroups-1 && g0+8 < r1 {
		return
	}
	b0 := g0 - 8*q
	b1 := min(g0+8, r1)
	per := (n + 7) / 8 * 64
	full := (b1 - b0) / 8
	for t := 0; t < n; t++ {
		dst := y[t*rows+b0 : t*rows+b1]
		for q := 0; q < full; q++ {
			*(*[8]float32)(dst[q*8:]) = *(*[8]float32)(acc[q*per+t*8:])
		}
		if rest := dst[full*8:]; len(rest) > 0 { // a last partial group
			copy(rest, acc[full*per+t*8:])
		}
	}
}

func matmulKAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	k := kernelFor(m.Type)
	pn := panelPool.Get().(*panel)
	defer panelPool.Put(pn)
	n, cols, rows := a.n, m.Cols, m.Rows
	nsbAll := cols / 256
	ts := m.Type.TypeSize()
	chunk := chunkCols / 256
	bias := kBias(m.Type)
	ng := 256 / k.group
	var kerns *[8]kPanelFunc
	switch {
	case k.group == 16 && k.hasMin:
		kerns = &kMinPanels16
	case k.group == 16:
		kerns = &kPanels16
	case k.hasMin:
		kerns = &kMinPanels32
	default:
		kerns = &kPanels32
	}
	ngroups := (n + 7) / 8
	per := ngroups * 64
	pn.acc = grow(pn.acc, panelStoreGroups*per)
	pn.u = grow(pn.u, chunk*2048)
	pn.sc = grow(pn.sc, chunk*ng*8)
	pn.mn = grow(pn.mn, chunk*128)
	pn.dw = grow(pn.dw, chunk*8)
	pn.mw = grow(pn.mw, chunk*8)
	for g0 := r0; g0 < r1; g0 += 8 {
		q := (g0 - r0) / 8 % panelStoreGroups
		if q == 0 {
			clear(pn.acc)
		}
		acc := pn.acc[q*per:]
		for c0 := 0; c0 < nsbAll; c0 += chunk {
			nsb := min(chunk, nsbAll-c0)
			k.alloc(&pn.row, nsb*256)
			for j := 0; j < 8; j++ {
				r := min(g0+j, rows-1)
				if fillKFast(m.Type, m.row(r)[c0*ts:(c0+nsb)*ts], nsb, j, pn) {
					continue
				}
				k.unpack(m.row(r)[c0*ts:(c0+nsb)*ts], &pn.row)
				for sb := 0; sb < nsb; sb++ {
					src := pn.row.u[sb*256 : sb*256+256]
					dst := pn.u[sb*2048:]
					for kk := 0; kk < 64; kk++ {
						for i := 0; i < 4; i++ {
							dst[kk*32+j*4+i] = uint8(int32(src[4*kk+i]) + bias)
						}
					}
					for g := 0; g < ng; g++ {
						pn.sc[(sb*ng+g)*8+j] = pn.row.gsc[sb*ng+g]
					}
					for h := 0; h < 16; h++ {
						var v int32
						if k.hasMin {
							v = pn.row.gmin[sb*ng+h*16/k.group]
						} else {
							v = bias * pn.row.gsc[sb*ng+h*16/k.group]
						}
						pn.mn[sb*128+(h/2)*16+j*2+h%2] = int16(v)
					}
					pn.dw[sb*8+j] = pn.row.bd[sb]
					pn.mw[sb*8+j] = pn.row.bm[sb]
				}
			}
			for tg := 0; tg < ngroups; tg++ {
				nt := min(8, n-tg*8)
				base := (tg*nsbAll + c0) * 8
				kerns[nt-1](&pn.u[0], &pn.sc[0], &pn.mn[0], &pn.dw[0], &pn.mw[0], nsb, &a.q[tg*8*cols+c0*256], cols,
					&a.daT[base], &a.bsT[base*8], &acc[tg*64])
			}
		}
		storePanelRows(y, pn.acc, n, rows, r0, g0, r1)
	}
}

// directMaxTokens is the largest batch for which the raw-block kernels are
// used; larger batches unpack panels once and reuse them across tokens.
// Both give the canonical result, so the choice never changes a bit.
const directMaxTokens = 4

// kBias is the offset that makes a K-quant's centred values unsigned.
func kBias(t ggml.Type) int32 {
	switch t {
	case ggml.TypeQ6_K:
		return 32
	case ggml.TypeQ3_K:
		return 4
	}
	return 0
}

//go:noescape
func f16Dot4x1AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x1RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x1AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x1RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x1AVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x1RAVX2(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

// archImplAVX2 returns the AVX2 implementation for t, or nil for the
// portable one. AVX2 has raw-block kernels only (no panels), which it uses
// for every batch size: one token at a time against the blocks in place,
// or (Q4_K, Q6_K and Q5_0, batches of 2 or more) up to 8 tokens at a time.
func archImplAVX2(t ggml.Type) matmulImpl {
	if k, ok := floatAVX2[t]; ok {
		return func(y []float32, m *Matrix, a *acts, r0, r1 int) {
			if kd, ok := decodeFloatAVX2[m.Type]; ok && floatDecode8 && a.n == 1 && m.Cols%16 == 0 {
				matmulFloatDecodeAVX2(y, m, a, r0, r1, kd)
				return
			}
			if sets := floatAVX2Batch[m.Type]; sets != nil && multiToken && a.n > 1 {
				matmulFloatN(y, m, a, r0, r1, sets, floatAVX2Tokens)
				return
			}
			matmulFloat(y, m, a, r0, r1, k[0], k[1])
		}
	}
	kern, ok := rawAVX2[t]
	if !ok {
		return nil
	}
	return func(y []float32, m *Matrix, a *acts, r0, r1 int) {
		if useRawTAVX2(t, a.n) {
			matmulRawT8(y, m, a, r0, r1, rawTKernelsAVX2[t])
			return
		}
		matmulRaw(y, m, a, r0, r1, kern)
	}
}

// floatAVX2 maps the float types to their AVX2 kernels (lanes, reduced).
var floatAVX2 = map[ggml.Type][2]floatKernel{
	ggml.TypeF16:  {f16Dot4x1AVX2, f16Dot4x1RAVX2},
	ggml.TypeF32:  {f32Dot4x1AVX2, f32Dot4x1RAVX2},
	ggml.TypeBF16: {bf16Dot4x1AVX2, bf16Dot4x1RAVX2},
}

// rawAVX2 maps types to their AVX2 raw-block kernels.
var rawAVX2 = map[ggml.Type]rawKernel{
	ggml.TypeQ8_0: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q8_0Dot8AVX2(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs[t*nb], acc)
	},
	ggml.TypeQ4_K: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q4_KDot8AVX2(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs16[t*a.cols/16], acc)
	},
	ggml.TypeQ5_K: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q5_KDot8AVX2(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs16[t*a.cols/16], acc)
	},
	ggml.TypeQ6_K: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q6_KDot8AVX2(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs16[t*a.cols/16], acc)
	},
	ggml.TypeQ4_0: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q4_0Dot8AVX2(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs[t*nb], acc)
	},
	ggml.TypeQ5_0: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q5_0Dot8AVX2(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs[t*nb], acc)
	},
	ggml.TypeQ4_1: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q4_1Dot8AVX2(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.s[t*nb], acc)
	},
	ggml.TypeQ5_1: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q5_1Dot8AVX2(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.s[t*nb], acc)
	},
}
