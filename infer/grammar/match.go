package grammar

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"github.com/muserhq/muser/infer/sample"
)

// Vocab is what Compile needs of a tokenizer (*tokenizer.Tokenizer
// satisfies it).
type Vocab interface {
	// VocabSize returns the number of tokens.
	VocabSize() int
	// Piece returns the bytes a token adds to the output; control tokens
	// render as "" when special is false.
	Piece(id int32, special bool) (string, error)
	// ID returns the token whose text is text.
	ID(text string) (int32, bool)
	// IsEOG reports whether id ends generation.
	IsEOG(id int32) bool
}

// Bounds on a compiled grammar's state, so that a pathological grammar
// fails a request instead of exhausting memory.
const (
	maxNodes     = 1 << 21 // distinct stack frames
	maxSets      = 1 << 16 // distinct parser states
	maskCacheMem = 64 << 20
)

// code element kinds beyond elemKind.
const elEnd elemKind = 255

// celem is an element of the flattened grammar.
type celem struct {
	kind elemKind
	el   *elem // elChar: the class
	rule int32 // elRule
	tok  int32 // elToken
}

// node is one frame of a parser stack: a position in code and the frame
// below it (-1 for none). A stack's top frame points at a character class
// or a token; the frames below are return positions.
type node struct{ pos, parent int32 }

// set is a parser state: the stacks still alive, and whether the input so
// far is a complete sentence.
type set struct {
	nodes  []int32 // sorted node ids
	accept bool
	ascii  *[128]int32 // advance cache by ASCII code point: id+1, 0 unknown
	other  map[rune]int32
	toks   map[int32]int32 // advance cache by control token
	mask   sample.TokenSet // allowed tokens with no partial character pending
}

// trieNode is a node of the token trie: the tokens whose piece ends here
// and the edges by next byte.
type trieNode struct {
	toks  []int32
	edges []trieEdge
}

type trieEdge struct {
	b     byte
	child int32
}

// Compiled is a grammar bound to a vocabulary: its flattened rules, the
// vocabulary's token trie, and caches of parser states, their transitions
// and their allowed-token sets, which every Matcher started from it
// shares. It is safe for concurrent use.
type Compiled struct {
	g     *Grammar
	code  []celem
	alts  [][]int32 // per rule, the start of each alternative in code
	vocab int
	eog   []int32
	trie  []trieNode

	mu       sync.Mutex
	nodes    []node
	nodeIdx  map[uint64]int32
	sets     []set
	setIdx   map[string]int32
	start    int32
	masks    int // cached masks
	maxMasks int
	seen     map[uint64]struct{} // expand's visited frames, reused
	buf      []int32
	keyBuf   []byte
	stateErr error
}

// Compile binds g to a vocabulary. A token reference resolves to a
// control token (one that renders as nothing, such as [TOOL_CALLS] or
// <|im_end|>) matched as that one token; a reference to a token that
// renders as text, or (by text) to no token at all, matches its text
// character by character, so <"<tool_call>"> works whether or not the
// vocabulary has such a token. A reference by id outside the vocabulary
// is an error.
func Compile(g *Grammar, v Vocab) (*Compiled, error) {
	c := &Compiled{g: g, nodeIdx: map[uint64]int32{}, setIdx: map[string]int32{}, seen: map[uint64]struct{}{}}
	if v != nil {
		c.vocab = v.VocabSize()
	}
	c.alts = make([][]int32, len(g.rules))
	for ri, r := range g.rules {
		for _, alt := range r.alts {
			c.alts[ri] = append(c.alts[ri], int32(len(c.code)))
			for i := range alt {
				e := &alt[i]
				switch e.kind {
				case elChar:
					c.code = append(c.code, celem{kind: elChar, el: e})
				case elRule:
					c.code = append(c.code, celem{kind: elRule, rule: int32(e.rule)})
				case elToken:
					if err := c.token(e, r.name, v); err != nil {
						return nil, err
					}
				}
			}
			c.code = append(c.code, celem{kind: elEnd})
		}
	}
	if v != nil {
		c.trie = []trieNode{{}}
		for id := int32(0); int(id) < c.vocab; id++ {
			if v.IsEOG(id) {
				c.eog = append(c.eog, id)
				continue
			}
			p, err := v.Piece(id, false)
			if err != nil {
				return nil, err
			}
			if p == "" {
				continue // a control token: only a token reference allows it
			}
			c.insert(p, id)
		}
		c.maxMasks = maskCacheMem / max(1, (c.vocab+63)/64*8)
	}
	c.sets = []set{{}} // 0: dead
	nodes, accept := c.expandAll(c.alts[g.root], -1)
	start, err := c.intern(nodes, accept)
	if err != nil {
		return nil, err
	}
	c.start = start
	return c, nil
}

// token appends the code for token reference e.
func (c *Compiled) token(e *elem, rule string, v Vocab) error {
	text := e.tokTxt
	if e.tokID >= 0 {
		if v == nil || int(e.tokID) >= c.vocab {
			return &RuleError{Rule: rule, Reason: fmt.Sprintf("refers to token %d, outside the vocabulary of %d", e.tokID, c.vocab)}
		}
		p, err := v.Piece(e.tokID, false)
		if err != nil {
			return err
		}
		if p == "" {
			c.code = append(c.code, celem{kind: elToken, tok: e.tokID})
			return nil
		}
		text = p
	} else if v != nil {
		if id, ok := v.ID(text); ok {
			if p, err := v.Piece(id, false); err == nil && p == "" {
				c.code = append(c.code, celem{kind: elToken, tok: id})
				return nil
			}
		}
	}
	for _, r := range text {
		c.code = append(c.code, celem{kind: elChar, el: &elem{kind: elChar, ranges: []runeRange{{r, r}}}})
	}
	return nil
}

func (c *Compiled) insert(p string, id int32) {
	n := int32(0)
	for i := 0; i < len(p); i++ {
		b := p[i]
		next := int32(-1)
		for _, e := range c.trie[n].edges {
			if e.b == b {
				next = e.child
				break
			}
		}
		if next < 0 {
			next = int32(len(c.trie))
			c.trie = append(c.trie, trieNode{})
			c.trie[n].edges = append(c.trie[n].edges, trieEdge{b, next})
		}
		n = next
	}
	c.trie[n].toks = append(c.trie[n].toks, id)
}

func (c *Compiled) node(pos, parent int32) int32 {
	k := uint64(uint32(pos))<<32 | uint64(uint32(parent))
	if id, ok := c.nodeIdx[k]; ok {
		return id
	}
	if len(c.nodes) >= maxNodes {
		if c.stateErr == nil {
			c.stateErr = fmt.Errorf("%w: more than %d parser stack frames", ErrTooLarge, maxNodes)
		}
		return 0
	}
	id := int32(len(c.nodes))
	c.nodes = append(c.nodes, node{pos, parent})
	c.nodeIdx[k] = id
	return id
}

// expandAll expands each position in starts under parent and returns the
// resulting top frames (in c.buf) and whether the stack can empty.
func (c *Compiled) expandAll(starts []int32, parent int32) ([]int32, bool) {
	c.buf = c.buf[:0]
	clear(c.seen)
	accept := false
	for _, s := range starts {
		if c.expand(s, parent) {
			accept = true
		}
	}
	return c.buf, accept
}

// expand follows pos (with the stack below it, parent) to the character
// classes and tokens it can start with, appending their frames to c.buf.
// It reports whether the whole stack can complete without input.
func (c *Compiled) expand(pos, parent int32) bool {
	for {
		k := uint64(uint32(pos))<<32 | uint64(uint32(parent))
		if _, ok := c.seen[k]; ok {
			return false // already expanded in this step (its accept was counted)
		}
		c.seen[k] = struct{}{}
		switch e := &c.code[pos]; e.kind {
		case elEnd:
			if parent < 0 {
				return true
			}
			n := c.nodes[parent]
			pos, parent = n.pos, n.parent
		case elChar, elToken:
			c.buf = append(c.buf, c.node(pos, parent))
			return false
		case elRule:
			frame := parent
			if c.code[pos+1].kind != elEnd { // a tail call returns straight to parent
				frame = c.node(pos+1, parent)
			}
			accept := false
			for _, a := range c.alts[e.rule] {
				if c.expand(a, frame) {
					accept = true
				}
			}
			return accept
		}
	}
}

// intern returns the id of the set of nodes (sorted and deduplicated in
// place).
func (c *Compiled) intern(nodes []int32, accept bool) (int32, error) {
	if c.stateErr != nil {
		return 0, c.stateErr
	}
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if len(nodes) == 0 && !accept {
		return 0, nil
	}
	k := c.keyBuf[:0]
	if accept {
		k = append(k, 1)
	} else {
		k = append(k, 0)
	}
	for _, n := range nodes {
		k = binary.LittleEndian.AppendUint32(k, uint32(n))
	}
	c.keyBuf = k
	if id, ok := c.setIdx[string(k)]; ok {
		return id, nil
	}
	if len(c.sets) >= maxSets {
		c.stateErr = fmt.Errorf("%w: more than %d parser states", ErrTooLarge, maxSets)
		return 0, c.stateErr
	}
	id := int32(len(c.sets))
	c.sets = append(c.sets, set{nodes: slices.Clone(nodes), accept: accept})
	c.setIdx[string(k)] = id
	return id, nil
}

// advance returns the set reached from set s by code point r (0: dead).
func (c *Compiled) advance(s int32, r rune) (int32, error) {
	st := &c.sets[s]
	if r < 128 {
		if st.ascii != nil && st.ascii[r] != 0 {
			return st.ascii[r] - 1, nil
		}
	} else if id, ok := st.other[r]; ok {
		return id, nil
	}
	c.buf = c.buf[:0]
	clear(c.seen)
	accept := false
	for _, n := range st.nodes {
		nd := c.nodes[n]
		if e := &c.code[nd.pos]; e.kind == elChar && e.el.matches(r) {
			if c.expand(nd.pos+1, nd.parent) {
				accept = true
			}
		}
	}
	id, err := c.intern(c.buf, accept)
	if err != nil {
		return 0, err
	}
	st = &c.sets[s] // intern may have grown c.sets
	if r < 128 {
		if st.ascii == nil {
			st.ascii = new([128]int32)
		}
		st.ascii[r] = id + 1
	} else {
		if st.other == nil {
			st.other = map[rune]int32{}
		}
		st.other[r] = id
	}
	return id, nil
}

// advanceToken returns the set reached from s by control token tok.
func (c *Compiled) advanceToken(s int32, tok int32) (int32, error) {
	if id, ok := c.sets[s].toks[tok]; ok {
		return id, nil
	}
	c.buf = c.buf[:0]
	clear(c.seen)
	accept := false
	for _, n := range c.sets[s].nodes {
		nd := c.nodes[n]
		if e := &c.code[nd.pos]; e.kind == elToken && e.tok == tok {
			if c.expand(nd.pos+1, nd.parent) {
				accept = true
			}
		}
	}
	id, err := c.intern(c.buf, accept)
	if err != nil {
		return 0, err
	}
	st := &c.sets[s]
	if st.toks == nil {
		st.toks = map[int32]int32{}
	}
	st.toks[tok] = id
	return id, nil
}

// state is a matcher's position: a parser state and, when the output so
// far ends inside a UTF-8 sequence, that sequence's bits.
type state struct {
	set    int32
	val    uint32 // the bits of the unfinished character so far
	need   uint8  // continuation bytes still to come (0: none pending)
	lo, hi byte   // the range of the next continuation byte
}

// feasible reports whether some stack of s can match a code point in
// [lo, hi].
func (c *Compiled) feasible(s int32, lo, hi rune) bool {
	for _, n := range c.sets[s].nodes {
		if e := &c.code[c.nodes[n].pos]; e.kind == elChar && e.el.matchesSome(lo, hi) {
			return true
		}
	}
	return false
}

// partialRange returns the code points a sequence can still become: val
// holds the bits so far, need bytes are missing, the next in [lo, hi].
func partialRange(val uint32, need uint8, lo, hi byte) (rune, rune) {
	a := val<<6 | uint32(lo&0x3f)
	b := val<<6 | uint32(hi&0x3f)
	for range need - 1 {
		a = a << 6
		b = b<<6 | 0x3f
	}
	return rune(a), rune(b)
}

// step advances st by one output byte; ok is false when the grammar
// cannot continue with it.
func (c *Compiled) step(st state, b byte) (state, bool, error) {
	if st.need == 0 {
		if b < 0x80 {
			s, err := c.advance(st.set, rune(b))
			return state{set: s}, s != 0, err
		}
		n := state{set: st.set, lo: 0x80, hi: 0xBF}
		switch {
		case b >= 0xC2 && b <= 0xDF:
			n.need, n.val = 1, uint32(b&0x1f)
		case b == 0xE0:
			n.need, n.val, n.lo = 2, 0, 0xA0
		case b >= 0xE1 && b <= 0xEF:
			n.need, n.val = 2, uint32(b&0x0f)
			if b == 0xED {
				n.hi = 0x9F // no surrogates
			}
		case b == 0xF0:
			n.need, n.val, n.lo = 3, 0, 0x90
		case b >= 0xF1 && b <= 0xF4:
			n.need, n.val = 3, uint32(b&0x07)
			if b == 0xF4 {
				n.hi = 0x8F
			}
		default:
			return st, false, nil // never valid UTF-8
		}
		lo, hi := partialRange(n.val, n.need, n.lo, n.hi)
		return n, c.feasible(st.set, lo, hi), nil
	}
	if b < st.lo || b > st.hi {
		return st, false, nil
	}
	n := state{set: st.set, val: st.val<<6 | uint32(b&0x3f), need: st.need - 1, lo: 0x80, hi: 0xBF}
	if n.need == 0 {
		s, err := c.advance(st.set, rune(n.val))
		return state{set: s}, s != 0, err
	}
	lo, hi := partialRange(n.val, n.need, n.lo, n.hi)
	return n, c.feasible(st.set, lo, hi), nil
}

// allowed adds the tokens allowed in st to out.
func (c *Compiled) allowed(st state, out sample.TokenSet) error {
	if st.set == 0 {
		return nil
	}
	if st.need == 0 {
		if m := c.sets[st.set].mask; m != nil {
			for i := range min(len(m), len(out)) {
				out[i] |= m[i]
			}
			return nil
		}
	}
	var m sample.TokenSet
	cache := st.need == 0 && c.masks < c.maxMasks
	if cache {
		m = sample.NewTokenSet(c.vocab)
	} else {
		m = out
	}
	if err := c.walk(0, st, m); err != nil {
		return err
	}
	if st.need == 0 {
		s := &c.sets[st.set]
		for _, n := range s.nodes {
			if e := &c.code[c.nodes[n].pos]; e.kind == elToken {
				m.Add(e.tok)
			}
		}
		if s.accept {
			for _, id := range c.eog {
				m.Add(id)
			}
		}
	}
	if cache {
		c.sets[st.set].mask = m
		c.masks++
		for i := range min(len(m), len(out)) {
			out[i] |= m[i]
		}
	}
	return nil
}

// walk adds the tokens below trie node t that st allows.
func (c *Compiled) walk(t int32, st state, out sample.TokenSet) error {
	for _, e := range c.trie[t].edges {
		n, ok, err := c.step(st, e.b)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		for _, id := range c.trie[e.child].toks {
			out.Add(id)
		}
		if len(c.trie[e.child].edges) > 0 && (n.need > 0 || len(c.sets[n.set].nodes) > 0) {
			if err := c.walk(e.child, n, out); err != nil {
				return err
			}
		}
	}
	return nil
}
