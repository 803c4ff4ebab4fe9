package kernels

//go:noescape
func dotAVX512(a, b *float32, n16 int) float32

//go:noescape
func dotF16AVX512(a *uint16, b *float32, n16 int) float32

//go:noescape
func axpyAVX512(y *float32, a float32, x *float32, n16 int)

//go:noescape
func axpyF16AVX512(y *float32, a float32, x *uint16, n16 int)

// The SIMD vector helpers take whole multiples of 16 elements; lengths
// with a remainder use the portable code, which has the same order.

func dotArch(a, b []float32) (float32, bool) {
	if isa < ISAAVX512 || len(a) < lanes || len(a)%lanes != 0 || len(b) < len(a) {
		return 0, false
	}
	return dotAVX512(&a[0], &b[0], len(a)/lanes), true
}

func dotF16Arch(a []uint16, b []float32) (float32, bool) {
	if isa < ISAAVX512 || len(a) < lanes || len(a)%lanes != 0 || len(b) < len(a) {
		return 0, false
	}
	return dotF16AVX512(&a[0], &b[0], len(a)/lanes), true
}

func axpyArch(y []float32, a float32, x []float32) int {
	if isa < ISAAVX512 || len(x) < lanes || len(y) < len(x) {
		return 0
	}
	n := len(x) / lanes
	axpyAVX512(&y[0], a, &x[0], n)
	return n * lanes
}

func axpyF16Arch(y []float32, a float32, x []uint16) int {
	if isa < ISAAVX512 || len(x) < lanes || len(y) < len(x) {
		return 0
	}
	n := len(x) / lanes
	axpyF16AVX512(&y[0], a, &x[0], n)
	return n * lanes
}
