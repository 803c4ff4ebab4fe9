package tokenizer

import (
	"errors"
	"slices"
	"testing"

	"github.com/muserhq/muser/infer/gguf"
)

// buildGGUF writes v as a vocab-only GGUF file with the gguf Builder,
// applies edit to the builder, and parses the result.
func buildGGUF(t *testing.T, v *Vocab, edit func(b *gguf.Builder)) gguf.Metadata {
	t.Helper()
	b := gguf.NewBuilder()
	b.Set(KeyArchitecture, "llama")
	b.Set(KeyModel, v.Model)
	if v.Pre != "" {
		b.Set(KeyPre, v.Pre)
	}
	b.SetArray(KeyTokens, v.Tokens)
	if v.Scores != nil {
		b.SetArray(KeyScores, v.Scores)
	}
	if v.Types != nil {
		types := make([]int32, len(v.Types))
		for i, x := range v.Types {
			types[i] = int32(x)
		}
		b.SetArray(KeyTokenType, types)
	}
	if v.Merges != nil {
		b.SetArray(KeyMerges, v.Merges)
	}
	for s, id := range v.SpecialIDs {
		b.Set(s.Key(), id)
	}
	if edit != nil {
		edit(b)
	}
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return f.Meta
}

func TestFromGGUF(t *testing.T) {
	for _, v := range []*Vocab{tinySPM(), tinyBPE("llama-bpe")} {
		t.Run(v.Model, func(t *testing.T) {
			direct := mustNew(t, v)
			tok, err := FromGGUF(buildGGUF(t, v, nil))
			if err != nil {
				t.Fatal(err)
			}
			if tok.Digest() != direct.Digest() {
				t.Errorf("Digest() through GGUF = %x, built directly = %x", tok.Digest(), direct.Digest())
			}
			text := "Hello the world, in 你好 café <|user|> 123!"
			got, err := tok.Encode(text, EncodeOptions{AddSpecial: true})
			if err != nil {
				t.Fatal(err)
			}
			want, _ := direct.Encode(text, EncodeOptions{AddSpecial: true})
			if !slices.Equal(got, want) {
				t.Errorf("Encode through GGUF = %v, built directly = %v", got, want)
			}
		})
	}
}

// TestVocabFromGGUFTypes checks that every key must have the exact type
// llama.cpp requires.
func TestVocabFromGGUFTypes(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(b *gguf.Builder)
		want error
	}{
		{"no model", func(b *gguf.Builder) { b.Delete(KeyModel) }, gguf.ErrMissingKey},
		{"model not a string", func(b *gguf.Builder) { b.Set(KeyModel, uint32(1)) }, gguf.ErrWrongType},
		{"pre not a string", func(b *gguf.Builder) { b.SetArray(KeyPre, []string{"gpt-2"}) }, gguf.ErrWrongType},
		{"no tokens", func(b *gguf.Builder) { b.Delete(KeyTokens) }, gguf.ErrMissingKey},
		{"tokens not strings", func(b *gguf.Builder) { b.SetArray(KeyTokens, []int32{1, 2}) }, gguf.ErrWrongType},
		{"scores float64", func(b *gguf.Builder) { b.SetArray(KeyScores, make([]float64, 300)) }, gguf.ErrWrongType},
		{"types uint32", func(b *gguf.Builder) { b.SetArray(KeyTokenType, make([]uint32, 300)) }, gguf.ErrWrongType},
		{"merges not strings", func(b *gguf.Builder) { b.SetArray(KeyMerges, []int32{1}) }, gguf.ErrWrongType},
		{"bos int32", func(b *gguf.Builder) { b.Set(SpecialBOS.Key(), int32(1)) }, gguf.ErrWrongType},
		{"add_bos uint8", func(b *gguf.Builder) { b.Set(KeyAddBOS, uint8(1)) }, gguf.ErrWrongType},
		{"name not a string", func(b *gguf.Builder) { b.Set(KeyName, int32(3)) }, gguf.ErrWrongType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := VocabFromGGUF(buildGGUF(t, tinySPM(), tc.edit))
			if !errors.Is(err, tc.want) {
				t.Fatalf("VocabFromGGUF: got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestVocabFromGGUFValues(t *testing.T) {
	meta := buildGGUF(t, tinySPM(), func(b *gguf.Builder) {
		scores := make([]int32, 277)
		scores[5] = -7
		b.SetArray(KeyScores, scores)
		b.SetBool(KeyAddEOS, true)
		b.SetBool(KeyAddSpacePrefix, false)
		b.Set(SpecialFIMPre.Key(), uint32(5))
		b.Set("tokenizer.ggml.prefix_token_id", uint32(6)) // deprecated, wins
		b.Set(SpecialFIMSuf.Key(), uint32(7))
		b.Set("tokenizer.ggml.suffix_token_id", uint32(99999)) // out of range: ignored
		b.Set(SpecialSEP.Key(), uint32(0xFFFFFFFF))
		b.Set(KeyName, "Tiny")
	})
	v, err := VocabFromGGUF(meta)
	if err != nil {
		t.Fatal(err)
	}
	if v.Scores[5] != -7 || v.AddEOS == nil || !*v.AddEOS || v.AddSpacePrefix == nil || *v.AddSpacePrefix || v.AddBOS != nil || v.Name != "Tiny" {
		t.Errorf("got score %v AddEOS %v AddSpacePrefix %v AddBOS %v Name %q", v.Scores[5], v.AddEOS, v.AddSpacePrefix, v.AddBOS, v.Name)
	}
	tok := mustNew(t, v)
	for _, tc := range []struct {
		s    Special
		want int32
	}{{SpecialFIMPre, 6}, {SpecialFIMSuf, 7}, {SpecialSEP, -1}, {SpecialBOS, 1}} {
		if got := tok.SpecialID(tc.s); got != tc.want {
			t.Errorf("SpecialID(%s) = %d, want %d", tc.s.Key(), got, tc.want)
		}
	}
}
