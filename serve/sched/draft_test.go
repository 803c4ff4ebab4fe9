package sched

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/pack"
)

func TestLookup(t *testing.T) {
	for _, c := range []struct {
		name    string
		h       []int32
		lo, hi  int
		max     int
		want    []int32
		comment string
	}{
		{"no repeat", []int32{1, 2, 3, 4}, 1, 4, 8, nil, ""},
		{"bigram", []int32{1, 2, 3, 4, 1, 2}, 2, 4, 8, []int32{3, 4, 1, 2}, ""},
		{"bigram capped", []int32{1, 2, 3, 4, 1, 2}, 2, 4, 2, []int32{3, 4}, ""},
		{"unigram off", []int32{5, 9, 7, 5}, 2, 4, 8, nil, ""},
		{"unigram on", []int32{5, 9, 7, 5}, 1, 4, 8, []int32{9, 7, 5}, ""},
		{"most recent wins", []int32{1, 2, 3, 1, 2, 4, 1, 2}, 2, 2, 1, []int32{4}, ""},
		{"longest wins", []int32{0, 2, 5, 9, 2, 6, 0, 2}, 1, 4, 1, []int32{5}, "the bigram 0 2 beats the later unigram 2"},
		{"run", []int32{7, 7, 7}, 2, 4, 5, []int32{7}, "the match may overlap the suffix"},
		{"short history", []int32{3}, 1, 4, 5, nil, ""},
		{"empty", nil, 1, 4, 5, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := lookup(nil, c.h, c.lo, c.hi, c.max)
			if !slices.Equal(got, c.want) {
				t.Errorf("lookup(%v, n %d..%d, max %d) = %v, want %v %s", c.h, c.lo, c.hi, c.max, got, c.want, c.comment)
			}
		})
	}
}

// FuzzLookup checks that a lookup proposal is always a continuation that
// occurs in the history right after the history's own last tokens.
func FuzzLookup(f *testing.F) {
	f.Add([]byte{1, 2, 3, 1, 2}, uint8(2), uint8(4), uint8(3))
	f.Add([]byte{7, 7, 7, 7}, uint8(1), uint8(3), uint8(8))
	f.Fuzz(func(t *testing.T, hb []byte, lo, hi, max uint8) {
		h := make([]int32, len(hb))
		for i, b := range hb {
			h[i] = int32(b % 5)
		}
		lo8, hi8 := int(lo%6)+1, int(hi%6)+1
		got := lookup(nil, h, lo8, hi8, int(max%10))
		if len(got) > int(max%10) {
			t.Fatalf("got %d tokens, more than max %d", len(got), max%10)
		}
		if len(got) == 0 {
			return
		}
		// Some n in [lo, hi] and i with h[i:i+n] == suffix and the
		// proposal following it.
		L := len(h)
		for n := min(hi8, L-1); n >= lo8; n-- {
			for i := 0; i+n < L; i++ {
				if slices.Equal(h[i:i+n], h[L-n:]) && slices.Equal(h[i+n:min(i+n+len(got), L)], got) {
					return
				}
			}
		}
		t.Fatalf("lookup(%v, %d..%d) = %v follows no occurrence of a suffix", h, lo8, hi8, got)
	})
}

func TestDraftLen(t *testing.T) {
	for _, c := range []struct {
		acc, rej float64
		max      int
		want     int
	}{
		{0, 0, 8, 1},     // α = 0.5: α² < 0.4
		{8, 0, 8, 8},     // α = 0.9: α^8 = 0.43
		{8, 0, 3, 3},     // capped
		{0, 10, 8, 1},    // never below one
		{3, 0, 8, 4},     // α = 0.8: α^4 = 0.41, α^5 = 0.33
		{100, 1, 16, 16}, // α ≈ 0.98
	} {
		t.Run(fmt.Sprintf("acc%v_rej%v_max%d", c.acc, c.rej, c.max), func(t *testing.T) {
			if got := draftLen(c.acc, c.rej, c.max); got != c.want {
				t.Errorf("draftLen(%v, %v, %d) = %d, want %d", c.acc, c.rej, c.max, got, c.want)
			}
		})
	}
}

// defaultEnv is the embedded default model, the target of the draft tests.
var (
	defOnce sync.Once
	defVal  *env
	defErr  error
	// q4 is the default model re-quantized to Q4_K: a draft model with the
	// same tokenizer that agrees with the target often but not always.
	q4Once sync.Once
	q4Val  *engine.Model
	q4Err  error
)

func loadDefault(t testing.TB) *env {
	t.Helper()
	defOnce.Do(func() {
		var f *gguf.File
		if f, defErr = defaultmodel.File(); defErr != nil {
			return
		}
		var m *engine.Model
		if m, defErr = engine.Load(f, engine.Options{Device: cpu.New(cpu.Options{Threads: 2})}); defErr != nil {
			return
		}
		var tok *tokenizer.Tokenizer
		tok, defErr = tokenizer.FromGGUF(m.File().Meta)
		defVal = &env{model: m, tok: tok}
	})
	if defErr != nil {
		t.Fatal(defErr)
	}
	return defVal
}

// loadDraft returns the default model re-quantized to Q4_K (written once
// into a temporary directory, as `muser quantize --type Q4_K` would).
func loadDraft(t testing.TB) *engine.Model {
	t.Helper()
	q4Once.Do(func() {
		var f *gguf.File
		if f, q4Err = defaultmodel.File(); q4Err != nil {
			return
		}
		dir, err := os.MkdirTemp("", "muser-draft-")
		if err != nil {
			q4Err = err
			return
		}
		// The mapped file stays open for the package's tests; unlinking
		// it now leaves no file behind.
		defer os.RemoveAll(dir)
		path := filepath.Join(dir, "draft-q4k.gguf")
		if q4Err = requantize(f, ggml.TypeQ4_K, path); q4Err != nil {
			return
		}
		q4Val, q4Err = engine.Open(path, engine.Options{Device: cpu.New(cpu.Options{Threads: 2})})
	})
	if q4Err != nil {
		t.Fatal(q4Err)
	}
	return q4Val
}

// requantize writes f with every weight matrix converted to typ (or its
// fallback for the matrix's row length): the rule of `muser quantize`.
func requantize(f *gguf.File, typ ggml.Type, path string) error {
	b := gguf.NewBuilder()
	for _, kv := range f.Meta.All() {
		b.Set(kv.Key, kv.Value)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		big := 0
		for _, d := range ti.Shape {
			if d > 1 {
				big++
			}
		}
		if big < 2 || !strings.HasSuffix(ti.Name, "weight") || strings.HasSuffix(ti.Name, "_norm.weight") {
			b.AddTensor(ti.Name, ti.Type, ti.Shape, f.Data(ti))
			continue
		}
		cols := int(ti.Shape[0])
		to := ggml.Fallback(typ, cols)
		from, src := ti.Type, f.Data(ti)
		b.AddTensorFunc(ti.Name, to, ti.Shape, func(dst []byte) error {
			sr, err := from.RowSize(cols)
			if err != nil {
				return err
			}
			dr, err := to.RowSize(cols)
			if err != nil {
				return err
			}
			buf := make([]float32, cols)
			for r := 0; r < len(src)/sr; r++ {
				if err := ggml.Dequantize(from, src[r*sr:(r+1)*sr], buf); err != nil {
					return err
				}
				if err := ggml.Quantize(to, buf, dst[r*dr:(r+1)*dr]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return b.WriteFile(path)
}

// scriptedDrafter proposes tokens from a fixed function of the history.
type scriptedDrafter struct {
	name string
	fn   func(h []int32, max int) []int32
}

func (d *scriptedDrafter) Name() string { return d.name }
func (d *scriptedDrafter) Forget(int)   {}
func (d *scriptedDrafter) Close() error { return nil }
func (d *scriptedDrafter) Draft(_ context.Context, reqs []DraftRequest) error {
	for i := range reqs {
		reqs[i].Tokens = append(reqs[i].Tokens[:0], d.fn(reqs[i].History, reqs[i].Max)...)
	}
	return nil
}

// randomDrafter proposes random tokens (almost always rejected) and,
// with a fixed-seed generator, sometimes a token out of the vocabulary
// or more than asked (which the scheduler must ignore).
func randomDrafter(vocab int, seed uint64) Drafter {
	r := rand.New(rand.NewPCG(seed, 1))
	return &scriptedDrafter{name: "random", fn: func(h []int32, max int) []int32 {
		n := 1 + r.IntN(max)
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(r.IntN(vocab))
		}
		switch r.IntN(20) {
		case 0:
			out[0] = int32(vocab + 3)
		case 1:
			out = append(out, 1, 2, 3)
		}
		return out
	}}
}

// oracleDrafter proposes what the plain run produced: every draft is
// accepted until the output diverges from it (it never does).
func oracleDrafter(prompts [][]int32, outputs [][]int32) Drafter {
	return &scriptedDrafter{name: "oracle", fn: func(h []int32, max int) []int32 {
		for i, p := range prompts {
			full := append(slices.Clone(p), outputs[i]...)
			if len(h) <= len(full) && slices.Equal(full[:len(h)], h) {
				return full[len(h):min(len(full), len(h)+max)]
			}
		}
		return nil
	}}
}

// specCase is one request of the exactness tests.
type specCase struct {
	prompt []int32
	req    Request
}

func specCases(t testing.TB, e *env, n int, seed uint64) []specCase {
	r := rand.New(rand.NewPCG(seed, 2))
	texts := []string{
		infertest.Story(int(seed%7), 30+int(seed%40)),
		"def add(a, b):\n    return a + b\n\ndef add(a, b):\n    return",
		"<|im_start|>user\nList three colours as JSON.<|im_end|>\n<|im_start|>assistant\n",
		"Once upon a time, there was a little cat. The little cat",
		"{\"name\": \"Tom\", \"age\": 3}, {\"name\": \"Lily\", \"age\": 4}, {\"name\":",
	}
	var out []specCase
	for i := range n {
		text := texts[(i+int(seed))%len(texts)]
		var sp sample.Params
		switch r.IntN(4) {
		case 0: // greedy
		case 1:
			sp = sampling(r.Uint64())
		case 2:
			sp = sampling(r.Uint64())
			sp.RepeatPenalty, sp.PresencePenalty, sp.FrequencyPenalty, sp.PenaltyLastN = 1.3, 0.2, 0.1, 16
		case 3:
			sp = sample.Params{Temperature: 1.3, Seed: r.Uint64(), TopK: 0}
		}
		req := Request{ID: fmt.Sprint(i), Prompt: e.encode(t, text), MaxTokens: 10 + r.IntN(50), Sampling: sp,
			Logprobs: r.IntN(4) - 1, NoCache: true}
		if r.IntN(3) == 0 {
			req.Stop = []string{"the", "\n\n"}[r.IntN(2):][:1]
		}
		if r.IntN(4) == 0 {
			req.MaxTokens = 0 // until EOG or the context
		}
		out = append(out, specCase{prompt: req.Prompt, req: req})
	}
	return out
}

// fullOutput records everything a client sees of a request, in order.
type fullOutput struct {
	events []string
	res    Result
	err    error
}

func collectFull(t testing.TB, task *Task) fullOutput {
	t.Helper()
	var o fullOutput
	for {
		evs, done, err := task.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			s := fmt.Sprintf("%d %q", ev.Token, ev.Text)
			if ev.Logprob != nil {
				s += fmt.Sprintf(" %v %x", ev.Logprob.ID, ev.Logprob.Logprob)
			}
			for _, x := range ev.Top {
				s += fmt.Sprintf(" [%v %x]", x.ID, x.Logprob)
			}
			o.events = append(o.events, s)
		}
		if done {
			break
		}
	}
	o.res, o.err = task.Result(), task.Err()
	return o
}

// runAll submits every case at once and collects them.
func runAll(t testing.TB, s *Scheduler, cases []specCase) []fullOutput {
	t.Helper()
	tasks := make([]*Task, len(cases))
	for i := range cases {
		req := cases[i].req
		task, err := s.Submit(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		tasks[i] = task
	}
	out := make([]fullOutput, len(cases))
	var wg sync.WaitGroup
	for i := range tasks {
		wg.Go(func() { out[i] = collectFull(t, tasks[i]) })
	}
	wg.Wait()
	return out
}

func sameOutput(t *testing.T, what string, got, want fullOutput) {
	t.Helper()
	if !slices.Equal(got.events, want.events) {
		t.Errorf("%s: events differ\n got %q\nwant %q", what, got.events, want.events)
	}
	g, w := got.res, want.res
	if !slices.Equal(g.Generated, w.Generated) || g.Finish != w.Finish || g.EOG != w.EOG || g.StopWord != w.StopWord ||
		g.PromptTokens != w.PromptTokens || g.CachedTokens != w.CachedTokens || fmt.Sprint(got.err) != fmt.Sprint(want.err) {
		t.Errorf("%s: got %v finish %v eog %v stop %q err %v, want %v finish %v eog %v stop %q err %v", what,
			g.Generated, g.Finish, g.EOG, g.StopWord, got.err, w.Generated, w.Finish, w.EOG, w.StopWord, want.err)
	}
}

// runLane runs cases on s (one at a time with one slot, all at once with
// more) and requires each output to be want's.
func runLane(t *testing.T, s *Scheduler, cases []specCase, want []fullOutput, slots int) []fullOutput {
	t.Helper()
	var got []fullOutput
	if slots == 1 {
		for i := range cases {
			got = append(got, runAll(t, s, cases[i:i+1])[0])
		}
	} else {
		got = runAll(t, s, cases)
	}
	for i := range cases {
		sameOutput(t, fmt.Sprintf("request %d", i), got[i], want[i])
	}
	return got
}

// TestSpeculationIsExact checks that every draft lane, at every draft
// length, alone and batched, gives what plain decoding gives: the same
// events (tokens, text, logprobs), finish reasons and stop words.
//
// Under the race detector (about ten times slower) every lane still runs
// alone and batched, for one seed at one draft length: the concurrency
// is the same at every seed and length, and the build without the
// detector runs the whole matrix.
func TestSpeculationIsExact(t *testing.T) {
	e := loadDefault(t)
	draft := loadDraft(t)
	seeds, dmaxes := []uint64{1, 2, 3}, []int{1, 3, 8}
	if raceDetector {
		seeds, dmaxes = seeds[:1], []int{3}
	}
	for _, seed := range seeds {
		cases := specCases(t, e, 6, seed)
		// Plain decoding, one request at a time.
		plain := e.newSched(t, nil, nil)
		want := make([]fullOutput, len(cases))
		for i := range cases {
			want[i] = runAll(t, plain, cases[i:i+1])[0]
		}
		prompts, outs := make([][]int32, len(cases)), make([][]int32, len(cases))
		for i := range cases {
			prompts[i], outs[i] = cases[i].prompt, want[i].res.Generated
		}
		lanes := []struct {
			name string
			make func() Drafter
		}{
			{"lookup", func() Drafter { return &LookupDrafter{} }},
			{"lookup-unigram", func() Drafter { return &LookupDrafter{MinN: 1, MaxN: 2} }},
			{"model-q4k", func() Drafter { return NewModelDrafter(draft) }},
			{"model-self", func() Drafter { return NewModelDrafter(e.model) }},
			{"model-q4k-chunk7", func() Drafter { d := NewModelDrafter(draft); d.Chunk = 7; return d }},
			{"model-q4k-window20", func() Drafter { d := NewModelDrafter(draft); d.Window = 20; return d }},
			{"lookup+model-q4k", func() Drafter { return NewChainDrafter(&LookupDrafter{}, NewModelDrafter(draft)) }},
			{"random", func() Drafter { return randomDrafter(e.model.Config().Vocab, seed) }},
			{"oracle", func() Drafter { return oracleDrafter(prompts, outs) }},
			// Wants hidden states, and checks each one (draft_hidden_test.go).
			{"hidden-probe", func() Drafter { return &hiddenProbe{model: e.model, want: true, seqs: fullSeqs(cases, want)} }},
		}
		for _, lane := range lanes {
			for _, dmax := range dmaxes {
				for _, slots := range []int{1, 3} {
					name := fmt.Sprintf("seed%d/%s/max%d/slots%d", seed, lane.name, dmax, slots)
					t.Run(name, func(t *testing.T) {
						d := lane.make()
						defer d.Close()
						s := e.newSched(t, nil, func(c *Config) { c.Drafter, c.DraftMax, c.Slots, c.DraftIgnoreCost = d, dmax, slots, true })
						got := runLane(t, s, cases, want, slots)
						if p, ok := d.(*hiddenProbe); ok {
							p.report(t)
						}
						st := s.DraftStats()
						if st.Lane != d.Name() {
							t.Errorf("stats lane %q, want %q", st.Lane, d.Name())
						}
						if st.Accepted > st.Drafted || st.Tokens != st.Steps+st.Accepted {
							t.Errorf("stats %+v: want accepted ≤ drafted and tokens = steps + accepted", st)
						}
						switch lane.name {
						case "oracle":
							// Requests that share a prompt may mislead it
							// once each; otherwise it is always right.
							if st.Drafted == 0 || st.Accepted*10 < st.Drafted*9 {
								t.Errorf("oracle lane: accepted %d of %d drafts, want at least 90%%", st.Accepted, st.Drafted)
							}
						case "model-self", "model-q4k", "model-q4k-chunk7", "model-q4k-window20", "lookup+model-q4k":
							if st.Accepted == 0 {
								t.Errorf("%s lane: accepted %d of %d, want some", lane.name, st.Accepted, st.Drafted)
							}
						}
						t.Logf("%s: %+v acceptance %.2f tokens/step %.2f", name, st, st.AcceptanceRate(), st.TokensPerStep())
						var rd, ra int
						for _, o := range got {
							rd, ra = rd+o.res.Drafted, ra+o.res.Accepted
						}
						if int64(rd) != st.Drafted || int64(ra) != st.Accepted {
							t.Errorf("results count %d drafted %d accepted, stats %d %d", rd, ra, st.Drafted, st.Accepted)
						}
					})
				}
			}
		}
	}
}

// TestSpeculationFillsContext runs requests to a full context: drafts
// never overrun it and the finish is the same.
func TestSpeculationFillsContext(t *testing.T) {
	e := loadDefault(t)
	prompt := e.encode(t, "Once upon a time")
	for _, seed := range []uint64{0, 5} {
		sp := sample.Params{}
		if seed != 0 {
			sp = endless(e, seed)
		}
		sp.LogitBias = eogBans(e)
		req := Request{ID: "full", Prompt: prompt, Sampling: sp, Logprobs: -1, NoCache: true}
		cfg := func(d Drafter) func(*Config) {
			return func(c *Config) { c.Ctx, c.Drafter, c.DraftIgnoreCost = 64, d, true }
		}
		want := runAll(t, e.newSched(t, nil, cfg(nil)), []specCase{{req: req}})[0]
		// The last token sampled is not fed: 64-len(prompt)+1 of them.
		if want.res.Finish != FinishLength || len(want.res.Generated) != 64-len(prompt)+1 {
			t.Fatalf("plain: finish %v after %d tokens, want length after %d", want.res.Finish, len(want.res.Generated), 64-len(prompt)+1)
		}
		for _, d := range []Drafter{NewModelDrafter(e.model), &LookupDrafter{MinN: 1}} {
			got := runAll(t, e.newSched(t, nil, cfg(d)), []specCase{{req: req}})[0]
			sameOutput(t, fmt.Sprintf("seed %d %s", seed, d.Name()), got, want)
			d.Close()
		}
	}
}

// TestSpeculationPacks checks that a request decoded with speculation,
// after a prefix restore, gives the same output as plain decoding and
// publishes the same packs (tokens, chunk IDs, Merkle roots).
func TestSpeculationPacks(t *testing.T) {
	e := loadDefault(t)
	draft := loadDraft(t)
	prompt := e.encode(t, infertest.Story(3, 120))
	if len(prompt) < 64+8 {
		t.Fatalf("prompt of %d tokens is too short", len(prompt))
	}
	type packSum struct {
		tokens []int32
		chunks []pack.Digest
		root   pack.Digest
	}
	runStore := func(d Drafter) ([]fullOutput, []packSum) {
		st := openStore(t, t.TempDir())
		defer st.Close()
		s := e.newSched(t, st, func(c *Config) { c.Drafter, c.DraftIgnoreCost = d, true })
		var outs []fullOutput
		for i, sp := range []sample.Params{{}, sampling(11), sampling(12)} {
			req := Request{ID: fmt.Sprint(i), Prompt: prompt, MaxTokens: 40, Sampling: sp, Logprobs: 1}
			outs = append(outs, runAll(t, s, []specCase{{req: req}})[0])
			if err := s.Sync(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		infos, err := st.Packs()
		if err != nil {
			t.Fatal(err)
		}
		var sums []packSum
		for _, in := range infos {
			m, err := st.Manifest(in.ID)
			if err != nil {
				t.Fatal(err)
			}
			sums = append(sums, packSum{m.Tokens, m.ChunkIDs(), m.Root})
		}
		slices.SortFunc(sums, func(a, b packSum) int { return slices.Compare(a.tokens, b.tokens) })
		return outs, sums
	}
	want, wantPacks := runStore(nil)
	if want[1].res.CacheSource != "store" || want[1].res.CachedTokens == 0 {
		t.Fatalf("second plain request: %d tokens from %q, want a restore", want[1].res.CachedTokens, want[1].res.CacheSource)
	}
	if len(wantPacks) == 0 {
		t.Fatal("plain run published no packs")
	}
	for _, d := range []Drafter{NewModelDrafter(draft), &LookupDrafter{}} {
		got, gotPacks := runStore(d)
		d.Close()
		for i := range want {
			sameOutput(t, fmt.Sprintf("%s request %d", d.Name(), i), got[i], want[i])
		}
		if fmt.Sprint(gotPacks) != fmt.Sprint(wantPacks) {
			t.Errorf("%s: packs %v, want %v", d.Name(), gotPacks, wantPacks)
		}
	}
}

func TestCheckDraftTokenizer(t *testing.T) {
	def := loadDefault(t)
	stories := loadEnv(t)
	draft := loadDraft(t)
	dtok, err := tokenizer.FromGGUF(draft.File().Meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckDraftTokenizer(def.tok, dtok); err != nil {
		t.Errorf("the re-quantized default model: %v, want no error", err)
	}
	err = CheckDraftTokenizer(def.tok, stories.tok)
	var te *TokenizerMismatchError
	if !errors.As(err, &te) || !errors.Is(err, ErrTokenizerMismatch) {
		t.Fatalf("stories260K as the default model's draft: got %v, want a *TokenizerMismatchError", err)
	}
	if te.Field != "vocabulary size" || te.Target != "2048" || te.Draft != fmt.Sprint(stories.tok.VocabSize()) {
		t.Errorf("got field %q target %q draft %q, want the vocabulary sizes 2048 and %d", te.Field, te.Target, te.Draft, stories.tok.VocabSize())
	}
	if !strings.Contains(err.Error(), "vocabulary size is 2048 in the model") {
		t.Errorf("message %q does not name the field and values", err)
	}
	// Opening stories260K as the default model's draft fails the same way,
	// naming the file.
	d, err := OpenModelDrafter(modelPath, engine.Options{Device: cpu.New(cpu.Options{Threads: 1})}, def.tok)
	if err == nil {
		d.Close()
		t.Fatal("OpenModelDrafter(stories260K) for the default model: got no error")
	}
	if !errors.Is(err, ErrTokenizerMismatch) || !strings.Contains(err.Error(), "stories260K.gguf") {
		t.Errorf("OpenModelDrafter: got %v, want a tokenizer mismatch naming the file", err)
	}
	// And a model of the same tokenizer opens.
	d, err = OpenModelDrafter(modelPath, engine.Options{Device: cpu.New(cpu.Options{Threads: 1})}, stories.tok)
	if err != nil {
		t.Fatalf("OpenModelDrafter(stories260K) for itself: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// TestTokenizerMismatchPieces checks that a vocabulary of the same size
// with one piece changed is named by the token at fault.
func TestTokenizerMismatchPieces(t *testing.T) {
	def := loadDefault(t)
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	v, err := tokenizer.VocabFromGGUF(f.Meta)
	if err != nil {
		t.Fatal(err)
	}
	v.Tokens = slices.Clone(v.Tokens)
	v.Tokens[1000] = v.Tokens[1000] + "x"
	other, err := tokenizer.New(v)
	if err != nil {
		t.Fatal(err)
	}
	err = CheckDraftTokenizer(def.tok, other)
	var te *TokenizerMismatchError
	if !errors.As(err, &te) || te.Field != "piece of token 1000" {
		t.Fatalf("got %v, want a mismatch naming piece of token 1000", err)
	}
}

// TestSpeculationWithConstraint checks that constrained requests (only
// even tokens, an end allowed after a few) give the same output with every
// lane, that the constraint sees exactly the tokens generated (never a
// rejected draft), and that drafts it forbids are cut before verification.
func TestSpeculationWithConstraint(t *testing.T) {
	e := loadDefault(t)
	draft := loadDraft(t)
	mk := func(i int) (*Request, *evenTokens) {
		c := &evenTokens{eog: e.tok.EOGs(), vocab: e.tok.VocabSize(), minLen: 4}
		sp := sample.Params{}
		if i%2 == 1 {
			sp = sampling(uint64(30 + i))
		}
		return &Request{ID: fmt.Sprint(i), Prompt: e.encode(t, infertest.Story(i, 20+9*i)), MaxTokens: 40,
			Sampling: sp, Logprobs: 1, NoCache: true, Constraint: c}, c
	}
	const n = 4
	plain := e.newSched(t, nil, nil)
	want := make([]fullOutput, n)
	for i := range n {
		req, c := mk(i)
		want[i] = runAll(t, plain, []specCase{{req: *req}})[0]
		if want[i].err != nil || !slices.Equal(c.accepted, want[i].res.Generated) {
			t.Fatalf("plain request %d: err %v, constraint accepted %v, generated %v", i, want[i].err, c.accepted, want[i].res.Generated)
		}
	}
	for _, d := range []Drafter{NewModelDrafter(draft), &LookupDrafter{MinN: 1}, randomDrafter(e.model.Config().Vocab, 9)} {
		t.Run(d.Name(), func(t *testing.T) {
			defer d.Close()
			s := e.newSched(t, nil, func(c *Config) { c.Drafter, c.Slots, c.DraftIgnoreCost = d, 2, true })
			cs := make([]*evenTokens, n)
			cases := make([]specCase, n)
			for i := range n {
				req, c := mk(i)
				cases[i], cs[i] = specCase{req: *req}, c
			}
			got := runAll(t, s, cases)
			for i := range n {
				sameOutput(t, fmt.Sprintf("request %d", i), got[i], want[i])
				if !slices.Equal(cs[i].accepted, got[i].res.Generated) {
					t.Errorf("request %d: the constraint accepted %v, generated %v", i, cs[i].accepted, got[i].res.Generated)
				}
			}
			if st := s.DraftStats(); st.Drafted == 0 {
				t.Errorf("no drafts verified: %+v", st)
			}
		})
	}
}

func TestAllowedPrefix(t *testing.T) {
	c := &evenTokens{vocab: 100, eog: []int32{99}}
	for _, tc := range []struct {
		draft, want []int32
	}{
		{[]int32{2, 4, 6}, []int32{2, 4, 6}},
		{[]int32{2, 3, 6}, []int32{2}},
		{[]int32{1}, []int32{}},
		{nil, nil},
	} {
		got := allowedPrefix(c, tc.draft)
		if !slices.Equal(got, tc.want) {
			t.Errorf("allowedPrefix(%v) = %v, want %v", tc.draft, got, tc.want)
		}
	}
	if len(c.accepted) != 0 {
		t.Errorf("the constraint itself accepted %v, want nothing (a clone checks drafts)", c.accepted)
	}
	if got := allowedPrefix(nil, []int32{1, 3}); !slices.Equal(got, []int32{1, 3}) {
		t.Errorf("no constraint: got %v, want the draft", got)
	}
}
