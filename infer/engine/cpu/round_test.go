package cpu

import (
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

func checkRound(t *testing.T, w uint32) {
	x := math.Float32frombits(w)
	if got, want := f32ToF16(x), ggml.F32ToF16(x); got != want {
		t.Fatalf("f32ToF16(%#08x = %g) = %#04x, want %#04x", w, x, got, want)
	}
	got, want := roundF16(x), ggml.F16ToF32(ggml.F32ToF16(x))
	if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
		t.Fatalf("roundF16(%#08x = %g) = %#08x, want %#08x", w, x, math.Float32bits(got), math.Float32bits(want))
	}
}

// TestRoundF16 compares roundF16 with the round trip through ggml's
// conversions, and f32ToF16 with ggml.F32ToF16, for every sign, exponent and top 7 mantissa bits, each with
// the low 16 bits at every rounding boundary and at random. Set
// MUSER_EXHAUSTIVE=1 to check all 2^32 bit patterns (about a minute).
func TestRoundF16(t *testing.T) {
	if os.Getenv("MUSER_EXHAUSTIVE") == "1" {
		for w := uint64(0); w < 1<<32; w++ {
			checkRound(t, uint32(w))
		}
		return
	}
	lows := []uint32{0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x2001, 0x2fff, 0x3000, 0x3001, 0x7fff, 0x8000, 0xefff, 0xf000, 0xf001, 0xffff}
	r := rand.New(rand.NewPCG(1, 2))
	for hi := uint32(0); hi < 1<<16; hi++ {
		for _, lo := range lows {
			checkRound(t, hi<<16|lo)
		}
		for range 8 {
			checkRound(t, hi<<16|r.Uint32()&0xffff)
		}
	}
}

func BenchmarkRoundF16(b *testing.B) {
	x := make([]float32, 4096)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range x {
		x[i] = r.Float32() / float32(1+r.IntN(5000))
	}
	y := make([]float32, len(x))
	b.Run("roundF16", func(b *testing.B) {
		for b.Loop() {
			copy(y, x)
			roundF16s(y)
		}
	})
	b.Run("ggml-roundtrip", func(b *testing.B) {
		for b.Loop() {
			for i, v := range x {
				y[i] = ggml.F16ToF32(ggml.F32ToF16(v))
			}
		}
	})
}

func BenchmarkF32ToF16(b *testing.B) {
	x := make([]float32, 2048)
	r := rand.New(rand.NewPCG(1, 1))
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	y := make([]uint16, len(x))
	b.SetBytes(int64(len(x)))
	for b.Loop() {
		f32ToF16s(y, x)
	}
}

// roundF16s rounds every element of x to binary16 precision in place, one
// roundF16 at a time: the per-element reference the tests hold the
// engine's vector rounding (kernels.RoundF16s) and attention to.
func roundF16s(x []float32) {
	for i, v := range x {
		x[i] = roundF16(v)
	}
}
