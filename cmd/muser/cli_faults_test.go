package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bad command lines are refused with the exit status --help documents,
// before anything is written: an existing file stays as it was.

func TestBadFlagsExitUsage(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "t.txt")
	if err := os.WriteFile(text, []byte("Once upon a time there was a cat."), 0o644); err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(dir, "keep.prof")
	if err := os.WriteFile(prof, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"bench", "-m", storiesModel, "--cpuprofile", prof, "--device", "bogus"},
		{"bench", "-m", storiesModel, "--cpuprofile", prof, "--draft-lookup"},
		{"bench", "-m", storiesModel, "--cpuprofile", prof, "--draft-lookup", "--text", text, "--gen-tokens", "5"},
		{"model", "inspect", storiesModel, "--no-digest", "--block-tokens", "100000", "--home", dir},
		{"serve", "--model", storiesModel, "--home", dir, "--addr", "127.0.0.1:0", "--shutdown-grace", "-1s"},
		{"serve", "--model", storiesModel, "--home", dir, "--addr", "127.0.0.1:0", "--shutdown-grace", "0s"},
		{"serve", "--model", storiesModel, "--home", dir, "--addr", "127.0.0.1:0", "--write-timeout", "-1s"},
	} {
		// A bound on a server that would start if the flag were taken:
		// it then runs until the context ends and exits 0.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var out, errs strings.Builder
		code := run(ctx, args, strings.NewReader(""), &out, &errs)
		cancel()
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, strings.TrimSpace(errs.String()))
		}
	}
	if b, _ := os.ReadFile(prof); string(b) != "precious" {
		t.Errorf("a bench refused for its flags replaced the --cpuprofile file (%d bytes)", len(b))
	}
}

// A file that cannot be written is a failed operation (exit status 1),
// not a missing input (3), even when its directory does not exist.
func TestOutputWriteFailureExit1(t *testing.T) {
	out := filepath.Join(t.TempDir(), "missing-dir", "out.gguf")
	if code, _, errs := runCLI(t, "quantize", "--type", "Q8_0", storiesModel, out); code != exitFailure {
		t.Errorf("quantize into a missing directory: exit %d, want %d (%s)", code, exitFailure, strings.TrimSpace(errs))
	}
	home, ids := fillStore(t, 1)
	if code, _, errs := muser(t, home, "pack", "export", ids[0].String(), "-o", out); code != exitFailure {
		t.Errorf("pack export into a missing directory: exit %d, want %d (%s)", code, exitFailure, strings.TrimSpace(errs))
	}
}

// pack export replaces an existing FILE only with --force.
func TestExportDoesNotClobber(t *testing.T) {
	home, ids := fillStore(t, 1)
	file := filepath.Join(t.TempDir(), "precious.txt")
	if err := os.WriteFile(file, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs := muser(t, home, "pack", "export", ids[0].String(), "-o", file)
	if b, _ := os.ReadFile(file); string(b) != "precious" || code != exitFailure {
		t.Fatalf("export over an existing file: exit %d (%q), the file now %d bytes; want exit %d and the file as it was", code, errs, len(b), exitFailure)
	}
	if code, _, errs := muser(t, home, "pack", "export", ids[0].String(), "-o", file, "--force"); code != 0 {
		t.Fatalf("export --force: exit %d (%s)", code, errs)
	}
	if b, _ := os.ReadFile(file); string(b) == "precious" {
		t.Fatal("export --force left the old file")
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(file), ".muser-export-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// pack rm naming one pack twice (its ID and a prefix of it) removes it.
func TestPackRmSamePackTwice(t *testing.T) {
	home, ids := fillStore(t, 2)
	if code, out, errs := muser(t, home, "pack", "rm", ids[0].String(), ids[0].String()[:12]); code != 0 {
		t.Fatalf("pack rm ID PREFIX-of-ID: exit %d, %q %q", code, out, errs)
	}
	if code, out, _ := muser(t, home, "pack", "ls"); code != 0 || strings.Contains(out, ids[0].Short()) {
		t.Fatalf("after pack rm: exit %d, still listed:\n%s", code, out)
	}
}

// A node enroll whose bundle cannot be written admits nobody.
func TestNodeEnrollFailedWriteAdmitsNobody(t *testing.T) {
	home := t.TempDir()
	if code, _, errs := muser(t, home, "cluster", "init", "--name", "alpha"); code != 0 {
		t.Fatalf("cluster init: %d %s", code, errs)
	}
	bad := filepath.Join(t.TempDir(), "missing-dir", "bob.bundle")
	code, _, errs := muser(t, home, "node", "enroll", "bob", "-o", bad)
	if code != exitFailure {
		t.Fatalf("enroll to %s: exit %d, want %d (%s)", bad, code, exitFailure, errs)
	}
	if _, out, _ := muser(t, home, "node", "ls"); strings.Contains(out, "bob") {
		t.Fatalf("node enroll failed (%s) but bob is in the registry:\n%s", strings.TrimSpace(errs), out)
	}
	good := filepath.Join(t.TempDir(), "bob.bundle")
	if code, _, errs := muser(t, home, "node", "enroll", "bob", "-o", good); code != 0 {
		t.Fatalf("enroll to %s: exit %d (%s)", good, code, errs)
	}
	if _, out, _ := muser(t, home, "node", "ls"); !strings.Contains(out, "bob") {
		t.Fatalf("bob enrolled but not in the registry:\n%s", out)
	}
}
