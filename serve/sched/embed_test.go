package sched

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/infer/sample"
)

// directHidden computes the prompt's hidden states in one Forward call.
func directHidden(t *testing.T, e *env, prompt []int32) []float32 {
	t.Helper()
	seq, err := e.model.NewSequence(len(prompt) + 1)
	if err != nil {
		t.Fatal(err)
	}
	defer seq.Close()
	st := []engine.Step{{Seq: seq, Tokens: prompt, Hidden: engine.OutputAll}}
	if err := e.model.Forward(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	return st[0].HiddenStates
}

// sameFloats reports the first index where a and b differ bitwise, or -1.
func sameFloats(a, b []float32) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func TestEmbeddingsRequests(t *testing.T) {
	e := loadEnv(t)
	H := e.model.Config().Hidden
	dir := t.TempDir()
	st := openStore(t, dir)
	defer st.Close()
	s := e.newSched(t, st, func(c *Config) { c.Slots = 3 })
	prompt := e.encode(t, infertest.Story(0, 150)) // several prefill chunks of 48, several blocks
	want := directHidden(t, e, prompt)

	// An embeddings request for every row, another for the last row,
	// beside a generation that keeps decoding: each gets its states.
	gen, err := s.Submit(context.Background(), &Request{ID: "gen", Prompt: e.encode(t, infertest.Story(1, 40)),
		MaxTokens: 30, Sampling: sample.Defaults(1)})
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg        sync.WaitGroup
		all, last output
	)
	wg.Go(func() { all = run(t, s, &Request{ID: "all", Prompt: prompt, Hidden: engine.OutputAll}) })
	wg.Go(func() { last = run(t, s, &Request{ID: "last", Prompt: prompt, Hidden: engine.OutputLast}) })
	g := collect(t, gen)
	wg.Wait()
	if g.err != nil || len(g.res.Generated) == 0 {
		t.Fatalf("generation beside embeddings: err %v, %d tokens", g.err, len(g.res.Generated))
	}
	if all.err != nil || last.err != nil {
		t.Fatalf("embeddings requests: %v, %v", all.err, last.err)
	}
	if i := sameFloats(all.res.Hidden, want); i >= 0 {
		t.Fatalf("every row: differs from one Forward at %d (got %d floats, want %d)", i, len(all.res.Hidden), len(want))
	}
	if i := sameFloats(last.res.Hidden, want[len(want)-H:]); i >= 0 {
		t.Fatalf("last row: differs at %d (got %d floats, want %d)", i, len(last.res.Hidden), H)
	}
	if len(all.res.Generated) != 0 || all.tokens != nil || all.res.Finish != FinishStop {
		t.Fatalf("embeddings request generated %v (events %v), finish %v; want nothing, stop", all.res.Generated, all.tokens, all.res.Finish)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The prompt's blocks are published; an every-row request still
	// computes every token (no restore), a last-row request restores.
	again := run(t, s, &Request{ID: "again", Prompt: prompt, Hidden: engine.OutputAll})
	if again.err != nil || again.res.CachedTokens != 0 || sameFloats(again.res.Hidden, want) >= 0 {
		t.Fatalf("every row after publish: err %v, cached %d (want 0), same states %v", again.err, again.res.CachedTokens,
			sameFloats(again.res.Hidden, want) < 0)
	}
	warm := run(t, s, &Request{ID: "warm", Prompt: prompt, Hidden: engine.OutputLast})
	if warm.err != nil || warm.res.CachedTokens == 0 || sameFloats(warm.res.Hidden, want[len(want)-H:]) >= 0 {
		t.Fatalf("last row after publish: err %v, cached %d (want > 0), same state %v", warm.err, warm.res.CachedTokens,
			sameFloats(warm.res.Hidden, want[len(want)-H:]) < 0)
	}
}

func TestEmbeddingsRequestErrors(t *testing.T) {
	e := loadEnv(t)
	s := e.newSched(t, nil, nil)
	for _, tc := range []struct {
		name string
		req  *Request
	}{
		{"bad mode", &Request{Prompt: []int32{1, 2}, Hidden: engine.Output(7)}},
		{"empty", &Request{Hidden: engine.OutputAll}},
		{"too long", &Request{Prompt: make([]int32, 600), Hidden: engine.OutputAll}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Submit(context.Background(), tc.req); !errors.Is(err, ErrBadRequest) {
				t.Fatalf("got %v, want an error wrapping ErrBadRequest", err)
			}
		})
	}
}
