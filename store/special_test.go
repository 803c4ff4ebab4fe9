//go:build unix

package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
	"github.com/muserhq/muser/store/vfs"
)

// replaceWith puts a special file where path was: a FIFO, a directory or
// a symbolic link to a regular copy of the original bytes.
func replaceWith(t *testing.T, path, kind string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(path, 0o600)
	case "dir":
		err = os.Mkdir(path, 0o700)
	case "symlink":
		copyPath := filepath.Join(t.TempDir(), "copy")
		if err = os.WriteFile(copyPath, data, 0o600); err == nil {
			err = os.Symlink(copyPath, path)
		}
	default:
		t.Fatalf("unknown kind %q", kind)
	}
	if err != nil {
		t.Fatalf("making a %s at %s: %v", kind, path, err)
	}
}

// TestSpecialFilesNeverBlock: a FIFO, a directory or a symbolic link in
// place of a chunk or manifest file is a finding of its pack (verify goes
// on, reports the other packs' faults and quarantines each), and a restore
// of such a pack is refused with a receipt instead of hanging.
func TestSpecialFilesNeverBlock(t *testing.T) {
	for _, kind := range []string{"fifo", "dir", "symlink"} {
		for _, target := range []string{"chunk", "manifest"} {
			t.Run(kind+" "+target, func(t *testing.T) {
				s := storetest.OpenUnchecked(t, "", store.Options{BlockTokens: 4, NoSync: true})
				id := packtest.Identity("special")
				a := storetest.Publish(t, s, id, salt, packtest.Tokens(1, 8, 500), 40).Pack
				b := storetest.Publish(t, s, id, salt, packtest.Tokens(2, 8, 500), 40).Pack
				c := storetest.Publish(t, s, id, salt, packtest.Tokens(3, 8, 500), 40).Pack
				ma, _ := s.Manifest(a)
				mb, _ := s.Manifest(b)
				if target == "chunk" {
					replaceWith(t, chunkFile(s.Dir(), ma.Chunks[1].ID), kind)
				} else {
					replaceWith(t, manifestFile(s.Dir(), a), kind)
				}
				flip(t, chunkFile(s.Dir(), mb.Chunks[0].ID), 3) // a second, ordinary fault

				// A no-data check sees it too, without opening chunks.
				rep, err := s.Verify(context.Background(), store.VerifyOptions{NoData: true})
				if err != nil {
					t.Fatalf("verify (no data): %v", err)
				}
				if got := findingPacks(rep); !got[a] {
					t.Errorf("verify (no data): findings %v; want one for pack %s", rep.Findings, a.Short())
				}

				rep, err = s.Verify(context.Background(), store.VerifyOptions{Quarantine: true})
				if err != nil {
					t.Fatalf("verify: got error %v, want findings", err)
				}
				got := findingPacks(rep)
				if !got[a] || !got[b] || got[c] {
					t.Fatalf("verify findings %v: got packs %v, want %s and %s (and not %s)", rep.Findings, got, a.Short(), b.Short(), c.Short())
				}
				for _, f := range rep.Findings {
					var pe *store.PackError
					if errors.As(f, &pe) && pe.Pack == a && !errors.Is(f, pack.ErrCorrupt) {
						t.Errorf("finding %v does not wrap pack.ErrCorrupt", f)
					}
				}
				if len(rep.Quarantined) != 2 {
					t.Errorf("quarantined %v, want %s and %s", rep.Quarantined, a.Short(), b.Short())
				}
				rs, err := s.Receipts(store.ReceiptFilter{Pack: a})
				if err != nil || len(rs) == 0 {
					t.Errorf("receipts of %s: got %v, %v; want one from verify", a.Short(), rs, err)
				}
			})
		}
	}
}

// TestRestoreSpecialFile: a restore through the index of a pack whose
// chunk is a FIFO is refused with a receipt, and the next restore misses.
func TestRestoreSpecialFile(t *testing.T) {
	for _, kind := range []string{"fifo", "dir", "symlink"} {
		t.Run(kind, func(t *testing.T) {
			s := storetest.OpenUnchecked(t, "", store.Options{BlockTokens: 4, NoSync: true})
			id := packtest.Identity("special-restore")
			toks := packtest.Tokens(9, 12, 500)
			p := storetest.Publish(t, s, id, salt, toks, 40).Pack
			m, _ := s.Manifest(p)
			replaceWith(t, chunkFile(s.Dir(), m.Chunks[1].ID), kind)
			_, _, err := storetest.Restore(t, s, id, salt, append(toks, 1))
			var re *store.RefusalError
			if !errors.As(err, &re) || re.Receipt.ID == "" || !errors.Is(err, vfs.ErrNotRegular) {
				t.Fatalf("restore: got %v, want a *RefusalError with a receipt wrapping vfs.ErrNotRegular", err)
			}
			n, _, err := storetest.Restore(t, s, id, salt, append(toks, 1))
			if n != 0 || err != nil {
				t.Fatalf("restore after the refusal: %d tokens, %v; want a miss", n, err)
			}
		})
	}
}
