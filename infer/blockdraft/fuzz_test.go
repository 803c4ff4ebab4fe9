package blockdraft_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite testdata/fuzz/FuzzOpen's generated seeds")

// microDrafter returns a small drafter (about 10 KB at Q8_0): D 32, 1
// layer, 2 heads, 1 KV head, F 32, B 4, for a micro llama target (hidden
// 32, vocabulary 16).
func microDrafter(tb testing.TB, typ ggml.Type) []byte {
	return drafterForMicro(tb, blockdrafttest.Options{Hidden: 32, Layers: 1, Heads: 2, KVHeads: 1, FFN: 32, Block: 4, Seed: 1, Type: typ})
}

// tinyDrafter returns the smallest drafter the format allows, for the
// micro llama target (about 2 KB, most of it the tokenizer): D 2, 1
// layer, 1 head, F 1, B 2, F32.
func tinyDrafter(tb testing.TB) []byte {
	return drafterForMicro(tb, blockdrafttest.Options{Hidden: 2, Layers: 1, Heads: 1, KVHeads: 1, FFN: 1, Block: 2, Seed: 1, Type: ggml.TypeF32})
}

func drafterForMicro(tb testing.TB, o blockdrafttest.Options) []byte {
	tb.Helper()
	tb2, err := enginetest.Build(enginetest.Micro("llama"), ggml.TypeQ8_0, 1)
	if err != nil {
		tb.Fatal(err)
	}
	tdata, err := tb2.Bytes()
	if err != nil {
		tb.Fatal(err)
	}
	target, err := gguf.Parse(tdata)
	if err != nil {
		tb.Fatal(err)
	}
	data, err := blockdrafttest.Bytes(target, o)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// TestFuzzSeeds checks that the generated seeds in testdata/fuzz/FuzzOpen
// are those tinyDrafter makes (go test -run TestFuzzSeeds -update-seeds
// rewrites them), so that the corpus keeps a valid drafter as the format
// and the helper change.
func TestFuzzSeeds(t *testing.T) {
	valid := tinyDrafter(t)
	seeds := map[string][]byte{
		"valid-tiny-f32":     valid,
		"truncated-tiny-f32": valid[:len(valid)*2/3],
	}
	for name, data := range seeds {
		path := filepath.Join("testdata", "fuzz", "FuzzOpen", name)
		want := fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", data)
		if *updateSeeds {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update-seeds to write it)", err)
		}
		if string(got) != string(want) {
			t.Errorf("%s differs from the seed tinyDrafter makes (run with -update-seeds)", path)
		}
	}
	m, err := blockdraft.Load(mustParse(t, valid), 1)
	if err != nil {
		t.Fatalf("the valid seed does not load: %v", err)
	}
	m.Close()
}

func mustParse(tb testing.TB, data []byte) *gguf.File {
	tb.Helper()
	f, err := gguf.Parse(data)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// FuzzOpen writes arbitrary bytes to a file and opens it as a drafter:
// Open must not panic, and a drafter that opens must draft: a full block
// of tokens within its vocabulary, for a zero hidden state and the last
// token as the anchor, twice with the same result.
func FuzzOpen(f *testing.F) {
	for _, typ := range []ggml.Type{ggml.TypeQ8_0, ggml.TypeF32} {
		f.Add(microDrafter(f, typ))
	}
	f.Add(tinyDrafter(f))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "fuzz.gguf")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := blockdraft.Open(path, 2)
		if err != nil {
			return
		}
		defer m.Close()
		draft := func() []int32 {
			reqs := []blockdraft.Request{{Hidden: make([]float32, m.TargetHidden()), Anchor: int32(m.Vocab() - 1), Max: m.BlockSize()}}
			if err := m.Draft(context.Background(), reqs); err != nil {
				t.Fatalf("Draft on an opened drafter: %v", err)
			}
			return reqs[0].Tokens
		}
		toks := draft()
		if len(toks) != m.BlockSize()-1 {
			t.Fatalf("%d tokens, want %d", len(toks), m.BlockSize()-1)
		}
		for _, tok := range toks {
			if tok < 0 || int(tok) >= m.Vocab() {
				t.Fatalf("token %d outside the vocabulary of %d", tok, m.Vocab())
			}
		}
		if again := draft(); fmt.Sprint(again) != fmt.Sprint(toks) {
			t.Fatalf("the same request drafts %v, then %v", toks, again)
		}
	})
}
