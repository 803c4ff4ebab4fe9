package store_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
)

// BenchmarkPublishPackReceived times PublishPack alone for a pack of 512
// received chunks (4 KiB each, written by PutChunk with fsync beforehand,
// untimed): the ledger commit and the directory fsyncs owed to it (rule
// W1), one per chunk directory the chunks landed in (up to 256).
//
//	go test -run '^$' -bench BenchmarkPublishPackReceived -benchtime 5x ./store/
func BenchmarkPublishPackReceived(b *testing.B) {
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		s, err := store.Open(b.TempDir(), store.Options{BlockTokens: 4})
		if err != nil {
			b.Fatal(err)
		}
		refs := make([]pack.ChunkRef, 512)
		for j := range refs {
			c := make([]byte, 4096)
			binary.LittleEndian.PutUint64(c, uint64(i)<<32|uint64(j))
			refs[j] = pack.ChunkRef{ID: pack.ChunkID(c), Size: uint32(len(c))}
			if err := s.PutChunk(ctx, refs[j].ID, c, "bench"); err != nil {
				b.Fatal(err)
			}
		}
		m := &pack.Manifest{Identity: packtest.Identity("bench"), BlockTokens: 4, Tenant: pack.TenantTag(nil),
			Tokens: packtest.Tokens(uint64(i), 4*len(refs), 1000), Chunks: refs, Producer: "bench", Generation: 1,
			Created: time.Unix(1, 0).UTC()}
		m.Root = pack.MerkleRoot(m.ChunkIDs())
		b.StartTimer()
		if _, _, err := s.PublishPack(ctx, m, store.PublishOptions{Source: "bench"}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
