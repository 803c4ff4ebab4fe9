package kernels

import (
	"fmt"
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
