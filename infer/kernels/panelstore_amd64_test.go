package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// TestPanelStoreRuns checks the panel drivers' stores (storePanelRows)
// bit for bit against the portable kernels on work items of every shape
// they take: runs of 8 row groups and a shorter last run, a last partial
// group of rows, one token (Q2_K and Q3_K take panels at every batch size,
// in work items of 64 rows or more) and batches past the raw-block kernels'
// limit (16-row items), at 1 and 2 threads.
func TestPanelStoreRuns(t *testing.T) {
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
	for _, typ := range []ggml.Type{ggml.TypeQ2_K, ggml.TypeQ3_K, ggml.TypeQ4_K, ggml.TypeQ4_0, ggml.TypeQ5_1} {
		for _, rows := range []int{200, 71} {
			for _, n := range []int{1, 3, 133} {
				t.Run(fmt.Sprintf("%s/rows=%d/n=%d", typ, rows, n), func(t *testing.T) {
					cols := blockCols(typ, 512)
					rng := rand.New(rand.NewPCG(41, uint64(typ)<<16|uint64(rows)<<8|uint64(n)))
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
