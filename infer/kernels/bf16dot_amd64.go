package kernels

import (
	"math"
	"math/rand/v2"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/muserhq/muser/infer/ggml"
)

// The BF16 kernels on VDPBF16PS (AVX512_BF16), genBF16Dot in
// internal/asmgen: x is the tokens' packed bf16 activations in the pair
// layout (acts.bp), n16 even.

//go:noescape
func bf16dDot4x1AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x1RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x2RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x3RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x4RAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x1AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x2AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x3AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x4AAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x1ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x2ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x3ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16dDot4x4ARAVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

// bf16dKernels and bf16dAccKernels are the VDPBF16PS kernels, lanes and
// reduced, by token count; the second set starts from the lane sums of
// the previous column chunk.
var (
	bf16dKernels = floatSet{
		lanes:   [4]floatKernel{bf16dDot4x1AVX512, bf16dDot4x2AVX512, bf16dDot4x3AVX512, bf16dDot4x4AVX512},
		reduced: [4]floatKernel{bf16dDot4x1RAVX512, bf16dDot4x2RAVX512, bf16dDot4x3RAVX512, bf16dDot4x4RAVX512},
	}
	bf16dAccKernels = floatSet{
		lanes:   [4]floatKernel{bf16dDot4x1AAVX512, bf16dDot4x2AAVX512, bf16dDot4x3AAVX512, bf16dDot4x4AAVX512},
		reduced: [4]floatKernel{bf16dDot4x1ARAVX512, bf16dDot4x2ARAVX512, bf16dDot4x3ARAVX512, bf16dDot4x4ARAVX512},
	}
)

// hasBF16Dot reports whether the CPU has VDPBF16PS and computes it as the
// SDM defines it (bf16DotProbe); bf16Dot is the knob that uses it (off:
// the fused-multiply-add kernels, the same bits; benchmarks and tests
// compare the two in one run). It is on where the kernels were measured
// faster than the fused ones: AMD's CPUs (Zen 5: 1.10–1.51×). On an Intel
// Sapphire Rapids Xeon they ran at 0.75–0.95× of them (docs/benchmarks.md,
// "F16 and BF16 prefill"), so Intel CPUs keep the fused kernels.
var (
	hasBF16Dot = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512BF16 && bf16DotProbe()
	bf16Dot    = hasBF16Dot && cpuIsAMD()
)

// cpuVendor returns CPUID leaf 0's vendor string registers.
func cpuVendor() (ebx, edx, ecx uint32)

// cpuIsAMD reports whether the CPU's vendor string is "AuthenticAMD".
func cpuIsAMD() bool {
	b, d, c := cpuVendor()
	var v [12]byte
	for i := range 4 {
		v[i], v[4+i], v[8+i] = byte(b>>(8*i)), byte(d>>(8*i)), byte(c>>(8*i))
	}
	return string(v[:]) == "AuthenticAMD"
}

// bf16PackWanted reports whether BF16 activations of n tokens × cols
// columns should also be packed in the pair layout for the VDPBF16PS
// kernels: one token (the one-token kernel, against the matrix's cached
// range) or a batch that takes the exact kernels (bf16FMAMinTokens), rows
// of whole 32-column groups.
func bf16PackWanted(n, cols int) bool {
	return bf16Dot && bf16FMA && isa >= ISAAVX512 && (n == 1 || n >= bf16FMAMinTokens) && cols%32 == 0
}

//go:noescape
func bf16dDot8x1AVX512(w *byte, rowBytes int, x *uint16, n32 int, acc *float32)

//go:noescape
func bf16dDot8x1LockAVX512(w *byte, rowBytes int, x *uint16, n32 int, acc *float32)

//go:noescape
func bf16dDot8x1LeapAVX512(w *byte, rowBytes int, x *uint16, n32 int, acc *float32)

// bf16dLong is the VDPBF16PS one-token kernel that rows of floatLockCols
// columns or more take (shorter rows take the leapfrog one); the tests
// and benchmarks swap in the one-chain kernel. Same bits.
var bf16dLong bf16dKernel = bf16dDot8x1LockAVX512

// bf16dKernel is a VDPBF16PS one-token kernel: 8 rows against one token's
// activations in the pair layout.
type bf16dKernel func(w *byte, rowBytes int, x *uint16, n32 int, acc *float32)

// bf16DotDecode reports whether one token of a (packed, a.n == 1) takes
// the VDPBF16PS one-token kernel against m: a BF16 matrix made by
// NewMatrix whose whole range (scanned once, then cached) and the token's
// pass bf16DotExact.
func bf16DotDecode(m *Matrix, a *acts) bool {
	if m.Type != ggml.TypeBF16 || m.bf16 == nil || a.n != 1 || len(a.bp) == 0 {
		return false
	}
	return bf16DotExact(m.bf16.rangeOf(m.Data, bf16TileRange), a.fr[0])
}

// matmulBF16DotDecode runs the VDPBF16PS one-token kernel over whole
// 8-row groups of [r0,r1); the rows after the last whole group take the
// one-token 4-row kernel, which gives the same bits.
func matmulBF16DotDecode(y []float32, m *Matrix, a *acts, r0, r1 int) {
	rb := m.RowBytes
	k := bf16dLong
	if m.Cols < floatLockCols {
		k = bf16dDot8x1LeapAVX512
	}
	g := r0
	for ; g+8 <= r1; g += 8 {
		k(&m.Data[g*rb], rb, &a.bp[0], m.Cols/32, &y[g])
	}
	if g < r1 {
		matmulFloatN(y, m, a, g, r1, &floatSets{plain: &floatSet{lanes: [4]floatKernel{bf16Dot4x1AVX512}, reduced: [4]floatKernel{bf16Dot4x1RAVX512}}}, 1)
	}
}

// bf16DotProbe runs the 4-row × 4-token reduced kernel on a fixed random
// tile of ordinary values (which bf16DotExact accepts) and reports whether
// it gives the canonical bits. The tile is built so that other orders or
// roundings of the instruction's two steps (the even product first, the
// pair summed before it is added) give other bits (TestBF16DotProbe): a
// CPU that computed it differently would keep the fused-multiply-add
// kernels.
func bf16DotProbe() bool {
	w, x, want := bf16DotProbeTile()
	var got [16]float32
	bf16dDot4x4RAVX512(&w[0], 2*bf16ProbeCols, (*float32)(unsafe.Pointer(&x[0])), 2*bf16ProbeCols, bf16ProbeCols/16, &got[0])
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return false
		}
	}
	return true
}

// bf16ProbeCols is the probe tile's row length.
const bf16ProbeCols = 256

// bf16DotProbeTile returns the probe's 4 rows of bf16 weights (bytes), its
// 4 tokens' activations in the pair layout and the canonical results
// ([row·4+token]).
func bf16DotProbeTile() (w []byte, x []uint16, want [16]float32) {
	rng := rand.New(rand.NewPCG(0xbf16, 0xd07))
	val := func() uint16 { // an ordinary value: exponent fields 110..139
		return uint16(rng.IntN(2))<<15 | uint16(110+rng.IntN(30))<<7 | uint16(rng.IntN(128))
	}
	const n = bf16ProbeCols
	w = make([]byte, 4*n*2)
	wv := make([]uint16, 4*n)
	for i := range wv {
		wv[i] = val()
		w[2*i], w[2*i+1] = byte(wv[i]), byte(wv[i]>>8)
	}
	xf := make([]float32, 4*n)
	x = make([]uint16, 4*n)
	for i := range xf {
		xf[i] = ggml.BF16ToF32(val())
	}
	for t := 0; t < 4; t++ {
		packBF16Pairs(x[t*n:(t+1)*n], xf[t*n:(t+1)*n])
	}
	for r := 0; r < 4; r++ {
		for t := 0; t < 4; t++ {
			var acc [lanes]float32
			for c := 0; c < n; c++ {
				acc[c%lanes] = acc[c%lanes] + float32(ggml.BF16ToF32(wv[r*n+c])*xf[t*n+c])
			}
			want[r*4+t] = reduceLanes(&acc)
		}
	}
	return w, x, want
}
