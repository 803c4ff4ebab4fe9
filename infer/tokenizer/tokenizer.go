package tokenizer

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
)

// kind is the tokenizer algorithm.
type kind int

const (
	kindSPM kind = iota + 1 // SentencePiece-style: bigram merges by score, byte fallback
	kindBPE                 // byte-level BPE: pre-tokenizer, merges by rank
)

// null is llama.cpp's LLAMA_TOKEN_NULL: no such token.
const null int32 = -1

// Tokenizer turns text into token ids and back exactly as llama.cpp does
// for the same vocabulary. It is immutable and safe for concurrent use.
type Tokenizer struct {
	kind    kind
	model   string
	preName string
	pre     preTokenizer

	tokens []string
	scores []float32
	types  []TokenType
	attrs  []TokenAttr
	ids    map[string]int32

	special [numSpecial]int32
	eog     map[int32]bool

	addBOS, addEOS, addSpacePrefix bool
	cleanSpaces                    bool // clean up spaces before punctuation when decoding
	escapeSpaces                   bool // spaces are U+2581 in token text (SentencePiece style)
	ignoreMerges                   bool

	// specials are the tokens that text is partitioned on before the
	// tokenizer proper runs: control, user-defined and unknown tokens,
	// longest first.
	specials []int32
	spTrie   []trieNode // trie of the specials' texts; see buildTrie
	spRoot   [256]int32 // the root's edges

	spm    spmTables
	bpe    bpeTables
	merges []string // BPE merges, for Digest

	// pieceText holds every token's rendering (special tokens as their
	// text); token id's is pieceText[pieceEnd[id-1]:pieceEnd[id]].
	pieceText string
	pieceEnd  []uint32

	digestOnce sync.Once
	digest     [32]byte
}

// New validates v and builds its tokenizer, applying llama.cpp's defaults
// and rules for the model type and pre-tokenizer (the same steps, in the
// same order, as llama_vocab::load). It does not keep v.
func New(v *Vocab) (*Tokenizer, error) {
	t := &Tokenizer{model: v.Model, preName: v.Pre}
	for i := range t.special {
		t.special[i] = null
	}
	switch v.Model {
	case "llama":
		t.kind = kindSPM
		t.special[SpecialBOS], t.special[SpecialEOS], t.special[SpecialUNK] = 1, 2, 0
		t.addSpacePrefix, t.addBOS = true, true
	case "gpt2", "gemma4":
		t.kind = kindBPE
		if v.Merges == nil {
			return nil, vocabErr("tokenizer.ggml.merges", -1, "missing; a BPE vocabulary needs its merges")
		}
		if v.Model == "gemma4" {
			t.preName = "gemma4"
		} else {
			t.special[SpecialBOS], t.special[SpecialEOS] = 11, 11
		}
		pre, err := lookupPre(t.preName)
		if err != nil {
			return nil, &VocabError{Field: "tokenizer.ggml.pre", Index: -1, Err: err}
		}
		t.pre = pre
		t.cleanSpaces = !pre.noClean
		t.escapeSpaces = pre.rawUTF8
		t.ignoreMerges = pre.ignoreMerges
		t.addBOS = pre.addBOS
		if pre.noBOS {
			t.special[SpecialBOS] = null
		}
	case "no_vocab", "none", "bert", "t5", "rwkv", "plamo2", "hybriddna", "whitespace":
		return nil, &VocabError{Field: "tokenizer.ggml.model", Index: -1, Err: fmt.Errorf("%w: %q", ErrUnsupportedModel, v.Model)}
	default:
		return nil, &VocabError{Field: "tokenizer.ggml.model", Index: -1, Err: fmt.Errorf("%w: %q", ErrUnknownModel, v.Model)}
	}
	if v.AddSpacePrefix != nil {
		t.addSpacePrefix = *v.AddSpacePrefix
	}

	if err := t.loadTokens(v); err != nil {
		return nil, err
	}
	n := int32(len(t.tokens))

	for s, id := range t.special {
		if id >= n {
			t.special[s] = null
		}
	}
	for s, id := range v.SpecialIDs {
		if s >= 0 && s < numSpecial && id < uint32(n) {
			t.special[s] = int32(id)
		}
	}
	if v.AddBOS != nil {
		t.addBOS = *v.AddBOS
	}
	if v.AddEOS != nil {
		t.addEOS = *v.AddEOS
	}
	if t.pre.forceBOS {
		t.addBOS = true
	}

	t.detectSpecial()
	t.buildSpecials()
	t.buildTrie()
	if err := t.nameRules(v.Pre, v.Name, v.Architecture); err != nil {
		return nil, err
	}

	switch t.kind {
	case kindSPM:
		t.buildSPM()
	case kindBPE:
		if err := t.buildBPE(v.Merges); err != nil {
			return nil, err
		}
		t.merges = slices.Clone(v.Merges)
	}
	if err := t.buildPieces(); err != nil {
		return nil, err
	}
	return t, nil
}

// maxPiece bounds the rendering of one token. Byte-level BPE renders a
// code point outside the GPT-2 byte map as a marker that repeats the
// whole token text, so a hostile vocabulary could ask for pieces
// quadratic in its size.
const maxPiece = 1 << 20

// buildPieces renders every token as llama.cpp's token_to_piece does with
// special set (control and unknown tokens as their text), the cache that
// appendPiece reads, as llama.cpp caches them. It refuses the tokens
// llama.cpp cannot render, which make it fail to load the vocabulary:
// byte tokens too short to hold "<0xXX", and byte-level BPE tokens whose
// text decodes above U+10FFFF.
func (t *Tokenizer) buildPieces() error {
	var b []byte
	t.pieceEnd = make([]uint32, len(t.tokens))
	for id, a := range t.attrs {
		text := t.tokens[id]
		switch {
		case a&(AttrUnknown|AttrControl|AttrUserDefined) != 0:
			b = append(b, text...)
		case a&AttrNormal != 0:
			if t.kind == kindSPM || t.escapeSpaces {
				b = appendUnescaped(b, text)
				break
			}
			unknown := 0
			for i := 0; i < len(text); {
				c, n := decodeRune(text, i)
				if c > 0x10FFFF {
					return vocabErr("tokenizer.ggml.tokens", id, "text %q decodes to U+%X, beyond U+10FFFF", text, c)
				}
				if c >= rune(len(byteOfRune)) || byteOfRune[c] < 0 {
					unknown++
				}
				i += n
			}
			if unknown*(len(text)+24) > maxPiece {
				return vocabErr("tokenizer.ggml.tokens", id, "text of %d bytes renders to more than %d bytes", len(text), maxPiece)
			}
			b = appendByteLevel(b, text)
		case a&AttrByte != 0:
			if len(text) < 3 {
				return vocabErr("tokenizer.ggml.tokens", id, "byte token %q is not of the form <0xXX>", text)
			}
			b = append(b, byteOfToken(text))
		}
		if len(b) > 1<<31 {
			return vocabErr("tokenizer.ggml.tokens", id, "the tokens render to more than 2 GiB")
		}
		t.pieceEnd[id] = uint32(len(b))
	}
	t.pieceText = string(b)
	return nil
}

// loadTokens copies tokens, scores and types and derives attributes.
func (t *Tokenizer) loadTokens(v *Vocab) error {
	n := len(v.Tokens)
	if n == 0 {
		return vocabErr("tokenizer.ggml.tokens", -1, "no tokens")
	}
	if n > 1<<30 {
		return vocabErr("tokenizer.ggml.tokens", -1, "%d tokens is more than token ids can address", n)
	}
	if v.Scores != nil && len(v.Scores) < n {
		return vocabErr("tokenizer.ggml.scores", -1, "%d scores for %d tokens", len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) < n {
		return vocabErr("tokenizer.ggml.token_type", -1, "%d types for %d tokens", len(v.Types), n)
	}
	t.tokens = make([]string, n)
	t.scores = make([]float32, n)
	t.types = make([]TokenType, n)
	t.attrs = make([]TokenAttr, n)
	t.ids = make(map[string]int32, n)
	for i, text := range v.Tokens {
		if text == "" {
			// llama.cpp renames empty tokens so that they stay unique.
			text = fmt.Sprintf("[EMPTY_%d]", i)
		}
		if prev, dup := t.ids[text]; dup {
			return vocabErr("tokenizer.ggml.tokens", i, "token %q repeats token %d", text, prev)
		}
		t.ids[text] = int32(i)
		t.tokens[i] = text
		if v.Scores != nil {
			t.scores[i] = v.Scores[i]
		}
		t.types[i] = TypeNormal
		if v.Types != nil {
			t.types[i] = v.Types[i]
		}
		t.attrs[i] = attrOfType(t.types[i])
	}
	return nil
}

// Texts that llama.cpp recognises as special roles when the metadata does
// not name them, in the order this package prefers them. (llama.cpp takes
// whichever its hash map yields first; vocabularies rarely hold two.)
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eomTexts    = []string{"<|eom_id|>"}
	fimPreTexts = []string{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"}
	fimSufTexts = []string{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"}
	fimMidTexts = []string{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"}
	fimPadTexts = []string{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}
	fimRepTexts = []string{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}
	fimSepTexts = []string{"<|file_sep|>"}
	// eogTexts end generation wherever they appear in a vocabulary.
	eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
		"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
		"[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~["}
)

// detectSpecial applies llama.cpp's text-based rules: it finds EOT, EOM
// and fill-in-the-middle tokens the metadata did not name, makes them
// control tokens, marks unused control tokens, and builds the set of
// end-of-generation tokens.
func (t *Tokenizer) detectSpecial() {
	for _, r := range []struct {
		role  Special
		texts []string
	}{
		{SpecialEOT, eotTexts}, {SpecialEOM, eomTexts},
		{SpecialFIMPre, fimPreTexts}, {SpecialFIMSuf, fimSufTexts}, {SpecialFIMMid, fimMidTexts},
		{SpecialFIMPad, fimPadTexts}, {SpecialFIMRep, fimRepTexts}, {SpecialFIMSep, fimSepTexts},
	} {
		if t.special[r.role] != null {
			continue
		}
		for _, text := range r.texts {
			if id, ok := t.ids[text]; ok {
				t.special[r.role] = id
				t.attrs[id] |= AttrControl
				break
			}
		}
	}
	for id, text := range t.tokens {
		if t.attrs[id]&AttrControl != 0 && strings.Contains(text, "unused") {
			t.attrs[id] |= AttrUnused
		}
	}

	t.eog = map[int32]bool{}
	for _, s := range []Special{SpecialFIMPad, SpecialFIMRep, SpecialFIMSep} {
		if id := t.special[s]; id != null {
			t.eog[id] = true
		}
	}
	for _, text := range eogTexts {
		if id, ok := t.ids[text]; ok {
			t.eog[id] = true
			t.attrs[id] |= AttrControl
		}
	}
	// gpt-oss renders these tokens always.
	for _, text := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := t.ids[text]; ok {
			t.attrs[id] = AttrUserDefined
		}
	}
	for _, s := range []Special{SpecialEOS, SpecialEOT, SpecialEOM} {
		if id := t.special[s]; id != null {
			t.eog[id] = true
		}
	}
	// gpt-oss and Solar Open: <|end|> does not end generation there.
	has := func(text string) (int32, bool) {
		id, ok := t.ids[text]
		return id, ok && t.eog[id]
	}
	_, ret := has("<|return|>")
	_, call := has("<|call|>")
	_, calls := has("<|calls|>")
	_, flush := has("<|flush|>")
	if end, ok := has("<|end|>"); ok && (ret && (call || calls) || (call || calls) && flush) {
		delete(t.eog, end)
		t.attrs[end] = AttrUserDefined
	}
	// Gemma 4 and PaddleOCR: </s> is text there.
	if _, ok := has("<|tool_response>"); ok {
		if s, ok := has("</s>"); ok {
			delete(t.eog, s)
			t.attrs[s] = AttrNormal
		}
	}
}

// buildSpecials lists the tokens text is partitioned on, longest first.
// llama.cpp sorts with an unstable sort; ties (equal length) keep id
// order here, which matters only when two tokens of one length overlap
// in the text.
func (t *Tokenizer) buildSpecials() {
	for id, a := range t.attrs {
		if a&(AttrControl|AttrUserDefined|AttrUnknown) != 0 {
			t.specials = append(t.specials, int32(id))
		}
	}
	sort.SliceStable(t.specials, func(i, j int) bool {
		return len(t.tokens[t.specials[i]]) > len(t.tokens[t.specials[j]])
	})
}

// nameRules sets the per-token strip attributes llama.cpp derives from
// the model's name and architecture.
func (t *Tokenizer) nameRules(pre, name, arch string) error {
	set := func(text string, a TokenAttr, on bool) error {
		id, ok := t.ids[text]
		if !ok {
			return vocabErr("tokenizer.ggml.tokens", -1, "model %q needs a %q token", name, text)
		}
		if on {
			t.attrs[id] |= a
		} else {
			t.attrs[id] &^= a
		}
		return nil
	}
	lname := strings.ToLower(name)
	containsAny := func(s string, subs ...string) bool {
		for _, sub := range subs {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}
	switch {
	case containsAny(pre, "jina-v2-de", "jina-v2-es", "jina-v2-code") || containsAny(arch, "nomic-bert-moe", "jina-bert-v3"):
		if _, ok := t.ids["<mask>"]; ok {
			return set("<mask>", AttrLStrip, true)
		}
	case containsAny(lname, "phi-3", "phi3"):
		for _, id := range t.specials {
			t.attrs[id] |= AttrRStrip
		}
		if err := set("</s>", AttrRStrip, true); err != nil {
			return err
		}
		for _, text := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if err := set(text, AttrRStrip, false); err != nil {
				return err
			}
		}
	case containsAny(lname, "modern-bert"):
		if _, ok := t.ids["[MASK]"]; ok {
			return set("[MASK]", AttrLStrip, true)
		}
	}
	return nil
}

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Token returns the text of token id as the vocabulary stores it (with
// U+2581 for spaces in SentencePiece vocabularies, byte-level code points
// in BPE ones), or "" when id is out of range.
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// ID returns the id of the token whose text is text.
func (t *Tokenizer) ID(text string) (int32, bool) {
	id, ok := t.ids[text]
	return id, ok
}

// Type returns the type the vocabulary gives token id, or TypeUndefined
// when id is out of range.
func (t *Tokenizer) Type(id int32) TokenType {
	if id < 0 || int(id) >= len(t.types) {
		return TypeUndefined
	}
	return t.types[id]
}

// Attr returns the attributes the tokenizer acts on for token id, as
// llama.cpp derives them, or AttrUndefined when id is out of range.
func (t *Tokenizer) Attr(id int32) TokenAttr {
	if id < 0 || int(id) >= len(t.attrs) {
		return AttrUndefined
	}
	return t.attrs[id]
}

// Score returns the score of token id (0 when out of range).
func (t *Tokenizer) Score(id int32) float32 {
	if id < 0 || int(id) >= len(t.scores) {
		return 0
	}
	return t.scores[id]
}

// SpecialID returns the id of a special role, or -1 when the vocabulary
// has none.
func (t *Tokenizer) SpecialID(s Special) int32 {
	if s < 0 || s >= numSpecial {
		return null
	}
	return t.special[s]
}

// BOS returns the beginning-of-sequence token, or -1 when there is none.
func (t *Tokenizer) BOS() int32 { return t.special[SpecialBOS] }

// EOS returns the end-of-sequence token, or -1 when there is none.
func (t *Tokenizer) EOS() int32 { return t.special[SpecialEOS] }

// EOT returns the end-of-turn token, or -1 when there is none.
func (t *Tokenizer) EOT() int32 { return t.special[SpecialEOT] }

// AddBOS reports whether Encode with AddSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with AddSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// IsEOG reports whether id ends generation: EOS, EOT, EOM, the
// fill-in-the-middle pad, repo and file-separator tokens, and tokens whose
// text llama.cpp treats as ending a turn (<|im_end|>, <|eot_id|>,
// <end_of_turn>, <|endoftext|>, ...).
func (t *Tokenizer) IsEOG(id int32) bool { return id != null && t.eog[id] }

// EOGs returns the end-of-generation tokens, in increasing order.
func (t *Tokenizer) EOGs() []int32 {
	ids := make([]int32, 0, len(t.eog))
	for id := range t.eog {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Model returns tokenizer.ggml.model.
func (t *Tokenizer) Model() string { return t.model }

// Pre returns the pre-tokenizer name in effect ("" for none given).
func (t *Tokenizer) Pre() string { return t.preName }
