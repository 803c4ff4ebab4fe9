package grammar

import (
	"fmt"

	"github.com/muserhq/muser/infer/sample"
)

// Matcher is a sample.Constraint that allows exactly the tokens that keep
// the output a prefix of a sentence of its grammar, and the vocabulary's
// end-of-generation tokens exactly when the output is a whole sentence.
// It is not safe for concurrent use; matchers of one Compiled may run in
// different goroutines.
type Matcher struct {
	c     *Compiled
	v     Vocab
	st    state
	ended bool // an end-of-generation token was accepted
}

var _ sample.Constraint = (*Matcher)(nil)

// NewMatcher returns a matcher at the start of the grammar. v must be the
// vocabulary c was compiled for.
func (c *Compiled) NewMatcher(v Vocab) *Matcher {
	return &Matcher{c: c, v: v, st: state{set: c.start}}
}

// Allowed adds the tokens that may come next to set.
func (m *Matcher) Allowed(set sample.TokenSet) error {
	if m.ended {
		return nil
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.c.allowed(m.st, set)
}

// Accept advances past tok, or returns a *TokenError (wrapping
// ErrRejected) and keeps its state when the grammar does not allow tok.
func (m *Matcher) Accept(tok int32) error {
	if m.ended {
		return &TokenError{Token: tok, Piece: "(after the end)"}
	}
	if tok < 0 || int(tok) >= m.c.vocab {
		return &TokenError{Token: tok, Piece: "(outside the vocabulary)"}
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	c := m.c
	if m.st.need == 0 && m.st.set != 0 {
		for _, n := range c.sets[m.st.set].nodes {
			if e := &c.code[c.nodes[n].pos]; e.kind == elToken && e.tok == tok {
				s, err := c.advanceToken(m.st.set, tok)
				if err != nil {
					return err
				}
				m.st = state{set: s}
				return nil
			}
		}
	}
	if m.v.IsEOG(tok) {
		if m.st.need == 0 && m.st.set != 0 && c.sets[m.st.set].accept {
			m.ended = true
			return nil
		}
		return &TokenError{Token: tok, Piece: "(end of generation before the output is complete)"}
	}
	p, err := m.v.Piece(tok, false)
	if err != nil {
		return err
	}
	if p == "" {
		return &TokenError{Token: tok, Piece: p}
	}
	st := m.st
	for i := 0; i < len(p); i++ {
		var ok bool
		if st, ok, err = c.step(st, p[i]); err != nil {
			return err
		} else if !ok {
			return &TokenError{Token: tok, Piece: p}
		}
	}
	m.st = st
	return nil
}

// CanEnd reports whether the output so far is a whole sentence of the
// grammar.
func (m *Matcher) CanEnd() bool {
	if m.ended {
		return true
	}
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return m.st.need == 0 && m.st.set != 0 && m.c.sets[m.st.set].accept
}

// Clone returns an independent matcher in the same state.
func (m *Matcher) Clone() sample.Constraint {
	n := *m
	return &n
}

// AcceptString advances past the bytes of s as if tokens spelling them
// had been accepted; it returns a *SyntaxError-free ErrRejected error
// naming the byte offset where the grammar stops allowing s.
func (m *Matcher) AcceptString(s string) error {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	st := m.st
	for i := 0; i < len(s); i++ {
		var (
			ok  bool
			err error
		)
		if st, ok, err = m.c.step(st, s[i]); err != nil {
			return err
		} else if !ok {
			return fmt.Errorf("%w: byte %d of %q", ErrRejected, i, s)
		}
	}
	m.st = st
	return nil
}

// Match reports whether s is a sentence of g. It is for tests and
// validation, not for generation.
func (g *Grammar) Match(s string) (bool, error) {
	c, err := Compile(g, nil)
	if err != nil {
		return false, err
	}
	st := state{set: c.start}
	for i := 0; i < len(s); i++ {
		var ok bool
		if st, ok, err = c.step(st, s[i]); err != nil {
			return false, err
		} else if !ok {
			return false, nil
		}
	}
	return st.need == 0 && st.set != 0 && c.sets[st.set].accept, nil
}
