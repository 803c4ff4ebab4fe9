package tokenizer

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/muserhq/muser/infer/gguf"
)

var (
	fuzzOnce sync.Once
	fuzzToks []*Tokenizer
)

// fuzzTokenizers are built once per process: the built-in SentencePiece
// vocabulary, the built-in BPE vocabulary under every pre-tokenizer, and
// stories260K and GPT-2 when ../shared is present.
func fuzzTokenizers(t testing.TB) []*Tokenizer {
	fuzzOnce.Do(func() {
		fuzzToks = append(fuzzToks, mustNew(t, tinySPM()))
		for _, pre := range PreTokenizers() {
			fuzzToks = append(fuzzToks, mustNew(t, tinyBPE(pre)))
		}
		for _, f := range []string{fileStories, fileGPT2} {
			if v, ok := loadShared(t, f); ok {
				fuzzToks = append(fuzzToks, mustNew(t, v))
			}
		}
	})
	return fuzzToks
}

// checkStream decodes ids with a stream decoder and checks that every
// piece of output is valid UTF-8 and that the whole is the tokens' bytes
// with ill-formed sequences replaced.
func checkStream(t *testing.T, tok *Tokenizer, ids []int32, special bool) {
	d := tok.NewStreamDecoderWith(DecodeOptions{RenderSpecial: special})
	var got strings.Builder
	var raw []byte
	for _, id := range ids {
		out := d.Write(id)
		if !utf8.ValidString(out) {
			t.Fatalf("StreamDecoder.Write(%d) = %q: invalid UTF-8", id, out)
		}
		got.WriteString(out)
		if p, err := tok.Piece(id, special); err == nil {
			raw = append(raw, p...)
		}
	}
	out := d.Flush()
	if !utf8.ValidString(out) {
		t.Fatalf("StreamDecoder.Flush() = %q: invalid UTF-8", out)
	}
	got.WriteString(out)
	if want := string(appendValidUTF8(nil, raw)); got.String() != want {
		t.Fatalf("stream of %v = %q, want %q", ids, got.String(), want)
	}
}

// FuzzEncode encodes arbitrary bytes with one of the fuzz tokenizers (sel
// picks it): Encode must not panic, must return ids in range, must round-trip where the
// vocabulary can represent the text, and the stream decoder must never
// emit invalid UTF-8.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", "Hello world", " the  in\n\n\t1234 café 你好 😀", "<s>a</s><|endoftext|><|user|>", "\xff\xc3 \xe4\xb8", "▁x ' 's"} {
		f.Add(s, uint8(0)) // tinySPM
		f.Add(s, uint8(1)) // tinyBPE with the first pre-tokenizer
	}
	f.Fuzz(func(t *testing.T, text string, sel uint8) {
		toks := fuzzTokenizers(t)
		tok := toks[int(sel)%len(toks)]
		for _, opt := range []EncodeOptions{{}, {ParseSpecial: true}, {AddSpecial: true, ParseSpecial: true}} {
			ids, err := tok.Encode(text, opt)
			if err != nil {
				if tok.kind == kindBPE && errors.Is(err, ErrInvalidText) {
					return
				}
				t.Fatalf("%s/%s: Encode(%q, %+v): %v", tok.model, tok.preName, text, opt, err)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d, vocabulary has %d", text, id, tok.VocabSize())
				}
			}
			if opt == (EncodeOptions{}) {
				if want, ok := expectRoundTrip(tok, text); ok {
					got, err := tok.DecodeWith(ids, DecodeOptions{RenderSpecial: true})
					if err != nil || got != want {
						t.Fatalf("%s/%s: Decode(Encode(%q)) = %q, %v; want %q", tok.model, tok.preName, text, got, err, want)
					}
				}
			}
			checkStream(t, tok, ids, opt.ParseSpecial)
		}
	})
}

// FuzzDecode decodes arbitrary id sequences, in range or not: Decode must
// not panic, must fail exactly when an id is out of range, and the stream
// decoder must never emit invalid UTF-8.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0, 1, 0, 2, 0x01, 0x10})
	f.Add([]byte{0xe4 + 3, 0, 0xbd + 3, 0, 0xa0 + 3, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, tok := range fuzzTokenizers(t) {
			var ids []int32
			bad := false
			for i := 0; i+2 <= len(data); i += 2 {
				id := int32(binary.LittleEndian.Uint16(data[i:]))
				if id >= 0xF000 {
					id = -int32(id & 0xFF) // some negative ids
				} else {
					id %= int32(tok.VocabSize()) + 8 // and a few past the end
				}
				bad = bad || id < 0 || int(id) >= tok.VocabSize()
				ids = append(ids, id)
			}
			for _, opt := range []DecodeOptions{{}, {RenderSpecial: true, RemoveSpecial: true}} {
				_, err := tok.DecodeWith(ids, opt)
				if (err != nil) != bad || err != nil && !errors.Is(err, ErrTokenRange) {
					t.Fatalf("DecodeWith(%v) error = %v, want one only for out-of-range ids (%v)", ids, err, bad)
				}
			}
			checkStream(t, tok, ids, len(data)%2 == 1)
		}
	})
}

// FuzzNew builds vocabularies from arbitrary bytes: New must not panic, and
// a tokenizer it accepts must encode and decode without panicking.
func FuzzNew(f *testing.F) {
	f.Add([]byte("\x00a\x00b\x00ab\x00<s>\x00\x01\x00\x02"), "ab a b", uint8(0))
	f.Add([]byte("\x00a\x00b\x00ab\x00a b\x00Ġ\x00<0x41>"), "ab a b", uint8(1))
	f.Add([]byte("\x00x\x00\x00x\x00<mask>"), "x <mask> x", uint8(2))
	pres := PreTokenizers()
	f.Fuzz(func(t *testing.T, data []byte, text string, sel uint8) {
		parts := strings.Split(string(data), "\x00")
		v := &Vocab{Model: []string{"llama", "gpt2", "gemma4"}[int(sel)%3], Pre: pres[int(sel)%len(pres)]}
		for i, p := range parts {
			if i%5 == 4 {
				v.Merges = append(v.Merges, p)
			} else {
				v.Tokens = append(v.Tokens, p)
				v.Types = append(v.Types, TokenType(len(p)%8))
				v.Scores = append(v.Scores, float32(len(p)*(i%3)))
			}
		}
		if v.Merges == nil {
			v.Merges = []string{}
		}
		if sel&8 != 0 {
			v.Name = "phi3"
		}
		if sel&16 != 0 {
			v.AddEOS = boolp(true)
		}
		tok, err := New(v)
		if err != nil {
			if !errors.Is(err, ErrInvalidVocab) {
				t.Fatalf("New: %v, want only ErrInvalidVocab", err)
			}
			return
		}
		for _, opt := range []EncodeOptions{{}, {AddSpecial: true, ParseSpecial: true}} {
			ids, err := tok.Encode(text, opt)
			if err != nil {
				if errors.Is(err, ErrInvalidText) || errors.Is(err, ErrNoByteToken) || errors.Is(err, ErrNoSpecialToken) {
					continue
				}
				t.Fatalf("Encode: %v", err)
			}
			if _, err := tok.DecodeWith(ids, DecodeOptions{RenderSpecial: true}); err != nil {
				t.Fatalf("Decode(%v): %v", ids, err)
			}
			checkStream(t, tok, ids, true)
		}
		tok.Digest()
	})
}

// FuzzFromGGUF reads arbitrary GGUF files that the gguf package accepts:
// VocabFromGGUF and New must not panic.
func FuzzFromGGUF(f *testing.F) {
	// Small seeds: the fuzzer minimises every input that finds new
	// coverage, and that costs time in proportion to its size.
	for _, v := range []*Vocab{
		{Model: "llama", Tokens: []string{"<unk>", "<s>", "</s>", "▁", "a", "▁a", "<0x62>"}, Types: []TokenType{2, 3, 3, 1, 1, 1, 6}},
		{Model: "gpt2", Pre: "llama-bpe", Tokens: []string{"a", "b", "ab", "Ġ", "<|eot_id|>"}, Merges: []string{"a b"}},
	} {
		b := gguf.NewBuilder()
		b.Set(KeyModel, v.Model)
		if v.Pre != "" {
			b.Set(KeyPre, v.Pre)
		}
		b.SetArray(KeyTokens, v.Tokens)
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
		b.Set(SpecialBOS.Key(), uint32(1))
		data, err := b.Bytes()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := gguf.Parse(data)
		if err != nil {
			return
		}
		tok, err := FromGGUF(file.Meta)
		if err != nil {
			return
		}
		if ids, err := tok.Encode("Hello the world 123", EncodeOptions{AddSpecial: true}); err == nil {
			if _, err := tok.Decode(ids); err != nil {
				t.Fatalf("Decode(%v): %v", ids, err)
			}
		}
	})
}
