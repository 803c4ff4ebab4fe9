package sched

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/infer/sample"
)

// evenTokens allows only even token ids, and the end-of-generation tokens
// once it has accepted minLen tokens. It records what it accepted.
type evenTokens struct {
	eog      []int32
	vocab    int
	minLen   int
	accepted []int32
}

func (c *evenTokens) Allowed(set sample.TokenSet) error {
	for id := 0; id < c.vocab; id += 2 {
		set.Add(int32(id))
	}
	if c.CanEnd() {
		for _, id := range c.eog {
			set.Add(id)
		}
	}
	return nil
}

func (c *evenTokens) Accept(tok int32) error {
	if tok%2 != 0 && !slices.Contains(c.eog, tok) {
		return fmt.Errorf("token %d is odd", tok)
	}
	c.accepted = append(c.accepted, tok)
	return nil
}

func (c *evenTokens) CanEnd() bool { return len(c.accepted) >= c.minLen }

func (c *evenTokens) Clone() sample.Constraint {
	d := *c
	d.accepted = slices.Clone(c.accepted)
	return &d
}

func TestConstraint(t *testing.T) {
	e := loadEnv(t)
	const n = 4
	mk := func(i int) (*Request, *evenTokens) {
		c := &evenTokens{eog: e.tok.EOGs(), vocab: e.tok.VocabSize(), minLen: 5}
		return &Request{ID: fmt.Sprint(i), Prompt: e.encode(t, infertest.Story(0, 10+7*i)), MaxTokens: 30,
			Sampling: sampling(uint64(7 + i)), Logprobs: 1, NoCache: true, Constraint: c}, c
	}
	alone := e.newSched(t, nil, nil)
	want := make([]output, n)
	for i := range n {
		req, c := mk(i)
		want[i] = run(t, alone, req)
		if want[i].err != nil || len(want[i].res.Generated) < c.minLen {
			t.Fatalf("request %d: err %v, %d tokens, want at least %d", i, want[i].err, len(want[i].res.Generated), c.minLen)
		}
		if !slices.Equal(c.accepted, want[i].res.Generated) {
			t.Errorf("request %d: constraint accepted %v, generated %v", i, c.accepted, want[i].res.Generated)
		}
		for j, tok := range want[i].res.Generated {
			if tok%2 != 0 && !e.tok.IsEOG(tok) {
				t.Errorf("request %d token %d: got odd token %d", i, j, tok)
			}
			if e.tok.IsEOG(tok) && j < c.minLen {
				t.Errorf("request %d: end-of-generation at %d, before the constraint could end (%d)", i, j, c.minLen)
			}
		}
	}
	batched := e.newSched(t, nil, func(c *Config) { c.Slots = n })
	tasks := make([]*Task, n)
	for i := range n {
		req, _ := mk(i)
		task, err := batched.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		tasks[i] = task
	}
	got := make([]output, n)
	var wg sync.WaitGroup
	for i := range tasks {
		wg.Go(func() { got[i] = collect(t, tasks[i]) })
	}
	wg.Wait()
	for i := range n {
		if !slices.Equal(got[i].res.Generated, want[i].res.Generated) || got[i].text != want[i].text {
			t.Errorf("request %d: batched gave %v, alone %v", i, got[i].res.Generated, want[i].res.Generated)
		}
	}
}
