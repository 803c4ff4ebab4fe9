package engine

import (
	"fmt"
	"slices"
)

// Sequence is one token stream of a Model and its KV cache: the tokens
// whose K and V are cached, in order from position 0. Forward appends to
// it. A Sequence is used by one goroutine at a time.
type Sequence struct {
	m      *Model
	kv     KV
	tokens []int32
}

// NewSequence returns an empty sequence that holds up to maxTokens tokens;
// maxTokens ≤ 0 means the model's training context length. The backend
// allocates its cache (usually as tokens arrive).
func (m *Model) NewSequence(maxTokens int) (*Sequence, error) {
	if maxTokens <= 0 {
		maxTokens = m.w.Config.CtxTrain
	}
	kv, err := m.be.NewKV(maxTokens)
	if err != nil {
		return nil, err
	}
	return &Sequence{m: m, kv: kv}, nil
}

// Len returns the number of tokens whose KV the sequence holds.
func (s *Sequence) Len() int { return len(s.tokens) }

// Max returns the most tokens the sequence can hold.
func (s *Sequence) Max() int { return s.kv.Max() }

// Tokens returns the sequence's tokens. The slice must not be modified; it
// is valid until the sequence next changes.
func (s *Sequence) Tokens() []int32 { return s.tokens[:len(s.tokens):len(s.tokens)] }

// KV returns the sequence's cache, kept by the model's backend.
func (s *Sequence) KV() KV { return s.kv }

// Close releases the sequence's cache (device memory, for a GPU backend).
// The sequence must not be used afterwards.
func (s *Sequence) Close() error {
	s.tokens = nil
	return s.kv.Close()
}

// Commit allocates the sequence's cache for Max tokens and writes every
// row past its tokens (zeros, which later tokens overwrite), so that no
// later Forward or ImportBlock grows the cache or takes the first write of
// its memory: as llama.cpp allocates and clears its KV buffer when it
// creates a context. On some virtual machines a first write costs
// microseconds per 4 KiB page (docs/benchmarks.md). The tokens and their
// rows are kept.
func (s *Sequence) Commit() error {
	n := s.kv.Max()
	if err := s.kv.Reserve(n); err != nil {
		return err
	}
	const block = 256
	zeros := make([]byte, s.kv.BlockBytes(block))
	for first := len(s.tokens); first < n; first += block {
		b := min(block, n-first)
		if err := s.kv.ImportBlock(zeros[:s.kv.BlockBytes(b)], first, b); err != nil {
			return fmt.Errorf("committing the KV cache's memory: %w", err)
		}
	}
	return nil
}

// Truncate drops every token from position n on, so the next Forward
// continues after token n-1. It keeps the allocation.
func (s *Sequence) Truncate(n int) error {
	if n < 0 || n > len(s.tokens) {
		return fmt.Errorf("%w: truncate to %d tokens, sequence has %d", ErrBatch, n, len(s.tokens))
	}
	s.tokens = s.tokens[:n]
	return nil
}

// ExportBlock returns the lkv1 chunk payload of the block of b tokens
// starting at position first (docs/kvpack.md, "Chunk payload").
func (s *Sequence) ExportBlock(first, b int) ([]byte, error) {
	if first < 0 || b <= 0 || first+b > len(s.tokens) {
		return nil, fmt.Errorf("%w: export of tokens [%d,%d), sequence has %d", ErrBatch, first, first+b, len(s.tokens))
	}
	return s.kv.ExportBlock(make([]byte, 0, s.kv.BlockBytes(b)), first, b)
}

// ImportBlock appends a block: tokens (which must start at position Len())
// and their lkv1 chunk payload kv. On error the sequence is unchanged.
func (s *Sequence) ImportBlock(tokens []int32, kv []byte) error {
	first := len(s.tokens)
	for i, t := range tokens {
		if t < 0 || int(t) >= s.m.w.Config.Vocab {
			return fmt.Errorf("%w: imported token %d at position %d is outside the vocabulary of %d", ErrBatch, t, first+i, s.m.w.Config.Vocab)
		}
	}
	if err := s.kv.ImportBlock(kv, first, len(tokens)); err != nil {
		return err
	}
	s.tokens = append(s.tokens, tokens...)
	return nil
}

// Fork returns a copy of the sequence sharing nothing with it.
func (s *Sequence) Fork() (*Sequence, error) {
	c, err := s.m.NewSequence(s.kv.Max())
	if err != nil {
		return nil, err
	}
	if n := len(s.tokens); n > 0 {
		kv, err := s.kv.ExportBlock(nil, 0, n)
		if err != nil {
			c.Close()
			return nil, err
		}
		if err := c.kv.ImportBlock(kv, 0, n); err != nil {
			c.Close()
			return nil, err
		}
	}
	c.tokens = slices.Clone(s.tokens)
	return c, nil
}
