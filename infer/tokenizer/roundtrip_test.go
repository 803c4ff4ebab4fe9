package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// propertyTokenizers are the tokenizers the property tests run on: two
// built here, and shared vocabularies when ../shared is present.
func propertyTokenizers(t *testing.T) map[string]*Tokenizer {
	toks := map[string]*Tokenizer{
		"tinySPM":             mustNew(t, tinySPM()),
		"tinyBPE/gpt-2":       mustNew(t, tinyBPE("gpt-2")),
		"tinyBPE/llama-bpe":   mustNew(t, tinyBPE("llama-bpe")),
		"tinyBPE/deepseek-v3": mustNew(t, tinyBPE("deepseek-v3")),
	}
	for _, f := range []struct{ name, file, pre string }{
		{"stories260K", fileStories, ""},
		{"llama-spm", fileLlama, ""},
		{"phi-3", filePhi3, ""},
		{"gpt-2", fileGPT2, ""},
		{"gpt-neox", fileNeox, ""},
		{"falcon", fileFalcon, ""},
		{"deepseek-llm", fileDSLLM, ""},
		{"gpt-2/llama-bpe", fileGPT2, "llama-bpe"},
		{"gpt-2/gpt-4o", fileGPT2, "gpt-4o"},
	} {
		v, ok := loadShared(t, f.file)
		if !ok {
			t.Logf("%s absent: property tests run on the built-in vocabularies only", f.file)
			continue
		}
		if f.pre != "" {
			v.Pre = f.pre
		}
		toks[f.name] = mustNew(t, v)
	}
	return toks
}

// randomText draws a string from pieces that stress tokenizers: words,
// digits, white space runs, punctuation, accents, CJK, emoji, control
// characters and, when invalid is set, bytes that are not UTF-8.
func randomText(r *rand.Rand, invalid bool) string {
	parts := []string{
		"the", "The", "THE", " a", "in", "er", "on", "'s", "'LL", "hello", "world", "x",
		" ", "  ", "    ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u3000",
		"0", "7", "123", "4567", "3.14", ".", ",", "!", "?", "...", "(", ")", "<", ">", "/", "-", "_", "'", "\"", "$", "€",
		"é", "e\u0301", "Ω", "ñ", "ß", "Ж", "ش", "ש", "ก", "न", "你", "好", "日本", "한", "😀", "👍🏽", "🇺🇸", "\u200d",
		"\x00", "\x01", "\x1b", "\u007f", "\ufeff", "\ufffd",
	}
	if invalid {
		parts = append(parts, "\x80", "\xff", "\xc3", "\xe4\xb8", "\xed\xa0\x80", "\xc0\x80")
	}
	var b strings.Builder
	for n := r.IntN(12); n >= 0; n-- {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// llamaNormalize is what byte-level BPE can give back for s: each code
// point as llama.cpp decodes it, re-encoded (invalid bytes become U+FFFD,
// overlong forms shorten). ok is false when s holds a value llama.cpp
// cannot re-encode.
func llamaNormalize(s string) (string, bool) {
	var b []byte
	for i := 0; i < len(s); {
		c, n := decodeRune(s, i)
		i += n
		var ok bool
		if b, ok = appendRune(b, c); !ok {
			return "", false
		}
	}
	return string(b), true
}

// expectRoundTrip returns what Decode(Encode(s)) must be, and false when
// the vocabulary cannot represent s (doc.go, "Round trip").
func expectRoundTrip(tok *Tokenizer, s string) (string, bool) {
	for _, id := range tok.specials {
		if tok.attrs[id]&AttrUserDefined != 0 && strings.Contains(s, tok.tokens[id]) {
			if tok.kind == kindSPM || tok.attrs[id]&(AttrLStrip|AttrRStrip) != 0 {
				return "", false // a space prefix follows it, or white space is dropped
			}
		}
	}
	switch tok.kind {
	case kindSPM:
		if strings.Contains(s, "\u2581") {
			return "", false
		}
		// A byte that starts no valid UTF-8 sequence still takes as many
		// bytes as its top bits announce into one symbol; a space among
		// them has been escaped to U+2581 and comes back as that.
		for i := 0; i < len(s); {
			c, n := utf8.DecodeRuneInString(s[i:])
			if c == utf8.RuneError && n == 1 && strings.Contains(s[i+1:min(i+utf8Len(s[i]), len(s))], " ") {
				return "", false
			}
			i += n
		}
		return s, true
	default:
		if tok.escapeSpaces {
			return "", false
		}
		n, ok := llamaNormalize(s)
		if !ok {
			return "", false
		}
		if tok.cleanSpaces {
			n = string(cleanSpaces([]byte(n)))
		}
		return n, true
	}
}

// TestRoundTrip is the round-trip property: for strings a vocabulary can
// represent, Decode(Encode(s)) gives s back (after byte-level BPE's
// normalisation and clean-up, which expectRoundTrip applies).
func TestRoundTrip(t *testing.T) {
	for name, tok := range propertyTokenizers(t) {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			checked := 0
			for i := 0; i < 2000; i++ {
				s := randomText(r, tok.kind == kindSPM || i%2 == 0)
				want, ok := expectRoundTrip(tok, s)
				if !ok {
					continue
				}
				checked++
				ids, err := tok.Encode(s, EncodeOptions{})
				if err != nil {
					t.Fatalf("Encode(%q): %v", s, err)
				}
				got, err := tok.DecodeWith(ids, DecodeOptions{RenderSpecial: true})
				if err != nil {
					t.Fatalf("Decode(%v): %v", ids, err)
				}
				if got != want {
					t.Fatalf("Decode(Encode(%q)) = %q, want %q (ids %v)", s, got, want, ids)
				}
			}
			if checked < 600 {
				t.Fatalf("only %d of 2000 random strings were representable", checked)
			}
		})
	}
}

// TestStreamDecoder checks on random token sequences that the stream
// decoder emits only valid UTF-8 and, all told, the pieces' bytes with
// ill-formed sequences replaced.
func TestStreamDecoder(t *testing.T) {
	for name, tok := range propertyTokenizers(t) {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(3, 4))
			n := int32(tok.VocabSize())
			for i := 0; i < 300; i++ {
				d := tok.NewStreamDecoderWith(DecodeOptions{RenderSpecial: i%2 == 0})
				var got strings.Builder
				var raw []byte
				for k := r.IntN(40); k >= 0; k-- {
					// Favour the first 300 ids, where byte tokens live.
					id := r.Int32N(min(n, 300))
					if r.IntN(3) == 0 {
						id = r.Int32N(n)
					}
					out := d.Write(id)
					if !utf8.ValidString(out) {
						t.Fatalf("Write(%d) = %q: not valid UTF-8", id, out)
					}
					got.WriteString(out)
					p, err := tok.Piece(id, i%2 == 0)
					if err != nil {
						t.Fatal(err)
					}
					raw = append(raw, p...)
				}
				out := d.Flush()
				if !utf8.ValidString(out) {
					t.Fatalf("Flush() = %q: not valid UTF-8", out)
				}
				got.WriteString(out)
				if want := string(appendValidUTF8(nil, raw)); got.String() != want {
					t.Fatalf("stream gave %q, want %q", got.String(), want)
				}
				if d.Err() != nil {
					t.Fatal(d.Err())
				}
			}
		})
	}
}

func TestStreamDecoderHoldsBack(t *testing.T) {
	tok := mustNew(t, tinySPM())
	b := func(x byte) int32 { return 3 + int32(x) } // byte tokens start at id 3
	d := tok.NewStreamDecoder()
	steps := []struct {
		id   int32
		want string
	}{
		{b('h'), "h"},
		{b(0xE4), ""}, // 你 is E4 BD A0
		{b(0xBD), ""},
		{b(0xA0), "你"},
		{b(0xF0), ""},       // 😀 is F0 9F 98 80
		{b('x'), "\uFFFDx"}, // the sequence is broken off
		{b(0xC3), ""},
		{b(0xC3), "\uFFFD"}, // a second lead byte breaks the first
	}
	for i, s := range steps {
		if got := d.Write(s.id); got != s.want {
			t.Fatalf("step %d: Write(%d) = %q, want %q", i, s.id, got, s.want)
		}
	}
	if got := d.Flush(); got != "\uFFFD" {
		t.Fatalf("Flush() = %q, want U+FFFD for the unfinished C3", got)
	}
	if got := d.Write(int32(tok.VocabSize())); got != "" || d.Err() == nil {
		t.Fatalf("Write(out of range) = %q, Err() = %v; want \"\" and an error", got, d.Err())
	}
}

func TestAppendValidUTF8(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"é你😀", "é你😀"},
		{"\xE4\xBD", "\uFFFD"}, // one maximal subpart
		{"\xE4\xBDx", "\uFFFDx"},
		{"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate: ED then two stray bytes
		{"\xC0\x80", "\uFFFD\uFFFD"},
		{"\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"\xF0\x9F\x98", "\uFFFD"},
		{"\xFF\xFE", "\uFFFD\uFFFD"},
	} {
		if got := string(appendValidUTF8(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("appendValidUTF8(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
