package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/muserhq/muser/store"
	"github.com/muserhq/muser/store/storetest"
)

// TestGCSweepsQuarantineAndStaleTemps: gc deletes files in quarantine/
// older than the grace period, and temporary files older than the
// store's Open whatever the grace (a crash's leftovers: the ledger lock
// makes the open store the only writer), but keeps a fresh quarantine file
// and a temporary file written since Open within the grace period.
func TestGCSweepsQuarantineAndStaleTemps(t *testing.T) {
	dir := t.TempDir()
	s := storetest.Open(t, dir, store.Options{BlockTokens: 4})
	s.Close()

	now := time.Now()
	files := []struct {
		path string
		age  time.Duration // before now; negative: written after the reopen
		gone bool
	}{
		{filepath.Join("quarantine", "aa.chunk"), 2 * time.Hour, true},
		{filepath.Join("quarantine", "bb.chunk"), time.Minute, false},
		{filepath.Join("chunks", "ab", ".tmp-crashed"), time.Minute, true},
		{filepath.Join("packs", "cd", ".tmp-crashed"), 2 * time.Hour, true},
		{filepath.Join("chunks", "ab", ".tmp-fresh"), -1, false},
		{filepath.Join("chunks", "ab", "not-ours"), 2 * time.Hour, false},
	}
	write := func(rel string, age time.Duration) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("0123456789"), 0o600); err != nil {
			t.Fatal(err)
		}
		at := now.Add(-age)
		if age < 0 {
			at = time.Now()
		}
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		if f.age >= 0 {
			write(f.path, f.age)
		}
	}
	s = storetest.Open(t, dir, store.Options{BlockTokens: 4})
	for _, f := range files {
		if f.age < 0 {
			write(f.path, f.age)
		}
	}
	dry, err := s.GC(context.Background(), store.GCOptions{MaxBytes: -1, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := s.GC(context.Background(), store.GCOptions{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, f := range files {
		_, err := os.Stat(filepath.Join(dir, f.path))
		if gone := os.IsNotExist(err); gone != f.gone {
			t.Errorf("%s: gone %v, want %v (stat: %v)", f.path, gone, f.gone, err)
		}
		if f.gone {
			want++
		}
	}
	if rep.Orphans != want || rep.OrphanBytes != int64(10*want) {
		t.Errorf("report: %d orphans, %d bytes; want %d, %d", rep.Orphans, rep.OrphanBytes, want, 10*want)
	}
	if dry.Orphans != rep.Orphans || dry.OrphanBytes != rep.OrphanBytes {
		t.Errorf("dry run: %d orphans, %d bytes; the run %d, %d", dry.Orphans, dry.OrphanBytes, rep.Orphans, rep.OrphanBytes)
	}
	// not-ours must go away before the harness's final check.
	os.Remove(filepath.Join(dir, "chunks", "ab", "not-ours"))
	os.Remove(filepath.Join(dir, "chunks", "ab", ".tmp-fresh"))
}
