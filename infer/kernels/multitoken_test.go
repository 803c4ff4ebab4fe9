package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// multiTokenTypes are the types with multi-token raw-block kernels on some
// variant, and their neighbours in a Q4_K_M file.
var multiTokenTypes = []ggml.Type{ggml.TypeQ8_0, ggml.TypeQ5_0, ggml.TypeQ4_K, ggml.TypeQ6_K}

// TestMatMulMultiToken checks the multi-token raw-block kernels bit for
// bit against the portable kernels, for every batch size 1..16 (and 17,
// 23: a full group of 8 tokens and a ragged one; 128 and 129: the last
// batch that takes them for Q5_0, Q4_K, Q6_K and the first that does not),
// row counts that are a
// whole number of 16-row groups, one that leaves an 8-row group and a
// ragged rest (40 = 2·16 + 8), and one spanning several decode tiles with
// a ragged end (135), with 1 and 3 threads, and with the kernels turned
// off (SetMultiToken(false)), which must give the same bits too. Weights
// are random bytes (every scale, min and quant value occurs) or all 0xFF
// (the largest scales, mins and quants), and activations random with
// outliers or all of one sign (the largest activation sums).
func TestMatMulMultiToken(t *testing.T) {
	pools := map[int]*Pool{1: NewPool(1), 3: NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	defer SetISA(SetISA(ISAGeneric))
	defer SetMultiToken(SetMultiToken(true))
	batches := []int{}
	for n := 1; n <= 16; n++ {
		batches = append(batches, n)
	}
	batches = append(batches, 17, 23, 128, 129)
	for _, typ := range multiTokenTypes {
		for _, rows := range []int{16, 40, 135} {
			for _, extreme := range []bool{false, true} {
				cols := 768
				t.Run(fmt.Sprintf("%s/rows=%d/extreme=%v", typ, rows, extreme), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(7, uint64(typ)<<8|uint64(rows)))
					data := randomWeights(rng, typ, rows, cols)
					x := randomActs(rng, 129*cols)
					if extreme {
						// Every byte but the f16 scales (which stay finite).
						ts := typ.TypeSize()
						for b := 0; b < len(data); b += ts {
							var keep [256]bool
							for _, off := range f16Fields[typ] {
								keep[off], keep[off+1] = true, true
							}
							for i := 0; i < ts; i++ {
								if !keep[i] {
									data[b+i] = 0xFF
								}
							}
						}
						if typ == ggml.TypeQ8_0 {
							// Quants of −128: the largest magnitude, which
							// the AVX2 kernels' int16 pair sums must hold.
							for b := 0; b < len(data); b += typ.TypeSize() {
								for i := 2; i < typ.TypeSize(); i++ {
									data[b+i] = 0x80
								}
							}
						}
						if typ == ggml.TypeQ6_K {
							// Scales −1 would be small: make them −128.
							for b := 0; b < len(data); b += typ.TypeSize() {
								for s := 192; s < 208; s++ {
									data[b+s] = 0x80
								}
							}
						}
						for i := range x {
							x[i] = -1 - float32(i%3)/1000
						}
					}
					m, err := NewMatrix(typ, rows, cols, data)
					if err != nil {
						t.Fatal(err)
					}
					SetISA(ISAGeneric)
					want := make([]float32, 129*rows)
					pools[1].MatMul(want, m, x, 129)
					for i, v := range want {
						if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) || v == 0 {
							t.Fatalf("reference element %d is %g: the weights must give finite, non-zero results", i, v)
						}
					}
					for _, v := range variants() {
						SetISA(v)
						for _, multi := range []bool{true, false} {
							SetMultiToken(multi)
							for _, n := range batches {
								for th, p := range pools {
									got := make([]float32, n*rows)
									p.MatMul(got, m, x, n)
									bitsEqual(t, fmt.Sprintf("%s, multi-token %v, n=%d, %d threads", v, multi, n, th), got, want[:n*rows])
								}
							}
						}
						SetMultiToken(true)
					}
				})
			}
		}
	}
}
