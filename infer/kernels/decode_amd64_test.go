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

// TestF16DecodeKernels checks both one-token F16 kernels of the AVX-512
// variant (the leapfrog kernel MatMul takes, and the one-chain-at-a-time
// kernel the benchmarks compare it with) bit for bit against the portable
// MatMul, on rows of one to 512 steps of 16 columns, odd and even (the
// leapfrog kernel's halves differ by one step when the count is odd), with
// weights that reach F16's extremes.
func TestF16DecodeKernels(t *testing.T) {
	if BestISA() < ISAAVX512 {
		t.Skip("no AVX-512")
	}
	defer SetISA(SetISA(ISAGeneric))
	p := NewPool(1)
	defer p.Close()
	kernels := map[string]decodeKernel{"leap": f16Dot8x1LeapAVX512, "chain": f16Dot8x1AVX512}
	for _, n16 := range []int{1, 2, 3, 56, 57, 64, 304, 512} {
		rows, cols := 16, n16*16
		rng := rand.New(rand.NewPCG(13, uint64(n16)))
		m, err := NewMatrix(ggml.TypeF16, rows, cols, extremeFloatWeights(rng, ggml.TypeF16, rows, cols))
		if err != nil {
			t.Fatal(err)
		}
		x := randomActs(rng, cols)
		SetISA(ISAGeneric)
		want := make([]float32, rows)
		p.MatMul(want, m, x, 1)
		for i, v := range x { // the kernels take the activations rounded to f16
			x[i] = f16Table[ggml.F32ToF16(v)]
		}
		for name, k := range kernels {
			got := make([]float32, rows)
			for g := 0; g < rows; g += 8 {
				k(&m.Data[g*m.RowBytes], m.RowBytes, &x[0], n16, &got[g])
			}
			for r := range got {
				if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
					t.Fatalf("%s, %d columns, row %d: %v (%#x), want %v (%#x)", name, cols, r, got[r], math.Float32bits(got[r]), want[r], math.Float32bits(want[r]))
				}
			}
		}
	}
}
