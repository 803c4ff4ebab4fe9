package blockdraft_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// edit changes a valid drafter: meta edits the metadata; tensor, called
// for each tensor, may add a replacement (or nothing) and return true to
// drop the original.
type edit struct {
	meta   func(b *gguf.Builder)
	tensor func(b *gguf.Builder, t *gguf.TensorInfo) bool
}

// rebuild writes base with e applied to a new file and returns its path.
func rebuild(t *testing.T, base *gguf.File, e edit) string {
	t.Helper()
	b := gguf.NewBuilder()
	for _, kv := range base.Meta.All() {
		b.Set(kv.Key, kv.Value)
	}
	if e.meta != nil {
		e.meta(b)
	}
	for i := range base.Tensors {
		ti := &base.Tensors[i]
		if e.tensor != nil && e.tensor(b, ti) {
			continue
		}
		b.AddTensor(ti.Name, ti.Type, ti.Shape, base.Data(ti))
	}
	path := filepath.Join(t.TempDir(), "edited.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatalf("write the edited drafter: %v", err)
	}
	return path
}

// replace returns a tensor edit that stores name as typ with shape
// (random-free: every value 0.5).
func replace(name string, typ ggml.Type, shape ...int64) func(b *gguf.Builder, t *gguf.TensorInfo) bool {
	return func(b *gguf.Builder, t *gguf.TensorInfo) bool {
		if t.Name != name {
			return false
		}
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		if typ.CanQuantize() {
			v := make([]float32, n)
			for i := range v {
				v[i] = 0.5
			}
			b.AddFloat32(name, typ, shape, v)
		} else {
			size, _ := typ.RowSize(int(n))
			b.AddTensor(name, typ, shape, make([]byte, size))
		}
		return true
	}
}

func setMeta(key string, v any) func(b *gguf.Builder) {
	return func(b *gguf.Builder) { b.Set(key, v) }
}

func TestOpenRefuses(t *testing.T) {
	target := openTarget(t)
	// D 64, 1 layer, 4 heads, 2 KV heads, F 128, B 4, F32; H 64, V 512.
	basePath := writeDrafter(t, target, blockdrafttest.Small())
	base, err := gguf.Open(basePath)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	if m, err := blockdraft.Open(basePath, 1); err != nil {
		t.Fatalf("the unedited drafter: %v", err)
	} else {
		m.Close()
	}
	const A = blockdraft.Arch + "."
	type want struct {
		key, tensor string // what the error must name (one of them)
		is          error
	}
	cases := []struct {
		name string
		e    edit
		want want
	}{
		{"architecture llama", edit{meta: setMeta("general.architecture", "llama")}, want{key: "general.architecture", is: blockdraft.ErrNotBlockDrafter}},
		{"architecture missing", edit{meta: func(b *gguf.Builder) { b.Delete("general.architecture") }}, want{key: "general.architecture", is: blockdraft.ErrNotBlockDrafter}},
		{"block_size 1", edit{meta: setMeta(A+"block_size", uint32(1))}, want{key: A + "block_size", is: blockdraft.ErrHParams}},
		{"block_size 65", edit{meta: setMeta(A+"block_size", uint32(65))}, want{key: A + "block_size", is: blockdraft.ErrHParams}},
		{"block_size a string", edit{meta: setMeta(A+"block_size", "4")}, want{key: A + "block_size", is: gguf.ErrWrongType}},
		{"block_count 0", edit{meta: setMeta(A+"block_count", uint32(0))}, want{key: A + "block_count", is: blockdraft.ErrHParams}},
		{"heads not dividing", edit{meta: setMeta(A+"attention.head_count", uint32(3))}, want{key: A + "attention.head_count", is: blockdraft.ErrHParams}},
		{"kv heads not dividing", edit{meta: setMeta(A+"attention.head_count_kv", uint32(3))}, want{key: A + "attention.head_count_kv", is: blockdraft.ErrHParams}},
		{"kv heads above heads", edit{meta: setMeta(A+"attention.head_count_kv", uint32(8))}, want{key: A + "attention.head_count_kv", is: blockdraft.ErrHParams}},
		{"odd head dimension", edit{meta: setMeta(A+"attention.head_count", uint32(64))}, want{key: A + "attention.head_count", is: blockdraft.ErrHParams}},
		{"eps NaN", edit{meta: setMeta(A+"attention.layer_norm_rms_epsilon", float32(math.NaN()))}, want{key: A + "attention.layer_norm_rms_epsilon", is: blockdraft.ErrHParams}},
		{"eps 0", edit{meta: setMeta(A+"attention.layer_norm_rms_epsilon", float32(0))}, want{key: A + "attention.layer_norm_rms_epsilon", is: blockdraft.ErrHParams}},
		{"rope base negative", edit{meta: setMeta(A+"rope.freq_base", float32(-1))}, want{key: A + "rope.freq_base", is: blockdraft.ErrHParams}},
		{"rope base infinite", edit{meta: setMeta(A+"rope.freq_base", float32(math.Inf(1)))}, want{key: A + "rope.freq_base", is: blockdraft.ErrHParams}},
		{"target_hidden 0", edit{meta: setMeta(A+"target_hidden", uint32(0))}, want{key: A + "target_hidden", is: blockdraft.ErrHParams}},
		{"target_hidden 63", edit{meta: setMeta(A+"target_hidden", uint32(63))}, want{tensor: "fc.weight", is: blockdraft.ErrShape}},
		{"target_name a number", edit{meta: setMeta(A+"target_name", uint32(1))}, want{key: A + "target_name", is: gguf.ErrWrongType}},
		{"tokens empty", edit{meta: func(b *gguf.Builder) { b.SetArray("tokenizer.ggml.tokens", []string{}) }}, want{key: "tokenizer.ggml.tokens", is: blockdraft.ErrHParams}},
		{"tokens of numbers", edit{meta: func(b *gguf.Builder) { b.SetArray("tokenizer.ggml.tokens", []int32{1, 2}) }}, want{key: "tokenizer.ggml.tokens", is: blockdraft.ErrHParams}},
		{"one token more", edit{meta: func(b *gguf.Builder) {
			toks, _ := base.Meta.Strings("tokenizer.ggml.tokens")
			b.SetArray("tokenizer.ggml.tokens", append(toks, "extra"))
		}}, want{tensor: "token_embd.weight", is: blockdraft.ErrShape}},
		{"token_embd a row short", edit{tensor: replace("token_embd.weight", ggml.TypeF32, 64, 511)}, want{tensor: "token_embd.weight", is: blockdraft.ErrShape}},
		{"token_embd of I32", edit{tensor: replace("token_embd.weight", ggml.TypeI32, 64, 512)}, want{tensor: "token_embd.weight", is: blockdraft.ErrUnsupported}},
		{"mask_embd of B rows", edit{tensor: replace("mask_embd.weight", ggml.TypeF32, 64, 4)}, want{tensor: "mask_embd.weight", is: blockdraft.ErrShape}},
		{"fc without the hidden columns", edit{tensor: replace("fc.weight", ggml.TypeF32, 64, 64)}, want{tensor: "fc.weight", is: blockdraft.ErrShape}},
		{"fc transposed", edit{tensor: replace("fc.weight", ggml.TypeF32, 64, 128)}, want{tensor: "fc.weight", is: blockdraft.ErrShape}},
		{"attn_k of query size", edit{tensor: replace("blk.0.attn_k.weight", ggml.TypeF32, 64, 64)}, want{tensor: "blk.0.attn_k.weight", is: blockdraft.ErrShape}},
		{"attn_q of I32", edit{tensor: replace("blk.0.attn_q.weight", ggml.TypeI32, 64, 64)}, want{tensor: "blk.0.attn_q.weight", is: blockdraft.ErrUnsupported}},
		{"ffn_down transposed", edit{tensor: replace("blk.0.ffn_down.weight", ggml.TypeF32, 64, 128)}, want{tensor: "blk.0.ffn_down.weight", is: blockdraft.ErrShape}},
		{"ffn_up three-dimensional", edit{tensor: replace("blk.0.ffn_up.weight", ggml.TypeF32, 64, 64, 2)}, want{tensor: "blk.0.ffn_up.weight", is: blockdraft.ErrShape}},
		{"attn_norm one long", edit{tensor: replace("blk.0.attn_norm.weight", ggml.TypeF32, 65)}, want{tensor: "blk.0.attn_norm.weight", is: blockdraft.ErrShape}},
		{"ffn_norm of F16", edit{tensor: replace("blk.0.ffn_norm.weight", ggml.TypeF16, 64)}, want{tensor: "blk.0.ffn_norm.weight", is: blockdraft.ErrUnsupported}},
		{"output_norm NaN", edit{tensor: func(b *gguf.Builder, ti *gguf.TensorInfo) bool {
			if ti.Name != "output_norm.weight" {
				return false
			}
			v := make([]float32, 64)
			v[7] = float32(math.NaN())
			b.AddFloat32(ti.Name, ggml.TypeF32, ti.Shape, v)
			return true
		}}, want{tensor: "output_norm.weight", is: blockdraft.ErrShape}},
		{"output of V+1 rows", edit{tensor: replace("output.weight", ggml.TypeF32, 64, 513)}, want{tensor: "output.weight", is: blockdraft.ErrShape}},
	}
	// Every key missing.
	for _, key := range []string{A + "block_size", A + "embedding_length", A + "block_count", A + "feed_forward_length",
		A + "attention.head_count", A + "attention.head_count_kv", A + "attention.layer_norm_rms_epsilon",
		A + "rope.freq_base", A + "target_hidden", A + "target_name", "tokenizer.ggml.tokens"} {
		is := gguf.ErrMissingKey
		if key == "tokenizer.ggml.tokens" {
			is = blockdraft.ErrHParams
		}
		cases = append(cases, struct {
			name string
			e    edit
			want want
		}{"missing " + key, edit{meta: func(b *gguf.Builder) { b.Delete(key) }}, want{key: key, is: is}})
	}
	// Every tensor missing.
	for i := range base.Tensors {
		name := base.Tensors[i].Name
		cases = append(cases, struct {
			name string
			e    edit
			want want
		}{"missing " + name, edit{tensor: func(_ *gguf.Builder, t *gguf.TensorInfo) bool { return t.Name == name }},
			want{tensor: name, is: blockdraft.ErrShape}})
	}
	if len(base.Tensors) != 14 {
		t.Fatalf("the base drafter has %d tensors, want 14 (5 + 9 per layer)", len(base.Tensors))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := rebuild(t, base, tc.e)
			m, err := blockdraft.Open(path, 1)
			if err == nil {
				m.Close()
				t.Fatal("Open succeeded, want an error")
			}
			if !errors.Is(err, tc.want.is) {
				t.Errorf("got %v, want an error matching %v", err, tc.want.is)
			}
			if tc.want.key != "" {
				var he *blockdraft.HParamError
				if !errors.As(err, &he) || he.Key != tc.want.key {
					t.Errorf("got %v, want a *HParamError naming %s", err, tc.want.key)
				}
			}
			if tc.want.tensor != "" {
				var te *blockdraft.TensorError
				if !errors.As(err, &te) || te.Name != tc.want.tensor {
					t.Errorf("got %v, want a *TensorError naming %s", err, tc.want.tensor)
				}
			}
			t.Log(err)
			if !strings.Contains(err.Error(), path) {
				t.Errorf("%q does not name the file %s", err, path)
			}
		})
	}
}

func TestOpenTruncatedAndMissing(t *testing.T) {
	target := openTarget(t)
	data, err := blockdrafttest.Bytes(target, blockdrafttest.Small())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, n := range []int{0, 3, 100, len(data) / 2, len(data) - 1} {
		path := filepath.Join(dir, "cut.gguf")
		if err := os.WriteFile(path, data[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := blockdraft.Open(path, 1)
		if err == nil {
			m.Close()
			t.Fatalf("%d of %d bytes: Open succeeded, want an error", n, len(data))
		}
		if !errors.Is(err, gguf.ErrMalformed) {
			t.Errorf("%d of %d bytes: got %v, want an error matching gguf.ErrMalformed", n, len(data), err)
		}
	}
	_, err = blockdraft.Open(filepath.Join(dir, "absent.gguf"), 1)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: got %v, want os.ErrNotExist", err)
	}
}
