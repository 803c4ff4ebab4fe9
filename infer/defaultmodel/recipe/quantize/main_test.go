package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// writeF32 writes a small llama-like F32 GGUF and returns its path and the
// values of its tensors.
func writeF32(t *testing.T, dir string) (string, map[string][]float32) {
	t.Helper()
	b := gguf.NewBuilder()
	b.SetString("general.architecture", "llama")
	b.SetUint32(gguf.KeyFileType, 0)
	b.SetArray("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>"})
	b.SetString(gguf.KeyChatTemplate, "{{ messages }}")
	vals := map[string][]float32{}
	shapes := []struct {
		name  string
		shape []int64
	}{
		{"token_embd.weight", []int64{64, 3}},
		{"blk.0.attn_norm.weight", []int64{64}},
		{"blk.0.attn_q.weight", []int64{64, 64}},
	}
	for i, s := range shapes {
		n := int64(1)
		for _, d := range s.shape {
			n *= d
		}
		v := make([]float32, n)
		for j := range v {
			v[j] = float32(math.Sin(float64(j*(i+3)+1))) * 0.1
		}
		vals[s.name] = v
		if err := b.AddFloat32(s.name, ggml.TypeF32, s.shape, v); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "f32.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path, vals
}

func TestQuantize(t *testing.T) {
	dir := t.TempDir()
	in, vals := writeF32(t, dir)
	out := filepath.Join(dir, "q8.gguf")
	if err := run([]string{"-in", in, "-out", out}, io.Discard); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	if ft, err := f.Meta.Uint32(gguf.KeyFileType); err != nil || ft != fileTypeQ8_0 {
		t.Fatalf("file type = %d, %v; want %d", ft, err, fileTypeQ8_0)
	}
	if qv, err := f.Meta.Uint32("general.quantization_version"); err != nil || qv != quantizationVersion {
		t.Fatalf("quantization version = %d, %v; want %d", qv, err, quantizationVersion)
	}
	wantKeys := []string{"general.architecture", gguf.KeyFileType, "tokenizer.ggml.tokens", gguf.KeyChatTemplate, "general.quantization_version"}
	if got := f.Meta.Keys(); len(got) != len(wantKeys) {
		t.Fatalf("keys = %q, want %q", got, wantKeys)
	} else {
		for i := range got {
			if got[i] != wantKeys[i] {
				t.Fatalf("key %d = %q, want %q (order kept)", i, got[i], wantKeys[i])
			}
		}
	}
	if toks, err := f.Meta.Strings("tokenizer.ggml.tokens"); err != nil || len(toks) != 3 || toks[1] != "<s>" {
		t.Fatalf("tokens = %q, %v", toks, err)
	}

	for _, tc := range []struct {
		name string
		typ  ggml.Type
	}{
		{"token_embd.weight", ggml.TypeQ8_0},
		{"blk.0.attn_norm.weight", ggml.TypeF32},
		{"blk.0.attn_q.weight", ggml.TypeQ8_0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ti, ok := f.Tensor(tc.name)
			if !ok {
				t.Fatalf("tensor %q missing", tc.name)
			}
			if ti.Type != tc.typ {
				t.Fatalf("type = %s, want %s", ti.Type, tc.typ)
			}
			want := vals[tc.name]
			got := make([]float32, len(want))
			if err := ggml.Dequantize(ti.Type, f.Data(ti), got); err != nil {
				t.Fatal(err)
			}
			// Q8_0 keeps each value within half a step of its block's scale
			// (max|x|/127), plus the f16 rounding of the scale.
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 0.1/127*0.51+1e-4 {
					t.Fatalf("value %d = %v, want %v (error %g too large)", i, got[i], want[i], d)
				}
			}
			if tc.typ == ggml.TypeQ8_0 {
				enc := make([]byte, len(f.Data(ti)))
				if err := ggml.Quantize(ggml.TypeQ8_0, want, enc); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(enc, f.Data(ti)) {
					t.Fatal("Q8_0 bytes differ from ggml.Quantize of the F32 values")
				}
			}
		})
	}

	// Deterministic: a second run writes the same bytes.
	out2 := filepath.Join(dir, "q8b.gguf")
	if err := run([]string{"-in", in, "-out", out2}, io.Discard); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(out2)
	if !bytes.Equal(a, b) {
		t.Fatal("two runs wrote different files")
	}
}

func TestQuantizeRejects(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "x.gguf")
	if err := os.WriteFile(notGGUF, []byte("not a gguf file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	q8 := filepath.Join(dir, "q8.gguf")
	b := gguf.NewBuilder()
	b.AddFloat32("w", ggml.TypeQ8_0, []int64{32, 1}, make([]float32, 32))
	if err := b.WriteFile(q8); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"no flags":      {},
		"no output":     {"-in", q8},
		"extra arg":     {"-in", q8, "-out", filepath.Join(dir, "o"), "x"},
		"missing input": {"-in", filepath.Join(dir, "absent"), "-out", filepath.Join(dir, "o")},
		"not gguf":      {"-in", notGGUF, "-out", filepath.Join(dir, "o")},
		"already Q8_0":  {"-in", q8, "-out", filepath.Join(dir, "o")},
	} {
		t.Run(name, func(t *testing.T) {
			if err := run(args, io.Discard); err == nil {
				t.Fatalf("run(%q) = nil, want an error", args)
			}
			if _, err := os.Stat(filepath.Join(dir, "o")); err == nil {
				t.Fatal("an output file was written despite the error")
			}
		})
	}
}
