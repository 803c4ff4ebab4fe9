package engine_test

import (
	"context"
	"github.com/muserhq/muser/infer/engine"
	"testing"
)

func benchForward(b *testing.B, path string, threads, prompt int, decode bool) {
	m := openModel(b, path, opts{Threads: threads})
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
			if err := m.Forward(ctx, []engine.Step{{Seq: seq, Tokens: toks, Output: engine.OutputLast}}); err != nil {
				b.Fatal(err)
			}
			continue
		}
		st := []engine.Step{{Seq: seq, Output: engine.OutputLast}}
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
