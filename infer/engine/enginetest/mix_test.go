package enginetest

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// TestQ4KM checks the Q4_K_M mix tensor by tensor on a 24-block model, as
// llama.cpp's quantizer types Qwen2.5-0.5B: Q6_K for attn_v and ffn_down
// in blocks 0–2, 5, 8, …, 20 and 21–23 and for the tied embedding, Q4_K
// elsewhere, each then through the fallback for its row length (rows of
// 320, not a multiple of 256: Q5_0 and Q8_0).
func TestQ4KM(t *testing.T) {
	more := map[int]bool{0: true, 1: true, 2: true, 5: true, 8: true, 11: true, 14: true, 17: true, 20: true, 21: true, 22: true, 23: true}
	for _, c := range []struct {
		hidden int
		high   ggml.Type // the embedding's type
	}{
		{256, ggml.TypeQ6_K},
		{320, ggml.TypeQ8_0},
	} {
		t.Run(fmt.Sprint(c.hidden), func(t *testing.T) {
			s := Tiny("qwen2")
			s.Layers, s.Hidden = 24, c.hidden
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := WriteMixFile(path, s, Q4KM, 5); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			matrices := 0
			for i := range f.Tensors {
				ti := &f.Tensors[i]
				if len(ti.Shape) != 2 {
					continue
				}
				matrices++
				var layer int
				base := ti.Name
				if strings.HasPrefix(ti.Name, "blk.") {
					fmt.Sscanf(ti.Name, "blk.%d.", &layer)
					base = ti.Name[strings.Index(ti.Name[4:], ".")+5:]
				}
				rule := ggml.TypeQ4_K
				if base == "token_embd.weight" || (base == "attn_v.weight" || base == "ffn_down.weight") && more[layer] {
					rule = ggml.TypeQ6_K
				}
				want := TypeFor(rule, int(ti.Shape[0]))
				if base == "token_embd.weight" && want != c.high {
					t.Errorf("the table's high type for rows of %d: %v, TypeFor says %v", c.hidden, c.high, want)
				}
				if ti.Type != want {
					t.Errorf("%s: %v, want %v", ti.Name, ti.Type, want)
				}
			}
			if want := 1 + 7*s.Layers; matrices != want {
				t.Errorf("%d matrices, want %d", matrices, want)
			}
		})
	}
}

// TestMixKeepsWeights checks that a mix changes the types only: the same
// seed gives the same values, so a uniform Q8_0 model and BuildMix with
// Uniform(Q8_0) are one file, and ParseMix names both kinds.
func TestMixKeepsWeights(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	if err := WriteFile(a, Tiny("llama"), ggml.TypeQ8_0, 4); err != nil {
		t.Fatal(err)
	}
	m, err := ParseMix("q8_0")
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteMixFile(b, Tiny("llama"), m, 4); err != nil {
		t.Fatal(err)
	}
	fa, err := gguf.Open(a)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := gguf.Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if gguf.WeightsDigest(fa) != gguf.WeightsDigest(fb) {
		t.Error("Uniform(Q8_0) gave other weights than Build with Q8_0")
	}
	if m, err := ParseMix("Q4_K_M"); err != nil || m.Name != "Q4_K_M" {
		t.Errorf("ParseMix(Q4_K_M) = %q, %v", m.Name, err)
	}
	if _, err := ParseMix("Q4_K_X"); err == nil || !strings.Contains(err.Error(), "Q4_K_X") {
		t.Errorf("ParseMix(Q4_K_X): %v, want an error naming it", err)
	}
}
