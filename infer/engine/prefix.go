package engine

import (
	"context"
	"fmt"

	"github.com/muserhq/muser/infer"
	"github.com/muserhq/muser/pack"
)

// RestorePrefix fills the empty sequence seq with the longest prefix of
// tokens that ps holds under (id, salt), verified by the store, and
// returns how many tokens it restored (a multiple of ps.BlockTokens()).
// The last token is never restored, so a Forward of tokens[n:] always has
// at least one token to compute logits from. On any error seq is left
// empty: blocks already imported are discarded (fail closed).
func (m *Model) RestorePrefix(ctx context.Context, ps infer.PrefixStore, id pack.Identity, salt []byte,
	seq *Sequence, tokens []int32) (int, error) {
	if seq.m != m || seq.Len() != 0 {
		return 0, fmt.Errorf("%w: restore into a sequence of %d tokens (want an empty sequence of this model)", ErrPrefix, seq.Len())
	}
	b := ps.BlockTokens()
	if b <= 0 || id.KV != m.KVString(b) {
		return 0, fmt.Errorf("%w: identity kv %q does not match this model and a store of %d-token blocks (%q)",
			ErrPrefix, id.KV, b, m.KVString(b))
	}
	if len(tokens) < 2 {
		return 0, nil
	}
	want := tokens[:min(len(tokens)-1, seq.Max())]
	n, err := ps.Restore(ctx, id, salt, want, func(block int, kv []byte) error {
		if block*b != seq.Len() {
			return fmt.Errorf("%w: store passed block %d, want block %d", ErrPrefix, block, seq.Len()/b)
		}
		if (block+1)*b > len(want) {
			return fmt.Errorf("%w: store passed block %d beyond the %d tokens asked for", ErrPrefix, block, len(want))
		}
		return seq.ImportBlock(tokens[block*b:(block+1)*b], kv)
	})
	if err == nil && n != seq.Len() {
		err = fmt.Errorf("%w: store reported %d tokens restored, %d were imported", ErrPrefix, n, seq.Len())
	}
	if err != nil {
		seq.tokens = seq.tokens[:0]
		return 0, err
	}
	return n, nil
}

// PublishPrefix offers ps every full block of seq's tokens under (id,
// salt) and returns the number of tokens covered. The store writes only
// the blocks it lacks.
func (m *Model) PublishPrefix(ctx context.Context, ps infer.PrefixStore, id pack.Identity, salt []byte, seq *Sequence) (int, error) {
	b := ps.BlockTokens()
	if b <= 0 || id.KV != m.KVString(b) {
		return 0, fmt.Errorf("%w: identity kv %q does not match this model and a store of %d-token blocks (%q)",
			ErrPrefix, id.KV, b, m.KVString(b))
	}
	n := seq.Len() / b * b
	if n == 0 {
		return 0, nil
	}
	tokens := seq.Tokens()[:n]
	err := ps.Publish(ctx, id, salt, tokens, func(block int) ([]byte, error) {
		if block < 0 || (block+1)*b > n {
			return nil, fmt.Errorf("%w: store asked for block %d of %d", ErrPrefix, block, n/b)
		}
		return seq.ExportBlock(block*b, b)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
