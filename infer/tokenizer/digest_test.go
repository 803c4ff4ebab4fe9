package tokenizer

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestDigestGolden pins the digests of the tokenizers the tests know, so
// that a change to the encoding (or to what New derives) is deliberate:
// it changes every pack identity.
func TestDigestGolden(t *testing.T) {
	const golden = "testdata/digest.golden"
	got := map[string]string{
		"tinySPM":       hex.EncodeToString(digestOf(t, mustNew(t, tinySPM()))),
		"tinyBPE/gpt-2": hex.EncodeToString(digestOf(t, mustNew(t, tinyBPE("gpt-2")))),
		"tinyBPE/qwen2": hex.EncodeToString(digestOf(t, mustNew(t, tinyBPE("qwen2")))),
	}
	files, _ := filepath.Glob(filepath.Join(sharedDir, "vocab", "*.gguf"))
	files = append(files, filepath.Join(sharedDir, fileStories))
	shared := false
	for _, f := range files {
		rel, _ := filepath.Rel(sharedDir, f)
		v, ok := loadShared(t, rel)
		if !ok {
			continue
		}
		shared = true
		got[rel] = hex.EncodeToString(digestOf(t, mustNew(t, v)))
	}
	if *update {
		var b strings.Builder
		b.WriteString("# Tokenizer digests (TestDigestGolden; go test -run TestDigestGolden -update)\n")
		for _, k := range slices.Sorted(maps.Keys(got)) {
			fmt.Fprintf(&b, "%s %s\n", k, got[k])
		}
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(golden)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			k, v, _ := strings.Cut(line, " ")
			want[k] = v
		}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			if shared || strings.HasPrefix(k, "tiny") {
				t.Errorf("%s: no digest computed", k)
			}
			continue
		}
		if g != w {
			t.Errorf("Digest(%s) = %s, want %s", k, g, w)
		}
	}
	if !shared {
		t.Logf("%s absent: checked the built-in vocabularies only", sharedDir)
	}
}

func digestOf(t *testing.T, tok *Tokenizer) []byte {
	d := tok.Digest()
	if d != tok.computeDigest() {
		t.Fatal("Digest() is not stable")
	}
	return d[:]
}

// TestDigestSensitivity checks that every input that can change a token
// id changes the digest, and that metadata the tokenizer ignores does not.
func TestDigestSensitivity(t *testing.T) {
	base := mustNew(t, tinyBPE("gpt-2")).Digest()
	for _, tc := range []struct {
		name    string
		edit    func(v *Vocab)
		changes bool
	}{
		{"same vocab", func(v *Vocab) {}, false},
		{"model name", func(v *Vocab) { v.Name = "something" }, false},
		{"pre-tokenizer", func(v *Vocab) { v.Pre = "mpt" }, true},
		{"token text", func(v *Vocab) { v.Tokens[200] = "zz" }, true},
		{"score", func(v *Vocab) { v.Scores = make([]float32, len(v.Tokens)); v.Scores[3] = 1 }, true},
		{"token type", func(v *Vocab) { v.Types[5] = TypeUserDefined }, true},
		{"merge order", func(v *Vocab) { v.Merges[0], v.Merges[1] = v.Merges[1], v.Merges[0] }, true},
		{"merge dropped", func(v *Vocab) { v.Merges = v.Merges[:len(v.Merges)-1] }, true},
		{"BOS id", func(v *Vocab) { v.SpecialIDs[SpecialBOS] = 5 }, true},
		{"EOT id", func(v *Vocab) { v.SpecialIDs[SpecialEOT] = 5 }, true},
		{"add BOS", func(v *Vocab) { v.AddBOS = boolp(true) }, true},
		{"add EOS", func(v *Vocab) { v.AddEOS = boolp(true) }, true},
		{"add space prefix", func(v *Vocab) { v.AddSpacePrefix = boolp(true) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tinyBPE("gpt-2")
			tc.edit(v)
			if got := mustNew(t, v).Digest(); (got != base) != tc.changes {
				t.Errorf("digest changed = %v, want %v", got != base, tc.changes)
			}
		})
	}
	// Phi-3's name does matter: it changes attributes.
	phi := func(name string) *Vocab {
		v := tinySPM()
		v.Name = name
		v.Tokens = append(v.Tokens, "<|endoftext|>")
		v.Types = append(v.Types, TypeControl)
		v.Scores = append(v.Scores, 0)
		return v
	}
	if mustNew(t, phi("Phi-3")).Digest() == mustNew(t, phi("")).Digest() {
		t.Error("a Phi-3 name (which sets RStrip on special tokens) did not change the digest")
	}
	// SentencePiece ignores the pre-tokenizer name and the merges.
	v := tinySPM()
	v.Pre, v.Merges = "qwen2", []string{"a b"}
	if mustNew(t, v).Digest() != mustNew(t, tinySPM()).Digest() {
		t.Error("a SentencePiece vocabulary's digest depends on its (ignored) pre-tokenizer or merges")
	}
}
