package store_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/muserhq/muser/infer"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

// The store is the engine's PrefixStore.
var _ infer.PrefixStore = (*store.Store)(nil)

const chunkSize = 96

var salt = []byte("tenant-a")

func TestPublishRestore(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 4})
	id := packtest.Identity("x")
	toks := packtest.Tokens(1, 4*6+2, 32000)
	res := storetest.Publish(t, s, id, salt, toks[:24], chunkSize)
	if !res.New || res.ChunksWritten != 6 || res.BytesWritten != 6*chunkSize {
		t.Fatalf("publish: got %+v, want new with 6 chunks written", res)
	}
	keys := pack.BlockKeys(id.Key(), pack.TenantTag(salt), toks, 4)
	tests := []struct {
		name   string
		id     pack.Identity
		salt   []byte
		tokens []int32
		want   int
	}{
		{"whole", id, salt, toks[:24], 24},
		{"longer request", id, salt, toks, 24},
		{"prefix", id, salt, toks[:10], 8},
		{"less than a block", id, salt, toks[:3], 0},
		{"other tenant", id, []byte("tenant-b"), toks, 0},
		{"other identity", packtest.Identity("y"), salt, toks, 0},
		{"diverging tokens", id, salt, append(append([]int32{}, toks[:13]...), 99999, 1, 2, 3), 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := s.Match(tt.id, tt.salt, tt.tokens)
			if err != nil || m.Tokens != tt.want {
				t.Fatalf("Match: got %d tokens (%v), want %d", m.Tokens, err, tt.want)
			}
			n, blocks, err := storetest.Restore(t, s, tt.id, tt.salt, tt.tokens)
			if err != nil || n != tt.want {
				t.Fatalf("Restore: got %d tokens (%v), want %d", n, err, tt.want)
			}
			for i, b := range blocks {
				if !bytes.Equal(b, packtest.KV(keys[i], chunkSize)) {
					t.Fatalf("block %d: bytes differ from those published", i)
				}
			}
		})
	}
	if _, err := s.Restore(context.Background(), id, salt, []int32{1, -2, 3, 4}, nil); !errors.Is(err, pack.ErrInvalid) {
		t.Fatalf("negative token: got %v, want ErrInvalid", err)
	}
}

func TestPublishDedup(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 4})
	id := packtest.Identity("d")
	toks := packtest.Tokens(2, 40, 1000)
	first := storetest.Publish(t, s, id, salt, toks[:16], chunkSize)
	asked := 0
	res, err := s.PublishPrefix(context.Background(), id, salt, toks[:24], func(i int) ([]byte, error) {
		asked++
		return storetest.KV(id, salt, toks, 4, chunkSize)(i)
	})
	if err != nil {
		t.Fatal(err)
	}
	if asked != 2 || res.ChunksWritten != 2 || !res.New {
		t.Fatalf("extension: got %d blocks fetched, %+v; want 2 fetched and written", asked, res)
	}
	again := storetest.Publish(t, s, id, salt, toks[:16], chunkSize)
	if again.New || again.Pack != first.Pack || again.ChunksWritten != 0 {
		t.Fatalf("republish: got %+v, want the existing pack %s refreshed", again, first.Pack.Short())
	}
	// Same KV under another tenant: new keys, but identical chunk bytes
	// are stored once.
	other := []byte("tenant-b")
	res2, err := s.PublishPrefix(context.Background(), id, other, toks[:16], storetest.KV(id, salt, toks, 4, chunkSize))
	if err != nil || !res2.New || res2.ChunksWritten != 0 {
		t.Fatalf("other tenant, same bytes: got %+v, %v; want a new pack writing no chunk", res2, err)
	}
	st, err := s.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Packs != 3 || st.Chunks != 6 || st.ChunkBytes != 6*chunkSize {
		t.Fatalf("stats: got %+v, want 3 packs, 6 chunks", st)
	}
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	id := packtest.Identity("r")
	toks := packtest.Tokens(3, 32, 1000)
	s, err := store.Open(dir, store.Options{BlockTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Publish(t, s, id, salt, toks[:20], chunkSize)
	storetest.Publish(t, s, id, salt, toks[:32], chunkSize)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = store.Open(dir, store.Options{BlockTokens: 64})
	var bse *store.BlockSizeError
	if !errors.As(err, &bse) || bse.Configured != 64 || bse.Stored != 4 {
		t.Fatalf("other block size: got %v, want BlockSizeError 64 vs 4", err)
	}
	s = storetest.Open(t, dir, store.Options{})
	if s.BlockTokens() != 4 {
		t.Fatalf("block size: got %d, want 4 from the ledger", s.BlockTokens())
	}
	if m, _ := s.Match(id, salt, toks); m.Tokens != 32 {
		t.Fatalf("after reopen: matched %d tokens, want 32", m.Tokens)
	}
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	storetest.Open(t, dir, store.Options{})
	_, err := store.Open(dir, store.Options{LockTimeout: 100 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("got %v, want ErrLocked", err)
	}
}

func TestMustExist(t *testing.T) {
	_, err := store.Open(t.TempDir(), store.Options{MustExist: true})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
}
