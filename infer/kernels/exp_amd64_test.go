package kernels

import (
	"math"
	"testing"
)

// TestExp32AVX512 compares the assembly Exp32 (through softmaxExpAVX512
// with max 0) with the Go Exp32 on a sweep of float32 bit patterns over
// the whole interesting range, and on the special values.
func TestExp32AVX512(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	var xs []float32
	for _, v := range []float32{0, float32(math.Copysign(0, -1)), 1, -1, 88.72284, 88.72285, 88.7228, -104, -103.99999, -104.00001,
		-87.3, -103.2, float32(math.Inf(1)), float32(math.Inf(-1)), 1e-30, -1e-30, 1e30, -1e30} {
		xs = append(xs, v)
	}
	step := uint32(131)
	if testing.Short() {
		step = 997
	}
	for _, lo := range []uint32{0x00000000, 0x80000000} { // positive, negative
		for b := lo; b < lo+0x43000000; b += step { // |x| < 128
			xs = append(xs, math.Float32frombits(b))
		}
	}
	for len(xs)%8 != 0 {
		xs = append(xs, 0)
	}
	got := append([]float32(nil), xs...)
	var sums [8]float64
	softmaxExpAVX512(&got[0], len(got)/8, 0, &expConsts[0], &sums)
	bad := 0
	for i, x := range xs {
		want := Exp32(x)
		if math.Float32bits(got[i]) != math.Float32bits(want) {
			if bad < 5 {
				t.Errorf("Exp32(%g [%#x]): assembly %#x, Go %#x", x, math.Float32bits(x), math.Float32bits(got[i]), math.Float32bits(want))
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d values differ", bad, len(xs))
	}
	nan := []float32{float32(math.NaN()), 0, 0, 0, 0, 0, 0, 0}
	softmaxExpAVX512(&nan[0], 1, 0, &expConsts[0], &sums)
	if nan[0] == nan[0] {
		t.Errorf("Exp32(NaN) = %g, want NaN", nan[0])
	}
}
