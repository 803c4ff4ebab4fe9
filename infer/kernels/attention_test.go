package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// attnCase is one tile shape: nq queries of dimension dim against nk
// cache rows, stride elements apart.
type attnCase struct {
	dim, nq, nk, stride int
}

var attnCases = []attnCase{
	{16, 1, 1, 16}, {16, 3, 40, 32}, {64, 1, 16, 128}, {64, 4, 17, 128}, {64, 7, 100, 128},
	{64, 14, 300, 128}, {64, 9, 33, 64}, {128, 5, 64, 256}, {128, 8, 47, 128}, {80, 6, 50, 160},
	{256, 4, 20, 256}, {48, 2, 31, 48}, {64, 6, 2*AttnPart + 3, 128}, {16, 3, AttnPart + 1, 16},
}

// attnInputs returns f16 K/V rows and f16-rounded queries.
func attnInputs(c attnCase, seed uint64) (kv []uint16, q []float32) {
	rng := rand.New(rand.NewPCG(seed, 3))
	kf := randomActs(rng, (c.nk-1)*c.stride+c.dim)
	kv = make([]uint16, len(kf))
	F32ToF16(kv, kf)
	q = randomActs(rng, c.nq*c.dim)
	qh := make([]uint16, len(q))
	F32ToF16(qh, q)
	F16ToF32(q, qh)
	return kv, q
}

// TestScoresF16 checks every variant's tile scores against DotF16 and a
// float32 multiply on the portable variant, bit for bit.
func TestScoresF16(t *testing.T) {
	for _, c := range attnCases {
		k, q := attnInputs(c, uint64(c.dim*1000+c.nk))
		const scale = 0.125
		ld := c.nk + 3
		want := make([]float32, c.nq*ld)
		old := SetISA(ISAGeneric)
		for i := range c.nq {
			for j := range c.nk {
				want[i*ld+j] = DotF16(k[j*c.stride:j*c.stride+c.dim], q[i*c.dim:(i+1)*c.dim]) * scale
			}
		}
		SetISA(old)
		for _, v := range variants() {
			t.Run(fmt.Sprintf("%s/d%d/q%d/k%d", v, c.dim, c.nq, c.nk), func(t *testing.T) {
				defer SetISA(SetISA(v))
				got := make([]float32, c.nq*ld)
				ScoresF16(got, ld, k, c.stride, q, c.dim, c.nq, c.nk, scale)
				bitsEqual(t, "scores", got, want)
			})
		}
	}
}

// TestWeightedSumF16 checks every variant's tile weighted sums, with
// ragged per-query lengths (some ending just past a part), against the
// definition written out with AXPYF16 on the portable variant — a chain
// from +0 per AttnPart positions, the parts' sums added in order — bit
// for bit. Columns past dim keep what they held.
func TestWeightedSumF16(t *testing.T) {
	for _, c := range attnCases {
		v, _ := attnInputs(c, uint64(c.dim*7+c.nk))
		rng := rand.New(rand.NewPCG(uint64(c.nq), 9))
		lda, ldy := c.nk+1, c.dim+16
		a := randomActs(rng, c.nq*lda)
		n := make([]int, c.nq)
		for i := range n {
			n[i] = c.nk - rng.IntN(min(c.nk, 5)) // ragged ends, as causal tiles have
		}
		if c.nq > 2 {
			n[1] = 0 // a query with no rows gets zeros
		}
		y0 := randomActs(rng, c.nq*ldy)
		want := append([]float32(nil), y0...)
		old := SetISA(ISAGeneric)
		for i := range c.nq {
			y := want[i*ldy : i*ldy+c.dim]
			clear(y)
			part := make([]float32, c.dim)
			for lo := 0; lo < n[i]; lo += AttnPart {
				clear(part)
				for j := lo; j < min(n[i], lo+AttnPart); j++ {
					AXPYF16(part, a[i*lda+j], v[j*c.stride:j*c.stride+c.dim])
				}
				for d := range y {
					y[d] += part[d]
				}
			}
		}
		SetISA(old)
		for _, isa := range variants() {
			t.Run(fmt.Sprintf("%s/d%d/q%d/k%d", isa, c.dim, c.nq, c.nk), func(t *testing.T) {
				defer SetISA(SetISA(isa))
				got := append([]float32(nil), y0...)
				tmp := randomActs(rng, c.nq*ldy) // scratch: its contents must not matter
				WeightedSumF16(got, ldy, a, lda, v, c.stride, c.dim, n, tmp)
				bitsEqual(t, "weighted sums", got, want)
				for i := range c.nq {
					y := make([]float32, c.dim)
					AXPYF16Parts(y, make([]float32, c.dim), a[i*lda:i*lda+n[i]], v, c.stride)
					bitsEqual(t, "AXPYF16Parts", y, want[i*ldy:i*ldy+c.dim])
				}
			})
		}
	}
}

// TestAXPYParts checks the f32 cache's weighted sum against AXPY chains
// per part added in order, for lengths around the part boundaries.
func TestAXPYParts(t *testing.T) {
	const dim, stride = 24, 40
	rng := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{0, 1, AttnPart - 1, AttnPart, AttnPart + 1, 3*AttnPart + 7} {
		a := randomActs(rng, n)
		v := randomActs(rng, max(n, 1)*stride)
		want := make([]float32, dim)
		part := make([]float32, dim)
		for lo := 0; lo < n; lo += AttnPart {
			clear(part)
			for j := lo; j < min(n, lo+AttnPart); j++ {
				for d := range part {
					part[d] = part[d] + float32(a[j]*v[j*stride+d])
				}
			}
			for d := range want {
				want[d] += part[d]
			}
		}
		for _, isa := range variants() {
			t.Run(fmt.Sprintf("%s/n%d", isa, n), func(t *testing.T) {
				defer SetISA(SetISA(isa))
				got := randomActs(rng, dim)
				AXPYParts(got, randomActs(rng, dim), a, v, stride)
				bitsEqual(t, "AXPYParts", got, want)
			})
		}
	}
}

// BenchmarkAttentionTile measures one tile of 14 queries (two tokens × 7
// query heads of one KV head, Qwen2.5-0.5B's shape) against 8192 cached
// positions of a 2-KV-head f16 cache: the tile kernels against the row
// kernels called per query (the phase-1 attention), same variant.
func BenchmarkAttentionTile(b *testing.B) {
	const ctx, dim, stride, nq = 8192, 64, 128, 14
	c := attnCase{dim, nq, ctx, stride}
	k, q := attnInputs(c, 1)
	s := make([]float32, nq*ctx)
	y := make([]float32, nq*dim)
	tmp := make([]float32, nq*dim)
	n := make([]int, nq)
	for i := range n {
		n[i] = ctx
	}
	flop := float64(4*ctx*dim*nq) / 1e9
	for _, v := range variants() {
		b.Run(v.String()+"/rows", func(b *testing.B) {
			defer SetISA(SetISA(v))
			cpu := startCPU(b)
			for b.Loop() {
				for i := range nq {
					DotF16Rows(s[i*ctx:(i+1)*ctx], k, stride, q[i*dim:(i+1)*dim])
					AXPYF16Rows(y[i*dim:(i+1)*dim], s[i*ctx:(i+1)*ctx], k, stride)
				}
			}
			cpu.report(flop, "GFLOP")
		})
		b.Run(v.String()+"/tile", func(b *testing.B) {
			defer SetISA(SetISA(v))
			cpu := startCPU(b)
			for b.Loop() {
				ScoresF16(s, ctx, k, stride, q, dim, nq, ctx, 1)
				WeightedSumF16(y, dim, s, ctx, k, stride, dim, n, tmp)
			}
			cpu.report(flop, "GFLOP")
		})
	}
}

// TestRoundF16s checks every variant against ggml's conversions on the
// rounding boundaries of every exponent, specials and random bits, with a
// NaN in some slices (which the SIMD code hands back to the portable one).
func TestRoundF16s(t *testing.T) {
	var in []float32
	for e := uint32(0); e < 256; e++ {
		for _, m := range []uint32{0, 1, 0xfff, 0x1000, 0x1001, 0x2000, 0x2fff, 0x3000, 0x3001, 0x7fffff, 0x7ff000, 0x400000} {
			for _, s := range []uint32{0, 1 << 31} {
				in = append(in, math.Float32frombits(s|e<<23|m))
			}
		}
	}
	rng := rand.New(rand.NewPCG(4, 4))
	for range 4096 {
		in = append(in, math.Float32frombits(rng.Uint32()&^(0xff<<23)|uint32(100+rng.IntN(40))<<23))
	}
	in = append(in, float32(math.Inf(1)), float32(math.Inf(-1)), 65504, 65519.99, 65520, -65520)
	for _, nan := range []bool{false, true} {
		x := slices.Clone(in)
		if !nan { // drop NaNs
			x = slices.DeleteFunc(x, func(v float32) bool { return v != v })
		}
		want := make([]float32, len(x))
		for i, v := range x {
			want[i] = ggml.F16ToF32(ggml.F32ToF16(v))
		}
		for _, v := range variants() {
			for _, n := range []int{len(x), 7, 8, 15, 16, 17, 33} {
				t.Run(fmt.Sprintf("%s/nan=%v/n%d", v, nan, n), func(t *testing.T) {
					defer SetISA(SetISA(v))
					got := slices.Clone(x[:n])
					RoundF16s(got)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("element %d (%#x): got %#x, want %#x", i, math.Float32bits(x[i]), math.Float32bits(got[i]), math.Float32bits(want[i]))
						}
					}
				})
			}
		}
	}
}
