package sched

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/infertest"
)

// prefixCounter counts the Observer's Prefix calls: one per admitted
// request, so one per prefill.
type prefixCounter struct {
	nopObserver
	mu sync.Mutex
	n  int
}

func (p *prefixCounter) Prefix(int, int, string) { p.mu.Lock(); p.n++; p.mu.Unlock() }

// byChoice splits a task's events by choice.
func byChoice(t *testing.T, task *Task, n int) ([][]int32, []string, Result) {
	t.Helper()
	toks := make([][]int32, n)
	texts := make([]strings.Builder, n)
	last := 0
	for {
		evs, done, err := task.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Choice < last || ev.Choice >= n {
				t.Fatalf("event of choice %d after choice %d (n = %d): want index order", ev.Choice, last, n)
			}
			last = ev.Choice
			if ev.Token != NoToken {
				toks[ev.Choice] = append(toks[ev.Choice], ev.Token)
			}
			texts[ev.Choice].WriteString(ev.Text)
		}
		if done {
			break
		}
	}
	out := make([]string, n)
	for i := range texts {
		out[i] = texts[i].String()
	}
	return toks, out, task.Result()
}

func TestChoices(t *testing.T) {
	e := loadEnv(t)
	prompt := e.encode(t, infertest.Story(0, 40))
	for _, c := range []struct {
		name       string
		n          int
		constraint bool
		stop       []string
	}{
		{"three choices", 3, false, nil},
		{"two choices with a stop string", 2, false, []string{"."}},
		{"four constrained choices", 4, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			mk := func(seed uint64, n int) *Request {
				r := &Request{Prompt: prompt, MaxTokens: 14, Sampling: sampling(seed), Stop: c.stop, NoCache: true, N: n}
				if c.constraint {
					r.Constraint = &evenTokens{eog: e.tok.EOGs(), vocab: e.tok.VocabSize(), minLen: 3}
				}
				return r
			}
			alone := e.newSched(t, nil, nil)
			var want []output
			for i := range c.n {
				o := run(t, alone, mk(uint64(50+i), 1))
				if o.err != nil {
					t.Fatal(o.err)
				}
				want = append(want, o)
			}
			// Each choice is what it is alone, with or without a draft
			// lane (whose steps may end a choice in their middle).
			for _, d := range []struct {
				name string
				make func() Drafter
			}{
				{"plain", func() Drafter { return nil }},
				{"model-self", func() Drafter { return NewModelDrafter(e.model) }},
				{"lookup", func() Drafter { return &LookupDrafter{MinN: 1} }},
			} {
				t.Run(d.name, func(t *testing.T) {
					sameChoices(t, e, mk(50, c.n), want, c.constraint, d.make())
				})
			}
		})
	}
	for _, c := range []struct {
		name string
		req  Request
	}{
		{"too many", Request{Prompt: prompt, Sampling: sampling(1), N: MaxChoices + 1}},
		{"prefill only", Request{Prompt: prompt, Sampling: sampling(1), N: 2, PrefillOnly: true}},
		{"embeddings", Request{Prompt: prompt, Sampling: sampling(1), N: 2, Hidden: engine.OutputLast}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := e.newSched(t, nil, nil)
			_, err := s.Submit(context.Background(), &c.req)
			var re *RequestError
			if !errors.As(err, &re) || re.Field != "n" {
				t.Fatalf("got %v, want a RequestError naming n", err)
			}
		})
	}
}

// sameChoices runs req (N choices) on a scheduler with drafter d (nil:
// none) and checks that choice i is want[i], the request alone with seed
// plus i, and that the prompt was computed once.
func sameChoices(t *testing.T, e *env, req *Request, want []output, constraint bool, d Drafter) {
	t.Helper()
	obs := &prefixCounter{}
	s := e.newSched(t, nil, func(cfg *Config) { cfg.Observer, cfg.Drafter, cfg.DraftIgnoreCost = obs, d, true })
	task, err := s.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	toks, texts, res := byChoice(t, task, req.N)
	if err := task.Err(); err != nil {
		t.Fatal(err)
	}
	if obs.n != 1 {
		t.Errorf("got %d prefills (Observer.Prefix calls), want 1", obs.n)
	}
	if len(res.Choices) != req.N {
		t.Fatalf("got %d choice results, want %d", len(res.Choices), req.N)
	}
	var all []int32
	for i := range req.N {
		wantToks := want[i].tokens
		if !slices.Equal(toks[i], wantToks) {
			t.Errorf("choice %d: got tokens %v, want %v (the request alone with seed+%d)", i, toks[i], wantToks, i)
		}
		if texts[i] != want[i].text {
			t.Errorf("choice %d: got text %q, want %q", i, texts[i], want[i].text)
		}
		cr := res.Choices[i]
		if !slices.Equal(cr.Generated, want[i].res.Generated) || cr.Finish != want[i].res.Finish || cr.StopWord != want[i].res.StopWord {
			t.Errorf("choice %d: got result %+v, want generated %v finish %v stop %q", i, cr, want[i].res.Generated, want[i].res.Finish, want[i].res.StopWord)
		}
		if constraint {
			for _, tok := range toks[i] {
				if tok%2 != 0 {
					t.Errorf("choice %d: token %d is odd under the even-token constraint", i, tok)
				}
			}
		}
		all = append(all, cr.Generated...)
	}
	if !slices.Equal(res.Generated, all) {
		t.Errorf("Result.Generated has %d tokens, want the %d of every choice in order", len(res.Generated), len(all))
	}
}
