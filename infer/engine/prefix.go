package engine

import (
	"context"
	"fmt"

	"github.com/muserhq/muser/infer"
	"github.com/muserhq/muser/pack"
)

// RestorePrefix is the one prefix-restore rule of muser: it fills the
// empty sequence seq with every whole block of prompt that ps holds under
// (id, salt), verified by the store, and returns how many tokens of KV seq
// then holds. When those blocks cover the whole prompt, its last token is
// dropped again: its logits must be computed, and the KV of the tokens
// before it does not depend on it. So the caller always has at least one
// token, prompt[n:], to Forward, and a prompt whose blocks are all cached
// costs one token of compute.
//
// On any error seq is left empty: blocks already imported are discarded
// (fail closed).
func (m *Model) RestorePrefix(ctx context.Context, ps infer.PrefixStore, id pack.Identity, salt []byte,
	seq *Sequence, prompt []int32) (int, error) {
	if seq.m != m || seq.Len() != 0 {
		return 0, fmt.Errorf("%w: restore into a sequence of %d tokens (want an empty sequence of this model)", ErrPrefix, seq.Len())
	}
	b := ps.BlockTokens()
	if err := m.checkKV(id, b); err != nil {
		return 0, err
	}
	if len(prompt) < 2 {
		return 0, nil
	}
	want := prompt[:min(len(prompt), seq.Max())]
	n, err := ps.Restore(ctx, id, salt, want, func(block int, kv []byte) error {
		if block*b != seq.Len() {
			return fmt.Errorf("%w: store passed block %d, want block %d", ErrPrefix, block, seq.Len()/b)
		}
		if (block+1)*b > len(want) {
			return fmt.Errorf("%w: store passed block %d beyond the %d tokens asked for", ErrPrefix, block, len(want))
		}
		return seq.ImportBlock(want[block*b:(block+1)*b], kv)
	})
	if err == nil && n != seq.Len() {
		err = fmt.Errorf("%w: store reported %d tokens restored, %d were imported", ErrPrefix, n, seq.Len())
	}
	if err == nil && n >= len(prompt) {
		n = len(prompt) - 1
		err = seq.Truncate(n)
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
	if err := m.checkKV(id, b); err != nil {
		return 0, err
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

// checkKV refuses an identity whose kv field is not this model's for a
// store of b-token blocks: its chunks would not fit the model's caches.
func (m *Model) checkKV(id pack.Identity, b int) error {
	if b <= 0 || id.KV != m.KVString(b) {
		return fmt.Errorf("%w: identity kv %q does not match this model and a store of %d-token blocks (%q)",
			ErrPrefix, id.KV, b, m.KVString(b))
	}
	return nil
}
