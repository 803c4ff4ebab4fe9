package storetest

import (
	"context"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
)

// Open opens (creating) a store in dir, or in a new temporary directory
// when dir is empty. When the test ends, the store is closed and reopened
// and a full verify (every chunk read) must find nothing: every store test
// ends with a store check.
func Open(t testing.TB, dir string, opts store.Options) *store.Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	// Registered first, so it runs after the store is closed.
	t.Cleanup(func() { CheckDir(t, dir, store.Options{}) })
	return OpenUnchecked(t, dir, opts)
}

// OpenUnchecked is Open without the final check, for tests that leave
// faults on purpose.
func OpenUnchecked(t testing.TB, dir string, opts store.Options) *store.Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := store.Open(dir, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

// CheckDir opens the store in dir and fails the test if a full verify
// finds anything.
func CheckDir(t testing.TB, dir string, opts store.Options) {
	t.Helper()
	s, err := store.Open(dir, opts)
	if err != nil {
		t.Errorf("store check: reopening %s: %v", dir, err)
		return
	}
	defer s.Close()
	Check(t, s)
}

// Check fails the test if a full verify of s finds anything.
func Check(t testing.TB, s *store.Store) {
	t.Helper()
	rep, err := s.Verify(context.Background(), store.VerifyOptions{})
	if err != nil {
		t.Errorf("store check: %v", err)
		return
	}
	for _, f := range rep.Findings {
		t.Errorf("store check finding: %v", f)
	}
}

// Publish publishes tokens under id and salt with synthetic KV of
// chunkSize bytes per block (packtest.KV of the block key, so the same
// prefix always has the same bytes, as with a batch-invariant engine).
func Publish(t testing.TB, s *store.Store, id pack.Identity, salt []byte, tokens []int32, chunkSize int) store.PublishResult {
	t.Helper()
	res, err := s.PublishPrefix(context.Background(), id, salt, tokens, KV(id, salt, tokens, s.BlockTokens(), chunkSize))
	if err != nil {
		t.Fatalf("publish %d tokens: %v", len(tokens), err)
	}
	return res
}

// KV returns a get function for Publish serving synthetic KV.
func KV(id pack.Identity, salt []byte, tokens []int32, blockTokens, chunkSize int) func(int) ([]byte, error) {
	keys := pack.BlockKeys(id.Key(), pack.TenantTag(salt), tokens, blockTokens)
	return func(i int) ([]byte, error) { return packtest.KV(keys[i], chunkSize), nil }
}

// Restore restores the longest prefix of tokens and returns the tokens
// restored and a copy of each block's bytes.
func Restore(t testing.TB, s *store.Store, id pack.Identity, salt []byte, tokens []int32) (int, [][]byte, error) {
	t.Helper()
	var blocks [][]byte
	n, err := s.Restore(context.Background(), id, salt, tokens, func(i int, kv []byte) error {
		if i != len(blocks) {
			t.Fatalf("put called for block %d, want %d", i, len(blocks))
		}
		blocks = append(blocks, append([]byte(nil), kv...))
		return nil
	})
	return n, blocks, err
}
