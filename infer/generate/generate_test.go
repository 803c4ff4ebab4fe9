package generate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
)

const stories = "../../../shared/models/stories260K.gguf"

func load(t *testing.T) (*engine.Model, *tokenizer.Tokenizer) {
	t.Helper()
	if _, err := os.Stat(stories); err != nil {
		t.Skipf("shared test model absent (%v); CI has ../shared beside the clone", err)
	}
	m, err := engine.Open(stories, engine.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tok, err := tokenizer.FromGGUF(m.File().Meta)
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}

func golden(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(stories), "golden", "stories260K.llama2c-test_all.expected.txt"))
	if err != nil {
		t.Skip(err)
	}
	return string(b)
}

func encode(t *testing.T, tok *tokenizer.Tokenizer, s string) []int32 {
	ids, err := tok.Encode(s, tokenizer.EncodeOptions{AddSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestGolden is the must-show on the library path: greedy output
// for "Once upon a time" begins with llama2.c's expected text.
func TestGolden(t *testing.T) {
	m, tok := load(t)
	want := golden(t)
	var streamed strings.Builder
	res, err := Run(context.Background(), m, tok, Request{
		Prompt:    encode(t, tok, "Once upon a time"),
		MaxTokens: 200,
		OnText:    func(s string) error { streamed.WriteString(s); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	got := "Once upon a time" + res.Text
	if !strings.HasPrefix(got, want) {
		t.Errorf("greedy output\n%q\ndoes not begin with the golden\n%q", got, want)
	}
	if streamed.String() != res.Text {
		t.Errorf("streamed text differs from Result.Text")
	}
	if res.Finish != FinishLength || len(res.Tokens) != 200 {
		t.Errorf("finish %s after %d tokens, want length after 200", res.Finish, len(res.Tokens))
	}
}

// TestPrefixReuse runs the same long prompt twice against a MemStore: the
// second run restores the prompt's full blocks and produces exactly the
// same tokens; a different salt sees nothing.
func TestPrefixReuse(t *testing.T) {
	m, tok := load(t)
	ps := infertest.NewMemStore(16)
	prompt := encode(t, tok, golden(t)[:300])
	id := m.Identity(tok.Digest(), [32]byte{}, ps.BlockTokens())
	req := Request{Prompt: prompt, MaxTokens: 40, Store: ps, Identity: id,
		Sampling: sample.Params{Temperature: 0.9, Seed: 3},
		Warn:     func(err error) { t.Errorf("warning: %v", err) }}
	first, err := Run(context.Background(), m, tok, req)
	if err != nil {
		t.Fatal(err)
	}
	if first.CachedTokens != 0 || first.Published == 0 {
		t.Fatalf("first run: %d cached, %d published; want 0 cached and some published", first.CachedTokens, first.Published)
	}
	second, err := Run(context.Background(), m, tok, req)
	if err != nil {
		t.Fatal(err)
	}
	if want := (len(prompt) - 1) / 16 * 16; second.CachedTokens != want {
		t.Errorf("second run restored %d tokens, want %d", second.CachedTokens, want)
	}
	if second.Text != first.Text {
		t.Errorf("output with a restored prefix differs:\n%q\n%q", second.Text, first.Text)
	}
	req.Salt = []byte("other tenant")
	third, err := Run(context.Background(), m, tok, req)
	if err != nil {
		t.Fatal(err)
	}
	if third.CachedTokens != 0 || third.Text != first.Text {
		t.Errorf("other salt: %d cached (want 0), same text %v", third.CachedTokens, third.Text == first.Text)
	}
	// A store that fails mid-restore is reported and recomputed.
	ps.FailAfterBlocks = 1
	var warned error
	req.Salt, req.Warn = nil, func(err error) { warned = err }
	fourth, err := Run(context.Background(), m, tok, req)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(warned, infertest.ErrInjected) || fourth.CachedTokens != 0 || fourth.Text != first.Text {
		t.Errorf("failed restore: warning %v, %d cached, same text %v; want the injected error, 0, true", warned, fourth.CachedTokens, fourth.Text == first.Text)
	}
}

func TestStopAndEOG(t *testing.T) {
	m, tok := load(t)
	prompt := encode(t, tok, "Once upon a time")
	res, err := Run(context.Background(), m, tok, Request{Prompt: prompt, MaxTokens: 200, Stop: []string{"Lily"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != ", there was a little girl named " || res.Finish != FinishStop {
		t.Errorf("stop at Lily: text %q, finish %s", res.Text, res.Finish)
	}
	// With the EOS token's logit boosted it is the first choice: the run
	// ends at once and emits nothing.
	res, err = Run(context.Background(), m, tok, Request{Prompt: prompt, MaxTokens: 10,
		Sampling: sample.Params{LogitBias: map[int32]float64{tok.EOS(): 100}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "" || len(res.Tokens) != 0 || res.Finish != FinishStop {
		t.Errorf("EOS first: text %q, %d tokens, finish %s", res.Text, len(res.Tokens), res.Finish)
	}
	res, err = Run(context.Background(), m, tok, Request{Prompt: prompt, Context: 12})
	if err != nil {
		t.Fatal(err)
	}
	if res.Finish != FinishContext || len(prompt)+len(res.Tokens) != 13 {
		t.Errorf("context 12: finish %s with %d prompt + %d generated tokens", res.Finish, len(prompt), len(res.Tokens))
	}
	if _, err := Run(context.Background(), m, tok, Request{}); !errors.Is(err, ErrPrompt) {
		t.Errorf("empty prompt: %v, want ErrPrompt", err)
	}
}

func TestSeed(t *testing.T) {
	m, tok := load(t)
	prompt := encode(t, tok, "Once upon a time")
	run := func(seed uint64) string {
		res, err := Run(context.Background(), m, tok, Request{Prompt: prompt, MaxTokens: 60, Sampling: sample.Params{Temperature: 1, Seed: seed}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Text
	}
	a, b, c := run(7), run(7), run(8)
	if a != b {
		t.Errorf("seed 7 gave two outputs:\n%q\n%q", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 gave the same 60 tokens")
	}
}
