package tokenizer

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
)

// TestUnicodeVersion guards the Unicode 15.1 overlay in unicode.go: when
// Go's tables move past 15.0, the overlay must be re-derived (llama.cpp's
// tables are Unicode 15.1) before this test is updated.
func TestUnicodeVersion(t *testing.T) {
	if unicode.Version != "15.0.0" {
		t.Fatalf("unicode.Version = %s, want 15.0.0: revisit unicode15_1 in unicode.go", unicode.Version)
	}
}

func TestClassOf(t *testing.T) {
	classOnce.Do(buildClasses)
	for c := rune(0); c < 0x80; c++ {
		if got, want := asciiClass[c], classTable[c]; got != want {
			t.Errorf("asciiClass[%#x] = %#x, want %#x (from Go's tables)", c, got, want)
		}
	}
	for _, tc := range []struct {
		c    rune
		want uint8
	}{
		{'a', cLetter}, {'Z', cLetter}, {'7', cNumber}, {'_', cPunct}, {'$', cSymbol}, {' ', cSeparator},
		{'\n', cControl}, {0xE9, cLetter}, {0x0301, cMark}, {0x00BD, cNumber}, {0x2028, cSeparator},
		{0x4E00, cLetter}, {0x1F600, cSymbol}, {0xD800, cControl}, {0xE000, cControl}, {0xFEFF, cControl},
		{0x0378, cUndefined}, {0x2FFC, cSymbol}, {0x31EF, cSymbol}, {0x2EBF0, cLetter}, {0x2EE5D, cLetter},
		{0x2EE5E, cUndefined}, {0x10FFFF, cUndefined}, {0x110000, cUndefined}, {0x1FFFFF, cUndefined},
	} {
		if got := classOf(tc.c); got != tc.want {
			t.Errorf("classOf(%U) = %#x, want %#x", tc.c, got, tc.want)
		}
	}
}

func TestDecodeRune(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want rune
		size int
	}{
		{"a", 'a', 1},
		{"é", 0xE9, 2},
		{"€", 0x20AC, 3},
		{"😀", 0x1F600, 4},
		{"\x80", 0xFFFD, 1},         // continuation byte alone
		{"\xC3", 0xFFFD, 1},         // cut short
		{"\xC3(", 0xFFFD, 1},        // bad continuation
		{"\xC0\x80", 0, 2},          // overlong NUL decodes, as in llama.cpp
		{"\xED\xA0\x80", 0xD800, 3}, // surrogate decodes
		{"\xF7\xBF\xBF\xBF", 0x1FFFFF, 4},
		{"\xF8\x88\x80\x80\x80", 0xFFFD, 1},
		{"\xFF", 0xFFFD, 1},
	} {
		c, n := decodeRune(tc.in, 0)
		if c != tc.want || n != tc.size {
			t.Errorf("decodeRune(%q) = %U, %d; want %U, %d", tc.in, c, n, tc.want, tc.size)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(v *Vocab)
		want  error
		field string
	}{
		{"unknown model", func(v *Vocab) { v.Model = "nope" }, ErrUnknownModel, "tokenizer.ggml.model"},
		{"WPM", func(v *Vocab) { v.Model = "bert" }, ErrUnsupportedModel, "tokenizer.ggml.model"},
		{"no tokens", func(v *Vocab) { v.Tokens, v.Types, v.Scores = nil, nil, nil }, ErrInvalidVocab, "tokenizer.ggml.tokens"},
		{"duplicate token", func(v *Vocab) { v.Tokens[5] = v.Tokens[4] }, ErrInvalidVocab, "tokenizer.ggml.tokens"},
		{"empty tokens stay unique", func(v *Vocab) { v.Tokens[5] = "[EMPTY_4]"; v.Tokens[4] = "" }, ErrInvalidVocab, "tokenizer.ggml.tokens"},
		{"short scores", func(v *Vocab) { v.Scores = v.Scores[:3] }, ErrInvalidVocab, "tokenizer.ggml.scores"},
		{"short types", func(v *Vocab) { v.Types = v.Types[:3] }, ErrInvalidVocab, "tokenizer.ggml.token_type"},
		{"short byte token", func(v *Vocab) { v.Tokens[3] = "<0" }, ErrInvalidVocab, "tokenizer.ggml.tokens"},
		{"phi-3 without </s>", func(v *Vocab) { v.Name = "Phi-3 mini"; v.Tokens[2] = "</x>" }, ErrInvalidVocab, "tokenizer.ggml.tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tinySPM()
			tc.edit(v)
			_, err := New(v)
			var ve *VocabError
			if !errors.Is(err, tc.want) || !errors.As(err, &ve) || ve.Field != tc.field {
				t.Fatalf("New: got %v, want an error wrapping %v on field %s", err, tc.want, tc.field)
			}
		})
	}
	for _, tc := range []struct {
		name string
		edit func(v *Vocab)
		want error
	}{
		{"no merges", func(v *Vocab) { v.Merges = nil }, ErrInvalidVocab},
		{"unknown pre", func(v *Vocab) { v.Pre = "no-such-pre" }, ErrUnknownPre},
		{"unsupported pre", func(v *Vocab) { v.Pre = "kimi-k2" }, ErrUnsupportedPre},
		{"token beyond U+10FFFF", func(v *Vocab) { v.Tokens[100] = "\xF7\xBF\xBF\xBF" }, ErrInvalidVocab},
		{"token rendering too long", func(v *Vocab) { v.Tokens[100] = strings.Repeat("あ", 5000) }, ErrInvalidVocab},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tinyBPE("gpt-2")
			tc.edit(v)
			if _, err := New(v); !errors.Is(err, tc.want) {
				t.Fatalf("New: got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		v                      *Vocab
		bos, eos               int32
		addBOS, addEOS, prefix bool
	}{
		{"SPM", tinySPM(), 1, 2, true, false, true},
		{"SPM metadata", func() *Vocab {
			v := tinySPM()
			v.AddBOS, v.AddEOS, v.AddSpacePrefix = boolp(false), boolp(true), boolp(false)
			v.SpecialIDs = map[Special]uint32{SpecialEOS: 5, SpecialBOS: 100000}
			return v
		}(), 1, 5, false, true, false},
		{"BPE gpt-2", func() *Vocab { v := tinyBPE("gpt-2"); v.SpecialIDs = nil; return v }(), 11, 11, false, false, false},
		{"BPE llama3", func() *Vocab { v := tinyBPE("llama-bpe"); v.SpecialIDs = nil; return v }(), 11, 11, true, false, false},
		{"BPE chatglm", func() *Vocab { v := tinyBPE("chatglm-bpe"); v.SpecialIDs = nil; return v }(), -1, 11, false, false, false},
		{"BPE gemma4 forces BOS", func() *Vocab { v := tinyBPE("gemma4"); v.AddBOS = boolp(false); return v }(), 266, 266, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := mustNew(t, tc.v)
			if tok.BOS() != tc.bos || tok.EOS() != tc.eos || tok.AddBOS() != tc.addBOS || tok.AddEOS() != tc.addEOS || tok.addSpacePrefix != tc.prefix {
				t.Errorf("got BOS %d EOS %d AddBOS %v AddEOS %v prefix %v; want %d %d %v %v %v",
					tok.BOS(), tok.EOS(), tok.AddBOS(), tok.AddEOS(), tok.addSpacePrefix, tc.bos, tc.eos, tc.addBOS, tc.addEOS, tc.prefix)
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	bpe := mustNew(t, tinyBPE("gpt-2"))
	if _, err := bpe.Encode("ok \xF5\x80\x80\x80 no", EncodeOptions{}); !errors.Is(err, ErrInvalidText) {
		t.Errorf("BPE Encode of a sequence beyond U+10FFFF: got %v, want ErrInvalidText", err)
	}
	v := tinySPM()
	v.Tokens[3+0x41] = "<0xAA>" // no <0x41> any more; <0xAA> now repeats
	v.Tokens[3+0xAA] = "<0xZZ>"
	spm := mustNew(t, v)
	if _, err := spm.Encode("A", EncodeOptions{}); !errors.Is(err, ErrNoByteToken) {
		t.Errorf("SPM Encode with a missing byte token: got %v, want ErrNoByteToken", err)
	}
	v = tinySPM()
	v.SpecialIDs = map[Special]uint32{}
	v.Tokens = v.Tokens[:1] // default BOS (1) and EOS (2) fall out of range
	v.Types, v.Scores = v.Types[:1], v.Scores[:1]
	v.AddEOS = boolp(true)
	small := mustNew(t, v)
	if _, err := small.Encode("x", EncodeOptions{AddSpecial: true}); !errors.Is(err, ErrNoSpecialToken) {
		t.Errorf("Encode with AddSpecial and no BOS: got %v, want ErrNoSpecialToken", err)
	}
	if _, err := small.Encode("x", EncodeOptions{}); !errors.Is(err, ErrNoByteToken) {
		t.Errorf("Encode without byte tokens: got %v, want ErrNoByteToken", err)
	}
	if _, err := spm.Decode([]int32{5, int32(spm.VocabSize())}); !errors.Is(err, ErrTokenRange) {
		t.Errorf("Decode of an out-of-range id: got %v, want ErrTokenRange", err)
	}
	var te *TokenError
	if _, err := spm.Decode([]int32{-1}); !errors.As(err, &te) || te.ID != -1 {
		t.Errorf("Decode of -1: got %v, want a *TokenError for -1", err)
	}
}

// TestPartition checks the special-token partition on a vocabulary with
// every strip attribute, against fragments worked out by hand from
// llama.cpp's tokenizer_st_partition.
func TestPartition(t *testing.T) {
	v := tinyBPE("gpt-2")
	v.Tokens = append(v.Tokens, "<mask>", "<ab>", "<a", "b>")
	v.Types = append(v.Types, TypeUserDefined, TypeControl, TypeUserDefined, TypeUserDefined)
	v.Pre = "jina-v2-de" // gives <mask> the LStrip attribute
	tok := mustNew(t, v)
	id := func(s string) int32 { x, _ := tok.ID(s); return x }
	frag := func(off, end int) fragment { return fragment{tok: null, off: off, end: end} }
	tokf := func(s string) fragment { return fragment{tok: id(s)} }
	for _, tc := range []struct {
		text    string
		special bool
		want    []fragment
	}{
		{"plain", false, []fragment{frag(0, 5)}},
		{"a <|user|> b", false, []fragment{frag(0, 2), tokf("<|user|>"), frag(10, 12)}},
		{"a <|endoftext|> b", false, []fragment{frag(0, 17)}},
		{"a <|endoftext|> b", true, []fragment{frag(0, 2), tokf("<|endoftext|>"), frag(15, 17)}},
		{"x \t <mask> y", false, []fragment{frag(0, 1), tokf("<mask>"), frag(10, 12)}},
		{" \t<mask>", false, []fragment{tokf("<mask>")}},
		// <ab> (control, longer) is taken first when parsing specials;
		// otherwise "<a" and "b>" split it.
		{"<ab>", true, []fragment{tokf("<ab>")}},
		{"<ab>", false, []fragment{tokf("<a"), tokf("b>")}},
		{"<a<ab>b>", true, []fragment{tokf("<a"), tokf("<ab>"), tokf("b>")}},
		{"<|user|><|user|>", false, []fragment{tokf("<|user|>"), tokf("<|user|>")}},
	} {
		got := tok.partition(tc.text, tc.special)
		if !slices.Equal(got, tc.want) {
			t.Errorf("partition(%q, %v) = %v, want %v", tc.text, tc.special, got, tc.want)
		}
	}
	// Phi-3's rule: RStrip on every special token except <unk>, <s>,
	// <|endoftext|>; </s> always.
	v = tinySPM()
	v.Name = "Phi3"
	v.Tokens = append(v.Tokens, "<|endoftext|>", "<|end|>")
	v.Types = append(v.Types, TypeControl, TypeControl)
	v.Scores = append(v.Scores, 0, 0)
	tok = mustNew(t, v)
	for _, tc := range []struct {
		text   string
		strips bool
	}{{"<|end|>", true}, {"</s>", true}, {"<|user|>", true}, {"<s>", false}, {"<unk>", false}, {"<|endoftext|>", false}} {
		x, _ := tok.ID(tc.text)
		if got := tok.Attr(x)&AttrRStrip != 0; got != tc.strips {
			t.Errorf("Phi-3 %s: RStrip = %v, want %v", tc.text, got, tc.strips)
		}
	}
	got := tok.partition("<|end|>  \n x", true)
	want := []fragment{{tok: mustID(t, tok, "<|end|>")}, frag(11, 12)}
	if !slices.Equal(got, want) {
		t.Errorf("Phi-3 partition = %v, want %v", got, want)
	}
}

func mustID(t *testing.T, tok *Tokenizer, s string) int32 {
	t.Helper()
	id, ok := tok.ID(s)
	if !ok {
		t.Fatalf("no token %q", s)
	}
	return id
}

func TestSpecialRoles(t *testing.T) {
	v := tinyBPE("gpt-2")
	for _, s := range []string{"<|im_end|>", "<|fim_prefix|>", "<fim-prefix>", "<|fim_pad|>", "<|eom_id|>", "<|return|>", "<|call|>", "<|end|>", "<|channel|>", "<ctl_unused_1>"} {
		v.Tokens = append(v.Tokens, s)
		v.Types = append(v.Types, TypeNormal)
	}
	v.Types[len(v.Types)-1] = TypeControl
	tok := mustNew(t, v)
	id := func(s string) int32 { return mustID(t, tok, s) }
	if got, want := tok.EOT(), id("<|im_end|>"); got != want {
		t.Errorf("EOT() = %d, want %d (<|im_end|>)", got, want)
	}
	if got, want := tok.SpecialID(SpecialFIMPre), id("<|fim_prefix|>"); got != want {
		t.Errorf("FIM prefix = %d, want %d: <|fim_prefix|> comes first in llama.cpp's list", got, want)
	}
	for _, tc := range []struct {
		text string
		eog  bool
		attr TokenAttr
	}{
		{"<|im_end|>", true, AttrNormal | AttrControl},
		{"<|fim_prefix|>", false, AttrNormal | AttrControl},
		{"<fim-prefix>", false, AttrNormal},
		{"<|fim_pad|>", true, AttrNormal | AttrControl},
		{"<|eom_id|>", true, AttrNormal | AttrControl},
		{"<|return|>", true, AttrNormal | AttrControl},
		{"<|end|>", false, AttrUserDefined}, // gpt-oss: <|return|> and <|call|> present
		{"<|channel|>", false, AttrUserDefined},
		{"<ctl_unused_1>", false, AttrControl | AttrUnused},
		{"<|endoftext|>", true, AttrControl},
	} {
		x := id(tc.text)
		if got := tok.IsEOG(x); got != tc.eog {
			t.Errorf("IsEOG(%s) = %v, want %v", tc.text, got, tc.eog)
		}
		if got := tok.Attr(x); got != tc.attr {
			t.Errorf("Attr(%s) = %#x, want %#x", tc.text, got, tc.attr)
		}
	}
	if tok.IsEOG(-1) {
		t.Error("IsEOG(-1) = true")
	}
}

func TestCleanSpaces(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"a .", "a."},
		{" ?", "?"},
		{"a , b ! c ?", "a, b! c?"},
		{"he said ' hi ' x", "he said'hi'x"},
		{"it 's he 'll they 're we 've I 'm don 't I 'd", "it's he 'll they're we've I'm don 't I 'd"},
		{" ' ' x", "'' x"},
		{"x ' ", "x'"},
		{"x '", "x '"},
	} {
		if got := string(cleanSpaces([]byte(tc.in))); got != tc.want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestByteOfToken(t *testing.T) {
	for _, tc := range []struct {
		text string
		want byte
	}{{"<0x0A>", 0x0A}, {"<0xff>", 0xFF}, {"<0xF", 0x0F}, {"<0x", 0}, {"<0xZZ>", 0}, {"<0x-1>", 0xFF}} {
		if got := byteOfToken(tc.text); got != tc.want {
			t.Errorf("byteOfToken(%q) = %#x, want %#x", tc.text, got, tc.want)
		}
	}
}

func TestPreTokenizersKnown(t *testing.T) {
	names := PreTokenizers()
	for _, n := range []string{"default", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "falcon", "starcoder", "refact", "mpt", "smollm", "command-r"} {
		if !slices.Contains(names, n) {
			t.Errorf("PreTokenizers() lacks %q", n)
		}
		if _, err := New(tinyBPE(n)); err != nil {
			t.Errorf("New with pre %q: %v", n, err)
		}
	}
	for _, n := range unsupportedPre {
		if _, ok := preTokenizers[n]; ok {
			t.Errorf("%q is both supported and unsupported", n)
		}
	}
}

// TestSplitters checks each splitter on strings whose pieces are worked
// out from the regex by hand; TestParity checks them against llama.cpp.
func TestSplitters(t *testing.T) {
	pieces := func(steps []splitter, s string) []string {
		c := []rune(s)
		cuts := []int{len(c)}
		for _, st := range steps {
			var next []int
			start := 0
			for _, n := range cuts {
				next = st(c[start:start+n], next)
				start += n
			}
			cuts = next
		}
		var out []string
		start := 0
		for _, n := range cuts {
			out = append(out, string(c[start:start+n]))
			start += n
		}
		return out
	}
	for _, tc := range []struct {
		pre, in string
		want    []string
	}{
		{"gpt-2", "Hello world's  12345 ?!\n\n x", []string{"Hello", " world", "'s", " ", " 12345", " ?!", "\n\n", " x"}},
		{"llama-bpe", "Hello WORLD'S 12345\r\n\n  x", []string{"Hello", " WORLD", "'S", " ", "123", "45", "\r\n\n", " ", " x"}},
		{"qwen2", "ab12!\n", []string{"ab", "1", "2", "!\n"}},
		{"starcoder", "x123 y", []string{"x", "1", "2", "3", " y"}},
		{"falcon", "a+b=12345", []string{"a", "+", "b", "=", "123", "45"}},
		{"default", "12345678", []string{"123", "456", "78"}},
		{"deepseek-coder", "a1b2 你好\n", []string{"a", "1", "b", "2", " ", "你好", "\n"}},
		{"deepseek-llm", "Hi!  ", []string{"Hi", "!", "  "}},
		{"gpt-4o", "HTTPServer isOK 1234", []string{"HTTPServer", " is", "OK", " ", "123", "4"}},
		{"tekken", "ABC déf", []string{"ABC", " déf"}},
		{"poro-chat", "Hei, maailma. (x)", []string{"Hei", ",", " maailma", ". (", "x", ")"}},
		{"jais-2", "a" + strings.Repeat(" ", 7) + "b", []string{"a", "    ", "  ", " b"}},
	} {
		p, err := lookupPre(tc.pre)
		if err != nil {
			t.Fatal(err)
		}
		if got := pieces(p.steps, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%s: split(%q) = %q, want %q", tc.pre, tc.in, got, tc.want)
		}
	}
}

// TestConcurrentUse encodes and decodes from several goroutines at once;
// run with -race it checks that a Tokenizer is safe for concurrent use
// (Digest is computed lazily, here from several goroutines at once).
func TestConcurrentUse(t *testing.T) {
	toks := []*Tokenizer{mustNew(t, tinySPM()), mustNew(t, tinyBPE("llama-bpe")), mustNew(t, tinyBPE("deepseek-llm"))}
	texts := []string{"Hello the world", "café 你好 😀 123", "<|user|> in er on\n\n", "ÀÉÎ déjà vu"}
	want := make([][][]int32, len(toks))
	for i, tok := range toks {
		for _, s := range texts {
			ids, err := tok.Encode(s, EncodeOptions{ParseSpecial: true})
			if err != nil {
				t.Fatal(err)
			}
			want[i] = append(want[i], ids)
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				i := (g + k) % len(toks)
				tok := toks[i]
				tok.Digest()
				for j, s := range texts {
					ids, err := tok.Encode(s, EncodeOptions{ParseSpecial: true})
					if err != nil || !slices.Equal(ids, want[i][j]) {
						errs <- fmt.Errorf("goroutine %d: Encode(%q) = %v, %v; want %v", g, s, ids, err, want[i][j])
						return
					}
					if _, err := tok.Decode(ids); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestAddAndRemoveSpecial checks BOS and EOS around Encode and Decode
// against llama.cpp's rules: AddSpecial adds both where the vocabulary says
// so; RemoveSpecial drops them again, and a removed BOS leaves
// SentencePiece's leading space in place.
func TestAddAndRemoveSpecial(t *testing.T) {
	v := tinySPM()
	v.AddEOS = boolp(true)
	tok := mustNew(t, v)
	a := mustID(t, tok, "▁a")
	for _, tc := range []struct {
		text string
		opt  EncodeOptions
		want []int32
	}{
		{"a", EncodeOptions{}, []int32{a}},
		{"a", EncodeOptions{AddSpecial: true}, []int32{1, a, 2}},
		{"", EncodeOptions{AddSpecial: true}, []int32{1, 2}},
		{"<s>a", EncodeOptions{AddSpecial: true, ParseSpecial: true}, []int32{1, 1, a, 2}},
	} {
		got, err := tok.Encode(tc.text, tc.opt)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q, %+v) = %v, %v; want %v", tc.text, tc.opt, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		ids  []int32
		opt  DecodeOptions
		want string
	}{
		{[]int32{a}, DecodeOptions{}, "a"},
		{[]int32{1, a, 2}, DecodeOptions{}, " a"},
		{[]int32{1, a, 2}, DecodeOptions{RenderSpecial: true}, "<s> a</s>"},
		{[]int32{1, a, 2}, DecodeOptions{RemoveSpecial: true}, " a"},
		{[]int32{1, a, 2}, DecodeOptions{RemoveSpecial: true, RenderSpecial: true}, " a"},
		{[]int32{a, 2}, DecodeOptions{RemoveSpecial: true, RenderSpecial: true}, "a"},
	} {
		got, err := tok.DecodeWith(tc.ids, tc.opt)
		if err != nil || got != tc.want {
			t.Errorf("DecodeWith(%v, %+v) = %q, %v; want %q", tc.ids, tc.opt, got, err, tc.want)
		}
	}
}
