package tokenizer

import (
	"fmt"
	"slices"
	"strings"
)

// EncodeOptions are llama_tokenize's two flags.
type EncodeOptions struct {
	// AddSpecial adds BOS and EOS where the vocabulary says to
	// (tokenizer.ggml.add_bos_token and add_eos_token, or llama.cpp's
	// default for the model type and pre-tokenizer when absent).
	AddSpecial bool
	// ParseSpecial recognises the text of control tokens (<s>,
	// <|im_start|>, ...) as those tokens. User-defined tokens are always
	// recognised, as in llama.cpp.
	ParseSpecial bool
}

// Encode tokenizes text exactly as llama.cpp's llama_tokenize(text,
// add_special, parse_special) does. Text is bytes: invalid UTF-8 is
// tokenized as llama.cpp tokenizes it (SentencePiece falls back to byte
// tokens; byte-level BPE reads each invalid byte as U+FFFD). It fails only
// when a needed token is missing (BOS or EOS with AddSpecial, a byte
// token for SentencePiece byte fallback) or, for BPE, when text holds a
// sequence that decodes above U+10FFFF.
func (t *Tokenizer) Encode(text string, opt EncodeOptions) ([]int32, error) {
	out := make([]int32, 0, len(text)/3+2)
	if opt.AddSpecial && t.addBOS {
		if t.special[SpecialBOS] == null {
			return nil, fmt.Errorf("%w: the vocabulary asks for BOS but has none", ErrNoSpecialToken)
		}
		out = append(out, t.special[SpecialBOS])
	}
	var frags []fragment
	if text != "" {
		frags = t.partition(text, opt.ParseSpecial)
	}
	var err error
	switch t.kind {
	case kindSPM:
		prevSpecial := true
		for _, f := range frags {
			if f.tok != null {
				out = append(out, f.tok)
				prevSpecial = true
				continue
			}
			s := text[f.off:f.end]
			if t.addSpacePrefix && prevSpecial {
				s = " " + s
			}
			if out, err = t.encodeSPM(strings.ReplaceAll(s, " ", "\u2581"), out); err != nil {
				return nil, err
			}
			prevSpecial = false
		}
	case kindBPE:
		var w bpeWork
		for _, f := range frags {
			if f.tok != null {
				out = append(out, f.tok)
				continue
			}
			s := text[f.off:f.end]
			if t.escapeSpaces {
				s = strings.ReplaceAll(s, " ", "\u2581")
			}
			if out, err = t.encodeBPE(s, out, &w); err != nil {
				return nil, err
			}
		}
	}
	if opt.AddSpecial && t.addEOS {
		if t.special[SpecialEOS] == null {
			return nil, fmt.Errorf("%w: the vocabulary asks for EOS but has none", ErrNoSpecialToken)
		}
		out = append(out, t.special[SpecialEOS])
	}
	return out, nil
}

// fragment is a piece of the text to encode: a special token (tok), or
// text[off:end] to run the tokenizer on (tok == null).
type fragment struct {
	tok      int32
	off, end int
}

// trieNode is a node of the trie of special-token texts.
type trieNode struct {
	next map[byte]int32
	// ends lists the ranks (indexes into Tokenizer.specials) of the
	// special tokens whose text ends here.
	ends []int32
}

// isCSpace is C's isspace in the "C" locale, which llama.cpp's
// strip attributes use.
func isCSpace(b byte) bool { return b == ' ' || b >= '\t' && b <= '\r' }

// partition splits text on special tokens as llama.cpp's
// tokenizer_st_partition does. Tokens are taken longest first; for each,
// its leftmost non-overlapping occurrences inside text not yet taken
// become that token; white space next to a token with the LStrip or
// RStrip attribute is dropped. Control and unknown tokens are skipped
// unless parseSpecial is set.
//
// llama.cpp rescans the text once per special token. This finds every
// occurrence of every special token in one pass over a trie, then replays
// llama.cpp's order on the occurrences, which gives the same fragments.
func (t *Tokenizer) partition(text string, parseSpecial bool) []fragment {
	// occ[r] lists the start offsets of special rank r, in text order.
	var occ map[int32][]int
	for i := 0; i < len(text) && len(t.spTrie) > 0; i++ {
		n := t.spRoot[text[i]]
		for j := i + 1; n != 0; j++ {
			node := &t.spTrie[n]
			for _, r := range node.ends {
				if !parseSpecial && t.attrs[t.specials[r]]&(AttrControl|AttrUnknown) != 0 {
					continue
				}
				if occ == nil {
					occ = map[int32][]int{}
				}
				occ[r] = append(occ[r], i)
			}
			if j >= len(text) {
				break
			}
			n = node.next[text[j]]
		}
	}
	if occ == nil {
		return []fragment{{tok: null, off: 0, end: len(text)}}
	}
	ranks := make([]int32, 0, len(occ))
	for r := range occ {
		ranks = append(ranks, r)
	}
	slices.Sort(ranks)

	const (
		free = iota
		stripped
		taken
	)
	state := make([]uint8, len(text))
	tokAt := map[int]int32{}
	for _, r := range ranks {
		starts := occ[r]
		id := t.specials[r]
		size := len(t.tokens[id])
		a := t.attrs[id]
		next := 0
	scan:
		for _, m := range starts {
			if m < next {
				continue
			}
			for k := m; k < m+size; k++ {
				if state[k] != free {
					continue scan
				}
			}
			for k := m; k < m+size; k++ {
				state[k] = taken
			}
			tokAt[m] = id
			next = m + size
			if a&AttrLStrip != 0 {
				for k := m - 1; k >= 0 && state[k] == free && isCSpace(text[k]); k-- {
					state[k] = stripped
				}
			}
			if a&AttrRStrip != 0 {
				for next < len(text) && state[next] == free && isCSpace(text[next]) {
					state[next] = stripped
					next++
				}
			}
		}
	}

	var frags []fragment
	for i := 0; i < len(text); {
		switch state[i] {
		case taken:
			id := tokAt[i]
			frags = append(frags, fragment{tok: id})
			i += len(t.tokens[id])
		case stripped:
			i++
		default:
			j := i
			for j < len(text) && state[j] == free {
				j++
			}
			frags = append(frags, fragment{tok: null, off: i, end: j})
			i = j
		}
	}
	return frags
}

// buildTrie builds the trie of special-token texts. Node 0 is the root;
// no edge leads back to it, so 0 also means "no edge".
func (t *Tokenizer) buildTrie() {
	if len(t.specials) == 0 {
		return
	}
	t.spTrie = []trieNode{{}}
	for r, id := range t.specials {
		text := t.tokens[id]
		n := t.spRoot[text[0]]
		if n == 0 {
			n = int32(len(t.spTrie))
			t.spRoot[text[0]] = n
			t.spTrie = append(t.spTrie, trieNode{})
		}
		for i := 1; i < len(text); i++ {
			node := &t.spTrie[n]
			next := node.next[text[i]]
			if next == 0 {
				if node.next == nil {
					node.next = map[byte]int32{}
				}
				next = int32(len(t.spTrie))
				node.next[text[i]] = next
				t.spTrie = append(t.spTrie, trieNode{})
			}
			n = next
		}
		t.spTrie[n].ends = append(t.spTrie[n].ends, int32(r))
	}
}
