package store_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

// TestConcurrentPublishRestoreGC runs publishers, restorers, verify and an
// aggressive gc (tiny budget, no orphan grace) at once; verify must find
// nothing. gc must never
// pull a chunk from under an in-flight publish or restore: every restore
// succeeds (a miss is fine) with the published bytes, and the store
// checks clean at the end.
func TestConcurrentPublishRestoreGC(t *testing.T) {
	s := storetest.Open(t, "", store.Options{BlockTokens: 4, OrphanGrace: -1, NoSync: true})
	id := packtest.Identity("c")
	shared := packtest.Tokens(80, 8, 100)
	prompt := func(w, i int) []int32 {
		return append(append([]int32{}, shared...), packtest.Tokens(uint64(w*1000+i%7), 4*(1+i%5), 100)...)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	const rounds = 40
	for w := 0; w < 3; w++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				toks := prompt(w, i)
				if _, err := s.PublishPrefix(ctx, id, salt, toks, storetest.KV(id, salt, toks, 4, 64)); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				toks := prompt(w, i)
				keys := pack.BlockKeys(id.Key(), pack.TenantTag(salt), toks, 4)
				_, err := s.Restore(ctx, id, salt, toks, func(b int, kv []byte) error {
					if !bytes.Equal(kv, packtest.KV(keys[b], 64)) {
						t.Errorf("block %d: wrong bytes", b)
					}
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < rounds/4; i++ {
			rep, err := s.Verify(ctx, store.VerifyOptions{})
			if err != nil {
				errs <- err
				return
			}
			for _, f := range rep.Findings {
				t.Errorf("verify during publishes and gc: %v", f)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < rounds; i++ {
			if _, err := s.GC(ctx, store.GCOptions{MaxBytes: 2000}); err != nil {
				errs <- err
				return
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if rs, _ := s.Receipts(store.ReceiptFilter{}); len(rs) != 0 {
		t.Fatalf("refusals under concurrency: %+v", rs)
	}
}
