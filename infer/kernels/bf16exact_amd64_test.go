package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// TestBF16TileRange checks the AVX-512 exponent scan against the portable
// one on values of every kind (zeros of both signs, subnormals, ordinary
// values, infinities, NaN) at lengths around its 32-value step.
func TestBF16TileRange(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	specials := []uint16{0, 0x8000, 0x0001, 0x807F, 0x7F80, 0xFF80, 0x7FC1, 0x0080, 0x7F7F}
	for _, n := range []int{0, 1, 31, 32, 33, 64, 95, 96, 1000} {
		for trial := 0; trial < 50; trial++ {
			b := make([]byte, 2*n)
			for i := 0; i < n; i++ {
				v := uint16(rng.Uint32())
				switch rng.IntN(4) {
				case 0:
					v = specials[rng.IntN(len(specials))]
				case 1:
					v = v&0x807F | uint16(100+rng.IntN(40))<<7 // an ordinary magnitude
				case 2:
					v &= 0x8000 // a zero
				}
				binary.LittleEndian.PutUint16(b[2*i:], v)
			}
			if got, want := bf16TileRange(b), bf16RowsRange(b); got != want {
				t.Fatalf("%d values, trial %d: got %#x, want %#x", n, trial, uint32(got), uint32(want))
			}
		}
	}
}

// TestMatMulBF16Exact checks BF16 batches on the fused-multiply-add
// kernels bit for bit against the portable kernels: ordinary weights and
// activations (where the fused kernels must run: bf16ExactTokens accepts
// every tile), tokens whose activations are tiny mixed with ordinary ones
// (their token groups fall back to the multiply-then-add kernels), and
// tiny weights, where the fused kernel called directly does give other
// bits (so the check that keeps it out is what the result rests on).
func TestMatMulBF16Exact(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512")
	}
	defer SetISA(SetISA(ISAGeneric))
	pools := map[int]*Pool{1: NewPool(1), 2: NewPool(2)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	const rows, cols = 70, 912
	bf16 := func(v float32) uint16 { return ggml.F32ToBF16(v) }
	weights := func(rng *rand.Rand, scale float32) []byte {
		d := make([]byte, rows*cols*2)
		for i := 0; i < rows*cols; i++ {
			binary.LittleEndian.PutUint16(d[2*i:], bf16(float32(rng.NormFloat64())*scale))
		}
		return d
	}
	for _, c := range []struct {
		name        string
		wScale      float32
		tinyTokens  []int // tokens whose activations are scaled by 2^tinyExp
		tinyExp     int
		n           int
		wantAllFast bool
	}{
		{"ordinary/n=4", 0.05, nil, 0, 4, true},
		{"ordinary/n=13", 0.05, nil, 0, 13, true},
		{"ordinary/n=64", 0.05, nil, 0, 64, true},
		{"tiny tokens", 0.05, []int{1, 9}, -122, 16, false},
		// Products near 2^-140: float32 subnormals with bits below 2^-149.
		{"tiny weights", 1e-21, []int{0, 1, 2, 3, 4, 5, 6, 7}, -70, 8, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, uint64(c.n)))
			m, err := NewMatrix(ggml.TypeBF16, rows, cols, weights(rng, c.wScale))
			if err != nil {
				t.Fatal(err)
			}
			x := randomActs(rng, c.n*cols)
			for _, tok := range c.tinyTokens {
				for i := tok * cols; i < (tok+1)*cols; i++ {
					x[i] = float32(math.Ldexp(float64(x[i]), c.tinyExp))
				}
			}
			SetISA(ISAGeneric)
			want := make([]float32, c.n*rows)
			pools[1].MatMul(want, m, x, c.n)
			SetISA(ISAAVX512)
			a := new(acts)
			a.reset(actBF16, c.n, cols)
			for tok := 0; tok < c.n; tok++ {
				a.quantRow(x, tok)
			}
			exact := bf16ExactTokens(m, a, 0, rows)
			if exact == nil {
				t.Fatal("bf16ExactTokens: nil for a BF16 batch")
			}
			allFast := exact(0, c.n)
			if allFast != c.wantAllFast {
				t.Errorf("all tokens exact: got %v, want %v", allFast, c.wantAllFast)
			}
			if c.name == "tiny weights" {
				// The fused kernel on its own rounds differently here.
				var acc [16]float32
				differs := false
				for g := 0; g+4 <= rows && !differs; g += 4 {
					bf16fDot4x4RAVX512(&m.Data[g*m.RowBytes], m.RowBytes, &a.f[0], cols*4, cols/16, &acc[0])
					for r := 0; r < 4; r++ {
						for tok := 0; tok < 4; tok++ {
							if math.Float32bits(acc[r*4+tok]) != math.Float32bits(want[tok*rows+g+r]) {
								differs = true
							}
						}
					}
				}
				if !differs {
					t.Fatal("the fused kernel gave the canonical bits on tiny weights: the case does not test the check")
				}
			}
			for th, p := range pools {
				for _, on := range []bool{true, false} {
					bf16FMA = on
					got := make([]float32, c.n*rows)
					p.MatMul(got, m, x, c.n)
					bitsEqual(t, fmt.Sprintf("%d threads, fused kernels %v", th, on), got, want)
				}
				bf16FMA = true
			}
		})
	}
}

// TestRoundBF16Arch checks the AVX-512 rounding of activations to bf16
// (and their range) bit for bit against ggml.F32ToBF16 and the portable
// range, on values of every kind: ties to even, values that round up to
// infinity, subnormals, zeros of both signs, infinities and NaNs with
// payloads, at lengths around the 16-value step.
func TestRoundBF16Arch(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512")
	}
	defer SetISA(SetISA(ISAAVX512))
	rng := rand.New(rand.NewPCG(9, 10))
	specials := []uint32{0, 0x80000000, 0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F7FFFFF, 0xFF7F8000,
		0x00000001, 0x807FFFFF, 0x00008000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFF1234, 0x7FBF8000}
	for _, n := range []int{0, 1, 15, 16, 17, 48, 100, 896} {
		for trial := 0; trial < 40; trial++ {
			src := make([]float32, n)
			for i := range src {
				switch rng.IntN(3) {
				case 0:
					src[i] = math.Float32frombits(specials[rng.IntN(len(specials))])
				case 1:
					src[i] = math.Float32frombits(rng.Uint32())
				default:
					src[i] = float32(rng.NormFloat64())
				}
			}
			dst := make([]float32, n)
			got, ok := roundBF16Arch(src, dst)
			if !ok {
				t.Fatal("roundBF16Arch did not run on AVX-512")
			}
			want := bf16RangeEmpty
			for i, v := range src {
				b := ggml.F32ToBF16(v)
				want = want.addBits(b)
				if w := uint32(b) << 16; math.Float32bits(dst[i]) != w {
					t.Fatalf("n=%d, value %d (%#08x): got %#08x, want %#08x", n, i, math.Float32bits(v), math.Float32bits(dst[i]), w)
				}
			}
			if got != want {
				t.Fatalf("n=%d, trial %d: range %#x, want %#x", n, trial, uint32(got), uint32(want))
			}
		}
	}
}

// TestMatMulFloatChunks checks batches of more than 4 tokens whose rows
// are taken in column chunks (floatChunkMin16, floatChunk16) bit for bit
// against the portable kernels, for every float type, with and without
// columns past the last whole 16 and a last chunk shorter than the others,
// on 1 and 2 threads, at the default chunk and at a short one, and rows
// shorter than 16 columns.
func TestMatMulFloatChunks(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512")
	}
	defer SetISA(SetISA(ISAGeneric))
	defer func(mn, c int) { floatChunkMin16, floatChunk16 = mn, c }(floatChunkMin16, floatChunk16)
	pools := map[int]*Pool{1: NewPool(1), 2: NewPool(2)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, ch := range [][2]int{{floatChunkMin16, floatChunk16}, {8, 5}} {
		for _, typ := range []ggml.Type{ggml.TypeF16, ggml.TypeF32, ggml.TypeBF16} {
			// 7 and 15: rows shorter than one 16-column step (no kernel step at all).
			for _, cols := range []int{7, 15, 16*ch[0] + 7, 16 * (2*ch[1] + 3), 16*(ch[0]+ch[1]) + 9} {
				for _, n := range []int{5, 8, 37} {
					t.Run(fmt.Sprintf("chunk=%d/%s/cols=%d/n=%d", ch[1], typ, cols, n), func(t *testing.T) {
						floatChunkMin16, floatChunk16 = ch[0], ch[1]
						const rows = 37
						rng := rand.New(rand.NewPCG(31, uint64(cols)<<8|uint64(n)))
						m, err := NewMatrix(typ, rows, cols, randomWeights(rng, typ, rows, cols))
						if err != nil {
							t.Fatal(err)
						}
						x := randomActs(rng, n*cols)
						SetISA(ISAGeneric)
						want := make([]float32, n*rows)
						pools[1].MatMul(want, m, x, n)
						SetISA(ISAAVX512)
						for th, p := range pools {
							got := make([]float32, n*rows)
							p.MatMul(got, m, x, n)
							bitsEqual(t, fmt.Sprintf("%d threads", th), got, want)
						}
					})
				}
			}
		}
	}
}
