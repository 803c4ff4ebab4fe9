package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/store"
)

// TestPackTransferChecksNode: pack push and pack pull check NODE before
// they open the store or move anything. A NODE that is not a peer in the
// registry is exit status 3 even when there is nothing to push, this
// node's own name and a removed peer are refused too, and a pull that is
// refused creates no store under --home.
func TestPackTransferChecksNode(t *testing.T) {
	home := t.TempDir()
	for _, args := range [][]string{
		{"cluster", "init", "--name", "alpha"},
		{"node", "enroll", "gone", "-o", filepath.Join(t.TempDir(), "gone.bundle")},
		{"node", "add", "gone", "127.0.0.1:9"},
		{"node", "rm", "gone"},
	} {
		if code, _, errOut := muser(t, home, args...); code != exitOK {
			t.Fatalf("%v: exit %d, %s", args, code, errOut)
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"pull from an unknown node", []string{"pack", "pull", "ghost", "abcd"}, exitNotFound, `"ghost" is not in the registry`},
		{"pull from this node", []string{"pack", "pull", "alpha", "abcd"}, exitUsage, "this node's own name"},
		{"pull from a removed node", []string{"pack", "pull", "gone", "abcd"}, exitFailure, "gone was removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := muser(t, home, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d with %q", tc.args, code, out, errOut, tc.code, tc.msg)
			}
			if _, err := os.Stat(filepath.Join(home, "ledger.db")); err == nil {
				t.Fatalf("%v: refused, but it created a store under --home", tc.args)
			}
		})
	}
	// An empty store: push --all has nothing to send, but NODE is still
	// checked.
	st, err := store.Open(home, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"push to an unknown node", []string{"pack", "push", "ghost", "--all"}, exitNotFound, `"ghost" is not in the registry`},
		{"push to this node", []string{"pack", "push", "alpha", "--all"}, exitUsage, "this node's own name"},
		{"push to a removed node", []string{"pack", "push", "gone", "--all"}, exitFailure, "gone was removed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := muser(t, home, append(tc.args, "--json")...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d with %q", tc.args, code, out, errOut, tc.code, tc.msg)
			}
		})
	}
}
