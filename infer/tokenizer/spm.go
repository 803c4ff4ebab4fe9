package tokenizer

import "fmt"

// spmTables are what SentencePiece-style encoding needs beyond the token
// list.
type spmTables struct {
	// byteTok[b] is the token byte fallback uses for byte b: <0xXX>, or
	// else the one-byte token; -1 when the vocabulary has neither.
	byteTok [256]int32
}

func (t *Tokenizer) buildSPM() {
	for b := 0; b < 256; b++ {
		t.spm.byteTok[b] = null
		if id, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
			t.spm.byteTok[b] = id
		} else if id, ok := t.ids[string([]byte{byte(b)})]; ok {
			t.spm.byteTok[b] = id
		}
	}
}

// spmSymbol is a run of text[start:start+n] in the linked list of
// symbols being merged; n == 0 marks a symbol merged into its left
// neighbour.
type spmSymbol struct {
	start, n   int
	prev, next int
}

// spmBigram is a candidate merge of two adjacent symbols into the token
// whose text they spell together.
type spmBigram struct {
	score       float32
	left, right int
	size        int
}

// spmBefore orders the work queue: highest score first, then leftmost.
func spmBefore(a, b spmBigram) bool {
	return a.score > b.score || a.score == b.score && a.left < b.left
}

// encodeSPM appends the tokens of text (spaces already escaped as U+2581)
// as llama.cpp's SentencePiece tokenizer finds them: split into UTF-8
// characters (judged by lead byte alone), repeatedly merge the adjacent
// pair whose concatenation is the highest-scoring token, then emit each
// remaining symbol as its token or, failing that, as byte tokens.
func (t *Tokenizer) encodeSPM(text string, out []int32) ([]int32, error) {
	syms := make([]spmSymbol, 0, len(text))
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		i := len(syms)
		syms = append(syms, spmSymbol{start: off, n: n, prev: i - 1, next: i + 1})
		off += n
	}
	if len(syms) == 0 {
		return out, nil
	}
	syms[len(syms)-1].next = -1

	var q heap[spmBigram]
	q.before = spmBefore
	try := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		l := syms[left]
		s := text[l.start : l.start+l.n+syms[right].n]
		if id, ok := t.ids[s]; ok {
			q.push(spmBigram{score: t.scores[id], left: left, right: right, size: len(s)})
		}
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for q.len() > 0 {
		b := q.pop()
		l, r := &syms[b.left], &syms[b.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != b.size {
			continue // stale: one side has merged since
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = b.left
		}
		try(l.prev, b.left)
		try(b.left, l.next)
	}

	for i := 0; i != -1; i = syms[i].next {
		s := text[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[s]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(s); j++ {
			id := t.spm.byteTok[s[j]]
			if id == null {
				return nil, fmt.Errorf("%w: byte 0x%02X has no <0x%02X> token", ErrNoByteToken, s[j], s[j])
			}
			out = append(out, id)
		}
	}
	return out, nil
}

// heap is a binary heap ordered by before (the first element is the one
// no other is before).
type heap[T any] struct {
	items  []T
	before func(a, b T) bool
}

func (h *heap[T]) len() int { return len(h.items) }

func (h *heap[T]) push(x T) {
	h.items = append(h.items, x)
	i := len(h.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h.before(h.items[i], h.items[p]) {
			break
		}
		h.items[i], h.items[p] = h.items[p], h.items[i]
		i = p
	}
}

func (h *heap[T]) pop() T {
	top := h.items[0]
	last := len(h.items) - 1
	h.items[0] = h.items[last]
	h.items = h.items[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && h.before(h.items[l], h.items[m]) {
			m = l
		}
		if r < last && h.before(h.items[r], h.items[m]) {
			m = r
		}
		if m == i {
			break
		}
		h.items[i], h.items[m] = h.items[m], h.items[i]
		i = m
	}
	return top
}
