package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// extremeFloatWeights returns rows×cols weights of type t (F16 or BF16)
// mixing ordinary values with the type's extremes: its largest finite
// values, subnormals and zeros of both signs, and (BF16) magnitudes so
// small that a product with an activation underflows float32, where a
// fused multiply-add would round differently from the canonical rounded
// product. Every fourth row is tiny throughout (f16 and bf16 subnormals),
// so that, against the tiny activations of TestMatMulFloatDecode's tokens 2
// and 4, its products round to float32's subnormal grid, exact halves
// included, and its whole sum stays there, where those roundings show.
func extremeFloatWeights(rng *rand.Rand, t ggml.Type, rows, cols int) []byte {
	data := make([]byte, rows*cols*2)
	for i := 0; i < len(data); i += 2 {
		v := float32(rng.NormFloat64())
		if (i/2/cols)%4 == 3 {
			v *= 1e-39
			if t == ggml.TypeF16 {
				v = float32(rng.NormFloat64()) * 1e-6
			}
		} else {
			v = extremeWeight(rng, v)
		}
		var bits uint16
		if t == ggml.TypeF16 {
			bits = ggml.F32ToF16(v)
		} else {
			bits = ggml.F32ToBF16(v)
		}
		binary.LittleEndian.PutUint16(data[i:], bits)
	}
	return data
}

// extremeWeight returns v or, one time in four, an extreme in its place.
func extremeWeight(rng *rand.Rand, v float32) float32 {
	switch rng.IntN(16) {
	case 0:
		v = float32(math.Copysign(65504, float64(v))) // f16's largest
	case 1:
		v *= 1e-7 // an f16 subnormal; a tiny bf16
	case 2:
		v = float32(math.Copysign(0, float64(v)))
	case 3:
		v *= 1e-38 // bf16 subnormal range (f16: 0)
	}
	return v
}

// TestMatMulFloatDecode checks MatMul of F16 and BF16 weights for 1 to 5
// tokens (the 8-row one-token kernels, the rows after the last whole group
// of 8, the 4-row kernels of batches)
// bit for bit against the portable kernels, on every variant and thread
// count, for column counts with an odd and an even number of 16-column
// steps (and one step alone), with extreme weights and activations: every
// batch of consecutive tokens must equal those tokens' rows of the
// portable result.
func TestMatMulFloatDecode(t *testing.T) {
	const tokens = 5
	pools := map[int]*Pool{1: NewPool(1), 2: NewPool(2)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	defer SetISA(SetISA(ISAGeneric))
	for _, typ := range []ggml.Type{ggml.TypeF16, ggml.TypeBF16} {
		for _, sh := range []struct{ rows, cols int }{{8, 16}, {21, 48}, {77, 896}, {64, 912}, {24, 1072}, {130, 4864}, {40, 2064}} {
			t.Run(fmt.Sprintf("%s/%dx%d", typ, sh.rows, sh.cols), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(11, uint64(typ)<<16|uint64(sh.cols)))
				m, err := NewMatrix(typ, sh.rows, sh.cols, extremeFloatWeights(rng, typ, sh.rows, sh.cols))
				if err != nil {
					t.Fatal(err)
				}
				x := randomActs(rng, tokens*sh.cols)
				for _, tok := range []int{2, 4} {
					for i := tok * sh.cols; i < (tok+1)*sh.cols; i++ {
						x[i] = float32(math.Ldexp(float64(x[i]), -17)) // products that underflow
					}
				}
				SetISA(ISAGeneric)
				want := make([]float32, tokens*sh.rows)
				pools[1].MatMul(want, m, x, tokens)
				for _, v := range variants() {
					SetISA(v)
					for th, p := range pools {
						for t0 := 0; t0 < tokens; t0++ {
							for n := 1; t0+n <= tokens; n++ {
								got := make([]float32, n*sh.rows)
								p.MatMul(got, m, x[t0*sh.cols:(t0+n)*sh.cols], n)
								bitsEqual(t, fmt.Sprintf("%s, %d threads, tokens [%d,%d)", v, th, t0, t0+n), got, want[t0*sh.rows:(t0+n)*sh.rows])
							}
						}
					}
				}
			})
		}
	}
}
