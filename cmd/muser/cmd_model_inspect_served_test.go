package main

import (
	"context"
	"testing"

	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/store"
)

// TestModelInspectBlockOfServedStore: while muser serve holds the store
// under --home, model inspect computes the identity's kv field for that
// store's block size (which it asks the server for), as --help promises,
// not for the default: with a store of 16-token blocks, the identity
// printed is the one of the packs the server makes.
func TestModelInspectBlockOfServedStore(t *testing.T) {
	path := stories(t)
	home := t.TempDir()
	st, err := store.Open(home, store.Options{BlockTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := serveCLI(t, ctx, path, home)

	got := inspectIdentityJSON(t, "--no-digest", "--home", home, path)
	want := engineIdentity(t, path, kvcache.DTypeF16, 16)
	if got.BlockTokens != 16 || got.KV != want.KV {
		t.Errorf("model inspect while serve runs: block tokens %d (from %q), kv %q; want 16 from the store, kv %q",
			got.BlockTokens, got.BlockFrom, got.KV, want.KV)
	}
	cancel()
	if c := <-srv.code; c != exitOK {
		t.Fatalf("serve exit %d (stderr %s)", c, srv.stderr.String())
	}
	// With the server gone, the store is read directly: the same answer.
	if got := inspectIdentityJSON(t, "--no-digest", "--home", home, path); got.BlockTokens != 16 || got.BlockFrom != "the store under "+home {
		t.Errorf("model inspect after serve: block tokens %d from %q; want 16 from the store", got.BlockTokens, got.BlockFrom)
	}
}
