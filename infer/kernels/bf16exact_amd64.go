package kernels

import "github.com/muserhq/muser/infer/ggml"

//go:noescape
func bf16ExpRangeAVX512(p *byte, n32 int) uint32

//go:noescape
func bf16fDot4x1AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x1RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x2RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x3RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16fDot4x4RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

// bf16FMA enables the fused-multiply-add BF16 kernels where every product
// is exact (bf16exact.go); off, BF16 batches take the multiply-then-add
// kernels as before them (same bits: a knob for benchmarks that compare
// the two in one run).
var bf16FMA = true

// bf16FMAMinTokens is the smallest batch for which a tile's weights are
// scanned for their exponent range: the scan reads the tile once, which a
// few tokens do not repay.
const bf16FMAMinTokens = 4

// bf16fKernels are the BF16 fused-multiply-add kernels, lanes and reduced,
// by token count.
var bf16fKernels = floatSet{
	lanes:   [4]floatKernel{bf16fDot4x1AVX512, bf16fDot4x2AVX512, bf16fDot4x3AVX512, bf16fDot4x4AVX512},
	reduced: [4]floatKernel{bf16fDot4x1RAVX512, bf16fDot4x2RAVX512, bf16fDot4x3RAVX512, bf16fDot4x4RAVX512},
}

// bf16TileRange returns the exponent range of the bf16 values in b.
func bf16TileRange(b []byte) bf16Range {
	n32 := len(b) / 64
	r := bf16RangeEmpty
	if n32 > 0 {
		r = bf16Range(bf16ExpRangeAVX512(&b[0], n32))
	}
	return r.join(bf16RowsRange(b[n32*64:]))
}

// bf16ExactTokens returns, for a BF16 tile of rows [r0,r1) of m and a's
// tokens, a function reporting whether tokens [t0,t0+nt) may take the
// exact kernels, or nil where none may be checked. The exact kernels are
// the VDPBF16PS ones where a's activations are packed for them (their
// check is bf16DotExact), else the fused-multiply-add ones (every product
// exact: bf16ProductsExact).
func bf16ExactTokens(m *Matrix, a *acts, r0, r1 int) func(t0, nt int) bool {
	if !bf16FMA || m.Type != ggml.TypeBF16 || a.n < bf16FMAMinTokens {
		return nil
	}
	check := bf16ProductsExact
	if len(a.bp) > 0 {
		check = bf16DotExact
	}
	rw := bf16TileRange(m.Data[r0*m.RowBytes : r1*m.RowBytes])
	return func(t0, nt int) bool {
		for t := t0; t < t0+nt; t++ {
			if !check(rw, a.fr[t]) {
				return false
			}
		}
		return true
	}
}

//go:noescape
func bf16RoundAVX512(src *float32, dst *float32, n16 int) uint32

// roundBF16Arch rounds src to bf16 into dst (widened back to float32) as
// quantRow does, with AVX-512 where the CPU has it, and returns the
// values' range; it reports whether it did the work.
func roundBF16Arch(src, dst []float32) (bf16Range, bool) {
	if isa < ISAAVX512 {
		return 0, false
	}
	n16 := len(src) / 16
	r := bf16RangeEmpty
	if n16 > 0 {
		r = bf16Range(bf16RoundAVX512(&src[0], &dst[0], n16))
	}
	for i := n16 * 16; i < len(src); i++ {
		b := ggml.F32ToBF16(src[i])
		r = r.addBits(b)
		dst[i] = ggml.BF16ToF32(b)
	}
	return r, true
}
