package kernels

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

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

// benchMatrices caches generated weights across sub-benchmarks.
var benchMatrices = map[string]*Matrix{}

func benchMatrix(b *testing.B, typ ggml.Type, rows, cols int) *Matrix {
	key := fmt.Sprint(typ, rows, cols)
	if m, ok := benchMatrices[key]; ok {
		return m
	}
	rng := rand.New(rand.NewPCG(3, 4))
	m, err := NewMatrix(typ, rows, cols, randomWeights(rng, typ, rows, cols))
	if err != nil {
		b.Fatal(err)
	}
	benchMatrices[key] = m
	return m
}

// cpuMeter reports, next to Go's wall-clock figures, rates per second of
// CPU time consumed by the whole process (both threads at threads=2). The
// development machines are shared, and CPU time is far less disturbed by
// other people's jobs than wall time.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
}

// startCPU collects garbage first, so that a collection of earlier
// benchmarks' data is not billed to this one.
func startCPU(b *testing.B) *cpuMeter {
	runtime.GC()
	return &cpuMeter{b: b, start: processCPU()}
}

func (c *cpuMeter) report(work float64, unit string) {
	cpu := processCPU() - c.start
	if cpu <= 0 {
		return
	}
	c.b.ReportMetric(work*float64(c.b.N)/cpu.Seconds(), unit+"/cpu-s")
}

func BenchmarkMatMul(b *testing.B) {
	for _, typ := range benchTypes {
		for _, sh := range benchShapes {
			if sh.cols%typ.BlockSize() != 0 {
				continue
			}
			for _, n := range []int{1, 512} {
				if n == 512 && sh.rows > 10000 {
					continue // the output matrix is applied to one token at a time
				}
				for _, th := range []int{1, 2} {
					b.Run(fmt.Sprintf("%s/%s/n=%d/threads=%d", typ, sh.name, n, th), func(b *testing.B) {
						m := benchMatrix(b, typ, sh.rows, sh.cols)
						x := randomActs(rand.New(rand.NewPCG(5, 6)), n*sh.cols)
						y := make([]float32, n*sh.rows)
						p := NewPool(th)
						defer p.Close()
						b.SetBytes(int64(len(m.Data)))
						p.MatMul(y, m, x, n)
						cpu := startCPU(b)
						for b.Loop() {
							p.MatMul(y, m, x, n)
						}
						flops := 2 * float64(sh.rows) * float64(sh.cols) * float64(n)
						b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
						cpu.report(flops/1e9, "GFLOP")
						cpu.report(float64(len(m.Data))/1e9, "GB")
					})
				}
			}
		}
	}
}

// BenchmarkMemSum is the same-run peer for decode: it reads as many bytes
// as a Q8_0 weight matrix of each shape (summing them as uint64 words), so
// its rate is the memory bandwidth a decode MatMul can hope for.
func BenchmarkMemSum(b *testing.B) {
	for _, sh := range benchShapes {
		for _, th := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", sh.name, th), func(b *testing.B) {
				size := sh.rows * sh.cols * 34 / 32 // Q8_0 bytes
				data := make([]uint64, size/8)
				for i := range data {
					data[i] = uint64(i)
				}
				p := NewPool(th)
				defer p.Close()
				parts := (sh.rows + tileRows - 1) / tileRows
				sums := make([]uint64, parts)
				b.SetBytes(int64(size))
				cpu := startCPU(b)
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
				cpu.report(float64(size)/1e9, "GB")
			})
		}
	}
}

func BenchmarkAttention(b *testing.B) {
	// One head of an 8k-token context: 8192 keys of dimension 64 in f16.
	const ctx, dim = 8192, 64
	rng := rand.New(rand.NewPCG(7, 7))
	kf := randomActs(rng, ctx*dim)
	k := make([]uint16, ctx*dim)
	F32ToF16(k, kf)
	q := randomActs(rng, dim)
	scores := make([]float32, ctx)
	out := make([]float32, dim)
	for _, v := range variants() {
		b.Run(v.String(), func(b *testing.B) {
			defer SetISA(SetISA(v))
			cpu := startCPU(b)
			for b.Loop() {
				for j := range scores {
					scores[j] = DotF16(k[j*dim:(j+1)*dim], q)
				}
				Softmax(scores)
				clear(out)
				for j, s := range scores {
					AXPYF16(out, s, k[j*dim:(j+1)*dim])
				}
			}
			cpu.report(4*ctx*dim/1e9, "GFLOP")
		})
		b.Run(v.String()+"/rows", func(b *testing.B) {
			defer SetISA(SetISA(v))
			cpu := startCPU(b)
			for b.Loop() {
				DotF16Rows(scores, k, dim, q)
				Softmax(scores)
				clear(out)
				AXPYF16Rows(out, scores, k, dim)
			}
			cpu.report(4*ctx*dim/1e9, "GFLOP")
		})
	}
}

// BenchmarkQuantize measures activation quantization of one 4864-wide row
// (Qwen2.5-0.5B's FFN width) per variant.
func BenchmarkQuantize(b *testing.B) {
	x := randomActs(rand.New(rand.NewPCG(1, 1)), 4864)
	for _, kind := range []struct {
		name string
		k    actKind
	}{{"Q8_0", actQ8_0}, {"Q8_1", actQ8_1}, {"Q8_K", actQ8_K}} {
		for _, v := range variants() {
			b.Run(kind.name+"/"+v.String(), func(b *testing.B) {
				defer SetISA(SetISA(v))
				var a acts
				a.reset(kind.k, 1, len(x))
				cpu := startCPU(b)
				for b.Loop() {
					a.quantRow(x, 0)
				}
				cpu.report(float64(len(x))/1e9, "Gelem")
			})
		}
	}
}

// BenchmarkMatMulISA compares the variants on the same matrix in one run
// (decode of a Qwen2.5-0.5B ffn_down at Q8_0 and Q4_K, prefill of 64 tokens).
func BenchmarkMatMulISA(b *testing.B) {
	for _, typ := range []ggml.Type{ggml.TypeQ8_0, ggml.TypeQ4_K} {
		for _, n := range []int{1, 64} {
			for _, v := range variants() {
				b.Run(fmt.Sprintf("%s/n=%d/%s", typ, n, v), func(b *testing.B) {
					defer SetISA(SetISA(v))
					m := benchMatrix(b, typ, 896, 4864)
					x := randomActs(rand.New(rand.NewPCG(5, 6)), n*m.Cols)
					y := make([]float32, n*m.Rows)
					p := NewPool(1)
					defer p.Close()
					cpu := startCPU(b)
					for b.Loop() {
						p.MatMul(y, m, x, n)
					}
					cpu.report(2*float64(m.Rows*m.Cols*n)/1e9, "GFLOP")
				})
			}
		}
	}
}

// BenchmarkMatMulSmallBatch measures decode of several streams: matrices
// of the Qwen2.5-0.5B shapes times n tokens, with the multi-token
// raw-block kernels (kernels=multi) against the same-run peer without them
// (kernels=single: the one-token raw kernel per token up to 4 tokens,
// unpacked panels above). Q8_0 on every shape; the other types of a
// Q4_K_M file (Q5_0, Q4_K, Q6_K) on the shapes their blocks divide, less
// the output matrix. Types with AVX2 multi-token kernels (Q4_K) also run
// on the AVX2 variant (suffix /isa=avx2) where the CPU has AVX-512. ns/token
// is wall time per token of the batch.
func BenchmarkMatMulSmallBatch(b *testing.B) {
	for _, typ := range []ggml.Type{ggml.TypeQ8_0, ggml.TypeQ5_0, ggml.TypeQ4_K, ggml.TypeQ6_K} {
		for _, sh := range benchShapes {
			if sh.cols%typ.BlockSize() != 0 || typ != ggml.TypeQ8_0 && sh.rows > 10000 {
				continue
			}
			for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
				for _, v := range []ISA{BestISA(), ISAAVX2} {
					if v != BestISA() && (v > BestISA() || !hasRawTAVX2(typ)) {
						continue
					}
					suffix := ""
					if v != BestISA() {
						suffix = "/isa=" + v.String()
					}
					for _, multi := range []bool{true, false} {
						name := map[bool]string{true: "multi", false: "single"}[multi]
						b.Run(fmt.Sprintf("%s/%s/n=%d/kernels=%s%s", typ, sh.name, n, name, suffix), func(b *testing.B) {
							defer SetMultiToken(SetMultiToken(multi))
							defer SetISA(SetISA(v))
							m := benchMatrix(b, typ, sh.rows, sh.cols)
							x := randomActs(rand.New(rand.NewPCG(5, 6)), n*sh.cols)
							y := make([]float32, n*sh.rows)
							p := NewPool(1)
							defer p.Close()
							p.MatMul(y, m, x, n)
							cpu := startCPU(b)
							for b.Loop() {
								p.MatMul(y, m, x, n)
							}
							b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
							cpu.report(2*float64(sh.rows)*float64(sh.cols)*float64(n)/1e9, "GFLOP")
						})
					}
				}
			}
		}
	}
}

// BenchmarkMatMulNVFP4 compares NVFP4 weights with Q8_0 and Q4_K on the
// same matrices, decode (1 token) and prefill (64 tokens), one thread,
// on each variant: Qwen2.5-0.5B's ffn_up (896 → 4864: rows of 896, which
// Q4_K's 256-value blocks do not divide, so Q5_0 stands in for it as in
// llama.cpp's Q4_K_M) and ffn_down (4864 → 896).
func BenchmarkMatMulNVFP4(b *testing.B) {
	for _, sh := range []struct {
		name       string
		rows, cols int
	}{{"ffn_up_4864x896", 4864, 896}, {"ffn_down_896x4864", 896, 4864}} {
		for _, typ := range []ggml.Type{ggml.TypeNVFP4, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ5_0} {
			if sh.cols%typ.BlockSize() != 0 || typ == ggml.TypeQ5_0 && sh.cols%256 == 0 {
				continue
			}
			for _, n := range []int{1, 64} {
				for _, v := range variants() {
					b.Run(fmt.Sprintf("%s/%s/n=%d/%s", sh.name, typ, n, v), func(b *testing.B) {
						defer SetISA(SetISA(v))
						m := benchMatrix(b, typ, sh.rows, sh.cols)
						x := randomActs(rand.New(rand.NewPCG(5, 6)), n*sh.cols)
						y := make([]float32, n*sh.rows)
						p := NewPool(1)
						defer p.Close()
						b.SetBytes(int64(len(m.Data)))
						p.MatMul(y, m, x, n)
						cpu := startCPU(b)
						for b.Loop() {
							p.MatMul(y, m, x, n)
						}
						cpu.report(2*float64(sh.rows)*float64(sh.cols)*float64(n)/1e9, "GFLOP")
					})
				}
			}
		}
	}
}
