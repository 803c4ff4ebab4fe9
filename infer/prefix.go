package infer

import (
	"context"

	"github.com/muserhq/muser/pack"
)

// PrefixStore is what the engine needs from a durable KV cache. Tokens are
// grouped in blocks of BlockTokens() tokens; the KV bytes of one block for
// all layers form one chunk whose layout the engine defines (docs/kvpack.md,
// "Chunk payload").
//
// Implementations must fail closed: bytes that have not been verified
// against the pack's digests are never passed to put.
type PrefixStore interface {
	// BlockTokens is the number of tokens in one block (fixed per store).
	BlockTokens() int

	// Restore finds the longest cached block-aligned prefix of tokens stored
	// under (id, salt), verifies it, and hands each block's KV bytes to put
	// in order, block 0 first. The slice passed to put is valid only during
	// the call. Restore returns the number of tokens restored: 0 on a miss,
	// otherwise a multiple of BlockTokens(). If it returns an error, blocks
	// already passed to put must be discarded by the caller.
	Restore(ctx context.Context, id pack.Identity, salt []byte, tokens []int32,
		put func(block int, kv []byte) error) (int, error)

	// Publish records that tokens (a whole number of blocks, starting at
	// position 0) have the KV bytes that get returns for each block.
	// Blocks the store already holds are not written again.
	Publish(ctx context.Context, id pack.Identity, salt []byte, tokens []int32,
		get func(block int) ([]byte, error)) error
}
