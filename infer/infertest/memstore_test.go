package infertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/muserhq/muser/pack"
)

func TestMemStore(t *testing.T) {
	ctx := context.Background()
	id := pack.Identity{Format: 1, Arch: "a", KV: "f16;block=4;layout=lkv1", Engine: "e/1"}
	s := NewMemStore(4)
	toks := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	payload := func(b int) ([]byte, error) { return []byte(fmt.Sprint("block", b)), nil }
	if err := s.Publish(ctx, id, nil, toks[:8], payload); err != nil {
		t.Fatal(err)
	}
	if err := s.Publish(ctx, id, nil, toks[:8], payload); err != nil || s.Written != 2 {
		t.Fatalf("second publish: err %v, %d blocks written in all, want 2 (dedup)", err, s.Written)
	}
	if err := s.Publish(ctx, id, nil, toks[:6], payload); err == nil {
		t.Errorf("publish of a partial block succeeded")
	}
	for _, c := range []struct {
		name   string
		id     pack.Identity
		salt   []byte
		tokens []int32
		want   int
	}{
		{"whole", id, nil, toks, 8},
		{"one block", id, nil, toks[:7], 4},
		{"diverges in block 1", id, nil, []int32{1, 2, 3, 4, 5, 0, 7, 8}, 4},
		{"other salt", id, []byte("tenant"), toks, 0},
		{"other identity", pack.Identity{Format: 1, Arch: "b"}, nil, toks, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got [][]byte
			n, err := s.Restore(ctx, c.id, c.salt, c.tokens, func(b int, kv []byte) error {
				if b != len(got) {
					t.Errorf("put block %d, want %d", b, len(got))
				}
				got = append(got, bytes.Clone(kv))
				return nil
			})
			if err != nil || n != c.want || len(got)*4 != n {
				t.Fatalf("Restore = %d, %v with %d blocks put, want %d", n, err, len(got), c.want)
			}
			for i, kv := range got {
				if want, _ := payload(i); !bytes.Equal(kv, want) {
					t.Errorf("block %d = %q, want %q", i, kv, want)
				}
			}
		})
	}
	s.FailAfterBlocks = 1
	if _, err := s.Restore(ctx, id, nil, toks, func(int, []byte) error { return nil }); !errors.Is(err, ErrInjected) {
		t.Errorf("injected failure: got %v, want ErrInjected", err)
	}
}
