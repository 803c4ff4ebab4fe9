//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// chunkPathOf returns where chunk id of the store in home lives.
func chunkPathOf(home string, id pack.Digest) string {
	h := id.String()
	return filepath.Join(home, "chunks", h[:2], h)
}

// TestPackVerifySpecialFiles: a FIFO and a directory in place of chunk
// files, and a damaged chunk of a third pack, are three findings, each
// naming its pack; the check does not hang or stop at the first, and the
// three packs are quarantined.
func TestPackVerifySpecialFiles(t *testing.T) {
	home, ids := fillStore(t, 4)
	s, err := store.Open(home, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var first []pack.Digest
	for _, id := range ids[:3] {
		m, err := s.Manifest(id)
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, m.Chunks[0].ID)
	}
	s.Close()
	for i, mk := range []func(string) error{
		func(p string) error { return syscall.Mkfifo(p, 0o600) },
		func(p string) error { return os.Mkdir(p, 0o700) },
		func(p string) error { return os.WriteFile(p, []byte("not the chunk"), 0o600) },
	} {
		p := chunkPathOf(home, first[i])
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := mk(p); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := muser(t, home, "pack", "verify")
	if code != exitFailure {
		t.Fatalf("pack verify: exit %d, want %d\n%s%s", code, exitFailure, out, errOut)
	}
	for _, id := range ids[:3] {
		if !strings.Contains(out, "pack "+id.Short()) || !strings.Contains(errOut, "quarantined pack "+id.Short()) {
			t.Errorf("pack verify does not report and quarantine pack %s:\n%s%s", id.Short(), out, errOut)
		}
	}
	if strings.Contains(out, ids[3].Short()) {
		t.Errorf("pack verify names the sound pack %s:\n%s", ids[3].Short(), out)
	}
	if !strings.Contains(out, "3 errors found") || !strings.Contains(out, "not a regular file") {
		t.Errorf("pack verify output:\n%s\nwant 3 errors, the special files named as not regular", out)
	}
}
