package errorfs_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/store/vfs"
	"github.com/muserhq/muser/store/vfs/errorfs"
)

func TestOnNth(t *testing.T) {
	dir := t.TempDir()
	for n := 0; n < 4; n++ {
		c := errorfs.OnNth(n, errorfs.OpCreate, errorfs.OpWrite, errorfs.OpSync, errorfs.OpRename)
		fsys := errorfs.Wrap(vfs.Default, c)
		err := func() error {
			f, err := fsys.CreateTemp(dir, "x")
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := f.Write([]byte("hello")); err != nil {
				return err
			}
			if err := f.Sync(); err != nil {
				return err
			}
			return fsys.Rename(f.Name(), filepath.Join(dir, "final"))
		}()
		if !errors.Is(err, errorfs.ErrInjected) || !c.Fired() {
			t.Fatalf("n=%d: got %v, fired=%v; want the injected error", n, err, c.Fired())
		}
		if c.Seen() != n+1 {
			t.Fatalf("n=%d: saw %d operations, want %d", n, c.Seen(), n+1)
		}
	}
	c := errorfs.OnNth(-1)
	fsys := errorfs.Wrap(vfs.Default, c)
	if err := fsys.MkdirAll(filepath.Join(dir, "a"), 0o700); err != nil || c.Fired() || c.Seen() != 1 {
		t.Fatalf("counting only: err %v, fired %v, seen %d", err, c.Fired(), c.Seen())
	}
}
