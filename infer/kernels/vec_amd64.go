package kernels

import (
	"math"
	"unsafe"
)

//go:noescape
func dotAVX512(a, b *float32, n16 int) float32

//go:noescape
func dotF16AVX512(a *uint16, b *float32, n16 int) float32

//go:noescape
func axpyAVX512(y *float32, a float32, x *float32, n16 int)

//go:noescape
func axpyF16AVX512(y *float32, a float32, x *uint16, n16 int)

//go:noescape
func dotF16RowsAVX512(dst *float32, k *uint16, stride int, q *float32, n16 int, rows int)

//go:noescape
func axpyF16RowsAVX512(y *float32, a *float32, v *uint16, stride int, n16 int, rows int)

//go:noescape
func dotAVX2(a, b *float32, n16 int) float32

//go:noescape
func dotF16AVX2(a *uint16, b *float32, n16 int) float32

//go:noescape
func axpyAVX2(y *float32, a float32, x *float32, n16 int)

//go:noescape
func axpyF16AVX2(y *float32, a float32, x *uint16, n16 int)

//go:noescape
func dotF16RowsAVX2(dst *float32, k *uint16, stride int, q *float32, n16 int, rows int)

//go:noescape
func axpyF16RowsAVX2(y *float32, a *float32, v *uint16, stride int, n16 int, rows int)

// The SIMD vector helpers take whole multiples of 16 elements; lengths
// with a remainder use the portable code, which has the same order.

func dotArch(a, b []float32) (float32, bool) {
	if isa < ISAAVX2 || len(a) < lanes || len(a)%lanes != 0 || len(b) < len(a) {
		return 0, false
	}
	if isa >= ISAAVX512 {
		return dotAVX512(&a[0], &b[0], len(a)/lanes), true
	}
	return dotAVX2(&a[0], &b[0], len(a)/lanes), true
}

func dotF16Arch(a []uint16, b []float32) (float32, bool) {
	if isa < ISAAVX2 || len(a) < lanes || len(a)%lanes != 0 || len(b) < len(a) {
		return 0, false
	}
	if isa >= ISAAVX512 {
		return dotF16AVX512(&a[0], &b[0], len(a)/lanes), true
	}
	return dotF16AVX2(&a[0], &b[0], len(a)/lanes), true
}

func axpyArch(y []float32, a float32, x []float32) int {
	if isa < ISAAVX2 || len(x) < lanes || len(y) < len(x) {
		return 0
	}
	n := len(x) / lanes
	if isa >= ISAAVX512 {
		axpyAVX512(&y[0], a, &x[0], n)
	} else {
		axpyAVX2(&y[0], a, &x[0], n)
	}
	return n * lanes
}

func axpyF16Arch(y []float32, a float32, x []uint16) int {
	if isa < ISAAVX2 || len(x) < lanes || len(y) < len(x) {
		return 0
	}
	n := len(x) / lanes
	if isa >= ISAAVX512 {
		axpyF16AVX512(&y[0], a, &x[0], n)
	} else {
		axpyF16AVX2(&y[0], a, &x[0], n)
	}
	return n * lanes
}

func dotF16RowsArch(dst []float32, k []uint16, stride int, q []float32) bool {
	if isa < ISAAVX2 || len(q) < lanes || len(q)%lanes != 0 || len(dst) == 0 {
		return false
	}
	if isa >= ISAAVX512 {
		dotF16RowsAVX512(&dst[0], &k[0], stride, &q[0], len(q)/lanes, len(dst))
	} else {
		dotF16RowsAVX2(&dst[0], &k[0], stride, &q[0], len(q)/lanes, len(dst))
	}
	return true
}

func axpyF16RowsArch(y []float32, a []float32, v []uint16, stride int) bool {
	if isa < ISAAVX2 || len(y) < lanes || len(y)%lanes != 0 || len(a) == 0 {
		return false
	}
	if isa >= ISAAVX512 {
		axpyF16RowsAVX512(&y[0], &a[0], &v[0], stride, len(y)/lanes, len(a))
	} else {
		axpyF16RowsAVX2(&y[0], &a[0], &v[0], stride, len(y)/lanes, len(a))
	}
	return true
}

//go:noescape
func softmaxExpAVX512(x *float32, n8 int, mx float32, c *float64, sums *[8]float64)

//go:noescape
func siluMulAVX512(dst, gate, up *float32, n8 int, c *float64)

// expConsts are Exp32's constants for the assembly: float64 log2e, 0.5,
// ln2hi, ln2lo, the polynomial coefficients in Horner order, int64 1023,
// and float32 88.72284, -104, +Inf packed in the last two words.
var expConsts = func() *[19]float64 {
	var c [19]float64
	c[0], c[1], c[2], c[3] = exp32Log2e, 0.5, exp32Ln2hi, exp32Ln2lo
	c[4] = exp32Poly0
	copy(c[5:16], exp32Poly[:])
	c[16] = math.Float64frombits(1023)
	w := (*[6]float32)(unsafe.Pointer(&c[17]))
	w[0], w[1], w[2] = 88.72284, -104, float32(math.Inf(1))
	return &c
}()

func softmaxExpArch(x []float32, mx float32, sums *[8]float64) int {
	if isa < ISAAVX512 || len(x) < 8 {
		return 0
	}
	n8 := len(x) / 8
	softmaxExpAVX512(&x[0], n8, mx, &expConsts[0], sums)
	return n8 * 8
}

func siluMulArch(dst, gate, up []float32) int {
	if isa < ISAAVX512 || len(gate) < 8 {
		return 0
	}
	n8 := len(gate) / 8
	siluMulAVX512(&dst[0], &gate[0], &up[0], n8, &expConsts[0])
	return n8 * 8
}

//go:noescape
func maxNaNAVX512(x *float32, n16 int) (mx float32, nan bool)

//go:noescape
func scaleAVX512(x *float32, s float32, n16 int)

// maxNaNArch returns the maximum of x and whether x holds a NaN, or ok =
// false when there is no SIMD version.
func maxNaNArch(x []float32) (mx float32, nan, ok bool) {
	if isa < ISAAVX512 || len(x) < lanes {
		return 0, false, false
	}
	n := len(x) / lanes
	mx, nan = maxNaNAVX512(&x[0], n)
	for _, v := range x[n*lanes:] {
		if v > mx {
			mx = v
		}
		nan = nan || v != v
	}
	return mx, nan, true
}

func scaleArch(x []float32, s float32) int {
	if isa < ISAAVX512 || len(x) < lanes {
		return 0
	}
	n := len(x) / lanes
	scaleAVX512(&x[0], s, n)
	return n * lanes
}
