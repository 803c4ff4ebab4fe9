package sample

import "math/bits"

// TokenSet is a set of token ids kept as a bitset: token id is bit id%64
// of word id/64. Its length fixes the ids it can hold (64 per word).
type TokenSet []uint64

// NewTokenSet returns an empty set for a vocabulary of vocab tokens.
func NewTokenSet(vocab int) TokenSet { return make(TokenSet, (max(vocab, 0)+63)/64) }

// Has reports whether id is in the set; ids outside its range are not.
func (s TokenSet) Has(id int32) bool {
	w := int(id) >> 6
	return id >= 0 && w < len(s) && s[w]&(1<<(uint(id)&63)) != 0
}

// Add puts id in the set; ids outside its range are ignored.
func (s TokenSet) Add(id int32) {
	if w := int(id) >> 6; id >= 0 && w < len(s) {
		s[w] |= 1 << (uint(id) & 63)
	}
}

// Clear empties the set.
func (s TokenSet) Clear() { clear(s) }

// Len returns the number of ids in the set.
func (s TokenSet) Len() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return n
}

// Constraint restricts which tokens may be sampled next: a grammar, a JSON
// schema, a forced tool call. It is a state machine over the tokens of one
// sequence; the caller asks for the allowed set, samples from it with
// Sampler.SampleAllowed and reports the chosen token with Accept. A
// Constraint is not safe for concurrent use; Clone gives an independent
// copy (a speculative decoder clones it to check draft tokens without
// committing to them).
type Constraint interface {
	// Allowed adds to set (empty, sized for the vocabulary) the tokens
	// that may come next. It includes the vocabulary's end-of-generation
	// tokens exactly when CanEnd is true.
	Allowed(set TokenSet) error
	// Accept advances the constraint past tok. It returns an error, and
	// leaves the state unchanged, when tok is not allowed.
	Accept(tok int32) error
	// CanEnd reports whether the output so far is complete, so generation
	// may end here.
	CanEnd() bool
	// Clone returns an independent copy in the same state.
	Clone() Constraint
}
