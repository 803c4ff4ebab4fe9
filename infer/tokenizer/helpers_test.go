package tokenizer

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/gguf"
)

var (
	sharedMu    sync.Mutex
	sharedVocab = map[string]*Vocab{}
)

// loadShared returns the Vocab of a file under ../shared (for example
// "vocab/ggml-vocab-gpt-2.gguf"), parsed once per test binary, or ok ==
// false when ../shared is absent.
func loadShared(tb testing.TB, file string) (*Vocab, bool) {
	tb.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if v, ok := sharedVocab[file]; ok {
		return clone(v), true
	}
	f, err := gguf.Open(filepath.Join(sharedDir, file))
	if os.IsNotExist(err) {
		return nil, false
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	v, err := VocabFromGGUF(f.Meta)
	if err != nil {
		tb.Fatalf("%s: %v", file, err)
	}
	sharedVocab[file] = v
	return clone(v), true
}

// clone copies the parts of v a test may change.
func clone(v *Vocab) *Vocab {
	c := *v
	c.SpecialIDs = map[Special]uint32{}
	for k, x := range v.SpecialIDs {
		c.SpecialIDs[k] = x
	}
	return &c
}

// sharedTokenizer builds the tokenizer of a file under ../shared, with pre
// replacing its pre-tokenizer when not empty; it skips the test when
// ../shared is absent.
func sharedTokenizer(tb testing.TB, file, pre string) *Tokenizer {
	tb.Helper()
	v, ok := loadShared(tb, file)
	if !ok {
		tb.Skipf("%s absent: this test needs the shared test material at %s", file, sharedDir)
	}
	if pre != "" {
		v.Pre = pre
	}
	tok, err := New(v)
	if err != nil {
		tb.Fatalf("%s: %v", file, err)
	}
	return tok
}

// Files under ../shared that the property tests and fuzz targets use.
const (
	fileStories = "models/stories260K.gguf"
	fileLlama   = "vocab/ggml-vocab-llama-spm.gguf"
	filePhi3    = "vocab/ggml-vocab-phi-3.gguf"
	fileGPT2    = "vocab/ggml-vocab-gpt-2.gguf"
	fileNeox    = "vocab/ggml-vocab-gpt-neox.gguf"
	fileDSLLM   = "vocab/ggml-vocab-deepseek-llm.gguf"
	fileFalcon  = "vocab/ggml-vocab-falcon.gguf"
)

// bools returns a pointer to b, for Vocab's optional flags.
func boolp(b bool) *bool { return &b }

// tinySPM is a small SentencePiece vocabulary built in the test: the
// three specials, all 256 byte tokens, and a few pieces, so that tests and
// fuzz targets work without ../shared.
func tinySPM() *Vocab {
	v := &Vocab{Model: "llama"}
	add := func(text string, typ TokenType, score float32) {
		v.Tokens = append(v.Tokens, text)
		v.Types = append(v.Types, typ)
		v.Scores = append(v.Scores, score)
	}
	add("<unk>", TypeUnknown, 0)
	add("<s>", TypeControl, 0)
	add("</s>", TypeControl, 0)
	for b := 0; b < 256; b++ {
		add(byteTokenText[b], TypeByte, 0)
	}
	for i, p := range []string{"▁", "▁t", "he", "▁the", "▁a", "in", "▁in", "er", "on", "an", "▁w", "or", "é", "▁café", "你", "好", "你好", "<|user|>"} {
		typ := TypeNormal
		if p == "<|user|>" {
			typ = TypeUserDefined
		}
		add(p, typ, -float32(i))
	}
	return v
}

// tinyBPE is a small byte-level BPE vocabulary built in the test: every
// byte's code point, a few merges, and two specials.
func tinyBPE(pre string) *Vocab {
	v := &Vocab{Model: "gpt2", Pre: pre}
	for b := 0; b < 256; b++ {
		v.Tokens = append(v.Tokens, byteToText[b])
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"}, {"e", "r"}, {"Ġ", "Ġ"}, {"1", "2"}, {"12", "3"}, {"Ã", "©"}}
	for _, m := range merges {
		v.Merges = append(v.Merges, m[0]+" "+m[1])
		v.Tokens = append(v.Tokens, m[0]+m[1])
	}
	v.Tokens = append(v.Tokens, "<|endoftext|>", "<|user|>")
	v.Types = make([]TokenType, len(v.Tokens))
	for i := range v.Types {
		v.Types[i] = TypeNormal
	}
	v.Types[len(v.Types)-2] = TypeControl
	v.Types[len(v.Types)-1] = TypeUserDefined
	eot := uint32(len(v.Tokens) - 2)
	v.SpecialIDs = map[Special]uint32{SpecialBOS: eot, SpecialEOS: eot}
	return v
}

func mustNew(tb testing.TB, v *Vocab) *Tokenizer {
	tb.Helper()
	tok, err := New(v)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}
