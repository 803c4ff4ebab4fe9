package ggml

import (
	"bytes"
	"errors"
	"math"
	"math/rand"
	"testing"
)

// TestQuantizeReference compares every byte Quantize writes with the output
// of ggml's reference quantize_row_*_ref on the same input
// (testdata/ref/quant.*).
func TestQuantizeReference(t *testing.T) {
	for _, typ := range []Type{TypeQ4_0, TypeQ4_1, TypeQ5_0, TypeQ5_1, TypeQ8_0, TypeQ4_K, TypeQ6_K, TypeQ8_K, TypeNVFP4} {
		inputs := []string{"normal", "outliers", "negative", "sparse", "const"}
		if typ == TypeNVFP4 {
			// Scales in UE4M3's subnormal range and below (tiny), at and
			// past its top (huge), and values on and halfway between the
			// E2M1 grid points (ties).
			inputs = append(inputs, "tiny", "huge", "ties")
		}
		for _, input := range inputs {
			t.Run(typ.String()+"/"+input, func(t *testing.T) {
				src := floats(readRef(t, "quant."+typ.String()+"."+input+".f32"))
				want := readRef(t, "quant."+typ.String()+"."+input+".q")
				got := make([]byte, len(want))
				if err := Quantize(typ, src, got); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("first difference at byte %d (block %d): got %#02x, want %#02x", i, i/typ.TypeSize(), got[i], want[i])
						}
					}
				}
			})
		}
	}
}

// TestQuantizeHandBlocks checks blocks whose encoding follows directly from
// the reference algorithms' definitions.
func TestQuantizeHandBlocks(t *testing.T) {
	// Q8_0: amax = 127 gives d = 1 (f16 0x3c00), and each value rounds
	// half away from zero: 2.5 -> 3, -2.5 -> -3, 0.49 -> 0.
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3], x[4] = 127, 2.5, -2.5, 0.49, -127
	want := make([]byte, 34)
	want[0], want[1] = 0x00, 0x3c
	want[2], want[3], want[4], want[5], want[6] = 127, 3, 0xfd, 0, 0x81
	got := make([]byte, 34)
	if err := Quantize(TypeQ8_0, x, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Q8_0: got % x, want % x", got, want)
	}

	// Q4_0: the value of largest magnitude is -8, so d = -8 / -8 = 1 and
	// the quant is trunc(x + 8.5) capped at 15: -8 -> 0, 7 -> 15, 8.4 ->
	// capped 15, 0 -> 8, -0.6 -> trunc(7.9) = 7.
	x = make([]float32, 32)
	x[0], x[1], x[16], x[17] = -8, 7, -0.6, 0
	got = make([]byte, 18)
	if err := Quantize(TypeQ4_0, x, got); err != nil {
		t.Fatal(err)
	}
	if got[0] != 0x00 || got[1] != 0x3c {
		t.Errorf("Q4_0 d bytes % x, want 00 3c", got[:2])
	}
	if got[2] != 0x70 || got[3] != 0x8f || got[4] != 0x88 {
		t.Errorf("Q4_0 quants % x, want 70 8f 88 ...", got[2:5])
	}

	// Q8_K: the largest magnitude is -2, so iscale = -127 / -2 = 63.5,
	// d = 1/63.5; 1 -> nearest_int(63.5) = 64 (ties to even),
	// -2 -> -127; bsums[0] = 64 - 127.
	x = make([]float32, 256)
	x[0], x[1] = 1, -2
	got = make([]byte, 292)
	if err := Quantize(TypeQ8_K, x, got); err != nil {
		t.Fatal(err)
	}
	if d := math.Float32frombits(uint32(got[0]) | uint32(got[1])<<8 | uint32(got[2])<<16 | uint32(got[3])<<24); d != float32(1)/63.5 {
		t.Errorf("Q8_K d = %v, want %v", d, float32(1)/63.5)
	}
	if int8(got[4]) != 64 || int8(got[5]) != -127 {
		t.Errorf("Q8_K quants %d %d, want 64 -127", int8(got[4]), int8(got[5]))
	}
	if bsum := int16(uint16(got[260]) | uint16(got[261])<<8); bsum != 64-127 {
		t.Errorf("Q8_K bsums[0] = %d, want %d", bsum, 64-127)
	}
}

// TestQuantizeRoundTrip quantizes random rows and checks the decoded error
// against each format's bound.
func TestQuantizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	x := make([]float32, 256*8)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	// Bounds in units of the block's largest magnitude (amax), or of the
	// block's range for the min/max formats.
	tests := []struct {
		typ   Type
		bound float64 // max |error| / amax per block
	}{
		{TypeF32, 0},
		{TypeF16, 1.0 / 1024},
		{TypeBF16, 1.0 / 128},
		{TypeQ8_0, 0.5/127 + 1.0/1024},
		{TypeQ8_K, 0.5/127 + 1e-6},
		{TypeQ5_0, 1.0/16 + 1.0/512}, // -16..15: the positive end is clipped by up to one step
		{TypeQ5_1, 2 * (0.5/31 + 1.0/512)},
		{TypeQ4_0, 1.0/8 + 1.0/512}, // -8..7: the positive end is clipped by up to one step
		{TypeQ4_1, 2 * (0.5/15 + 1.0/512)},
		{TypeQ4_K, 2 * (1.0 / 15)},
		// Sub-blocks of 16 at scales within 1/128 of the block's: half a
		// step of 1/32 of the sub-block's largest, and one step lost at
		// the clipped positive end.
		{TypeQ6_K, 1.0/32 + 1.0/64},
		// Half the widest E2M1 gap (4 to 6) times the scale, amax/6 of a
		// sub-block rounded up by at most 1/16.
		{TypeNVFP4, 1.0 / 6 * (1 + 1.0/16)},
	}
	for _, tc := range tests {
		t.Run(tc.typ.String(), func(t *testing.T) {
			size, err := tc.typ.RowSize(len(x))
			if err != nil {
				t.Fatal(err)
			}
			q := make([]byte, size)
			if err := Quantize(tc.typ, x, q); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, len(x))
			if err := Dequantize(tc.typ, q, y); err != nil {
				t.Fatal(err)
			}
			bs := max(32, tc.typ.BlockSize())
			worst, sumSq, sumErr := 0.0, 0.0, 0.0
			for b := 0; b < len(x); b += bs {
				amax := 0.0
				for _, v := range x[b : b+bs] {
					amax = math.Max(amax, math.Abs(float64(v)))
				}
				for i := b; i < b+bs; i++ {
					e := math.Abs(float64(y[i]-x[i])) / amax
					worst = math.Max(worst, e)
					sumSq += float64(x[i]) * float64(x[i])
					sumErr += float64(y[i]-x[i]) * float64(y[i]-x[i])
				}
			}
			if worst > tc.bound {
				t.Errorf("worst error %.5f x amax exceeds the bound %.5f", worst, tc.bound)
			}
			t.Logf("%s: worst %.5f x amax, relative RMS error %.5f", tc.typ, worst, math.Sqrt(sumErr/sumSq))
		})
	}
}

func TestQuantizeErrors(t *testing.T) {
	tests := []struct {
		name string
		typ  Type
		src  int
		dst  int
		want error
	}{
		{"short dst", TypeQ8_0, 32, 33, ErrSize},
		{"partial block", TypeQ8_0, 31, 34, ErrSize},
		{"unknown type", Type(5), 32, 18, ErrUnknownType},
		{"no quantizer", TypeQ5_K, 256, 176, ErrUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Quantize(tc.typ, make([]float32, tc.src), make([]byte, tc.dst))
			if !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// TestQuantizeNonFinite feeds NaN and infinities: the output is
// unspecified, but Quantize must not panic.
func TestQuantizeNonFinite(t *testing.T) {
	x := make([]float32, 256)
	x[0], x[1], x[2] = float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))
	for _, typ := range Types() {
		if !typ.CanQuantize() {
			continue
		}
		size, _ := typ.RowSize(len(x))
		if err := Quantize(typ, x, make([]byte, size)); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

// TestRoundInt compares roundInt with math.Round on edge cases and a sweep
// of float32 values in the range Q8_0 uses.
func TestRoundInt(t *testing.T) {
	for _, x := range []float32{0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, -0.49999997, 126.5, -127.5, 127, 8388607.5, 1 << 30} {
		if got, want := roundInt(x), int(math.Round(float64(x))); got != want {
			t.Errorf("roundInt(%v) = %d, want %d", x, got, want)
		}
	}
	for u := uint32(0); u < 0x43000000; u += 251 { // [0, 128)
		for _, x := range []float32{math.Float32frombits(u), -math.Float32frombits(u)} {
			if got, want := roundInt(x), int(math.Round(float64(x))); got != want {
				t.Fatalf("roundInt(%v) = %d, want %d", x, got, want)
			}
		}
	}
}
