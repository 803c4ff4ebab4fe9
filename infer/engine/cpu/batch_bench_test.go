package cpu

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/kernels"
)

// BenchmarkDecodeBatch measures decode of n streams in one Forward call
// (one token per sequence, as serve's scheduler batches them) on the model
// named by MUSER_BENCH_MODEL (for issue 5, the Qwen2.5-0.5B-shaped Q8_0 file
// servebench builds: go run ./serve/servebench -keep DIR builds it as
// DIR/qwen2.5-0.5b-q8_0-seed1.gguf). kernels=multi uses the multi-token
// raw-block matmul kernels, kernels=single is the same-run peer without
// them (kernels.SetMultiToken). Each stream starts from a 32-token prompt
// and a step decodes one token of every stream; tok/s counts all streams.
func BenchmarkDecodeBatch(b *testing.B) {
	path := os.Getenv("MUSER_BENCH_MODEL")
	if path == "" {
		b.Skip("MUSER_BENCH_MODEL is not set (a GGUF model to benchmark, e.g. servebench's Qwen2.5-0.5B-shaped Q8_0 file)")
	}
	m := openModel(b, path, 2)
	V := m.Config().Vocab
	ctx := context.Background()
	const prompt, steps = 32, 16
	for _, n := range []int{1, 2, 4, 8, 16} {
		for _, multi := range []bool{true, false} {
			name := map[bool]string{true: "multi", false: "single"}[multi]
			b.Run(fmt.Sprintf("n=%d/kernels=%s", n, name), func(b *testing.B) {
				defer kernels.SetMultiToken(kernels.SetMultiToken(multi))
				var cpu time.Duration
				for b.Loop() {
					b.StopTimer()
					st := make([]engine.Step, n)
					for i := range st {
						seq, err := m.NewSequence(prompt + steps + 1)
						if err != nil {
							b.Fatal(err)
						}
						toks := make([]int32, prompt)
						for j := range toks {
							toks[j] = int32((1 + 7919*(j+prompt*i)) % V)
						}
						if err := m.Forward(ctx, []engine.Step{{Seq: seq, Tokens: toks, Output: engine.OutputNone}}); err != nil {
							b.Fatal(err)
						}
						st[i] = engine.Step{Seq: seq, Tokens: []int32{int32(i % V)}, Output: engine.OutputLast}
					}
					c0 := processCPU()
					b.StartTimer()
					for s := 0; s < steps; s++ {
						if err := m.Forward(ctx, st); err != nil {
							b.Fatal(err)
						}
						for i := range st {
							st[i].Tokens[0] = int32((s*31 + i) % V)
						}
					}
					b.StopTimer()
					cpu += processCPU() - c0
					b.StartTimer()
				}
				tokens := float64(n * steps * b.N)
				b.ReportMetric(tokens/b.Elapsed().Seconds(), "tok/s")
				b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(steps*b.N), "ms/step")
				b.ReportMetric(tokens/cpu.Seconds(), "tok/cpu-s")
			})
		}
	}
}

// processCPU returns the CPU time (user and system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
