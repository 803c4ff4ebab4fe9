package tokenizer

import (
	"bytes"
	"fmt"
	"strings"
)

// bpeTables are what BPE encoding needs beyond the token list. Merge
// halves are numbered as "pieces" so that the merge loop compares
// integers, not strings: a piece that is a token has the token's id, any
// other text an id from len(tokens) up, in extra.
type bpeTables struct {
	extra  map[string]int32 // pieces that are not tokens
	ranks  map[uint64]int32 // (left piece, right piece) → rank
	result []int32          // rank → piece of the merged text
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// piece returns the piece id of s, or -1.
func (t *Tokenizer) piece(s []byte) int32 {
	if id, ok := t.ids[string(s)]; ok {
		return id
	}
	if id, ok := t.bpe.extra[string(s)]; ok {
		return id
	}
	return null
}

// buildBPE parses the merges as llama.cpp does: each is split at its
// first space after the first byte ("a b" → "a", "b"; a merge with no
// such space is the pair ("", "")), and the first merge of a pair gives
// its rank.
func (t *Tokenizer) buildBPE(merges []string) error {
	if len(merges) > 1<<30 {
		return vocabErr("tokenizer.ggml.merges", -1, "%d merges is too many", len(merges))
	}
	b := &t.bpe
	b.extra = map[string]int32{}
	b.ranks = make(map[uint64]int32, len(merges))
	b.result = make([]int32, len(merges))
	// intern returns the piece id of s, numbering it if new (the
	// string(s) conversions in map lookups do not allocate).
	intern := func(s []byte) int32 {
		if id := t.piece(s); id != null {
			return id
		}
		id := int32(len(t.tokens) + len(b.extra))
		b.extra[string(s)] = id
		return id
	}
	var buf []byte
	for rank, m := range merges {
		var first, second string
		if len(m) > 1 {
			if i := strings.IndexByte(m[1:], ' '); i >= 0 {
				first, second = m[:i+1], m[i+2:]
			}
		}
		buf = append(buf[:0], m...)
		l := intern(buf[:len(first)])
		r := intern(buf[len(m)-len(second):])
		k := pairKey(l, r)
		if _, dup := b.ranks[k]; !dup {
			b.ranks[k] = int32(rank)
		}
		buf = append(append(buf[:0], first...), second...)
		b.result[rank] = intern(buf)
	}
	return nil
}

// bpeSymbol is a run of the word in the linked list being merged; n == 0
// marks a symbol merged into its left neighbour. piece is the piece id of
// its text, or -1 when that text is neither a token nor part of a merge.
type bpeSymbol struct {
	start, n   int
	prev, next int
	piece      int32
}

type bpeBigram struct {
	rank        int32
	left, right int
	lp, rp      int32 // the pieces the two symbols had when queued
}

// bpeBefore orders the work queue: lowest rank first, then leftmost.
func bpeBefore(a, b bpeBigram) bool {
	return a.rank < b.rank || a.rank == b.rank && a.left < b.left
}

// bpeWork is scratch space reused across the fragments of one Encode.
type bpeWork struct {
	cpts  []rune
	cuts  []int
	next  []int
	word  []byte
	syms  []bpeSymbol
	queue bpeHeap
}

// encodeBPE appends the tokens of one text fragment: decode code points
// as llama.cpp does, cut them into words with the pre-tokenizer, encode
// each word (GPT-2 byte-level, unless the pre-tokenizer keeps raw UTF-8),
// merge each word's characters by rank, and emit the resulting symbols.
func (t *Tokenizer) encodeBPE(text string, out []int32, w *bpeWork) ([]int32, error) {
	w.cpts = w.cpts[:0]
	for i := 0; i < len(text); {
		c, n := decodeRune(text, i)
		if c > 0x10FFFF {
			return nil, fmt.Errorf("%w: bytes % X at offset %d decode to U+%X, beyond U+10FFFF", ErrInvalidText, text[i:i+n], i, c)
		}
		w.cpts = append(w.cpts, c)
		i += n
	}
	w.cuts = append(w.cuts[:0], len(w.cpts))
	for _, step := range t.pre.steps {
		w.next = w.next[:0]
		start := 0
		for _, n := range w.cuts {
			w.next = step(w.cpts[start:start+n], w.next)
			start += n
		}
		w.cuts, w.next = w.next, w.cuts
	}
	start := 0
	for _, n := range w.cuts {
		w.word = w.word[:0]
		for _, c := range w.cpts[start : start+n] {
			if t.pre.rawUTF8 {
				w.word, _ = appendRune(w.word, c)
				continue
			}
			var buf [4]byte
			enc, _ := appendRune(buf[:0], c)
			for _, b := range enc {
				w.word = append(w.word, byteToText[b]...)
			}
		}
		start += n
		out = t.mergeWord(w.word, out, w)
	}
	return out, nil
}

// mergeWord appends the tokens of one encoded word.
func (t *Tokenizer) mergeWord(word []byte, out []int32, w *bpeWork) []int32 {
	syms := w.syms[:0]
	whole := false
	if t.ignoreMerges || t.pre.newlineWords && len(bytes.Trim(word, "\n")) == 0 {
		_, whole = t.ids[string(word)]
	}
	if whole {
		syms = append(syms, bpeSymbol{start: 0, n: len(word), prev: -1, next: -1})
	} else {
		for off := 0; off < len(word); {
			n := min(utf8Len(word[off]), len(word)-off)
			i := len(syms)
			syms = append(syms, bpeSymbol{start: off, n: n, prev: i - 1, next: i + 1, piece: t.piece(word[off : off+n])})
			off += n
		}
		if len(syms) > 0 {
			syms[len(syms)-1].next = -1
		}
		q := &w.queue
		*q = (*q)[:0]
		try := func(left, right int) {
			if left < 0 || right < 0 {
				return
			}
			lp, rp := syms[left].piece, syms[right].piece
			if lp == null || rp == null {
				return
			}
			if rank, ok := t.bpe.ranks[pairKey(lp, rp)]; ok {
				q.push(bpeBigram{rank: rank, left: left, right: right, lp: lp, rp: rp})
			}
		}
		for i := 1; i < len(syms); i++ {
			try(i-1, i)
		}
		for len(*q) > 0 {
			b := q.pop()
			l, r := &syms[b.left], &syms[b.right]
			if l.n == 0 || r.n == 0 || l.piece != b.lp || r.piece != b.rp {
				continue // stale: one side has merged since
			}
			l.n += r.n
			l.piece = t.bpe.result[b.rank]
			r.n = 0
			l.next = r.next
			if r.next >= 0 {
				syms[r.next].prev = b.left
			}
			try(l.prev, b.left)
			try(b.left, l.next)
		}
	}
	w.syms = syms

	for i := 0; i < len(syms); i++ {
		if syms[i].n == 0 {
			continue
		}
		s := word[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[string(s)]; ok {
			out = append(out, id)
			continue
		}
		// llama.cpp falls back to one token per byte of the symbol's
		// text; bytes with no token are dropped.
		for j := 0; j < len(s); j++ {
			var id int32
			var ok bool
			if t.pre.rawUTF8 {
				id, ok = t.ids[byteTokenText[s[j]]]
			} else {
				id, ok = t.ids[string(s[j:j+1])]
			}
			if ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// bpeHeap is a binary heap of bigrams, the best (bpeBefore) first.
type bpeHeap []bpeBigram

func (h *bpeHeap) push(x bpeBigram) {
	q := append(*h, x)
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !bpeBefore(q[i], q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
	*h = q
}

func (h *bpeHeap) pop() bpeBigram {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < last && bpeBefore(q[l], q[m]) {
			m = l
		}
		if r := l + 1; r < last && bpeBefore(q[r], q[m]) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}
