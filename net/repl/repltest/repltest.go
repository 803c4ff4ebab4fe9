package repltest

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
)

// SyntheticPrefiller implements repl.Prefiller with synthetic KV: each
// block's bytes are packtest.KV of its block key, so they depend only on
// the identity, the tenant and the token prefix, exactly as a
// batch-invariant engine's do. Blocks the store already holds are not
// recomputed (store.PublishPrefix skips them), as the engine reuses its
// cache.
type SyntheticPrefiller struct {
	// Store is where packs are published.
	Store *store.Store
	// Engine is the identity this "engine" computes KV for; a request for
	// another is refused.
	Engine pack.Identity
	// ChunkSize is the size of each block's KV.
	ChunkSize int
	// Answer, if not nil, replaces the identity and tokens the prefiller
	// publishes, to test consumers against faulty producers.
	Answer func(id pack.Identity, tokens []int32) (pack.Identity, []int32)

	calls  atomic.Int64
	blocks atomic.Int64
}

// Prefill publishes the longest block-aligned prefix of tokens and returns
// the pack's ID.
func (p *SyntheticPrefiller) Prefill(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) (pack.Digest, error) {
	p.calls.Add(1)
	if err := p.Engine.Check(id); err != nil {
		return pack.Digest{}, fmt.Errorf("this producer's engine cannot prefill the requested identity: %w", err)
	}
	b := p.Store.BlockTokens()
	n := len(tokens) / b * b
	if n == 0 {
		return pack.Digest{}, fmt.Errorf("%d tokens are fewer than one block of %d", len(tokens), b)
	}
	tokens = tokens[:n]
	if p.Answer != nil {
		id, tokens = p.Answer(id, tokens)
	}
	keys := pack.BlockKeys(id.Key(), pack.TenantTag(salt), tokens, b)
	res, err := p.Store.PublishPrefix(ctx, id, salt, tokens, func(i int) ([]byte, error) {
		p.blocks.Add(1)
		return packtest.KV(keys[i], p.ChunkSize), nil
	})
	if err != nil {
		return pack.Digest{}, err
	}
	return res.Pack, nil
}

// Calls returns how many prefill requests arrived.
func (p *SyntheticPrefiller) Calls() int64 { return p.calls.Load() }

// BlocksComputed returns how many blocks' KV were computed (blocks the
// store already held are not).
func (p *SyntheticPrefiller) BlocksComputed() int64 { return p.blocks.Load() }
