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
		if id, ok := t.ids[byteTokenText[b]]; ok {
			t.spm.byteTok[b] = id
		} else if id, ok := t.ids[string([]byte{byte(b)})]; ok {
			t.spm.byteTok[b] = id
		}
	}
}

// byteTokenText[b] is the text of byte b's fallback token, "<0xXX>" with
// upper-case hex digits.
var byteTokenText = func() [256]string {
	var t [256]string
	for b := range t {
		t[b] = fmt.Sprintf("<0x%02X>", b)
	}
	return t
}()

// spmSymbol is a run of text[start:start+n] in the linked list of
// symbols being merged; n == 0 marks a symbol merged into its left
// neighbour.
type spmSymbol struct {
	start, n   int32
	prev, next int32
}

// spmBigram is a candidate merge of two adjacent symbols into the token
// whose text they spell together.
type spmBigram struct {
	score       float32
	left, right int32
	size        int32
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
	if len(text) > 1<<30 {
		return nil, fmt.Errorf("%w: %d bytes is too long to encode at once", ErrInvalidText, len(text))
	}
	syms := make([]spmSymbol, 0, len(text))
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		i := int32(len(syms))
		syms = append(syms, spmSymbol{start: int32(off), n: int32(n), prev: i - 1, next: i + 1})
		off += n
	}
	if len(syms) == 0 {
		return out, nil
	}
	syms[len(syms)-1].next = -1

	q := make(spmHeap, 0, len(syms))
	try := func(left, right int32) {
		if left < 0 || right < 0 {
			return
		}
		l := syms[left]
		s := text[l.start : l.start+l.n+syms[right].n]
		if id, ok := t.ids[s]; ok {
			q.push(spmBigram{score: t.scores[id], left: left, right: right, size: int32(len(s))})
		}
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		try(i-1, i)
	}
	for len(q) > 0 {
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

	for i := int32(0); i != -1; i = syms[i].next {
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

// spmHeap is a binary heap of bigrams, the best (spmBefore) first.
type spmHeap []spmBigram

func (h *spmHeap) push(x spmBigram) {
	q := append(*h, x)
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !spmBefore(q[i], q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
	*h = q
}

func (h *spmHeap) pop() spmBigram {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < last && spmBefore(q[l], q[m]) {
			m = l
		}
		if r := l + 1; r < last && spmBefore(q[r], q[m]) {
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
