package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/gguf"
)

// tokenizerCLI runs muser with args and stdin.
func tokenizerCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// tinyVocabFile writes a vocab-only GGUF file with a small SentencePiece
// vocabulary: <unk> <s> </s>, the 256 byte tokens (ids 3..258), then ▁,
// ▁a, b, ▁ab (ids 259..262).
func tinyVocabFile(t *testing.T) string {
	t.Helper()
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	for b := 0; b < 256; b++ {
		tokens = append(tokens, "<0x"+strings.ToUpper(string("0123456789abcdef"[b>>4])+string("0123456789abcdef"[b&15]))+">")
		types = append(types, 6)
	}
	tokens = append(tokens, "▁", "▁a", "b", "▁ab")
	types = append(types, 1, 1, 1, 1)
	scores := make([]float32, len(tokens))
	scores[262] = 10
	b := gguf.NewBuilder()
	b.SetString("general.architecture", "llama")
	b.SetString("tokenizer.ggml.model", "llama")
	b.SetArray("tokenizer.ggml.tokens", tokens)
	b.SetArray("tokenizer.ggml.token_type", types)
	b.SetArray("tokenizer.ggml.scores", scores)
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := b.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTokenizeCommand(t *testing.T) {
	model := tinyVocabFile(t)
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   string
	}{
		{"default adds BOS", "", []string{"tokenize", "--model", model, "ab"}, exitOK, "1 262\n"},
		{"no BOS", "", []string{"tokenize", "--model", model, "--no-bos", "ab"}, exitOK, "262\n"},
		{"JSON", "", []string{"tokenize", "--model", model, "--json", "ab ab"}, exitOK, "[1,262,262]\n"},
		{"byte fallback", "", []string{"tokenize", "--model", model, "--no-bos", "ac"}, exitOK, "260 102\n"},
		{"control text is text", "", []string{"tokenize", "--model", model, "--no-bos", "<s>"}, exitOK, "259 63 118 65\n"},
		{"--special", "", []string{"tokenize", "--model", model, "--no-bos", "--special", "<s>"}, exitOK, "1\n"},
		{"stdin", "ab", []string{"tokenize", "--model", model}, exitOK, "1 262\n"},
		{"empty JSON", "", []string{"tokenize", "--model", model, "--json", "--no-bos", ""}, exitOK, "[]\n"},
		{"no model", "", []string{"tokenize", "x"}, exitUsage, ""},
		{"two texts", "", []string{"tokenize", "--model", model, "a", "b"}, exitUsage, ""},
		{"missing file", "", []string{"tokenize", "--model", filepath.Join(t.TempDir(), "none.gguf"), "x"}, exitNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := tokenizerCLI(t, tc.stdin, tc.args...)
			if code != tc.code || out != tc.out {
				t.Fatalf("muser %s: exit %d, output %q (stderr %q); want exit %d, output %q",
					strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.out)
			}
		})
	}
}

func TestDetokenizeCommand(t *testing.T) {
	model := tinyVocabFile(t)
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		code  int
		out   string
	}{
		{"ids", "", []string{"detokenize", "--model", model, "262", "262"}, exitOK, "ab ab\n"},
		// As in llama.cpp, a leading BOS keeps the first token's space.
		{"after BOS", "", []string{"detokenize", "--model", model, "1", "262", "262"}, exitOK, " ab ab\n"},
		{"special", "", []string{"detokenize", "--model", model, "--special", "1", "262"}, exitOK, "<s> ab\n"},
		{"commas and brackets", "", []string{"detokenize", "--model", model, "[262,", "260]"}, exitOK, "ab a\n"},
		{"stdin", "[262,102]\n", []string{"detokenize", "--model", model}, exitOK, "abc\n"},
		{"JSON", "", []string{"detokenize", "--model", model, "--json", "262", "13"}, exitOK, "\"ab\\n\"\n"},
		{"not a number", "", []string{"detokenize", "--model", model, "x"}, exitUsage, ""},
		{"out of range", "", []string{"detokenize", "--model", model, "263"}, exitUsage, ""},
		{"negative", "", []string{"detokenize", "--model", model, "--", "-1"}, exitUsage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := tokenizerCLI(t, tc.stdin, tc.args...)
			if code != tc.code || out != tc.out {
				t.Fatalf("muser %s: exit %d, output %q (stderr %q); want exit %d, output %q",
					strings.Join(tc.args, " "), code, out, errOut, tc.code, tc.out)
			}
		})
	}
}

// TestTokenizeStories checks the CLI against the ids llama.cpp gives for
// stories260K's reference prompt (../shared/models/golden).
func TestTokenizeStories(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "models")
	want, err := os.ReadFile(filepath.Join(dir, "golden", "stories260K.prompt-ids.txt"))
	if err != nil {
		t.Skipf("shared test material absent: %v", err)
	}
	model := filepath.Join(dir, "stories260K.gguf")
	code, out, errOut := tokenizerCLI(t, "", "tokenize", "--model", model, "--json", "Once upon a time")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got, ids []int32
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &ids); err != nil {
		t.Fatalf("golden ids: %v", err)
	}
	if !slicesEqual(got, ids) {
		t.Fatalf("tokenize = %v, want %v", got, ids)
	}
	// llama.cpp keeps SentencePiece's leading space after a BOS.
	code, out, _ = tokenizerCLI(t, out, "detokenize", "--model", model)
	if code != exitOK || out != " Once upon a time\n" {
		t.Fatalf("detokenize of %v: exit %d, %q", got, code, out)
	}
	code, out, _ = tokenizerCLI(t, "", "tokenize", "--model", model, "--no-bos", "Once upon a time")
	if code != exitOK {
		t.Fatal(code)
	}
	code, out, _ = tokenizerCLI(t, out, "detokenize", "--model", model)
	if code != exitOK || out != "Once upon a time\n" {
		t.Fatalf("detokenize(tokenize --no-bos): exit %d, %q", code, out)
	}
}

func slicesEqual(a, b []int32) bool {
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
