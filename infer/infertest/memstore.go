package infertest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/muserhq/muser/infer"
	"github.com/muserhq/muser/pack"
)

// ErrInjected is returned by a MemStore's Restore when FailAfterBlocks
// says so.
var ErrInjected = errors.New("infertest: injected restore failure")

// MemStore is an in-memory infer.PrefixStore. Its fields may be set
// before use; the counters may be read after calls return.
type MemStore struct {
	// B is the block size in tokens (BlockTokens).
	B int
	// FailAfterBlocks, when ≥ 0, makes Restore fail with ErrInjected
	// after passing that many blocks to put.
	FailAfterBlocks int

	mu     sync.Mutex
	blocks map[[32]byte][]byte
	// Written counts block payloads stored by Publish (dedup excluded).
	Written int
	// Restored counts block payloads passed to put by Restore.
	Restored int
}

var _ infer.PrefixStore = (*MemStore)(nil)

// NewMemStore returns an empty store with blocks of b tokens.
func NewMemStore(b int) *MemStore {
	return &MemStore{B: b, FailAfterBlocks: -1, blocks: map[[32]byte][]byte{}}
}

// BlockTokens returns B.
func (s *MemStore) BlockTokens() int { return s.B }

func (s *MemStore) key(id pack.Identity, salt []byte, tokens []int32) [32]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%#v", id)
	binary.Write(h, binary.LittleEndian, uint64(len(salt)))
	h.Write(salt)
	binary.Write(h, binary.LittleEndian, tokens)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Restore implements infer.PrefixStore.
func (s *MemStore) Restore(ctx context.Context, id pack.Identity, salt []byte, tokens []int32,
	put func(block int, kv []byte) error) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for (n+1)*s.B <= len(tokens) {
		kv, ok := s.blocks[s.key(id, salt, tokens[:(n+1)*s.B])]
		if !ok {
			break
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if s.FailAfterBlocks >= 0 && n == s.FailAfterBlocks {
			return 0, fmt.Errorf("block %d: %w", n, ErrInjected)
		}
		if err := put(n, append([]byte(nil), kv...)); err != nil {
			return 0, err
		}
		s.Restored++
		n++
	}
	return n * s.B, nil
}

// Publish implements infer.PrefixStore.
func (s *MemStore) Publish(ctx context.Context, id pack.Identity, salt []byte, tokens []int32,
	get func(block int) ([]byte, error)) error {
	if len(tokens)%s.B != 0 {
		return fmt.Errorf("infertest: publish of %d tokens, not a whole number of %d-token blocks", len(tokens), s.B)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < len(tokens)/s.B; i++ {
		k := s.key(id, salt, tokens[:(i+1)*s.B])
		if _, ok := s.blocks[k]; ok {
			continue
		}
		kv, err := get(i)
		if err != nil {
			return err
		}
		s.blocks[k] = append([]byte(nil), kv...)
		s.Written++
	}
	return nil
}
