package gguf

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// sharedDir is the read-only test material beside the repository.
const sharedDir = "../../../shared"

func sharedFile(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join(sharedDir, rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared test material %s not available: %v", p, err)
	}
	return p
}

func TestOpenStories260K(t *testing.T) {
	f, err := Open(sharedFile(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.Alignment != 32 {
		t.Errorf("version, alignment = %d, %d; want 3, 32", f.Version, f.Alignment)
	}
	for _, c := range []struct {
		key  string
		want uint32
	}{
		{"llama.block_count", 5},
		{"llama.embedding_length", 64},
		{"llama.feed_forward_length", 172},
		{"llama.attention.head_count", 8},
		{"llama.attention.head_count_kv", 4},
		{"llama.rope.dimension_count", 8},
		{"tokenizer.ggml.bos_token_id", 1},
		{"tokenizer.ggml.eos_token_id", 2},
	} {
		got, err := f.Meta.Uint32(c.key)
		if err != nil || got != c.want {
			t.Errorf("Uint32(%q) = %d, %v; want %d", c.key, got, err, c.want)
		}
	}
	if eps, err := f.Meta.Float32("llama.attention.layer_norm_rms_epsilon"); err != nil || eps != 1e-5 {
		t.Errorf("rms epsilon = %v, %v; want 1e-05", eps, err)
	}
	tokens, err := f.Meta.Strings("tokenizer.ggml.tokens")
	if err != nil || len(tokens) != 512 || tokens[0] != "<unk>" || tokens[1] != "<s>" || tokens[2] != "</s>" {
		t.Errorf("tokens: len %d, err %v, first %q", len(tokens), err, tokens[:min(3, len(tokens))])
	}
	if len(f.Tensors) != 48 {
		t.Fatalf("got %d tensors, want 48 (3 + 9 per layer x 5)", len(f.Tensors))
	}
	params := int64(0)
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Type != ggml.TypeF32 {
			t.Errorf("tensor %s has type %s, want F32", ti.Name, ti.Type)
		}
		if int64(len(f.Data(ti))) != ti.Size || ti.Size != 4*ti.Elements() {
			t.Errorf("tensor %s: data %d bytes, size %d, elements %d", ti.Name, len(f.Data(ti)), ti.Size, ti.Elements())
		}
		params += ti.Elements()
	}
	if params != 292800 {
		t.Errorf("parameter count %d, want 292800", params)
	}
	for _, c := range []struct {
		name  string
		shape []int64
	}{
		{"token_embd.weight", []int64{64, 512}},
		{"output.weight", []int64{64, 512}},
		{"output_norm.weight", []int64{64}},
		{"blk.0.attn_q.weight", []int64{64, 64}},
		{"blk.4.attn_k.weight", []int64{64, 32}},
		{"blk.4.ffn_gate.weight", []int64{64, 172}},
		{"blk.4.ffn_down.weight", []int64{172, 64}},
	} {
		ti, ok := f.Tensor(c.name)
		if !ok {
			t.Errorf("tensor %q missing", c.name)
			continue
		}
		if !equalShape(ti.Shape, c.shape) {
			t.Errorf("tensor %q shape %v, want %v", c.name, ti.Shape, c.shape)
		}
	}
	if got := QuantName(f); got != "F32" {
		t.Errorf("QuantName = %q, want F32", got)
	}
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOpenVocabFiles(t *testing.T) {
	want := map[string]int{
		"baichuan": 64000, "deepseek-coder": 32256, "deepseek-llm": 102400, "falcon": 65024,
		"gpt-2": 50257, "gpt-neox": 50432, "llama-spm": 32000, "mpt": 50432,
		"phi-3": 32064, "refact": 49216, "starcoder": 49152,
	}
	dir := filepath.Join(sharedDir, "vocab")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared test material %s not available: %v", dir, err)
	}
	for name, n := range want {
		t.Run(name, func(t *testing.T) {
			f, err := Open(filepath.Join(dir, "ggml-vocab-"+name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(f.Tensors) != 0 {
				t.Errorf("got %d tensors, want 0", len(f.Tensors))
			}
			tokens, err := f.Meta.Strings("tokenizer.ggml.tokens")
			if err != nil {
				t.Fatal(err)
			}
			if len(tokens) != n {
				t.Errorf("got %d tokens, want %d", len(tokens), n)
			}
			types, err := f.Meta.Int32s("tokenizer.ggml.token_type")
			if err != nil || len(types) != n {
				t.Errorf("token_type: %d entries, %v; want %d", len(types), err, n)
			}
			if _, err := f.Meta.String("tokenizer.ggml.model"); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestOpenMissing(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope.gguf"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want an error wrapping os.ErrNotExist", err)
	}
}
