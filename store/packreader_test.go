package store_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

// TestPackReader reads single blocks of a pack, in any order, and checks
// each against the KV published; a tampered chunk is refused with a
// receipt and quarantines the pack.
func TestPackReader(t *testing.T) {
	dir := t.TempDir()
	s := storetest.OpenUnchecked(t, dir, store.Options{BlockTokens: 4})
	id := packtest.Identity("reader")
	toks := packtest.Tokens(3, 20, 100)
	get := storetest.KV(id, nil, toks, 4, 300)
	res, err := s.PublishPrefix(context.Background(), id, nil, toks, get)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenPack(res.Pack, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(r.Manifest().Chunks); got != 5 {
		t.Fatalf("manifest has %d chunks, want 5", got)
	}
	var buf []byte
	for _, b := range []int{4, 0, 2, 2, 1, 3} {
		t.Run(fmt.Sprint("block=", b), func(t *testing.T) {
			want, _ := get(b)
			got, err := r.ReadBlock(context.Background(), b, buf)
			if err != nil {
				t.Fatalf("block %d: %v", b, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("block %d: got %d bytes that differ from the %d published", b, len(got), len(want))
			}
			buf = got
		})
	}
	for _, b := range []int{-1, 5} {
		if _, err := r.ReadBlock(context.Background(), b, nil); !errors.Is(err, pack.ErrInvalid) {
			t.Errorf("block %d: got %v, want ErrInvalid", b, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.ReadBlock(ctx, 0, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled context: got %v, want context.Canceled", err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	if _, err := s.OpenPack(pack.Digest{9}, ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown pack: got %v, want ErrNotFound", err)
	}

	// Tamper with block 3's chunk: reading it is a refusal that
	// quarantines the pack; other blocks read before that were fine.
	r, err = s.OpenPack(res.Pack, "peer:test")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	flip(t, chunkFile(dir, r.Manifest().Chunks[3].ID), 17)
	_, err = r.ReadBlock(context.Background(), 3, nil)
	var re *store.RefusalError
	var cf *store.ChunkFault
	if !errors.As(err, &re) || !errors.As(err, &cf) || cf.Block != 3 {
		t.Fatalf("tampered block 3: got %v, want a *RefusalError wrapping a *ChunkFault for block 3", err)
	}
	if _, err := s.OpenPack(res.Pack, ""); !errors.Is(err, store.ErrQuarantined) {
		t.Errorf("open after the fault: got %v, want ErrQuarantined", err)
	}
	if _, err := os.Stat(chunkFile(dir, r.Manifest().Chunks[3].ID)); !os.IsNotExist(err) {
		t.Errorf("tampered chunk file still in chunks/ (stat: %v), want it moved to quarantine/", err)
	}
}

// TestPackReaderBadManifest checks rule R1 at OpenPack: a manifest file
// that no longer hashes to its pack ID is refused and quarantines the
// pack.
func TestPackReaderBadManifest(t *testing.T) {
	dir := t.TempDir()
	s := storetest.OpenUnchecked(t, dir, store.Options{BlockTokens: 4})
	id := packtest.Identity("reader")
	toks := packtest.Tokens(4, 8, 100)
	res, err := s.PublishPrefix(context.Background(), id, nil, toks, storetest.KV(id, nil, toks, 4, 64))
	if err != nil {
		t.Fatal(err)
	}
	flip(t, manifestFile(dir, res.Pack), 5)
	_, err = s.OpenPack(res.Pack, "")
	var re *store.RefusalError
	if !errors.As(err, &re) {
		t.Fatalf("tampered manifest: got %v, want a *RefusalError", err)
	}
	if _, err := s.OpenPack(res.Pack, ""); !errors.Is(err, store.ErrQuarantined) {
		t.Errorf("open after the fault: got %v, want ErrQuarantined", err)
	}
}
