package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// Qwen2.5-0.5B matrix shapes: rows (outputs) × cols (inputs).
var benchShapes = []struct {
	name       string
	rows, cols int
}{
	{"attn_q_896x896", 896, 896},
	{"ffn_up_4864x896", 4864, 896},
	{"ffn_down_896x4864", 896, 4864},
	{"output_151936x896", 151936, 896},
}

// benchTypes are the weight types benchmarked. K-quants need columns that
// are a multiple of 256, which 896 is not; llama.cpp's Q4_K_M stores those
// tensors as Q5_0 (and Q6_K's as Q8_0), so Q5_0 stands in for them.
var benchTypes = []ggml.Type{ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ5_0, ggml.TypeQ6_K, ggml.TypeF16}

func BenchmarkMatMul(b *testing.B) {
	for _, typ := range benchTypes {
		for _, sh := range benchShapes {
			if sh.cols%typ.BlockSize() != 0 {
				continue
			}
			rng := rand.New(rand.NewPCG(3, 4))
			m, err := NewMatrix(typ, sh.rows, sh.cols, randomWeights(rng, typ, sh.rows, sh.cols))
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range []int{1, 512} {
				if n == 512 && sh.rows > 10000 {
					continue // the output matrix is applied to one token at a time
				}
				x := randomActs(rng, n*sh.cols)
				y := make([]float32, n*sh.rows)
				for _, th := range []int{1, 2} {
					b.Run(fmt.Sprintf("%s/%s/n=%d/threads=%d", typ, sh.name, n, th), func(b *testing.B) {
						p := NewPool(th)
						defer p.Close()
						b.SetBytes(int64(len(m.Data)))
						for b.Loop() {
							p.MatMul(y, m, x, n)
						}
						flops := 2 * float64(sh.rows) * float64(sh.cols) * float64(n)
						b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					})
				}
			}
		}
	}
}

// BenchmarkMemSum is the same-run peer for decode: it reads the same number
// of bytes as a weight matrix (summing them as uint64 words), so its MB/s is
// the memory bandwidth a decode MatMul can hope for.
func BenchmarkMemSum(b *testing.B) {
	for _, sh := range benchShapes {
		for _, th := range []int{1, 2} {
			size := sh.rows * sh.cols * 34 / 32 // Q8_0 bytes
			data := make([]uint64, size/8)
			for i := range data {
				data[i] = uint64(i)
			}
			b.Run(fmt.Sprintf("%s/threads=%d", sh.name, th), func(b *testing.B) {
				p := NewPool(th)
				defer p.Close()
				parts := th * 8
				sums := make([]uint64, parts)
				b.SetBytes(int64(size))
				for b.Loop() {
					p.Parallel(parts, func(i int) {
						lo, hi := len(data)*i/parts, len(data)*(i+1)/parts
						var s0, s1, s2, s3 uint64
						d := data[lo:hi]
						for j := 0; j+4 <= len(d); j += 4 {
							s0 += d[j]
							s1 += d[j+1]
							s2 += d[j+2]
							s3 += d[j+3]
						}
						sums[i] = s0 + s1 + s2 + s3
					})
				}
			})
		}
	}
}
