package gguf

import (
	"encoding/hex"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

func digestOf(t *testing.T, b *Builder) [32]byte {
	t.Helper()
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return WeightsDigest(f)
}

func TestWeightsDigest(t *testing.T) {
	base := func() *Builder {
		b := NewBuilder()
		b.SetString("general.name", "x")
		b.AddTensor("a", ggml.TypeF32, []int64{2}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
		b.AddTensor("b", ggml.TypeI8, []int64{4}, []byte{9, 10, 11, 12})
		return b
	}
	want := digestOf(t, base())

	same := map[string]func() *Builder{
		"different metadata": func() *Builder {
			b := base()
			b.SetString("general.name", "y")
			b.SetUint32("extra", 1)
			return b
		},
		"different tensor order": func() *Builder {
			b := NewBuilder()
			b.AddTensor("b", ggml.TypeI8, []int64{4}, []byte{9, 10, 11, 12})
			b.AddTensor("a", ggml.TypeF32, []int64{2}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
			return b
		},
		"different alignment": func() *Builder {
			b := base()
			b.SetUint32(KeyAlignment, 128)
			return b
		},
		"trailing unit dimension": func() *Builder {
			b := NewBuilder()
			b.AddTensor("a", ggml.TypeF32, []int64{2, 1}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
			b.AddTensor("b", ggml.TypeI8, []int64{4}, []byte{9, 10, 11, 12})
			return b
		},
	}
	for name, mk := range same {
		if got := digestOf(t, mk()); got != want {
			t.Errorf("%s changed the digest", name)
		}
	}
	differ := map[string]func() *Builder{
		"data": func() *Builder {
			b := NewBuilder()
			b.AddTensor("a", ggml.TypeF32, []int64{2}, []byte{1, 2, 3, 4, 5, 6, 7, 9})
			b.AddTensor("b", ggml.TypeI8, []int64{4}, []byte{9, 10, 11, 12})
			return b
		},
		"name": func() *Builder {
			b := NewBuilder()
			b.AddTensor("A", ggml.TypeF32, []int64{2}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
			b.AddTensor("b", ggml.TypeI8, []int64{4}, []byte{9, 10, 11, 12})
			return b
		},
		"type": func() *Builder {
			b := NewBuilder()
			b.AddTensor("a", ggml.TypeI32, []int64{2}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
			b.AddTensor("b", ggml.TypeI8, []int64{4}, []byte{9, 10, 11, 12})
			return b
		},
		"shape": func() *Builder {
			b := NewBuilder()
			b.AddTensor("a", ggml.TypeF32, []int64{1, 2}, []byte{1, 2, 3, 4, 5, 6, 7, 8})
			b.AddTensor("b", ggml.TypeI8, []int64{4}, []byte{9, 10, 11, 12})
			return b
		},
		"tensor boundary": func() *Builder {
			b := NewBuilder()
			b.AddTensor("a", ggml.TypeI8, []int64{12}, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
			return b
		},
		"extra tensor": func() *Builder {
			b := base()
			b.AddTensor("c", ggml.TypeI8, []int64{0}, nil)
			return b
		},
	}
	for name, mk := range differ {
		if got := digestOf(t, mk()); got == want {
			t.Errorf("changing the %s did not change the digest", name)
		}
	}
}

// TestStories260KIdentity pins the identity fields of the shared model, so
// that any change to the encodings is deliberate.
func TestStories260KIdentity(t *testing.T) {
	f, err := Open(sharedFile(t, "models/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := WeightsDigest(f)
	if got, want := hex.EncodeToString(d[:]), "cdb8216aa7bc7f23693d99d5fb66dd71de5439af5d1a862d88f7a821d62a1ab6"; got != want {
		t.Errorf("WeightsDigest = %s, want %s", got, want)
	}
	td, err := ChatTemplateDigest(f)
	if err != nil {
		t.Fatal(err)
	}
	if td != TemplateDigest("") {
		t.Error("stories260K has no chat template; its digest should be that of the empty template")
	}
}

func TestTemplateDigest(t *testing.T) {
	a, b := TemplateDigest("{{ messages }}"), TemplateDigest("{{ messages }} ")
	if a == b {
		t.Error("different templates, same digest")
	}
	empty := TemplateDigest("")
	if got, want := hex.EncodeToString(empty[:]), templateEmptyHex; got != want {
		t.Errorf("TemplateDigest(\"\") = %s, want %s", got, want)
	}
	bld := NewBuilder()
	bld.SetString(KeyChatTemplate, "{{ messages }}")
	data, _ := bld.Bytes()
	f, _ := Parse(data)
	if d, err := ChatTemplateDigest(f); err != nil || d != a {
		t.Errorf("ChatTemplateDigest = %x, %v", d, err)
	}
	bld.SetUint32(KeyChatTemplate, 1)
	data, _ = bld.Bytes()
	f, _ = Parse(data)
	if _, err := ChatTemplateDigest(f); err == nil {
		t.Error("ChatTemplateDigest accepted a non-string template")
	}
}

// templateEmptyHex pins TemplateDigest(""), so that a change to the
// encoding is noticed (it would change every pack identity).
const templateEmptyHex = "76a6418a7374051d7f7d0d8e4c1d74332d93b9a11a057419469ce7340cc943a7"

func TestQuantName(t *testing.T) {
	mk := func(tensors ...func(b *Builder)) *File {
		b := NewBuilder()
		for _, add := range tensors {
			add(b)
		}
		data, err := b.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	mat := func(name string, typ ggml.Type) func(b *Builder) {
		return func(b *Builder) {
			if err := b.AddFloat32(name, typ, []int64{256, 2}, make([]float32, 512)); err != nil {
				t.Fatal(err)
			}
		}
	}
	vec := func(name string) func(b *Builder) {
		return func(b *Builder) { b.AddFloat32(name, ggml.TypeF32, []int64{256}, make([]float32, 256)) }
	}
	if got := QuantName(mk(mat("a", ggml.TypeQ8_0), mat("b", ggml.TypeQ8_0), vec("n"))); got != "Q8_0" {
		t.Errorf("uniform Q8_0 with F32 norm: %q, want Q8_0", got)
	}
	if got := QuantName(mk(mat("a", ggml.TypeNVFP4), mat("b", ggml.TypeNVFP4), vec("n"))); got != "NVFP4" {
		t.Errorf("uniform NVFP4 with F32 norm: %q, want NVFP4", got)
	}
	if got := QuantName(mk(mat("a", ggml.TypeNVFP4), mat("b", ggml.TypeQ8_0))); len(got) != len("mixed:NVFP4+Q8_0@")+16 || got[:len("mixed:NVFP4+Q8_0@")] != "mixed:NVFP4+Q8_0@" {
		t.Errorf("NVFP4 with a Q8_0 fallback: %q, want mixed:NVFP4+Q8_0@<16 hex digits>", got)
	}
	if got := QuantName(mk(vec("n"))); got != "none" {
		t.Errorf("no matrices: %q, want none", got)
	}
	m1 := QuantName(mk(mat("a", ggml.TypeQ4_K), mat("b", ggml.TypeQ8_0), vec("n")))
	m2 := QuantName(mk(mat("a", ggml.TypeQ8_0), mat("b", ggml.TypeQ4_K)))
	m3 := QuantName(mk(mat("b", ggml.TypeQ8_0), mat("a", ggml.TypeQ4_K)))
	for _, m := range []string{m1, m2} {
		if len(m) != len("mixed:Q4_K+Q8_0@")+16 || m[:len("mixed:Q4_K+Q8_0@")] != "mixed:Q4_K+Q8_0@" {
			t.Errorf("mixed name %q, want mixed:Q4_K+Q8_0@<16 hex digits>", m)
		}
	}
	if m1 == m2 {
		t.Error("different type assignments gave the same mixed name")
	}
	if m1 != m3 {
		t.Errorf("same assignment in another file order: %q vs %q", m1, m3)
	}
}
