package ggml

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"testing"
)

// TestUE4M3Half checks the scale decoder on every byte against the
// format's definition evaluated in float64: exponent e = bits 3-6, mantissa
// m = bits 0-2, bit 7 ignored; m·2^−9 for e = 0, (1 + m/8)·2^(e−7)
// otherwise; 0x7F is NaN and reads as 0; the result is halved.
func TestUE4M3Half(t *testing.T) {
	for b := 0; b < 256; b++ {
		e, m := b>>3&15, b&7
		want := float64(m) / 512
		if e > 0 {
			want = (1 + float64(m)/8) * math.Pow(2, float64(e-7))
		}
		if b == 0x7f {
			want = 0
		}
		want /= 2
		if got := UE4M3Half(byte(b)); float64(got) != want {
			t.Errorf("UE4M3Half(%#02x) = %v, want %v", b, got, want)
		}
	}
	for _, c := range []struct {
		b    byte
		want float32
	}{{0x00, 0}, {0x80, 0}, {0x7f, 0}, {0xff, 240}, {0x7e, 224}, {0x38, 0.5}, {0x01, 1.0 / 1024}, {0x08, 1.0 / 128}} {
		if got := UE4M3Half(c.b); got != c.want {
			t.Errorf("UE4M3Half(%#02x) = %v, want %v", c.b, got, c.want)
		}
	}
}

// TestF32ToUE4M3 checks the scale encoder: every finite UE4M3 value below
// 256 encodes to its own byte, and the rules at the edges (doc comment).
func TestF32ToUE4M3(t *testing.T) {
	for b := byte(1); b < 0x7f; b++ {
		v := 2 * UE4M3Half(b)
		want := b
		if b >= 0x78 {
			want = 0x7e // ggml maps every value of 256 or more to 448
		}
		if got := F32ToUE4M3(v); got != want {
			t.Errorf("F32ToUE4M3(%v) = %#02x, want %#02x", v, got, want)
		}
	}
	const sub = 1.0 / 64 // 2^−6, the smallest normal UE4M3 value
	for _, c := range []struct {
		x    float32
		want byte
	}{
		{0, 0},
		{float32(math.Copysign(0, -1)), 0},
		{-1, 0},
		{float32(math.NaN()), 0},
		{float32(math.Inf(1)), 0x7e},
		{1e30, 0x7e},
		{448, 0x7e},
		{240, 0x77},       // 1.875·2^7
		{247.99998, 0x77}, // the fourth mantissa bit is clear
		{248, 0x7e},       // rounding carries into exponent 15: 448, not 256
		{1.0625, 0x39},    // 1 + 1/16: the fourth bit set rounds up to 1.125
		{1.0624999, 0x38},
		{1.9375, 0x40},          // rounds up to 2: the carry moves the exponent
		{1, 0x38},               // exponent 7, mantissa 0
		{sub, 0x08},             // the smallest normal value
		{sub * 0.99, 0x07},      // x·512 + 0.5 = 8.42: clamped to 7
		{1.0 / 512, 0x01},       // subnormal 1·2^−9
		{0.5 / 512, 0x01},       // 0.5 + 0.5 = 1
		{0.49 / 512, 0},         // below half of the smallest subnormal
		{1.4999999 / 512, 0x01}, // truncation after adding 0.5
		{1e-30, 0},              // far below the range
		{math.SmallestNonzeroFloat32, 0},
	} {
		if got := F32ToUE4M3(c.x); got != c.want {
			t.Errorf("F32ToUE4M3(%v) = %#02x, want %#02x", c.x, got, c.want)
		}
	}
}

// TestQuantizeNVFP4HandBlock checks one block whose bytes follow from the
// reference algorithm by hand.
//
// Sub-block 0 has amax 6, so its scale is F32ToUE4M3(6/6 = 1) = 0x38 and
// d = UE4M3Half(0x38) = 0.5: the grid is the E2M1 values themselves, codes
// 0..7 = 0 0.5 1 1.5 2 3 4 6 and 8..15 their negatives. Values: 6 → 7;
// 0.25 (halfway 0/0.5) → 0; −0.25 (halfway 0/−0.5) → 0; 0.75 (halfway
// 0.5/1) → 1; 5 (halfway 4/6) → 6; −5 → 14; 2.4 (nearest 2) → 4; −6 → 15;
// 1.5 → 3; −0.5 → 9; the rest 0 → 0.
// Sub-block 1 is all zero: scale 0, d = 0, every code 0.
// Sub-block 2 has amax 0.006: 0.001 is subnormal, 0.001·512 + 0.5 =
// 1.012, scale 0x01, d = 2^−10 (the scale rounded up by half); the grid
// is 0 1 2 3 4 6 8 12 times d, so 0.006 = 6.144·d → 6 (code 5), and
// −0.003 = −3.072·d → −3 (code 11).
// Sub-block 3 has amax 6000: 1000 is clamped to 448, scale 0x7E, d = 224;
// 6000 → 12·224 = 2688 is nearest (code 7); −700 → −3·224 = −672 (code
// 11).
func TestQuantizeNVFP4HandBlock(t *testing.T) {
	x := make([]float32, 64)
	copy(x, []float32{6, 0.25, -0.25, 0.75, 5, -5, 2.4, 0, -6, 1.5, -0.5})
	x[32], x[40] = 0.006, -0.003
	x[48], x[57] = 6000, -700
	want := make([]byte, 36)
	want[0], want[1], want[2], want[3] = 0x38, 0x00, 0x01, 0x7e
	// Sub-block 0: byte j = code(x[j]) | code(x[j+8])<<4.
	codes := []byte{7, 0, 0, 1, 6, 14, 4, 0, 15, 3, 9, 0, 0, 0, 0, 0}
	for j := 0; j < 8; j++ {
		want[4+j] = codes[j] | codes[j+8]<<4
	}
	want[4+16] = 5        // sub-block 2, value 0
	want[4+16] |= 11 << 4 // value 8
	want[4+24] = 7        // sub-block 3, value 0
	want[4+25] = 11 << 4  // value 9 is byte 1's high nibble
	got := make([]byte, 36)
	if err := Quantize(TypeNVFP4, x, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got  % x\nwant % x", got, want)
	}
}

// nvfp4Row returns n values whose 16-value sub-blocks have scales spread
// over UE4M3's normal range below 248 (amax/6 in [2^−6, 2^7)), where
// quantizing is idempotent.
func nvfp4Row(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for s := 0; s < n; s += 16 {
		scale := math.Ldexp(1+r.Float64()*0.9, r.Intn(13)-6) // amax/6 in [2^−6, 1.9·2^6]
		amax := 0.0
		for i := s; i < s+16; i++ {
			x[i] = float32(r.NormFloat64())
			amax = math.Max(amax, math.Abs(float64(x[i])))
		}
		for i := s; i < s+16; i++ {
			x[i] = float32(float64(x[i]) / amax * 6 * scale)
		}
	}
	return x
}

// checkNVFP4RoundTrip quantizes x, dequantizes it and checks every value
// y against its input x and its sub-block's scale S = 2·UE4M3Half(byte)
// (amax/6 as encoded): y is exactly E2M1Doubled(code)·S/2; y is a grid
// point nearest x, up to the float32 rounding of the differences the
// quantizer compares (for x far beyond the grid they all round alike and
// the lowest code wins); and where |x| < 6·S, |y − x| ≤ S, half the
// widest gap (4S to 6S). Non-finite inputs, whose codes ggml leaves
// unspecified, are not checked. If idem, quantizing the decoded values
// must give the same bytes.
func checkNVFP4RoundTrip(t *testing.T, x []float32, idem bool) {
	t.Helper()
	q := make([]byte, len(x)/64*36)
	if err := Quantize(TypeNVFP4, x, q); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(x))
	if err := Dequantize(TypeNVFP4, q, y); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		blk := q[i/64*36:]
		s, j := (i%64)/16, i%16
		b := blk[4+8*s+j%8]
		if j >= 8 {
			b >>= 4
		}
		d := float64(UE4M3Half(blk[s]))
		if want := float64(E2M1Doubled(b)) * d; float64(y[i]) != want {
			t.Fatalf("value %d: got %v, want %v exactly (code %d, scale byte %#02x)", i, y[i], want, b&15, blk[s])
		}
		xi, yi, S := float64(x[i]), float64(y[i]), 2*d
		if math.IsNaN(xi) || math.IsInf(xi, 0) {
			continue
		}
		best := math.Inf(1)
		for c := byte(0); c < 16; c++ {
			best = math.Min(best, math.Abs(float64(E2M1Doubled(c))*d-xi))
		}
		slack := (math.Abs(xi) + 6*S) * 0x1p-23
		if e := math.Abs(yi - xi); e > best+slack {
			t.Fatalf("value %d: %v decodes to %v, error %g; the nearest grid point is %g away", i, xi, yi, e, best)
		}
		if e := math.Abs(yi - xi); math.Abs(xi) < 6*S && e > S {
			t.Fatalf("value %d: %v decodes to %v, error %g above the scale %g", i, xi, yi, e, S)
		}
	}
	if !idem {
		return
	}
	q2 := make([]byte, len(q))
	if err := Quantize(TypeNVFP4, y, q2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(q, q2) {
		for i := range q {
			if q[i] != q2[i] {
				t.Fatalf("quantize(dequantize(q)) differs from q at byte %d (block %d): %#02x, want %#02x", i, i/36, q2[i], q[i])
			}
		}
	}
}

// TestNVFP4RoundTrip checks quantize → dequantize → quantize on rows whose
// scales lie where the reference quantizer is idempotent, and the error
// bound everywhere (tiny, huge and ordinary values).
func TestNVFP4RoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(40))
	t.Run("normal range", func(t *testing.T) {
		checkNVFP4RoundTrip(t, nvfp4Row(r, 64*64), true)
	})
	for _, c := range []struct {
		name string
		std  float64
	}{{"unit", 1}, {"tiny", 1e-4}, {"huge", 1e3}} {
		t.Run(c.name, func(t *testing.T) {
			x := make([]float32, 64*16)
			for i := range x {
				x[i] = float32(r.NormFloat64() * c.std)
			}
			checkNVFP4RoundTrip(t, x, false)
		})
	}
}

// TestNVFP4NotIdempotent documents where ggml's quantizer is not
// idempotent: for amax/6 in [248, 448) the scale becomes 448 (0x7E), the
// largest value decodes to a smaller E2M1 step, and requantizing picks a
// smaller scale.
func TestNVFP4NotIdempotent(t *testing.T) {
	x := make([]float32, 64)
	x[0] = 6 * 250 // amax/6 = 250: scale 0x7E (448), 1500/448 = 3.35 → 3
	q := make([]byte, 36)
	if err := Quantize(TypeNVFP4, x, q); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, 64)
	if err := Dequantize(TypeNVFP4, q, y); err != nil {
		t.Fatal(err)
	}
	if q[0] != 0x7e || y[0] != 3*448 {
		t.Fatalf("scale %#02x, value %v; want 0x7e and %v", q[0], y[0], 3*448)
	}
	q2 := make([]byte, 36)
	if err := Quantize(TypeNVFP4, y, q2); err != nil {
		t.Fatal(err)
	}
	if q2[0] != 0x76 { // 1344/6 = 224 = 1.75·2^7
		t.Errorf("requantized scale %#02x, want 0x76", q2[0])
	}
}

// nvfp4Seeds are FuzzNVFP4's seeds (written to testdata/fuzz/FuzzNVFP4 by
// TestWriteFuzzSeeds -update): the hand block's values; edge scales
// (subnormal, the 248 carry, above 448) with an infinity and a NaN; a row
// from the idempotent range.
func nvfp4Seeds() [][]byte {
	seed := func(x []float32) []byte {
		b := make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	return [][]byte{
		seed([]float32{6, 0.25, -0.25, 0.75, 5, -5, 2.4, 0, -6, 1.5, -0.5}),
		seed([]float32{1e-3, -2e-3, 1500, 248, 247.9, float32(math.Inf(1)), float32(math.NaN())}),
		seed(nvfp4Row(rand.New(rand.NewSource(1)), 64)),
	}
}

// FuzzNVFP4 quantizes arbitrary float32 bits (NaN and infinities
// included) as NVFP4 and checks the round trip of checkNVFP4RoundTrip:
// exact decoded values, each nearest its input or at the grid's end.
func FuzzNVFP4(f *testing.F) {
	for _, in := range nvfp4Seeds() {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		x := make([]float32, (len(in)/4+63)/64*64)
		for i := 0; i+4 <= len(in); i += 4 {
			x[i/4] = math.Float32frombits(binary.LittleEndian.Uint32(in[i:]))
		}
		if len(x) > 0 {
			checkNVFP4RoundTrip(t, x, false)
		}
	})
}

// TestFallback checks the type a matrix falls back to when its rows do
// not fit the requested type's block.
func TestFallback(t *testing.T) {
	for _, c := range []struct {
		t    Type
		n    int
		want Type
	}{
		{TypeNVFP4, 4096, TypeNVFP4},
		{TypeNVFP4, 896, TypeNVFP4}, // 14 blocks
		{TypeNVFP4, 96, TypeQ8_0},
		{TypeNVFP4, 172, TypeF16}, // stories260K's FFN: not a multiple of 32
		{TypeQ4_K, 4864, TypeQ4_K},
		{TypeQ4_K, 896, TypeQ5_0},
		{TypeQ4_K, 100, TypeF16},
		{TypeQ5_K, 96, TypeQ5_1},
		{TypeQ6_K, 96, TypeQ8_0},
		{TypeQ2_K, 96, TypeQ4_0},
		{TypeIQ2_XS, 96, TypeIQ4_NL},
		{TypeQ8_0, 896, TypeQ8_0},
		{TypeQ8_0, 40, TypeF16},
		{TypeQ4_0, 40, TypeF16},
		{TypeF16, 7, TypeF16},
		{TypeF32, 7, TypeF32},
		{TypeBF16, 7, TypeBF16},
	} {
		if got := Fallback(c.t, c.n); got != c.want {
			t.Errorf("Fallback(%v, %d) = %v, want %v", c.t, c.n, got, c.want)
		}
	}
}
