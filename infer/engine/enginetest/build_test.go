package enginetest

import (
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

func TestTypeFor(t *testing.T) {
	for _, c := range []struct {
		quant ggml.Type
		n     int
		want  ggml.Type
	}{
		{ggml.TypeQ4_K, 2048, ggml.TypeQ4_K},
		{ggml.TypeQ4_K, 896, ggml.TypeQ5_0}, // Qwen2.5-0.5B hidden size
		{ggml.TypeQ4_K, 4864, ggml.TypeQ4_K},
		{ggml.TypeQ8_0, 896, ggml.TypeQ8_0},
		{ggml.TypeQ8_0, 40, ggml.TypeF16},
		{ggml.TypeF16, 7, ggml.TypeF16},
		{ggml.TypeNVFP4, 896, ggml.TypeNVFP4},
		{ggml.TypeNVFP4, 32, ggml.TypeQ8_0}, // Micro's hidden size
		{ggml.TypeNVFP4, 40, ggml.TypeF16},
	} {
		if got := TypeFor(c.quant, c.n); got != c.want {
			t.Errorf("TypeFor(%v, %d) = %v, want %v", c.quant, c.n, got, c.want)
		}
	}
}

func TestLlama3RopeFreqs(t *testing.T) {
	f := Llama32_1B.Llama3.RopeFreqs(64, 500000)
	if len(f) != 32 {
		t.Fatalf("%d factors, want 32", len(f))
	}
	// The highest frequencies (short wavelengths) are unscaled, the lowest
	// scaled by the full factor, with a monotone ramp between.
	if f[0] != 1 || f[31] != 32 {
		t.Errorf("factors[0] = %v, [31] = %v; want 1 and 32", f[0], f[31])
	}
	for i := 1; i < len(f); i++ {
		if f[i] < f[i-1] {
			t.Errorf("factors not monotone at %d: %v < %v", i, f[i], f[i-1])
		}
	}
}

func TestBuildShapes(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		s := Tiny(arch)
		path := filepath.Join(t.TempDir(), arch+".gguf")
		if err := WriteFile(path, s, ggml.TypeQ4_K, 3); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			if ti.Name != "rope_freqs.weight" {
				n += ti.Elements()
			}
			if len(ti.Shape) == 2 {
				if want := TypeFor(ggml.TypeQ4_K, int(ti.Shape[0])); ti.Type != want {
					t.Errorf("%s %s: type %v, want %v", arch, ti.Name, ti.Type, want)
				}
			} else if ti.Type != ggml.TypeF32 {
				t.Errorf("%s %s: vector of type %v, want F32", arch, ti.Name, ti.Type)
			}
		}
		if n != s.Params() {
			t.Errorf("%s: %d weights in the file, Params() = %d", arch, n, s.Params())
		}
		toks, err := f.Meta.Strings("tokenizer.ggml.tokens")
		if err != nil || len(toks) != s.Vocab {
			t.Errorf("%s: %d tokens (%v), want %d", arch, len(toks), err, s.Vocab)
		}
		f.Close()
	}
}

func TestDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	for _, p := range []string{a, b} {
		if err := WriteFile(p, Tiny("qwen3"), ggml.TypeQ8_0, 11); err != nil {
			t.Fatal(err)
		}
	}
	fa, _ := gguf.Open(a)
	fb, _ := gguf.Open(b)
	defer fa.Close()
	defer fb.Close()
	if gguf.WeightsDigest(fa) != gguf.WeightsDigest(fb) {
		t.Error("the same shape, type and seed gave different weights")
	}
}
