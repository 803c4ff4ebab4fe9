package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/vfs"
	"github.com/muserhq/muser/store/vfs/errorfs"
)

// TestPublishWriteFaults fails each write-path file operation of a publish
// in turn (create, write, fsync, close, rename, directory fsync, mkdir):
// the publish returns the error, no pack is visible, the store checks
// clean, a retry succeeds, and gc reclaims whatever the failure left.
func TestPublishWriteFaults(t *testing.T) {
	id := packtest.Identity("fault")
	toks := packtest.Tokens(20, 12, 500)
	// Count the operations of one clean publish.
	dir0 := t.TempDir()
	if s, err := store.Open(dir0, store.Options{BlockTokens: 4}); err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}
	probe := errorfs.OnNth(-1)
	s0 := storetest.Open(t, dir0, store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, probe)})
	base := probe.Seen() // operations of Open itself
	storetest.Publish(t, s0, id, salt, toks, 40)
	total := probe.Seen() - base
	if total < 10 {
		t.Fatalf("a publish did only %d write-path operations", total)
	}
	for n := 0; n < total; n++ {
		dir := t.TempDir()
		// Open first with a clean file system (creating the store and its
		// key), then publish through the faulty one.
		s, err := store.Open(dir, store.Options{BlockTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		inj := errorfs.OnNth(base + n)
		s = storetest.Open(t, dir, store.Options{BlockTokens: 4, FS: errorfs.Wrap(vfs.Default, inj), OrphanGrace: -1})
		_, err = s.PublishPrefix(context.Background(), id, salt, toks, storetest.KV(id, salt, toks, 4, 40))
		if !inj.Fired() {
			t.Fatalf("fault %d never reached", n)
		}
		if !errors.Is(err, errorfs.ErrInjected) {
			t.Fatalf("fault %d: publish returned %v, want the injected error", n, err)
		}
		if ps, _ := s.Packs(); len(ps) != 0 {
			t.Fatalf("fault %d: %d packs visible after a failed publish", n, len(ps))
		}
		if m, _ := s.Match(id, salt, toks); m.Tokens != 0 {
			t.Fatalf("fault %d: failed publish is matched", n)
		}
		storetest.Check(t, s)
		// Retry: the fault fired once, so this succeeds.
		if _, err := s.PublishPrefix(context.Background(), id, salt, toks, storetest.KV(id, salt, toks, 4, 40)); err != nil {
			t.Fatalf("fault %d: retry: %v", n, err)
		}
		if _, err := s.Remove(mustOnePack(t, s)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GC(context.Background(), store.GCOptions{MaxBytes: -1}); err != nil {
			t.Fatal(err)
		}
		if left := dataFiles(t, dir); len(left) != 0 {
			t.Fatalf("fault %d: files left after rm and gc: %v", n, left)
		}
	}
}

func mustOnePack(t *testing.T, s *store.Store) [32]byte {
	t.Helper()
	ps, err := s.Packs()
	if err != nil || len(ps) != 1 {
		t.Fatalf("got %d packs (%v), want 1", len(ps), err)
	}
	return ps[0].ID
}

// dataFiles lists the files under chunks/ and packs/.
func dataFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, sub := range []string{"chunks", "packs"} {
		_ = filepath.WalkDir(filepath.Join(dir, sub), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.Type().IsRegular() {
				out = append(out, strings.TrimPrefix(p, dir))
			}
			return nil
		})
	}
	return out
}
