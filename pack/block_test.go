package pack_test

import (
	"errors"
	"testing"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/pack/packtest"
)

func TestBlockKeysChain(t *testing.T) {
	id := packtest.Identity("k").Key()
	tenant := pack.TenantTag([]byte("tenant-a"))
	toks := packtest.Tokens(1, 4*8+3, 1000)
	keys := pack.BlockKeys(id, tenant, toks, 4)
	if len(keys) != 8 {
		t.Fatalf("got %d keys, want 8 (partial block has none)", len(keys))
	}
	seen := map[pack.Digest]bool{}
	for _, k := range keys {
		if seen[k] {
			t.Fatal("repeated block key")
		}
		seen[k] = true
	}
	// A key depends on everything before the end of its block, and nothing after.
	for cut := 1; cut <= 8; cut++ {
		got := pack.BlockKeys(id, tenant, toks[:cut*4], 4)
		for i := range got {
			if got[i] != keys[i] {
				t.Fatalf("prefix of %d blocks: key %d differs", cut, i)
			}
		}
	}
	changed := append([]int32(nil), toks...)
	changed[9]++ // inside block 2
	got := pack.BlockKeys(id, tenant, changed, 4)
	for i := range got {
		if (got[i] == keys[i]) != (i < 2) {
			t.Fatalf("token 9 changed: key %d equal=%v, want equal only before block 2", i, got[i] == keys[i])
		}
	}
	other := pack.BlockKeys(id, pack.TenantTag([]byte("tenant-b")), toks, 4)
	for i := range other {
		if other[i] == keys[i] {
			t.Fatalf("two tenants share block key %d", i)
		}
	}
	otherID := pack.BlockKeys(packtest.Identity("k2").Key(), tenant, toks, 4)
	if otherID[0] == keys[0] {
		t.Fatal("two identities share block key 0")
	}
	// Regrouping the same tokens in another block size gives other keys.
	if k2 := pack.BlockKeys(id, tenant, toks[:8], 8); k2[0] == keys[1] || k2[0] == keys[0] {
		t.Fatal("block size is not bound into the key")
	}
}

func TestCheckTokens(t *testing.T) {
	tests := []struct {
		name   string
		tokens []int32
		block  int
		ok     bool
	}{
		{"one block", []int32{1, 2, 3, 4}, 4, true},
		{"two blocks", make([]int32, 8), 4, true},
		{"empty", nil, 4, false},
		{"partial", make([]int32, 5), 4, false},
		{"negative", []int32{1, -2, 3, 4}, 4, false},
		{"zero block", []int32{1}, 0, false},
		{"huge block", []int32{1}, pack.MaxBlockTokens + 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := pack.CheckTokens(tt.tokens, tt.block)
			if got := err == nil; got != tt.ok {
				t.Fatalf("got ok=%v (%v), want %v", got, err, tt.ok)
			}
			if err != nil && !errors.Is(err, pack.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}
