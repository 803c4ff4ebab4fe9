package enginetest

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// TestNVFP4Forward builds a tiny random model of each architecture with
// NVFP4 weights, runs it through the engine, and checks that (1) every
// matrix is NVFP4 and the quant name says so, (2) the logits are within
// the activation-quantization error of Reference (float64 arithmetic on
// the same dequantized weights), and (3) decoding the last token after a
// prefill of the others gives the same bits as one prefill of all of them.
func TestNVFP4Forward(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "nvfp4.gguf")
			if err := WriteFile(path, Tiny(arch), ggml.TypeNVFP4, 4); err != nil {
				t.Fatal(err)
			}
			m, err := engine.Open(path, engine.Options{Device: cpu.New(cpu.Options{Threads: 2})})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			f := m.File()
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				if len(ti.Shape) == 2 && ti.Type != ggml.TypeNVFP4 {
					t.Errorf("%s: type %v, want NVFP4", ti.Name, ti.Type)
				}
			}
			if q := gguf.QuantName(f); q != "NVFP4" {
				t.Errorf("QuantName = %q, want NVFP4", q)
			}

			V := m.Config().Vocab
			r := rand.New(rand.NewPCG(9, 9))
			toks := make([]int32, 12)
			for i := range toks {
				toks[i] = int32(r.IntN(V))
			}
			forward := func(seq *engine.Sequence, toks []int32, out engine.Output) []float32 {
				st := []engine.Step{{Seq: seq, Tokens: toks, Output: out}}
				if err := m.Forward(context.Background(), st); err != nil {
					t.Fatal(err)
				}
				return st[0].Logits
			}
			seq, err := m.NewSequence(len(toks))
			if err != nil {
				t.Fatal(err)
			}
			all := forward(seq, toks, engine.OutputAll)
			if len(all) != len(toks)*V {
				t.Fatalf("%d logits, want %d", len(all), len(toks)*V)
			}

			ref, err := Reference(f, toks)
			if err != nil {
				t.Fatal(err)
			}
			worst := 0.0
			for p := range toks {
				var num, den float64
				for i := 0; i < V; i++ {
					d := float64(all[p*V+i]) - ref[p][i]
					num += d * d
					den += ref[p][i] * ref[p][i]
				}
				worst = max(worst, math.Sqrt(num/den))
			}
			// As for Q8_0 weights: the engine quantizes activations to
			// Q8_0 and rounds K/V to f16; Reference does neither.
			if worst > 2e-2 {
				t.Errorf("relative logit error %.3g against the float64 reference, want ≤ 2e-2", worst)
			}
			t.Logf("worst relative logit error vs float64 reference: %.3g", worst)

			seq2, err := m.NewSequence(len(toks))
			if err != nil {
				t.Fatal(err)
			}
			forward(seq2, toks[:len(toks)-1], engine.OutputNone)
			last := forward(seq2, toks[len(toks)-1:], engine.OutputLast)
			want := all[(len(toks)-1)*V:]
			for i := range want {
				if math.Float32bits(last[i]) != math.Float32bits(want[i]) {
					t.Fatalf("logit %d of the last token: decoded %v, prefilled %v", i, last[i], want[i])
				}
			}
		})
	}
}
