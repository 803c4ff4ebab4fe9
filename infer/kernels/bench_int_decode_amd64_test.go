package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// intDecodeShapes are the matrices of a one-token decode of the models the
// engine benchmarks (scripts/bench.sh): Qwen3-0.6B (hidden 1024, ffn 3072,
// tied output 151,936 rows) and Llama-3.2-1B (hidden 2048, ffn 8192, output
// 128,256 rows).
var intDecodeShapes = []struct {
	name       string
	rows, cols int
}{
	{"qwen3_ffn_up_3072x1024", 3072, 1024},
	{"qwen3_ffn_down_1024x3072", 1024, 3072},
	{"qwen3_output_151936x1024", 151936, 1024},
	{"llama_ffn_up_8192x2048", 8192, 2048},
	{"llama_output_128256x2048", 128256, 2048},
}

// BenchmarkIntDecode measures one-token MatMul of the integer weight types
// of a Q4_K_M or Q8_0 file (Q6_K, Q4_K, Q8_0, Q5_0) at the shapes of
// intDecodeShapes, in GB/s of weights (the MB/s column; GB/cpu-s per
// CPU-second of the process), beside the same-run peer kind=memsum: a plain
// read of the same number of bytes per op, split into as many parts as the
// MatMul has tiles. Every case cycles through copies of its matrix that add
// up to at least coldBytes, so each op reads its weights from memory, as a
// real decode does. Each shape and thread count runs its cases back to
// back; kind=X-avx2 is type X on the AVX2 variant (SetISA) where the CPU
// has AVX-512 too. MUSER_BENCH_TYPES (a comma-separated list such as
// "Q6_K,memsum") and MUSER_BENCH_SHAPES (substrings of the shape names)
// narrow the run; MUSER_BENCH_WARM=1 multiplies one copy of each matrix
// (cache-resident where it fits: the kernels' compute bound).
func BenchmarkIntDecode(b *testing.B) {
	kinds := []string{"Q6_K", "Q4_K", "Q8_0", "Q5_0", "Q6_K-avx2", "Q4_K-avx2", "Q8_0-avx2", "memsum"}
	if s := os.Getenv("MUSER_BENCH_TYPES"); s != "" {
		kinds = strings.Split(s, ",")
	}
	shapeOK := func(name string) bool {
		s := os.Getenv("MUSER_BENCH_SHAPES")
		if s == "" {
			return true
		}
		for _, f := range strings.Split(s, ",") {
			if strings.Contains(name, f) {
				return true
			}
		}
		return false
	}
	for _, sh := range intDecodeShapes {
		if !shapeOK(sh.name) {
			continue
		}
		for _, th := range []int{1, 2} {
			for _, kind := range kinds {
				b.Run(fmt.Sprintf("%s/threads=%d/kind=%s", sh.name, th, kind), func(b *testing.B) {
					benchIntDecode(b, sh.rows, sh.cols, th, kind)
				})
			}
		}
	}
}

func benchIntDecode(b *testing.B, rows, cols, th int, kind string) {
	p := NewPool(th)
	defer p.Close()
	if kind == "memsum" {
		size := rows * cols * 34 / 32 // as many bytes as Q8_0
		b.SetBytes(int64(size))
		benchColdMemSum(b, p, size, rows)
		return
	}
	name, avx2 := strings.CutSuffix(kind, "-avx2")
	if avx2 {
		if BestISA() < ISAAVX2 {
			b.Skip("no AVX2")
		}
		defer SetISA(SetISA(ISAAVX2))
	}
	var typ ggml.Type
	switch name {
	case "Q6_K":
		typ = ggml.TypeQ6_K
	case "Q4_K":
		typ = ggml.TypeQ4_K
	case "Q8_0":
		typ = ggml.TypeQ8_0
	case "Q5_0":
		typ = ggml.TypeQ5_0
	default:
		b.Fatalf("kind %q: want Q6_K, Q4_K, Q8_0 or Q5_0 (optionally -avx2) or memsum", kind)
	}
	if cols%typ.BlockSize() != 0 {
		b.Skipf("%d columns are not whole %s blocks", cols, typ)
	}
	src := randomWeights(rand.New(rand.NewPCG(3, 4)), typ, rows, cols)
	size := len(src)
	copies := max(1, (coldBytes+size-1)/size)
	if os.Getenv("MUSER_BENCH_WARM") != "" {
		copies = 1 // cache-resident where it fits: the kernel's compute bound
	}
	b.SetBytes(int64(size))
	ms := make([]*Matrix, copies)
	for i := range ms {
		m, err := NewMatrix(typ, rows, cols, append([]byte(nil), src...))
		if err != nil {
			b.Fatal(err)
		}
		ms[i] = m
	}
	x := randomActs(rand.New(rand.NewPCG(5, 6)), cols)
	y := make([]float32, rows)
	i := 0
	cpu := startCPU(b)
	for b.Loop() {
		p.MatMul(y, ms[i], x, 1)
		i = (i + 1) % copies
	}
	cpu.report(float64(size)/1e9, "GB")
}
