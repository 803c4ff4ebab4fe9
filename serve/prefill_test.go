package serve

import (
	"context"
	"errors"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/pack"
)

// TestPrefill: the producer side of disaggregated prefill computes and
// publishes a prefix and names its pack; another identity is refused.
func TestPrefill(t *testing.T) {
	ts := startServer(t, nil)
	ids, err := ts.s.model.tok.Encode(infertest.Story(0, 150), tokenizer.EncodeOptions{AddSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	salt := []byte("consumer-salt")
	id, err := ts.s.Prefill(context.Background(), ts.s.Identity(), salt, ids)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ts.s.Store().Pack(id)
	if err != nil {
		t.Fatal(err)
	}
	b := ts.s.Store().BlockTokens()
	if info.Tokens != len(ids)/b*b {
		t.Errorf("pack covers %d tokens, want %d", info.Tokens, len(ids)/b*b)
	}
	m, err := ts.s.Store().Match(ts.s.Identity(), salt, ids)
	if err != nil || m.Tokens != info.Tokens {
		t.Errorf("match after prefill: %+v, %v", m, err)
	}
	// Again: nothing new to compute, same pack.
	again, err := ts.s.Prefill(context.Background(), ts.s.Identity(), salt, ids)
	if err != nil || again != id {
		t.Errorf("second prefill: %v, %v; want %v", again, err, id)
	}
	other := ts.s.Identity()
	other.Engine = "other-engine/9"
	if _, err := ts.s.Prefill(context.Background(), other, salt, ids); !errors.Is(err, pack.ErrRefused) {
		t.Errorf("another identity: got %v, want pack.ErrRefused", err)
	}
	if _, err := ts.s.Prefill(context.Background(), ts.s.Identity(), salt, ids[:10]); err == nil {
		t.Error("a prefill shorter than a block: got nil, want an error")
	}
}
