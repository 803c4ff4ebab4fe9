package engine

import (
	"context"
	"os"
	"strconv"
	"testing"
)

func benchForward(b *testing.B, path string, threads, prompt int, decode bool) {
	m := openModel(b, path, Options{Threads: threads})
	V := m.Config().Vocab
	toks := make([]int32, prompt)
	for i := range toks {
		toks[i] = int32((1 + 7919*i) % V)
	}
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		seq, _ := m.NewSequence(prompt + 1)
		if !decode {
			if err := m.Forward(ctx, []Step{{Seq: seq, Tokens: toks, Output: OutputLast}}); err != nil {
				b.Fatal(err)
			}
			continue
		}
		st := []Step{{Seq: seq, Output: OutputLast}}
		for i := range toks {
			st[0].Tokens = toks[i : i+1]
			if err := m.Forward(ctx, st); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(prompt*b.N)/b.Elapsed().Seconds(), "tok/s")
}

func BenchmarkPrefillStories(b *testing.B) {
	benchForward(b, sharedModel(b, "stories260K.gguf"), 2, 128, false)
}

func BenchmarkDecodeStories(b *testing.B) {
	benchForward(b, sharedModel(b, "stories260K.gguf"), 2, 128, true)
}

// BenchmarkPrefillLong prefills MUSER_BENCH_PROMPT tokens (default 2048)
// of the model at MUSER_BENCH_MODEL (skipped when unset) at 2 threads: the
// long-context attention benchmark (docs/benchmarks.md).
func BenchmarkPrefillLong(b *testing.B) {
	path := os.Getenv("MUSER_BENCH_MODEL")
	if path == "" {
		b.Skip("set MUSER_BENCH_MODEL to a GGUF file (e.g. a Qwen2.5-0.5B-shaped Q8_0 from scripts/bench.sh)")
	}
	n := 2048
	if s := os.Getenv("MUSER_BENCH_PROMPT"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("MUSER_BENCH_PROMPT=%q: want a positive token count", s)
		}
		n = v
	}
	benchForward(b, path, 2, n, false)
}
