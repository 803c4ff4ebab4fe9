package engine_test

import (
	"bytes"
	"context"
	"errors"
	"github.com/muserhq/muser/infer/engine"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kernels"
)

var tinyModel = enginetest.TinyModel

var tinyQuants = []ggml.Type{ggml.TypeF32, ggml.TypeF16, ggml.TypeQ8_0, ggml.TypeQ4_K}

// TestExactnessArchs runs the exactness property test on a tiny random
// model of each architecture at each weight type.
func TestExactnessArchs(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		for _, q := range tinyQuants {
			t.Run(arch+"/"+q.String(), func(t *testing.T) {
				checkExactness(t, tinyModel(t, arch, q), 1, 24)
			})
		}
	}
}

// TestMatchesReference compares the engine with enginetest.Reference, an
// independent float64 implementation, on tiny random models: the relative
// logit error must stay within what the engine's roundings explain (f16
// K/V, q and attention weights; activations quantized as the weight type
// needs), and the top-1 token must agree wherever the reference margin
// exceeds that error.
func TestMatchesReference(t *testing.T) {
	limits := map[ggml.Type]float64{ggml.TypeF32: 5e-4, ggml.TypeF16: 1e-3, ggml.TypeQ8_0: 2e-2, ggml.TypeQ4_K: 3e-2}
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		for _, q := range tinyQuants {
			t.Run(arch+"/"+q.String(), func(t *testing.T) {
				path := tinyModel(t, arch, q)
				m := openModel(t, path, opts{Threads: 2})
				r := rand.New(rand.NewPCG(5, 5))
				toks := enginetest.RandomTokens(r, 24, m.Config().Vocab)
				_, got := enginetest.Prefill(t, m, toks)
				ref, err := enginetest.Reference(m.File(), toks)
				if err != nil {
					t.Fatal(err)
				}
				V := m.Config().Vocab
				worst := 0.0
				for p := range toks {
					a := got[p*V : (p+1)*V]
					var ma, mb float64
					for i := range V {
						ma += float64(a[i])
						mb += ref[p][i]
					}
					ma, mb = ma/float64(V), mb/float64(V)
					var num, den float64
					best, second := -1, -1
					for i := range V {
						d := (float64(a[i]) - ma) - (ref[p][i] - mb)
						num += d * d
						den += (ref[p][i] - mb) * (ref[p][i] - mb)
						if best < 0 || ref[p][i] > ref[p][best] {
							best, second = i, best
						} else if second < 0 || ref[p][i] > ref[p][second] {
							second = i
						}
					}
					rel := math.Sqrt(num / den)
					worst = max(worst, rel)
					am := 0
					for i := range V {
						if a[i] > a[am] {
							am = i
						}
					}
					margin := ref[p][best] - ref[p][second]
					if am != best && margin > 4*rel*math.Sqrt(den/float64(V)) {
						t.Errorf("position %d: top-1 %d, reference %d with margin %.4f (noise %.4f)", p, am, best, margin, rel*math.Sqrt(den/float64(V)))
					}
				}
				if worst > limits[q] {
					t.Errorf("relative logit error %.3g, want ≤ %.3g", worst, limits[q])
				}
				t.Logf("worst relative logit error vs float64 reference: %.3g", worst)
			})
		}
	}
}

// TestLoadErrors checks that a model missing a tensor, with a misshaped
// one, or with bad hyperparameters is refused with an error naming it.
func TestLoadErrors(t *testing.T) {
	base := enginetest.Tiny("qwen2")
	for _, c := range []struct {
		name   string
		edit   func(b *gguf.Builder, f *gguf.File) *gguf.Builder
		target any
		is     error
		names  string
	}{
		{"missing tensor", func(b *gguf.Builder, f *gguf.File) *gguf.Builder {
			return rebuild(t, f, func(name string) bool { return name != "blk.1.attn_k.bias" }, nil)
		}, &engine.TensorError{}, engine.ErrTensor, "blk.1.attn_k.bias"},
		{"missing layer weight", func(b *gguf.Builder, f *gguf.File) *gguf.Builder {
			return rebuild(t, f, func(name string) bool { return name != "blk.0.ffn_down.weight" }, nil)
		}, &engine.TensorError{}, engine.ErrTensor, "blk.0.ffn_down.weight"},
		{"unknown architecture", func(b *gguf.Builder, f *gguf.File) *gguf.Builder {
			b.Set("general.architecture", "mamba")
			return b
		}, &engine.HParamError{}, engine.ErrUnknownArch, "general.architecture"},
		{"heads do not divide", func(b *gguf.Builder, f *gguf.File) *gguf.Builder {
			b.Set("qwen2.attention.head_count_kv", uint32(3))
			return b
		}, &engine.HParamError{}, engine.ErrHParams, "qwen2.attention.head_count_kv"},
		{"missing eps", func(b *gguf.Builder, f *gguf.File) *gguf.Builder {
			b.Delete("qwen2.attention.layer_norm_rms_epsilon")
			return b
		}, &engine.HParamError{}, gguf.ErrMissingKey, "qwen2.attention.layer_norm_rms_epsilon"},
		{"yarn scaling", func(b *gguf.Builder, f *gguf.File) *gguf.Builder {
			b.Set("qwen2.rope.scaling.type", "yarn")
			return b
		}, &engine.HParamError{}, engine.ErrUnsupported, "qwen2.rope.scaling.type"},
		{"wrong head dim", func(b *gguf.Builder, f *gguf.File) *gguf.Builder {
			b.Set("qwen2.attention.key_length", uint32(32))
			b.Set("qwen2.attention.value_length", uint32(32))
			b.Set("qwen2.rope.dimension_count", uint32(32))
			return b
		}, &engine.TensorError{}, engine.ErrTensor, "blk.0.attn_q.weight"},
		{"value length differs", func(b *gguf.Builder, f *gguf.File) *gguf.Builder {
			b.Set("qwen2.attention.value_length", uint32(32))
			return b
		}, &engine.HParamError{}, engine.ErrUnsupported, "qwen2.attention.value_length"},
		{"zero layers", func(b *gguf.Builder, f *gguf.File) *gguf.Builder {
			b.Set("qwen2.block_count", uint32(0))
			return b
		}, &engine.HParamError{}, engine.ErrHParams, "qwen2.block_count"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "src.gguf")
			if err := enginetest.WriteFile(src, base, ggml.TypeQ8_0, 1); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b, err := gguf.NewBuilderFrom(f)
			if err != nil {
				t.Fatal(err)
			}
			b = c.edit(b, f)
			dst := filepath.Join(dir, "bad.gguf")
			if err := b.WriteFile(dst); err != nil {
				t.Fatal(err)
			}
			m, err := engine.Open(dst, cpuOptions(1))
			if err == nil {
				m.Close()
				t.Fatalf("Open succeeded, want an error naming %s", c.names)
			}
			if !errors.Is(err, c.is) {
				t.Errorf("error %q does not wrap %v", err, c.is)
			}
			switch c.target.(type) {
			case *engine.TensorError:
				var te *engine.TensorError
				if !errors.As(err, &te) || te.Name != c.names {
					t.Errorf("error %q: want a *engine.TensorError naming %s", err, c.names)
				}
			case *engine.HParamError:
				var he *engine.HParamError
				if !errors.As(err, &he) || he.Key != c.names {
					t.Errorf("error %q: want an *engine.HParamError naming %s", err, c.names)
				}
			}
		})
	}
}

// rebuild copies f's metadata and the tensors keep accepts into a new
// Builder.
func rebuild(t *testing.T, f *gguf.File, keep func(string) bool, _ any) *gguf.Builder {
	b := gguf.NewBuilder()
	for _, kv := range f.Meta.All() {
		if err := b.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if keep(ti.Name) {
			if err := b.AddTensor(ti.Name, ti.Type, ti.Shape, f.Data(ti)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b
}

func TestBatchErrors(t *testing.T) {
	m := openModel(t, tinyModel(t, "llama", ggml.TypeQ8_0), opts{Threads: 1})
	other := openModel(t, tinyModel(t, "qwen3", ggml.TypeQ8_0), opts{Threads: 1})
	s, _ := m.NewSequence(8)
	s2, _ := other.NewSequence(8)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		batch []engine.Step
	}{
		{"no sequence", []engine.Step{{Tokens: []int32{1}}}},
		{"no tokens", []engine.Step{{Seq: s}}},
		{"token out of range", []engine.Step{{Seq: s, Tokens: []int32{int32(m.Config().Vocab)}}}},
		{"negative token", []engine.Step{{Seq: s, Tokens: []int32{-1}}}},
		{"sequence twice", []engine.Step{{Seq: s, Tokens: []int32{1}}, {Seq: s, Tokens: []int32{2}}}},
		{"other model", []engine.Step{{Seq: s2, Tokens: []int32{1}}}},
		{"context full", []engine.Step{{Seq: s, Tokens: make([]int32, 9)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := m.Forward(ctx, c.batch)
			var be *engine.BatchError
			if !errors.As(err, &be) || !errors.Is(err, engine.ErrBatch) {
				t.Fatalf("Forward = %v, want a *BatchError", err)
			}
			if s.Len() != 0 {
				t.Errorf("a refused batch changed the sequence to %d tokens", s.Len())
			}
		})
	}
	ctx2, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.Forward(ctx2, []engine.Step{{Seq: s, Tokens: []int32{1, 2}}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Forward = %v, want context.Canceled", err)
	}
	if s.Len() != 0 {
		t.Errorf("a cancelled Forward left %d tokens", s.Len())
	}
}

func TestArchString(t *testing.T) {
	m := openModel(t, tinyModel(t, "qwen3", ggml.TypeQ8_0), opts{Threads: 1})
	want := "qwen3;layers=2;hidden=256;heads=4;kv_heads=2;head_dim=32;rope=neox;rope_dim=32;rope_base=10000;rope_scale=1;rope_freqs=none;eps=1e-05;qk_norm=1;qkv_bias=0"
	if got := m.Config().ArchString(); got != want {
		t.Errorf("ArchString =\n%s\nwant\n%s", got, want)
	}
	l := openModel(t, tinyModel(t, "llama", ggml.TypeQ8_0), opts{Threads: 1})
	if c := l.Config(); c.RopeFreqs == nil || c.Rope != engine.RopeNormal {
		t.Errorf("tiny llama: rope %v, freqs %v; want normal RoPE with rope_freqs", c.Rope, c.RopeFreqs)
	}
	id, err := l.Identity(64)
	if err != nil {
		t.Fatal(err)
	}
	if id.Engine != engine.EngineName || id.KV != "f16;block=64;layout=lkv1" || id.Quant != gguf.QuantName(l.File()) || id.Model == ([32]byte{}) {
		t.Errorf("Identity = %+v", id)
	}
}

// TestNumericsVersion pins the kernels' numerics version the engine's
// identity was last bumped for: when the kernels change their canonical
// orders, this fails until engine.NumericsVersion is bumped too.
func TestNumericsVersion(t *testing.T) {
	const kernelsAtEngineV2 = 2
	if kernels.NumericsVersion != kernelsAtEngineV2 || engine.NumericsVersion != 2 {
		t.Fatalf("kernels.NumericsVersion is %d and engine engine.NumericsVersion %d: bump engine.NumericsVersion (identity %q) and update this test",
			kernels.NumericsVersion, engine.NumericsVersion, engine.EngineName)
	}
}

func TestForkAndTruncate(t *testing.T) {
	m := openModel(t, tinyModel(t, "qwen2", ggml.TypeQ8_0), opts{Threads: 2})
	r := rand.New(rand.NewPCG(8, 8))
	p := enginetest.RandomTokens(r, 30, m.Config().Vocab)
	_, full := enginetest.Prefill(t, m, p)
	V := m.Config().Vocab
	a, _ := m.NewSequence(64)
	if err := m.Forward(context.Background(), []engine.Step{{Seq: a, Tokens: p[:20]}}); err != nil {
		t.Fatal(err)
	}
	b, err := a.Fork()
	if err != nil {
		t.Fatal(err)
	}
	// Continue a with garbage, then truncate it back; b continues cleanly.
	if err := m.Forward(context.Background(), []engine.Step{{Seq: a, Tokens: []int32{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	if err := a.Truncate(20); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*engine.Sequence{a, b} {
		st := []engine.Step{{Seq: s, Tokens: p[20:], Output: engine.OutputAll}}
		if err := m.Forward(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		enginetest.RequireSame(t, "continuation after fork/truncate", st[0].Logits, full[20*V:])
	}
	if err := a.Truncate(31); err == nil {
		t.Error("Truncate past the end succeeded")
	}
}

// TestCommit: Commit on a sequence that holds tokens keeps their rows and
// takes the cache to Max tokens; the continuation computes the logits of
// one uninterrupted prefill.
func TestCommit(t *testing.T) {
	m := openModel(t, tinyModel(t, "qwen2", ggml.TypeQ8_0), opts{Threads: 2})
	r := rand.New(rand.NewPCG(9, 9))
	p := enginetest.RandomTokens(r, 30, m.Config().Vocab)
	_, full := enginetest.Prefill(t, m, p)
	V := m.Config().Vocab
	s, err := m.NewSequence(100)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := m.Forward(context.Background(), []engine.Step{{Seq: s, Tokens: p[:20]}}); err != nil {
		t.Fatal(err)
	}
	before, err := s.ExportBlock(0, 20)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(); err != nil {
		t.Fatal(err)
	}
	after, err := s.ExportBlock(0, 20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Error("Commit changed the rows of the sequence's tokens")
	}
	if s.Len() != 20 {
		t.Errorf("Len after Commit: %d, want 20", s.Len())
	}
	ref, _ := m.NewSequence(100)
	defer ref.Close()
	if err := ref.KV().Reserve(100); err != nil {
		t.Fatal(err)
	}
	if got, want := s.KV().Bytes(), ref.KV().Bytes(); got != want {
		t.Errorf("KV bytes after Commit: %d, want %d (all 100 tokens)", got, want)
	}
	st := []engine.Step{{Seq: s, Tokens: p[20:], Output: engine.OutputAll}}
	if err := m.Forward(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	enginetest.RequireSame(t, "continuation after Commit", st[0].Logits, full[20*V:])
}
