package sched

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/grammar"
	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/store"
)

// propCase is one request of the exactness property tests; mk builds a
// fresh copy (its Constraint is owned by one run).
type propCase struct {
	name string
	mk   func() Request
}

// propSampling returns the sampling settings the property tests mix: every
// step of the sampler's chain, greedy and seeded.
func propSampling(e *env, r *rand.Rand) (string, sample.Params) {
	seed := r.Uint64()
	bias := func() map[int32]float64 {
		m := map[int32]float64{}
		for range 6 {
			m[int32(r.IntN(e.tok.VocabSize()))] = []float64{4, -3, math.Inf(-1)}[r.IntN(3)]
		}
		return m
	}
	switch r.IntN(8) {
	case 0:
		return "greedy", sample.Params{}
	case 1:
		return "greedy+penalties", sample.Params{RepeatPenalty: 1.4, PresencePenalty: 0.5, FrequencyPenalty: 0.3, PenaltyLastN: -1}
	case 2:
		return "greedy+bias", sample.Params{LogitBias: bias()}
	case 3:
		p := sample.Defaults(seed)
		return "defaults", p
	case 4:
		return "topk5-topp0.7", sample.Params{Temperature: 1.2, TopK: 5, TopP: 0.7, Seed: seed}
	case 5:
		return "minp0.2", sample.Params{Temperature: 1.5, MinP: 0.2, Seed: seed}
	case 6:
		p := sample.Params{Temperature: 0.9, TopK: 0, TopP: 0.95, RepeatPenalty: 1.2, PresencePenalty: 0.4, FrequencyPenalty: 0.2,
			PenaltyLastN: 8, LogitBias: bias(), Seed: seed}
		return "everything", p
	default:
		return "hot", sample.Params{Temperature: 2, Seed: seed}
	}
}

// propCases returns n requests of varied prompts (some longer than a
// store block), lengths, stop strings, logprobs, sampling settings and
// constraints (the real JSON grammar), drawn from seed.
func propCases(t testing.TB, e *env, n int, seed uint64) []propCase {
	r := rand.New(rand.NewPCG(seed, 7))
	texts := []string{
		"Once upon a time",
		infertest.Story(int(seed%5), 20+int(seed%30)),
		infertest.Story(int(seed%3), 90),
		"<|im_start|>user\nGive me a JSON object about a cat.<|im_end|>\n<|im_start|>assistant\n",
		"{\"name\": \"Tom\", \"age\": 3}, {\"name\": \"Lily\", \"age\": 4}, {\"name\":",
	}
	json, err := grammar.Compile(grammar.JSONObject(), e.tok)
	if err != nil {
		t.Fatal(err)
	}
	var out []propCase
	for i := range n {
		text := texts[r.IntN(len(texts))]
		sname, sp := propSampling(e, r)
		maxTok := 5 + r.IntN(40)
		if r.IntN(5) == 0 {
			maxTok = 0
		}
		lp := r.IntN(4) - 1
		var stop []string
		if r.IntN(3) == 0 {
			stop = [][]string{{"."}, {" the"}, {"\n", "}"}}[r.IntN(3)]
		}
		constrained := r.IntN(4) == 0
		choices := 1
		if r.IntN(4) == 0 {
			choices = 2 + r.IntN(2)
		}
		prompt := e.encode(t, text)
		name := fmt.Sprintf("%d/%s/len%d/max%d/lp%d/stop%q/json%v/n%d", i, sname, len(prompt), maxTok, lp, stop, constrained, choices)
		out = append(out, propCase{name: name, mk: func() Request {
			req := Request{ID: fmt.Sprint(i), Salt: []byte("tenant"), Prompt: prompt, MaxTokens: maxTok, Sampling: sp, Logprobs: lp, Stop: stop, N: choices}
			if constrained {
				req.Constraint = json.NewMatcher(e.tok)
			}
			return req
		}})
	}
	return out
}

// runProp runs every case on s, all submitted at once, and returns what
// the clients saw.
func runProp(t *testing.T, s *Scheduler, cases []propCase, noCache bool) []fullOutput {
	t.Helper()
	sc := make([]specCase, len(cases))
	for i, c := range cases {
		req := c.mk()
		req.NoCache = noCache
		sc[i] = specCase{req: req}
	}
	return runAll(t, s, sc)
}

// sameProp compares the client's view of a request (events with logprobs,
// tokens, finish, stop word, error), not its cache counts.
func sameProp(t *testing.T, what string, got, want fullOutput) {
	t.Helper()
	if fmt.Sprint(got.events) != fmt.Sprint(want.events) {
		t.Errorf("%s: events differ\n got %q\nwant %q", what, got.events, want.events)
	}
	g, w := got.res, want.res
	if fmt.Sprint(g.Generated) != fmt.Sprint(w.Generated) || g.Finish != w.Finish || g.EOG != w.EOG || g.StopWord != w.StopWord ||
		fmt.Sprint(got.err) != fmt.Sprint(want.err) {
		t.Errorf("%s: got %v finish %v eog %v stop %q err %v, want %v finish %v eog %v stop %q err %v", what,
			g.Generated, g.Finish, g.EOG, g.StopWord, got.err, w.Generated, w.Finish, w.EOG, w.StopWord, want.err)
	}
}

// TestExactnessProperties checks that a request's events, logprobs and
// finish do not depend on how it was run: alone with its prompt in one
// chunk is the reference; batched with others of other lengths and
// settings, in small prefill chunks and split decode calls, with its
// prefix restored from the store or reused from a slot, and with each
// draft lane, must give the same.
func TestExactnessProperties(t *testing.T) {
	e := loadDefault(t)
	draft := loadDraft(t)
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	small, err := engine.Load(f, engine.Options{Device: cpu.New(cpu.Options{Threads: 1}), BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	seeds := []uint64{1, 2, 3, 4}
	if raceDetector {
		seeds = seeds[:1] // the concurrency is the same for every seed
	}
	for _, seed := range seeds {
		cases := propCases(t, e, 7, seed)
		ref := e.newSched(t, nil, func(c *Config) { c.PrefillChunk, c.StepTokens = 512, 512 })
		want := make([]fullOutput, len(cases))
		for i := range cases {
			want[i] = runProp(t, ref, cases[i:i+1], true)[0]
			t.Logf("seed %d case %s: %d tokens, finish %v, err %v", seed, cases[i].name, len(want[i].res.Generated), want[i].res.Finish, want[i].err)
		}
		variants := []struct {
			name  string
			cfg   func(*Config)
			store bool
			lane  func() Drafter
		}{
			{"batched-chunk1", func(c *Config) { c.Slots, c.PrefillChunk, c.StepTokens, c.DecodeBatch = 4, 1, 3, 1 }, false, nil},
			{"batched-chunk7", func(c *Config) { c.Slots, c.PrefillChunk, c.StepTokens, c.DecodeBatch = 3, 7, 10, -1 }, false, nil},
			{"store-reuse", func(c *Config) { c.Slots, c.SlotReuse = 2, true }, true, nil},
			{"lookup", func(c *Config) { c.Slots, c.PrefillChunk = 3, 11 }, false, func() Drafter { return &LookupDrafter{MinN: 1} }},
			{"model-q4k", func(c *Config) { c.Slots = 3 }, false, func() Drafter { return NewModelDrafter(draft) }},
			{"chain-store", func(c *Config) { c.Slots, c.SlotReuse = 2, true }, true,
				func() Drafter { return NewChainDrafter(&LookupDrafter{}, NewModelDrafter(draft)) }},
			{"random", func(c *Config) { c.Slots, c.DecodeBatch = 4, 1 }, false, func() Drafter { return randomDrafter(e.model.Config().Vocab, seed) }},
			// The same model with backend calls of 3 rows and 1 thread:
			// prompt chunks and verification rows span several calls.
			{"small-batches", func(c *Config) { c.Model, c.Slots, c.SlotReuse = small, 3, true }, true, func() Drafter { return NewModelDrafter(draft) }},
		}
		for _, v := range variants {
			t.Run(fmt.Sprintf("seed%d/%s", seed, v.name), func(t *testing.T) {
				var d Drafter
				if v.lane != nil {
					d = v.lane()
					defer d.Close()
				}
				var s *Scheduler
				if v.store {
					st := openStore(t, t.TempDir())
					defer st.Close()
					s = e.newSched(t, st, func(c *Config) {
						v.cfg(c)
						c.Drafter, c.DraftIgnoreCost, c.DraftMax = d, true, 4
					})
				} else {
					s = e.newSched(t, nil, func(c *Config) {
						v.cfg(c)
						c.Drafter, c.DraftIgnoreCost, c.DraftMax = d, true, 4
					})
				}
				// Closed before the store and the drafter (deferred first).
				defer s.Close(context.Background())
				passes := 1
				if v.store {
					passes = 3 // the second and third restore or reuse what the first published
				}
				cached := 0
				for pass := range passes {
					got := runProp(t, s, cases, !v.store)
					for i := range cases {
						sameProp(t, fmt.Sprintf("pass %d request %s", pass, cases[i].name), got[i], want[i])
						cached += got[i].res.CachedTokens
					}
					if v.store {
						if err := s.Sync(context.Background()); err != nil {
							t.Fatal(err)
						}
					}
				}
				if v.store && cached == 0 {
					t.Errorf("no request restored or reused a prefix")
				}
			})
		}
	}
}

// TestContextLimitProperties fills small contexts exactly: prompts of
// every length near the limit, one or several choices, greedy and seeded,
// batched or alone, with prefixes restored from a store of small blocks,
// and with each draft lane. Each must finish with length after
// Ctx-len(prompt)+1 tokens (the last one sampled is not fed), and give
// what plain decoding alone gives.
func TestContextLimitProperties(t *testing.T) {
	e := loadDefault(t)
	draft := loadDraft(t)
	const ctx = 40
	story := e.encode(t, infertest.Story(1, 60))
	if len(story) < ctx {
		t.Fatalf("story of %d tokens is shorter than the context", len(story))
	}
	var cases []propCase
	lengths := []int{ctx - 1, ctx - 2, ctx - 3, ctx - 8, 17, 16}
	if raceDetector {
		lengths = []int{ctx - 1, 16}
	}
	for _, p := range lengths {
		for _, n := range []int{1, 2} {
			for si, sp := range []sample.Params{{LogitBias: eogBans(e)}, endless(e, uint64(p)), {Temperature: 1, Seed: 9, LogitBias: eogBans(e)}} {
				prompt := story[:p]
				cases = append(cases, propCase{name: fmt.Sprintf("prompt%d/n%d/sampling%d", p, n, si), mk: func() Request {
					return Request{ID: fmt.Sprint(p), Salt: []byte("tenant"), Prompt: prompt, Sampling: sp, Logprobs: 1, N: n}
				}})
			}
		}
	}
	ref := e.newSched(t, nil, func(c *Config) { c.Ctx = ctx })
	want := make([]fullOutput, len(cases))
	for i, c := range cases {
		want[i] = runProp(t, ref, cases[i:i+1], true)[0]
		req := c.mk()
		wantLen := (ctx - len(req.Prompt) + 1) * req.N
		if want[i].err != nil || want[i].res.Finish != FinishLength || len(want[i].res.Generated) != wantLen {
			t.Fatalf("%s alone: finish %v after %d tokens, err %v; want length after %d", c.name, want[i].res.Finish,
				len(want[i].res.Generated), want[i].err, wantLen)
		}
	}
	for _, v := range []struct {
		name  string
		store bool
		cfg   func(*Config)
		lane  func() Drafter
	}{
		{"batched", false, func(c *Config) { c.Slots, c.PrefillChunk, c.StepTokens = 4, 5, 12 }, nil},
		{"store", true, func(c *Config) { c.Slots, c.SlotReuse = 2, true }, nil},
		{"lookup", false, func(c *Config) { c.Slots = 3 }, func() Drafter { return &LookupDrafter{MinN: 1} }},
		{"model-q4k", false, func(c *Config) { c.Slots = 3 }, func() Drafter { return NewModelDrafter(draft) }},
		{"model-window", true, func(c *Config) { c.Slots = 2 }, func() Drafter { d := NewModelDrafter(draft); d.Window = 12; return d }},
		{"random", true, func(c *Config) { c.Slots = 3 }, func() Drafter { return randomDrafter(e.model.Config().Vocab, 3) }},
	} {
		t.Run(v.name, func(t *testing.T) {
			var d Drafter
			if v.lane != nil {
				d = v.lane()
				defer d.Close()
			}
			mod := func(c *Config) {
				c.Ctx = ctx
				v.cfg(c)
				c.Drafter, c.DraftIgnoreCost, c.DraftMax = d, true, 6
			}
			var s *Scheduler
			passes := 1
			if v.store {
				st, err := store.Open(t.TempDir(), store.Options{NoSync: true, BlockTokens: 8})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				s, passes = e.newSched(t, st, mod), 2
			} else {
				s = e.newSched(t, nil, mod)
			}
			defer s.Close(context.Background()) // before the store and the drafter
			for pass := range passes {
				got := runProp(t, s, cases, !v.store)
				for i := range cases {
					sameProp(t, fmt.Sprintf("pass %d %s", pass, cases[i].name), got[i], want[i])
				}
				if err := s.Sync(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestCancelProperties cancels requests mid-way (in prefill and in
// decode) while others run beside them, then runs more requests in the
// freed slots (reusing the cancelled ones' KV where they can): every
// request that was not cancelled gives what it gives alone, and a
// cancelled one's tokens are a prefix of what it gives alone.
func TestCancelProperties(t *testing.T) {
	e := loadDefault(t)
	draft := loadDraft(t)
	long := e.encode(t, infertest.Story(2, 100))
	mk := func(id string, prompt []int32, max int, sp sample.Params) Request {
		return Request{ID: id, Salt: []byte("tenant"), Prompt: prompt, MaxTokens: max, Sampling: sp, Logprobs: 2}
	}
	victim := mk("victim", long, 200, endless(e, 5))
	early := mk("early", long[:70], 200, sample.Params{LogitBias: eogBans(e)})
	others := []Request{
		mk("a", long[:30], 40, sampling(1)),
		mk("b", e.encode(t, "Once upon a time"), 25, sample.Params{}),
		mk("c", long[:80], 30, sample.Params{Temperature: 1.1, TopK: 8, Seed: 4, RepeatPenalty: 1.3, PenaltyLastN: 16}),
	}
	after := []Request{
		mk("victim-again", long, 30, endless(e, 5)),
		mk("early-again", long[:75], 20, sampling(8)),
		mk("d", long[:40], 20, sampling(2)),
	}
	ref := e.newSched(t, nil, nil)
	alone := func(r Request) fullOutput {
		r.NoCache = true
		return runAll(t, ref, []specCase{{req: r}})[0]
	}
	wantVictim, wantEarly := alone(victim), alone(early)
	wantOthers := make([]fullOutput, len(others))
	for i, r := range others {
		wantOthers[i] = alone(r)
	}
	wantAfter := make([]fullOutput, len(after))
	for i, r := range after {
		wantAfter[i] = alone(r)
	}
	for _, v := range []struct {
		name string
		lane func() Drafter
	}{
		{"plain", nil},
		{"lookup", func() Drafter { return &LookupDrafter{MinN: 1} }},
		{"model-q4k", func() Drafter { return NewModelDrafter(draft) }},
		{"chain", func() Drafter { return NewChainDrafter(&LookupDrafter{}, NewModelDrafter(draft)) }},
	} {
		t.Run(v.name, func(t *testing.T) {
			var d Drafter
			if v.lane != nil {
				d = v.lane()
				defer d.Close()
			}
			st := openStore(t, t.TempDir())
			defer st.Close()
			s := e.newSched(t, st, func(c *Config) {
				c.Slots, c.SlotReuse, c.PrefillChunk, c.StepTokens = 3, true, 8, 16
				c.Drafter, c.DraftIgnoreCost, c.DraftMax = d, true, 4
			})
			ctx := context.Background()
			defer s.Close(ctx) // before the store and the drafter
			submit := func(r Request) *Task {
				task, err := s.Submit(ctx, &r)
				if err != nil {
					t.Fatal(err)
				}
				return task
			}
			vt, et := submit(victim), submit(early)
			et.Cancel() // most likely while its prompt is computed
			ot := make([]*Task, len(others))
			for i, r := range others {
				ot[i] = submit(r)
			}
			// Read the victim's first tokens, then cancel it.
			var seen []string
			for len(seen) < 6 {
				evs, done, err := vt.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, ev := range evs {
					seen = append(seen, fullEvent(ev))
				}
				if done {
					t.Fatalf("victim finished after %d events", len(seen))
				}
			}
			vt.Cancel()
			gotVictim := collectFull(t, vt)
			gotVictim.events = append(seen, gotVictim.events...)
			gotEarly := collectFull(t, et)
			for _, c := range []struct {
				name      string
				got, want fullOutput
			}{{"victim", gotVictim, wantVictim}, {"early", gotEarly, wantEarly}} {
				if !errors.Is(c.got.err, ErrCancelled) || c.got.res.Finish != FinishCancelled && c.got.res.Slot >= 0 {
					t.Errorf("%s: finish %v err %v, want cancelled", c.name, c.got.res.Finish, c.got.err)
				}
				if len(c.got.events) > len(c.want.events) || !slices.Equal(c.got.events, c.want.events[:len(c.got.events)]) {
					t.Errorf("%s: events %q are not a prefix of %q", c.name, c.got.events, c.want.events)
				}
			}
			for i := range others {
				sameProp(t, others[i].ID, collectFull(t, ot[i]), wantOthers[i])
			}
			if err := s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			for i, r := range after {
				got := collectFull(t, submit(r))
				sameProp(t, r.ID, got, wantAfter[i])
			}
		})
	}
}

// fullEvent renders an event as collectFull does.
func fullEvent(ev Event) string {
	s := fmt.Sprintf("%d %q", ev.Token, ev.Text)
	if ev.Logprob != nil {
		s += fmt.Sprintf(" %v %x", ev.Logprob.ID, ev.Logprob.Logprob)
	}
	for _, x := range ev.Top {
		s += fmt.Sprintf(" [%v %x]", x.ID, x.Logprob)
	}
	return s
}
