package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/muserhq/muser/infer/ggml"
)

// coldBytes is how many bytes of weights the decode benchmarks cycle
// through: more than any cache, so that every op streams its weights from
// memory as a real decode does (a model's weights are read once per token).
const coldBytes = 256 << 20

// memSum reads data in parts pieces on p's threads, summing it as uint64
// words: the plain read that a decode MatMul of the same bytes is measured
// against.
// benchColdMemSum is the decode benchmarks' same-run peer: it sums size
// bytes per op, cycling through copies that add up to coldBytes (so every
// op reads from memory), in as many parts as a MatMul of rows has tiles,
// and reports GB per CPU-second.
func benchColdMemSum(b *testing.B, p *Pool, size, rows int) {
	copies := max(1, (coldBytes+size-1)/size)
	data := make([]uint64, copies*size/8)
	for i := range data {
		data[i] = uint64(i)
	}
	tr := workRows(ggml.TypeQ8_0, 1, rows, p.threads)
	sums := make([]uint64, (rows+tr-1)/tr)
	i := 0
	cpu := startCPU(b)
	for b.Loop() {
		memSum(p, data[i*size/8:(i+1)*size/8], sums)
		i = (i + 1) % copies
	}
	cpu.report(float64(size)/1e9, "GB")
}

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

// BenchmarkFloatDecode measures decode MatMul (n=1, and n=4 for four
// streams) of F16 and BF16 weights at the Qwen2.5-0.5B shapes in GB/s of
// weights (the MB/s column; GB/cpu-s per CPU-second), beside its same-run
// peer kind=memsum: a plain read of the same number of bytes per op, split
// into as many parts as the MatMul has tiles. Every case cycles through
// copies of its matrix (or of its memsum buffer) that add up to at least
// coldBytes, so each op reads from memory, not from a cache.
// kind=F16 and BF16 are the one-token kernels MatMul takes (leapfrog or
// lockstep by the row's length, floatLockCols; BF16 on VDPBF16PS where
// the CPU and the token take it); kind=F16-leap, BF16-leap and
// BF16-mul-leap the leapfrog ones on every shape; kind=F16-chain,
// BF16-chain and BF16-mul-chain the ones that run their rows' chains one
// after the other (as before the leapfrog kernels), on every shape;
// kind=BF16-mul has the VDPBF16PS kernels off (the one-token kernels that
// multiply, then add; BF16 is those kernels again where the CPU takes no
// VDPBF16PS kernels). kind=F16-4row and BF16-4row are the same MatMul
// with the one-token kernels of f16_amd64.s (AVX-512) and f16_avx2_amd64.s
// (AVX2) off (the 4-row kernels, as before them; n=4 always takes the
// 4-row × 4-token kernels). The shapes are floatDecodeShapes.
// Each shape, token count and thread count runs its cases back to back.
func BenchmarkFloatDecode(b *testing.B) {
	benchFloatDecode(b, []int{1, 4}, []int{1, 2})
}

// BenchmarkFloatDecodeAVX2 is BenchmarkFloatDecode's one-token, one-thread
// cases on the AVX2 variant (SetISA), where the CPU has it.
func BenchmarkFloatDecodeAVX2(b *testing.B) {
	if BestISA() < ISAAVX2 {
		b.Skip("no AVX2")
	}
	defer SetISA(SetISA(ISAAVX2))
	benchFloatDecode(b, []int{1}, []int{1})
}

// floatDecodeShapes are the decode benchmarks' shapes: Qwen2.5-0.5B's,
// then rows of 1,024, 2,048, 3,072 and 8,192 columns of the Qwen3-0.6B and
// Llama-3.2-1B shapes (where floatLockCols is measured).
func floatDecodeShapes() []struct {
	name       string
	rows, cols int
} {
	return append(benchShapes[:len(benchShapes):len(benchShapes)], []struct {
		name       string
		rows, cols int
	}{
		{"qwen3_ffn_up_3072x1024", 3072, 1024},
		{"qwen3_ffn_down_1024x3072", 1024, 3072},
		{"llama_ffn_up_8192x2048", 8192, 2048},
		prefillShapesLlama[1],
	}...)
}

// benchFloatDecode runs the decode cases for the given token and thread
// counts.
func benchFloatDecode(b *testing.B, ns, threads []int) {
	for _, sh := range floatDecodeShapes() {
		size := sh.rows * sh.cols * 2
		copies := max(1, (coldBytes+size-1)/size)
		for _, n := range ns {
			for _, th := range threads {
				for _, kind := range []string{"F16", "F16-leap", "F16-chain", "F16-4row", "BF16", "BF16-leap", "BF16-chain", "BF16-mul", "BF16-mul-leap", "BF16-mul-chain", "BF16-4row", "memsum"} {
					b.Run(fmt.Sprintf("%s/n=%d/threads=%d/kind=%s", sh.name, n, th, kind), func(b *testing.B) {
						p := NewPool(th)
						defer p.Close()
						b.SetBytes(int64(size))
						if kind == "memsum" {
							benchColdMemSum(b, p, size, sh.rows)
							return
						}
						typ, old := ggml.TypeF16, strings.HasSuffix(kind, "-4row")
						if strings.HasPrefix(kind, "BF16") {
							typ = ggml.TypeBF16
						}
						defer func(on, dot bool) { floatDecode8, bf16Dot = on, dot }(floatDecode8, bf16Dot)
						floatDecode8 = !old
						defer func(c int, k bf16dKernel) { floatLockCols, bf16dLong = c, k }(floatLockCols, bf16dLong)
						switch {
						case strings.HasSuffix(kind, "-chain"): // the one-chain kernels, both variants
							defer func(k, k2 decodeKernel) { decodeFloat[typ], decodeFloatAVX2[typ] = k, k2 }(decodeFloat[typ], decodeFloatAVX2[typ])
							decodeFloat[typ], decodeFloatAVX2[typ] = chainDecodeFloat[typ], chainDecodeFloatAVX2[typ]
							floatLockCols, bf16dLong = 0, bf16dDot8x1AVX512
							defer func(k decodeKernel) { decodeFloatLong[typ] = k }(decodeFloatLong[typ])
							decodeFloatLong[typ] = chainDecodeFloat[typ]
						case strings.HasSuffix(kind, "-leap"):
							floatLockCols = math.MaxInt
						}
						bf16Dot = bf16Dot && (kind == "BF16" || kind == "BF16-chain" || kind == "BF16-leap")
						src := benchMatrix(b, typ, sh.rows, sh.cols)
						ms := []*Matrix{src}
						for len(ms) < copies {
							m, err := NewMatrix(typ, sh.rows, sh.cols, append([]byte(nil), src.Data...))
							if err != nil {
								b.Fatal(err)
							}
							ms = append(ms, m)
						}
						x := randomActs(rand.New(rand.NewPCG(5, 6)), n*sh.cols)
						y := make([]float32, n*sh.rows)
						for _, m := range ms { // a BF16 matrix's first call scans its range
							p.MatMul(y, m, x, n)
						}
						i := 0
						cpu := startCPU(b)
						for b.Loop() {
							p.MatMul(y, ms[i], x, n)
							i = (i + 1) % copies
						}
						cpu.report(float64(size)/1e9, "GB")
					})
				}
			}
		}
	}
}

// prefillShapesLlama are two Llama-3.2-1B shapes, whose rows (2048 and
// 8192 columns) are longer than any of Qwen2.5-0.5B's but ffn_down's.
var prefillShapesLlama = []struct {
	name       string
	rows, cols int
}{
	{"llama_attn_q_2048x2048", 2048, 2048},
	{"llama_ffn_down_2048x8192", 2048, 8192},
}

// BenchmarkFloatPrefill measures prefill MatMul (n=512) of F16 and BF16
// weights at the Qwen2.5-0.5B shapes (not the output matrix, which a
// prefill multiplies by its last token only) and two Llama-3.2-1B ones
// in GFLOP per CPU-second (2·rows·cols·n per op). BF16 takes the
// VDPBF16PS kernels where the CPU has them (else it is BF16-fma again);
// BF16-16rows is BF16 with work items of 16 rows instead of
// floatTileRows; BF16-fma has the VDPBF16PS kernels off (the
// fused-multiply-add kernels); BF16-before also has those off (the
// multiply-then-add kernels) and takes rows whole, as before both. Each
// shape and thread count runs its cases back to back.
func BenchmarkFloatPrefill(b *testing.B) {
	const n = 512
	shapes := append(benchShapes[:3:3], prefillShapesLlama...)
	for _, sh := range shapes {
		for _, th := range []int{1, 2} {
			for _, kind := range []string{"F16", "BF16", "BF16-16rows", "BF16-fma", "BF16-before"} {
				b.Run(fmt.Sprintf("%s/n=%d/threads=%d/kind=%s", sh.name, n, th, kind), func(b *testing.B) {
					p := NewPool(th)
					defer p.Close()
					typ := ggml.TypeF16
					if strings.HasPrefix(kind, "BF16") {
						typ = ggml.TypeBF16
					}
					defer func(on, dot bool, mn, tr int) {
						bf16FMA, bf16Dot, floatChunkMin16, floatTileRows = on, dot, mn, tr
					}(bf16FMA, bf16Dot, floatChunkMin16, floatTileRows)
					bf16FMA = kind != "BF16-before"
					bf16Dot = bf16Dot && (kind == "BF16" || kind == "BF16-16rows")
					if kind == "BF16-16rows" {
						floatTileRows = 16
					}
					if kind == "BF16-before" {
						floatChunkMin16 = math.MaxInt
					}
					m := benchMatrix(b, typ, sh.rows, sh.cols)
					x := randomActs(rand.New(rand.NewPCG(5, 6)), n*sh.cols)
					y := make([]float32, n*sh.rows)
					// Untimed: the first call writes y's fresh pages, which
					// cost about 12 µs each on some virtual machines.
					p.MatMul(y, m, x, n)
					cpu := startCPU(b)
					for b.Loop() {
						p.MatMul(y, m, x, n)
					}
					cpu.report(2*float64(sh.rows*sh.cols*n)/1e9, "GFLOP")
				})
			}
		}
	}
}

// BenchmarkFloatAVX2Batch compares, on the AVX2 variant, the batch kernels
// (2 rows × 3 tokens, kernels=multi) with the 4-row × 1-token kernel per
// token (kernels=single, SetMultiToken(false)) for F16, BF16 and F32
// weights at two Qwen2.5-0.5B shapes, 64 tokens, one thread, in GFLOP per
// CPU-second.
func BenchmarkFloatAVX2Batch(b *testing.B) {
	const n = 64
	if BestISA() < ISAAVX2 {
		b.Skip("no AVX2")
	}
	for _, sh := range benchShapes[1:3] {
		for _, typ := range []ggml.Type{ggml.TypeF16, ggml.TypeBF16, ggml.TypeF32} {
			for _, multi := range []bool{true, false} {
				name := map[bool]string{true: "multi", false: "single"}[multi]
				b.Run(fmt.Sprintf("%s/%s/n=%d/kernels=%s", sh.name, typ, n, name), func(b *testing.B) {
					defer SetISA(SetISA(ISAAVX2))
					defer SetMultiToken(SetMultiToken(multi))
					p := NewPool(1)
					defer p.Close()
					m := benchMatrix(b, typ, sh.rows, sh.cols)
					x := randomActs(rand.New(rand.NewPCG(5, 6)), n*sh.cols)
					y := make([]float32, n*sh.rows)
					// Untimed: the first call writes y's fresh pages, which
					// cost about 12 µs each on some virtual machines.
					p.MatMul(y, m, x, n)
					cpu := startCPU(b)
					for b.Loop() {
						p.MatMul(y, m, x, n)
					}
					cpu.report(2*float64(sh.rows*sh.cols*n)/1e9, "GFLOP")
				})
			}
		}
	}
}

// BenchmarkBF16DotKernel times the 4-row × 4-token BF16 kernels alone on a
// tile that stays in L1 (4 rows × 1,024 columns, 4 tokens): kind=dot the
// VDPBF16PS kernel, kind=fma the fused-multiply-add one, in GFLOP/s
// (2·16·1,024 per call): what the instructions give when no operand
// waits on a cache miss, the bound of the MatMul figures of
// BenchmarkFloatPrefill.
func BenchmarkBF16DotKernel(b *testing.B) {
	if !hasBF16Dot {
		b.Skip("no VDPBF16PS that passes the probe")
	}
	const cols = 1024
	rng := rand.New(rand.NewPCG(3, 4))
	w := make([]byte, 4*cols*2)
	for i := 0; i < 4*cols; i++ {
		v := ggml.F32ToBF16(float32(rng.NormFloat64()))
		w[2*i], w[2*i+1] = byte(v), byte(v>>8)
	}
	x := make([]float32, 4*cols)
	for i := range x {
		x[i] = ggml.BF16ToF32(ggml.F32ToBF16(float32(rng.NormFloat64())))
	}
	xp := make([]uint16, 4*cols)
	for t := 0; t < 4; t++ {
		packBF16Pairs(xp[t*cols:(t+1)*cols], x[t*cols:(t+1)*cols])
	}
	var acc [16]float32
	for _, kind := range []string{"dot", "fma"} {
		b.Run("kind="+kind, func(b *testing.B) {
			for b.Loop() {
				if kind == "dot" {
					bf16dDot4x4RAVX512(&w[0], cols*2, (*float32)(unsafe.Pointer(&xp[0])), cols*2, cols/16, &acc[0])
				} else {
					bf16fDot4x4RAVX512(&w[0], cols*2, &x[0], cols*4, cols/16, &acc[0])
				}
			}
			b.ReportMetric(2*16*cols*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
