package kernels

import (
	"encoding/binary"
	"math"
	"testing"
)

// bf16Value returns the float32 of the bf16 with exponent field e,
// mantissa bits mant and the given sign.
func bf16Value(neg bool, e, mant uint16) (uint16, float32) {
	b := e<<7 | mant&0x7F
	if neg {
		b |= 0x8000
	}
	return b, math.Float32frombits(uint32(b) << 16)
}

// TestBF16ProductsExact checks bf16ProductsExact against the arithmetic:
// for every pair of exponent fields and the extreme mantissas (the
// smallest and largest value of each field), where it reports exact, the
// float32 product equals the exact product (computed in float64, which
// holds any product of two bf16 values). It also checks that it accepts
// the ranges of ordinary weights and activations, so that the fused
// kernels run.
func TestBF16ProductsExact(t *testing.T) {
	exact, checked := 0, 0
	for ew := uint16(0); ew < 255; ew++ {
		for ex := uint16(0); ex < 255; ex++ {
			for _, mw := range []uint16{0, 1, 0x7F} {
				for _, mx := range []uint16{0, 1, 0x7F} {
					bw, w := bf16Value(false, ew, mw)
					bx, x := bf16Value(true, ex, mx)
					rw, rx := bf16RangeEmpty.addBits(bw), bf16RangeEmpty.addBits(bx)
					checked++
					if !bf16ProductsExact(rw, rx) {
						continue
					}
					exact++
					p := float32(w * x)
					if float64(p) != float64(w)*float64(x) {
						t.Fatalf("fields %d·%d (%g·%g): reported exact, but float32 product %g != %g", ew, ex, w, x, p, float64(w)*float64(x))
					}
				}
			}
		}
	}
	if exact < checked/4 {
		t.Errorf("%d of %d pairs reported exact, want at least a quarter", exact, checked)
	}
	for _, c := range []struct {
		name   string
		w, x   []float32
		want   bool
		reason string
	}{
		{"ordinary", []float32{1e-4, -0.02, 0.5, 3}, []float32{1e-6, -40, 1e3, 0}, true, "weights and activations of a model"},
		{"zeros", []float32{0, float32(math.Copysign(0, -1))}, []float32{1e30, 1e-30}, true, "every product is ±0"},
		{"underflow", []float32{1e-20}, []float32{1e-20}, false, "1e-40 is subnormal"},
		{"overflow", []float32{1e20}, []float32{1e20}, false, "1e40 overflows"},
		{"subnormal weight", []float32{1e-39}, []float32{1}, false, "a bf16 subnormal"},
		{"infinity", []float32{float32(math.Inf(1))}, []float32{1}, false, "not finite"},
		{"NaN", []float32{1}, []float32{float32(math.NaN())}, false, "not finite"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rw, rx := bf16RangeEmpty, bf16RangeEmpty
			for _, v := range c.w {
				rw = rw.addBits(uint16(math.Float32bits(v) >> 16))
			}
			for _, v := range c.x {
				rx = rx.addBits(uint16(math.Float32bits(v) >> 16))
			}
			if got := bf16ProductsExact(rw, rx); got != c.want {
				t.Errorf("got %v, want %v (%s)", got, c.want, c.reason)
			}
		})
	}
}

// TestBF16RowsRange checks the portable range of a few value sets.
func TestBF16RowsRange(t *testing.T) {
	for _, c := range []struct {
		vals []uint16
		want bf16Range
	}{
		{nil, 0xFFFF},
		{[]uint16{0, 0x8000}, 0xFFFF},
		{[]uint16{0x3F80}, 127 | 127<<16},       // 1
		{[]uint16{0x0001, 0x3F80}, 0 | 127<<16}, // a subnormal and 1
		{[]uint16{0x7F80, 0x0000}, 255 | 255<<16},
		{[]uint16{0xC000, 0x3800, 0x8000}, 112 | 128<<16}, // −2, 2^−15, −0
	} {
		b := make([]byte, 2*len(c.vals))
		for i, v := range c.vals {
			binary.LittleEndian.PutUint16(b[2*i:], v)
		}
		if got := bf16RowsRange(b); got != c.want {
			t.Errorf("%#04x: got %#x, want %#x", c.vals, uint32(got), uint32(c.want))
		}
	}
}

// dpbf16Step is one step of VDPBF16PS as the Intel SDM defines it, in Go:
// acc + w·x rounded once (the product is exact here), a subnormal input
// taken as zero and a subnormal result flushed to zero of its sign.
func dpbf16Step(acc, w, x float32) float32 {
	daz := func(v float32) float32 {
		if v != 0 && math.Abs(float64(v)) < 0x1p-126 {
			return float32(math.Copysign(0, float64(v)))
		}
		return v
	}
	r := float32(float64(daz(acc)) + float64(daz(w))*float64(daz(x)))
	return daz(r)
}

// TestBF16DotExact checks bf16DotExact against the instruction's
// arithmetic (dpbf16Step): where it accepts two ranges, chains of
// products of values at the ranges' ends (the smallest mantissas of the
// smallest exponents, which make the finest sums, and cancelling pairs)
// equal the canonical multiply-then-add bit for bit; one exponent field
// lower, a chain whose sum lands below 2^−126 is flushed by the
// instruction, so the bound is tight. Ordinary model ranges pass.
func TestBF16DotExact(t *testing.T) {
	val := func(neg bool, e, m uint16) float32 { _, v := bf16Value(neg, e, m); return v }
	rangeOf := func(vs ...float32) bf16Range {
		r := bf16RangeEmpty
		for _, v := range vs {
			r = r.addBits(uint16(math.Float32bits(v) >> 16))
		}
		return r
	}
	chain := func(ws, xs []float32) (canon, dp float32) {
		for i := range ws {
			canon = canon + ws[i]*xs[i]
			dp = dpbf16Step(dp, ws[i], xs[i])
		}
		return canon, dp
	}
	// With u the product grid 2^(ew+ex−268): 129·129·u − 130·128·u = u.
	for ew := uint16(1); ew <= 141; ew += 7 {
		for _, ex := range []uint16{142 - ew, 141 - ew} {
			if ex < 1 {
				continue
			}
			ws := []float32{val(false, ew, 1), val(true, ew, 2)}
			xs := []float32{val(false, ex, 1), val(false, ex, 0)}
			c, d := chain(ws, xs)
			accepted := bf16DotExact(rangeOf(ws...), rangeOf(xs...))
			switch {
			case ew+ex == 142 && !accepted:
				t.Fatalf("fields %d+%d: rejected at the bound", ew, ex)
			case ew+ex == 142 && math.Float32bits(c) != math.Float32bits(d):
				t.Fatalf("fields %d+%d: canonical %g, instruction %g", ew, ex, c, d)
			case ew+ex == 141 && accepted:
				t.Fatalf("fields %d+%d: accepted below the bound", ew, ex)
			case ew+ex == 141 && c == d:
				t.Fatalf("fields %d+%d: canonical and instruction agree (%g): the case does not test the bound", ew, ex, c)
			}
		}
	}
	for _, c := range []struct {
		name string
		w, x []float32
		want bool
	}{
		{"ordinary", []float32{1e-7, -0.02, 0.5, 3}, []float32{1e-6, -40, 1e3, 0}, true},
		{"zeros", []float32{0}, []float32{1e-39, 1}, true},
		{"subnormal activation", []float32{0.5}, []float32{1e-39}, false},
		{"tiny pair", []float32{1e-19}, []float32{1e-19}, false},
		{"infinity", []float32{float32(math.Inf(-1))}, []float32{1}, false},
	} {
		if got := bf16DotExact(rangeOf(c.w...), rangeOf(c.x...)); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
