package kernels

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// memSum reads data in parts pieces on p's threads, summing it as uint64
// words: the plain read that a decode MatMul of the same bytes is measured
// against.
func memSum(p *Pool, data []uint64, sums []uint64) {
	parts := len(sums)
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

// BenchmarkFloatDecode measures one-token MatMul of F16 and BF16 weights at
// the Qwen2.5-0.5B shapes in GB/s of weights (the MB/s column), beside its
// same-run peer kind=memsum: a plain read of the same number of bytes, split
// into as many parts as the MatMul has tiles. Each shape and thread count
// runs its three cases back to back, so -count alternates them.
func BenchmarkFloatDecode(b *testing.B) {
	for _, sh := range benchShapes {
		for _, th := range []int{1, 2} {
			for _, kind := range []string{"F16", "F16-4row", "BF16", "BF16-4row", "memsum"} {
				b.Run(fmt.Sprintf("%s/threads=%d/kind=%s", sh.name, th, kind), func(b *testing.B) {
					p := NewPool(th)
					defer p.Close()
					size := sh.rows * sh.cols * 2
					b.SetBytes(int64(size))
					if kind == "memsum" {
						data := make([]uint64, size/8)
						for i := range data {
							data[i] = uint64(i)
						}
						sums := make([]uint64, (sh.rows+decodeTileRows-1)/decodeTileRows)
						memSum(p, data, sums)
						cpu := startCPU(b)
						for b.Loop() {
							memSum(p, data, sums)
						}
						cpu.report(float64(size)/1e9, "GB")
						return
					}
					typ, old := ggml.TypeF16, strings.HasSuffix(kind, "-4row")
					if strings.HasPrefix(kind, "BF16") {
						typ = ggml.TypeBF16
					}
					defer func(on bool) { floatDecode8 = on }(floatDecode8)
					floatDecode8 = !old
					m := benchMatrix(b, typ, sh.rows, sh.cols)
					x := randomActs(rand.New(rand.NewPCG(5, 6)), sh.cols)
					y := make([]float32, sh.rows)
					p.MatMul(y, m, x, 1)
					cpu := startCPU(b)
					for b.Loop() {
						p.MatMul(y, m, x, 1)
					}
					cpu.report(float64(size)/1e9, "GB")
				})
			}
		}
	}
}
