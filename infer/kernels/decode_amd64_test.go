package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// TestQ6KDecodeKernels checks both one-token Q6_K kernels of the AVX-512
// variant (q6_KDot8GFNI where the CPU has GFNI, and q6_KDot8AVX512) bit
// for bit against the portable kernels, on row counts with and without a
// partial 8-row group and tile, and on one to eight super-blocks per row,
// at 1 and 2 threads.
func TestQ6KDecodeKernels(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512")
	}
	gfni := []bool{false}
	if q6KGFNI {
		gfni = append(gfni, true)
	}
	defer func(on bool) { q6KGFNI = on }(q6KGFNI)
	defer SetISA(SetISA(ISAGeneric))
	pools := []*Pool{NewPool(1), NewPool(2)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	for _, rows := range []int{8, 16, 57, 200} {
		for _, cols := range []int{256, 1024, 2048} {
			rng := rand.New(rand.NewPCG(7, uint64(rows*cols)))
			m, err := NewMatrix(ggml.TypeQ6_K, rows, cols, randomWeights(rng, ggml.TypeQ6_K, rows, cols))
			if err != nil {
				t.Fatal(err)
			}
			x := randomActs(rng, cols)
			SetISA(ISAGeneric)
			want := make([]float32, rows)
			pools[0].MatMul(want, m, x, 1)
			SetISA(ISAAVX512)
			for _, g := range gfni {
				for i, p := range pools {
					t.Run(fmt.Sprintf("rows=%d/cols=%d/gfni=%v/threads=%d", rows, cols, g, i+1), func(t *testing.T) {
						q6KGFNI = g
						got := make([]float32, rows)
						p.MatMul(got, m, x, 1)
						bitsEqual(t, "one token", got, want)
					})
				}
			}
		}
	}
}

// chainDecodeFloat and chainDecodeFloatAVX2 are the one-token kernels
// that run their rows' chains one after the other, which the leapfrog
// kernels of decodeFloat and decodeFloatAVX2 replaced: the benchmarks'
// kind=…-chain and TestFloatDecodeKernels take them.
var (
	chainDecodeFloat     = map[ggml.Type]decodeKernel{ggml.TypeF16: f16Dot8x1AVX512, ggml.TypeBF16: bf16Dot8x1AVX512}
	chainDecodeFloatAVX2 = map[ggml.Type]decodeKernel{ggml.TypeF16: f16Dot4x1SAVX2, ggml.TypeBF16: bf16Dot4x1SAVX2}
)

// TestFloatDecodeKernels checks every one-token F16 and BF16 kernel that
// takes float32 activations (the leapfrog and lockstep kernels MatMul
// takes and the one-chain kernels the benchmarks compare them with,
// AVX-512 with 8 rows a call and AVX2 with 4, where the CPU has them) bit
// for bit against the portable MatMul, on rows of one to 512 steps of 16
// columns, odd and even (a leapfrog kernel's halves differ by one step
// when the count is odd), with weights that reach the type's extremes.
func TestFloatDecodeKernels(t *testing.T) {
	type kernel struct {
		isa  ISA
		rows int
		k    decodeKernel
	}
	defer SetISA(SetISA(ISAGeneric))
	p := NewPool(1)
	defer p.Close()
	for _, typ := range []ggml.Type{ggml.TypeF16, ggml.TypeBF16} {
		kernels := map[string]kernel{
			"AVX-512 leapfrog": {ISAAVX512, 8, decodeFloat[typ]}, "AVX-512 one chain": {ISAAVX512, 8, chainDecodeFloat[typ]},
			"AVX2 leapfrog": {ISAAVX2, 4, decodeFloatAVX2[typ]}, "AVX2 one chain": {ISAAVX2, 4, chainDecodeFloatAVX2[typ]},
		}
		if k, ok := decodeFloatLong[typ]; ok {
			kernels["AVX-512 lockstep"] = kernel{ISAAVX512, 8, k}
		}
		for _, n16 := range []int{1, 2, 3, 56, 57, 64, 304, 512} {
			rows, cols := 16, n16*16
			rng := rand.New(rand.NewPCG(13, uint64(n16)<<8|uint64(typ)))
			m, err := NewMatrix(typ, rows, cols, extremeFloatWeights(rng, typ, rows, cols))
			if err != nil {
				t.Fatal(err)
			}
			x := randomActs(rng, cols)
			SetISA(ISAGeneric)
			want := make([]float32, rows)
			p.MatMul(want, m, x, 1)
			a := new(acts) // the kernels take the activations rounded to the type
			a.reset(kernelFor(typ).act, 1, cols)
			a.quantRow(x, 0)
			for name, k := range kernels {
				if BestISA() < k.isa {
					continue
				}
				got := make([]float32, rows)
				for g := 0; g < rows; g += k.rows {
					k.k(&m.Data[g*m.RowBytes], m.RowBytes, &a.f[0], n16, &got[g])
				}
				for r := range got {
					if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
						t.Fatalf("%s, %s kernel, %d columns, row %d: %v (%#x), want %v (%#x)", typ, name, cols, r, got[r], math.Float32bits(got[r]), want[r], math.Float32bits(want[r]))
					}
				}
			}
		}
	}
}
