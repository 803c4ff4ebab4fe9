package engine_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/infertest"
)

// TestRestorePrefixFailsClosed checks the restore rule's failure paths: a
// store that fails midway, an identity for another KV layout, a sequence
// that is not empty. Each leaves the sequence empty (or untouched), and a
// sequence whose restore failed computes the same logits as a fresh one.
func TestRestorePrefixFailsClosed(t *testing.T) {
	ctx := context.Background()
	m := openModel(t, tinyModel(t, "qwen2", ggml.TypeQ8_0), opts{Threads: 2})
	V := m.Config().Vocab
	const B = 8
	ps := infertest.NewMemStore(B)
	id, err := m.Identity(B)
	if err != nil {
		t.Fatal(err)
	}
	p := enginetest.RandomTokens(rand.New(rand.NewPCG(4, 4)), 3*B+2, V)
	seq, full := enginetest.Prefill(t, m, p)
	if _, err := m.PublishPrefix(ctx, ps, id, nil, seq); err != nil {
		t.Fatal(err)
	}

	ps.FailAfterBlocks = 1
	s, _ := m.NewSequence(len(p))
	n, err := m.RestorePrefix(ctx, ps, id, nil, s, p)
	if !errors.Is(err, infertest.ErrInjected) || n != 0 || s.Len() != 0 {
		t.Fatalf("restore from a failing store: %d tokens, %v, sequence of %d; want 0, the injected error, empty", n, err, s.Len())
	}
	st := []engine.Step{{Seq: s, Tokens: p, Output: engine.OutputAll}}
	if err := m.Forward(ctx, st); err != nil {
		t.Fatal(err)
	}
	enginetest.RequireSame(t, "logits after a failed restore", st[0].Logits, full)

	ps.FailAfterBlocks = -1
	other := id
	other.KV = engine.KVString(m.KVType(), 2*B)
	s2, _ := m.NewSequence(len(p))
	if n, err := m.RestorePrefix(ctx, ps, other, nil, s2, p); !errors.Is(err, engine.ErrPrefix) || n != 0 || s2.Len() != 0 {
		t.Errorf("restore under another kv field: %d tokens, %v; want ErrPrefix and nothing restored", n, err)
	}
	if n, err := m.RestorePrefix(ctx, ps, id, nil, s, p); !errors.Is(err, engine.ErrPrefix) || n != 0 || s.Len() != len(p) {
		t.Errorf("restore into a full sequence: %d tokens, %v, sequence of %d; want ErrPrefix and the sequence untouched", n, err, s.Len())
	}
	if n, err := m.RestorePrefix(ctx, ps, id, []byte("another tenant"), s2, p); err != nil || n != 0 {
		t.Errorf("restore under another salt: %d tokens, %v; want a miss", n, err)
	}
}
