package engine_test

import (
	"context"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"testing"

	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// FuzzLoad feeds arbitrary GGUF bytes to Load and, when a model loads, a
// short Forward: neither may panic, and a loaded model must return one
// row of logits of its vocabulary size. Seeds are micro models of each
// architecture (testdata/fuzz/FuzzLoad holds more).
func FuzzLoad(f *testing.F) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		for _, q := range []ggml.Type{ggml.TypeQ8_0, ggml.TypeF16} {
			b, err := enginetest.Build(enginetest.Micro(arch), q, 1)
			if err != nil {
				f.Fatal(err)
			}
			data, err := b.Bytes()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := gguf.Parse(data)
		if err != nil {
			return
		}
		m, err := engine.Load(gf, engine.Options{Device: cpu.New(cpu.Options{Threads: 1}), BatchSize: 2})
		if err != nil {
			return
		}
		defer m.Close()
		seq, err := m.NewSequence(4)
		if err != nil {
			t.Fatalf("NewSequence after a successful Load: %v", err)
		}
		V := m.Config().Vocab
		st := []engine.Step{{Seq: seq, Tokens: []int32{0, int32(V - 1), int32(V / 2)}, Output: engine.OutputLast}}
		if err := m.Forward(context.Background(), st); err != nil {
			t.Fatalf("Forward on a loaded model: %v", err)
		}
		if len(st[0].Logits) != V {
			t.Fatalf("%d logits, want %d", len(st[0].Logits), V)
		}
	})
}
