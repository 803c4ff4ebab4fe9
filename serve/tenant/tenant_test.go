package tenant

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	keyA = "sk-aaaaaaaaaaaaaaaaaaaa"
	keyB = "sk-bbbbbbbbbbbbbbbbbbbb"
	keyC = "c2VjcmV0LWtleS1udW1iZXItdGhyZWU="
)

func TestParseKeys(t *testing.T) {
	good := "# muser keys\n\n" + keyA + " alice\n  " + keyB + "\tbob  \n" + keyC + " alice\n"
	k, err := ParseKeys(strings.NewReader(good), "keys.txt")
	if err != nil {
		t.Fatal(err)
	}
	if k.Len() != 3 || k.Tenants() != 2 {
		t.Errorf("got %d keys of %d tenants, want 3 of 2", k.Len(), k.Tenants())
	}
	for _, tc := range []struct {
		key, tenant string
		ok          bool
	}{
		{keyA, "alice", true}, {keyB, "bob", true}, {keyC, "alice", true},
		{"sk-cccccccccccccccccccc", "", false}, {"", "", false}, {keyA + "x", "", false},
		{strings.ToUpper(keyA), "", false}, {"short", "", false},
	} {
		got, ok := k.Lookup(tc.key)
		if got != tc.tenant || ok != tc.ok {
			t.Errorf("Lookup(%q): got (%q, %v), want (%q, %v)", tc.key, got, ok, tc.tenant, tc.ok)
		}
	}
	for _, e := range k.entries {
		if bytes.Contains(e.hash[:], []byte("sk-")) {
			t.Errorf("entry holds key text")
		}
	}
}

func TestParseKeysErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		line       int
		msg        string
	}{
		{"empty", "", 0, "holds no keys"},
		{"comments only", "# nothing\n\n", 0, "holds no keys"},
		{"one field", keyA + "\n", 1, `want "KEY TENANT", got 1 fields`},
		{"three fields", keyA + " alice extra\n", 1, "got 3 fields"},
		{"short key", "# c\nshort alice\n", 2, "key: is 5 characters, want 16 to 256"},
		{"long key", strings.Repeat("k", 257) + " alice\n", 1, "key: is 257 characters"},
		{"bad key char", "sk-aaaaaaaa#aaaaaaaaa alice\n", 1, "character 12 ('#')"},
		{"bad tenant", keyA + " al!ce\n", 1, "tenant: \"al!ce\": character 3 ('!')"},
		{"long tenant", keyA + " " + strings.Repeat("t", 65) + "\n", 1, "want 1 to 64"},
		{"duplicate key", keyA + " alice\n" + keyB + " bob\n" + keyA + " carol\n", 3, "the key on line 1 appears again"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseKeys(strings.NewReader(tc.text), "keys.txt")
			var fe *FileError
			if !errors.As(err, &fe) || !errors.Is(err, ErrKeyFile) {
				t.Fatalf("got %v, want a *FileError wrapping ErrKeyFile", err)
			}
			if fe.Line != tc.line || fe.File != "keys.txt" {
				t.Errorf("got %s line %d, want keys.txt line %d", fe.File, fe.Line, tc.line)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %q, want it to contain %q", err, tc.msg)
			}
		})
	}
}

func TestLoadKeysMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys")
	if err := os.WriteFile(path, []byte(keyA+" alice\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadKeys(path)
	if !errors.Is(err, ErrKeyFile) || !strings.Contains(err.Error(), "mode 0644") {
		t.Fatalf("got %v, want a mode error", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	if tn, ok := k.Lookup(keyA); !ok || tn != "alice" {
		t.Errorf("got (%q, %v), want (alice, true)", tn, ok)
	}
	if _, err := LoadKeys(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want ErrNotExist", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#\n"), MaxFileBytes/2+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(big); !errors.Is(err, ErrKeyFile) {
		t.Errorf("got %v, want ErrKeyFile for an oversize file", err)
	}
}

func TestSalt(t *testing.T) {
	dir := t.TempDir()
	s1, err := LoadSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("got mode %04o, want 0600", fi.Mode().Perm())
	}
	s2, err := LoadSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s1.Salt("alice", ""), s2.Salt("alice", "")) {
		t.Error("the salt changed across loads of the same secret")
	}
	other, err := LoadSecret(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(s1.Salt("alice", ""), other.Salt("alice", "")) {
		t.Error("two secrets give the same salt")
	}
	seen := map[string]string{}
	for _, p := range [][2]string{{"alice", ""}, {"bob", ""}, {"alice", "x"}, {"alicex", ""}, {"alic", "ex"}, {"", "alice"}} {
		s := string(s1.Salt(p[0], p[1]))
		if len(s) != 32 {
			t.Fatalf("got %d-byte salt, want 32", len(s))
		}
		if prev, dup := seen[s]; dup {
			t.Errorf("%v and %s share a salt", p, prev)
		}
		seen[s] = p[0] + "/" + p[1]
	}
}

func TestLoadSecretErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, SecretFile)
	for _, tc := range []struct {
		name string
		data []byte
		mode os.FileMode
		msg  string
	}{
		{"loose mode", make([]byte, 32), 0o644, "mode 0644"},
		{"short", make([]byte, 31), 0o600, "want exactly 32"},
		{"long", make([]byte, 33), 0o600, "want exactly 32"},
		{"empty", nil, 0o600, "want exactly 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(path)
			if err := os.WriteFile(path, tc.data, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, err := LoadSecret(dir)
			if !errors.Is(err, ErrSecret) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %v, want ErrSecret containing %q", err, tc.msg)
			}
		})
	}
	// A secret that cannot be read (a directory in its place) says so,
	// not that it has the wrong size.
	os.Remove(path)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecret(dir); !errors.Is(err, ErrSecret) || !strings.Contains(err.Error(), "cannot be read") {
		t.Errorf("secret path is a directory: got %v, want ErrSecret saying it cannot be read", err)
	}
}

// TestClusterSecret: every node of a cluster derives the same secret from
// the link secret, another cluster a different one, and the derived
// secret is neither the link secret nor a salt computed with it.
func TestClusterSecret(t *testing.T) {
	link := bytes.Repeat([]byte{7}, 32)
	other := bytes.Repeat([]byte{8}, 32)
	a, b := ClusterSecret(link), ClusterSecret(append([]byte(nil), link...))
	if len(a) != SecretLen {
		t.Fatalf("len %d, want %d", len(a), SecretLen)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("two derivations from one link secret differ: %x vs %x", a, b)
	}
	if bytes.Equal(a, ClusterSecret(other)) {
		t.Errorf("two link secrets derive the same secret %x", a)
	}
	if bytes.Equal(a, link) {
		t.Errorf("derived secret equals the link secret")
	}
	sa, _ := NewSalter(a)
	sl, _ := NewSalter(link)
	if bytes.Equal(sa.Salt("local", ""), sl.Salt("local", "")) {
		t.Errorf("salt under the derived secret equals the salt under the link secret")
	}
}
