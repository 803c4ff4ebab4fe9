package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The parity vectors are llama.cpp's own tokenizations of the corpus in
// scripts/parity/corpus.mjs, made by scripts/parity/tokenize.mjs with
// node-llama-cpp. See scripts/parity/README.md.
var parityDir = flag.String("parity.dir", "testdata/parity", "directory of the parity vectors")

// sharedDir is the read-only test material beside the repository.
const sharedDir = "../../../shared"

type parityVector struct {
	Name        string         `json:"name"`
	File        string         `json:"file"`
	SHA256      string         `json:"sha256"`
	Set         map[string]any `json:"set"`
	NodeLlama   string         `json:"nodeLlamaCpp"`
	VocabSize   int            `json:"vocabSize"`
	BOS         int32          `json:"bos"`
	EOS         int32          `json:"eos"`
	EOT         int32          `json:"eot"`
	AddBOS      bool           `json:"addBos"`
	AddEOS      bool           `json:"addEos"`
	EOG         []int32        `json:"eog"`
	Attrs       [][2]int64     `json:"attrs"`
	PieceDigest struct {
		Plain   string `json:"plain"`
		Special string `json:"special"`
	} `json:"pieceDigest"`
	Cases []parityCase `json:"cases"`
}

// parityCase is one text. Special, Detok and DetokSpecial are absent
// where they equal IDs, Text and Text.
type parityCase struct {
	Text         string   `json:"text"`
	IDs          []int32  `json:"ids"`
	Special      *[]int32 `json:"special"`
	Detok        *string  `json:"detok"`
	DetokSpecial *string  `json:"detokSpecial"`
}

func loadVectors(t *testing.T) []*parityVector {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(*parityDir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no parity vectors in %s (%v)", *parityDir, err)
	}
	var out []*parityVector
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		v := &parityVector{}
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, v)
	}
	return out
}

// fileSums caches the sha256 of each shared file the vectors name.
var fileSums = map[string]string{}

// openVector loads the tokenizer a vector was made with: its GGUF file
// from ../shared, with the metadata changes the vector lists applied.
// It skips the test when ../shared is absent.
func openVector(t *testing.T, v *parityVector) *Tokenizer {
	t.Helper()
	path := filepath.Join(sharedDir, v.File)
	sum, ok := fileSums[v.File]
	if !ok {
		data, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			t.Skipf("%s absent: parity needs the shared test material at %s", path, sharedDir)
		}
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(data)
		sum = hex.EncodeToString(h[:])
		fileSums[v.File] = sum
	}
	if sum != v.SHA256 {
		t.Fatalf("%s: sha256 %s, but the vectors were made from %s; regenerate them", path, sum, v.SHA256)
	}
	voc, ok := loadShared(t, v.File)
	if !ok {
		t.Skipf("%s absent: parity needs the shared test material at %s", path, sharedDir)
	}
	for k, val := range v.Set {
		switch k {
		case KeyPre:
			voc.Pre = val.(string)
		case KeyAddSpacePrefix:
			b := val.(bool)
			voc.AddSpacePrefix = &b
		default:
			t.Fatalf("vector sets %s, which the test cannot apply", k)
		}
	}
	tok, err := New(voc)
	if err != nil {
		t.Fatalf("%s: %v", v.Name, err)
	}
	return tok
}

// v8String is what a string of bytes becomes once node-llama-cpp hands it
// to JavaScript: V8 replaces each maximal ill-formed subsequence with
// U+FFFD.
func v8String(s string) string { return string(appendValidUTF8(nil, []byte(s))) }

func TestParity(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			tok := openVector(t, v)
			checkVocabParity(t, v, tok)
			checkCaseParity(t, v, tok)
		})
	}
}

func checkVocabParity(t *testing.T, v *parityVector, tok *Tokenizer) {
	if got := tok.VocabSize(); got != v.VocabSize {
		t.Errorf("VocabSize() = %d, want %d", got, v.VocabSize)
	}
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"BOS()", tok.BOS(), v.BOS}, {"EOS()", tok.EOS(), v.EOS}, {"EOT()", tok.EOT(), v.EOT},
		{"AddBOS()", tok.AddBOS(), v.AddBOS}, {"AddEOS()", tok.AddEOS(), v.AddEOS},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if got := tok.EOGs(); !slices.Equal(got, v.EOG) {
		t.Errorf("EOGs() = %v, want %v", got, v.EOG)
	}
	want := map[int32]TokenAttr{}
	for _, a := range v.Attrs {
		want[int32(a[0])] = TokenAttr(a[1])
	}
	bad := 0
	for id := int32(0); id < int32(tok.VocabSize()); id++ {
		w, ok := want[id]
		if !ok {
			w = AttrNormal
		}
		if got := tok.Attr(id); got != w {
			if bad++; bad <= 5 {
				t.Errorf("Attr(%d %q) = %#x, want %#x", id, tok.Token(id), got, w)
			}
		}
	}
	for _, mode := range []struct {
		special bool
		want    string
	}{{false, v.PieceDigest.Plain}, {true, v.PieceDigest.Special}} {
		h := sha256.New()
		for id := int32(0); id < int32(tok.VocabSize()); id++ {
			s, err := tok.DecodeWith([]int32{id}, DecodeOptions{RenderSpecial: mode.special})
			if err != nil {
				t.Fatal(err)
			}
			h.Write([]byte(v8String(s) + "\x00"))
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != mode.want {
			t.Errorf("digest of every single-token Decode (RenderSpecial=%v) = %s, want %s", mode.special, got, mode.want)
		}
	}
}

func checkCaseParity(t *testing.T, v *parityVector, tok *Tokenizer) {
	fails := 0
	report := func(format string, a ...any) {
		if fails++; fails <= 10 {
			t.Errorf(format, a...)
		}
	}
	for i, c := range v.Cases {
		special := c.IDs
		if c.Special != nil {
			special = *c.Special
		}
		for _, m := range []struct {
			opt  EncodeOptions
			want []int32
		}{
			{EncodeOptions{}, c.IDs},
			{EncodeOptions{ParseSpecial: true}, special},
			{EncodeOptions{AddSpecial: true}, withSpecial(v, c.IDs)},
			{EncodeOptions{AddSpecial: true, ParseSpecial: true}, withSpecial(v, special)},
		} {
			got, err := tok.Encode(c.Text, m.opt)
			if err != nil {
				report("case %d %q: Encode(%+v): %v", i, c.Text, m.opt, err)
				continue
			}
			if !slices.Equal(got, m.want) {
				report("case %d %q: Encode(%+v)\n got %v\nwant %v", i, c.Text, m.opt, got, m.want)
			}
		}
		for _, m := range []struct {
			ids  []int32
			opt  DecodeOptions
			want *string
		}{
			{c.IDs, DecodeOptions{}, c.Detok},
			{special, DecodeOptions{RenderSpecial: true}, c.DetokSpecial},
		} {
			want := c.Text
			if m.want != nil {
				want = *m.want
			}
			got, err := tok.DecodeWith(m.ids, m.opt)
			if err != nil {
				report("case %d %q: DecodeWith(%v, %+v): %v", i, c.Text, m.ids, m.opt, err)
				continue
			}
			if v8String(got) != want {
				report("case %d: DecodeWith(%v, %+v)\n got %q\nwant %q", i, m.ids, m.opt, got, want)
			}
		}
	}
	if fails > 0 {
		t.Errorf("%s: %d of %d checks differ from llama.cpp", v.Name, fails, 6*len(v.Cases))
	} else {
		t.Logf("%s: %d cases × (4 encodings + 2 decodings) match llama.cpp", v.Name, len(v.Cases))
	}
}

// withSpecial is what llama_tokenize with add_special gives: node-llama-cpp
// cannot ask for it, so the vectors hold the add_special=false ids and
// llama.cpp's add-BOS/EOS flags and ids, and this applies llama.cpp's rule.
func withSpecial(v *parityVector, ids []int32) []int32 {
	var out []int32
	if v.AddBOS {
		out = append(out, v.BOS)
	}
	out = append(out, ids...)
	if v.AddEOS {
		out = append(out, v.EOS)
	}
	return out
}
