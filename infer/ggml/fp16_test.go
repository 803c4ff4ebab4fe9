package ggml

import (
	"math"
	"testing"
)

func TestF16Known(t *testing.T) {
	tests := []struct {
		h uint16
		f float32
	}{
		{0x0000, 0},
		{0x3c00, 1},
		{0xbc00, -1},
		{0x4000, 2},
		{0x3800, 0.5},
		{0x3555, 0.333251953125},
		{0x7bff, 65504},
		{0x0400, 1.0 / 16384},           // smallest normal, 2^-14
		{0x0001, 1.0 / 16777216},        // smallest subnormal, 2^-24
		{0x03ff, 1023.0 / 16777216},     // largest subnormal
		{0x7c00, float32(math.Inf(1))},  // +inf
		{0xfc00, float32(math.Inf(-1))}, // -inf
		{0xc500, -5},                    // -1.25 * 2^2
		{0x5640, 100},                   // 1.5625 * 2^6
		{0x2e66, 0.0999755859375},       // nearest binary16 to 0.1
		{0x8001, -1.0 / 16777216},       // negative subnormal
		{0x3c01, 1 + 1.0/1024},          // one ulp above 1
		{0x7800, 32768},                 // 2^15
		{0x1400, 1.0 / 1024},            // 2^-10
	}
	for _, tc := range tests {
		if got := F16ToF32(tc.h); got != tc.f {
			t.Errorf("F16ToF32(%#04x) = %v, want %v", tc.h, got, tc.f)
		}
		if got := F32ToF16(tc.f); got != tc.h {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", tc.f, got, tc.h)
		}
	}
	if got := F32ToF16(float32(math.Copysign(0, -1))); got != 0x8000 {
		t.Errorf("F32ToF16(-0) = %#04x, want 0x8000", got)
	}
}

func TestF32ToF16Rounding(t *testing.T) {
	tests := []struct {
		name string
		f    float32
		h    uint16
	}{
		{"tie to even down", 1 + 1.0/2048, 0x3c00},                 // halfway between 1 and 1+2^-10
		{"tie to even up", 1 + 3.0/2048, 0x3c02},                   // halfway between 1+2^-10 and 1+2^-9
		{"above tie", math.Float32frombits(0x3f801001), 0x3c01},    // just above halfway
		{"below tie", math.Float32frombits(0x3f800fff), 0x3c00},    // just below halfway
		{"65519 rounds down", 65519, 0x7bff},                       // below the halfway point to 65536
		{"65520 overflows", 65520, 0x7c00},                         // tie, odd mantissa: rounds up to infinity
		{"huge", 1e10, 0x7c00},                                     // overflow
		{"half of smallest subnormal", 1.0 / 33554432, 0x0000},     // 2^-25: tie to even zero
		{"above half subnormal", 1.5 / 33554432, 0x0001},           // 1.5 * 2^-25
		{"subnormal tie", 3.0 / 33554432, 0x0002},                  // 1.5 * 2^-24: tie to even 2
		{"tiny", 1e-10, 0x0000},                                    // underflow
		{"subnormal to normal", 2047.0 / 2048 / 16384, 0x0400},     // rounds up into the smallest normal
		{"negative tie", -(1 + 1.0/2048), 0xbc00},                  // sign kept
		{"nan", float32(math.NaN()), 0x7e00},                       // canonical quiet NaN
		{"negative nan", math.Float32frombits(0xffc00001), 0xfe00}, // sign kept, payload dropped
	}
	for _, tc := range tests {
		if got := F32ToF16(tc.f); got != tc.h {
			t.Errorf("%s: F32ToF16(%v) = %#04x, want %#04x", tc.name, tc.f, got, tc.h)
		}
	}
}

// TestF16RoundTrip converts every binary16 value to float32 and back.
func TestF16RoundTrip(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := F16ToF32(h)
		if h&0x7c00 == 0x7c00 && h&0x03ff != 0 {
			if !math.IsNaN(float64(f)) {
				t.Fatalf("F16ToF32(%#04x) = %v, want NaN", h, f)
			}
			continue
		}
		if back := F32ToF16(f); back != h {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, back)
		}
	}
}

// TestF32ToF16Nearest checks on a sweep of float32 values that the result
// is a nearest binary16 value (ties to even), by comparing with the two
// neighbours in float64.
func TestF32ToF16Nearest(t *testing.T) {
	for u := uint64(0); u < 1<<31; u += 4099 {
		f := math.Float32frombits(uint32(u))
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			continue
		}
		h := F32ToF16(f)
		got := float64(F16ToF32(h))
		x := float64(f)
		if math.IsInf(got, 0) {
			if x < 65520 {
				t.Fatalf("F32ToF16(%v) overflowed", f)
			}
			continue
		}
		for _, nb := range []uint16{h - 1, h + 1} {
			if nb&0x7c00 == 0x7c00 || nb == 0xffff {
				continue
			}
			alt := float64(F16ToF32(nb))
			if math.Abs(alt-x) < math.Abs(got-x) || math.Abs(alt-x) == math.Abs(got-x) && h&1 == 1 {
				t.Fatalf("F32ToF16(%v) = %#04x (%v), but %#04x (%v) is nearer or the even tie", f, h, got, nb, alt)
			}
		}
	}
}

func TestBF16(t *testing.T) {
	tests := []struct {
		f float32
		h uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie, even stays
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie, odd rounds up
		{math.Float32frombits(0x3f808001), 0x3f81}, // above tie
		{float32(math.Inf(1)), 0x7f80},
		{math.Float32frombits(0x7f800001), 0x7fc0}, // signalling NaN made quiet
		{math.Float32frombits(0x00000001), 0x0000}, // subnormal rounds to zero
		{math.Float32frombits(0x00008000), 0x0000}, // tie to even zero
		{math.Float32frombits(0x00018000), 0x0002}, // subnormal tie rounds up to even
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // max float rounds to infinity
	}
	for _, tc := range tests {
		if got := F32ToBF16(tc.f); got != tc.h {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(tc.f), got, tc.h)
		}
	}
	for i := 0; i < 1<<16; i++ {
		f := BF16ToF32(uint16(i))
		if math.Float32bits(f) != uint32(i)<<16 {
			t.Fatalf("BF16ToF32(%#04x) = %#08x", i, math.Float32bits(f))
		}
		if !math.IsNaN(float64(f)) && F32ToBF16(f) != uint16(i) {
			t.Fatalf("BF16 round trip of %#04x", i)
		}
	}
}
