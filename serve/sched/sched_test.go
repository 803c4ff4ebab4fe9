package sched

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/infertest"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

const modelPath = "../../../shared/models/stories260K.gguf"

// env is a loaded model with its tokenizer and identity.
type env struct {
	model *engine.Model
	tok   *tokenizer.Tokenizer
}

var (
	envOnce sync.Once
	envVal  *env
	envErr  error
)

func loadEnv(t testing.TB) *env {
	t.Helper()
	if _, err := os.Stat(modelPath); err != nil {
		t.Skipf("skipping: %s is absent (the shared test material lives beside the clone): %v", modelPath, err)
	}
	envOnce.Do(func() {
		var m *engine.Model
		m, envErr = engine.Open(modelPath, engine.Options{Device: cpu.New(cpu.Options{Threads: 2})})
		if envErr != nil {
			return
		}
		var tok *tokenizer.Tokenizer
		tok, envErr = tokenizer.FromGGUF(m.File().Meta)
		envVal = &env{model: m, tok: tok}
	})
	if envErr != nil {
		t.Fatal(envErr)
	}
	return envVal
}

func (e *env) identity(t testing.TB, block int) pack.Identity {
	t.Helper()
	id, err := e.model.Identity(block)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *env) encode(t testing.TB, text string) []int32 {
	t.Helper()
	ids, err := e.tok.Encode(text, tokenizer.EncodeOptions{AddSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func openStore(t testing.TB, dir string) *store.Store {
	t.Helper()
	st, err := store.Open(dir, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// newSched builds a scheduler; st may be nil. It is closed at cleanup.
func (e *env) newSched(t testing.TB, st *store.Store, mod func(*Config)) *Scheduler {
	t.Helper()
	cfg := Config{Model: e.model, Tokenizer: e.tok, Slots: 1, Ctx: 512, PrefillChunk: 48, StepTokens: 96}
	if st != nil {
		cfg.Store = st
		cfg.Identity = e.identity(t, st.BlockTokens())
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// output is what a request produced.
type output struct {
	tokens []int32
	text   string
	res    Result
	err    error
}

func collect(t testing.TB, task *Task) output {
	t.Helper()
	var o output
	var b strings.Builder
	for {
		evs, done, err := task.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Token != NoToken {
				o.tokens = append(o.tokens, ev.Token)
			}
			b.WriteString(ev.Text)
		}
		if done {
			break
		}
	}
	o.text, o.res, o.err = b.String(), task.Result(), task.Err()
	return o
}

func run(t testing.TB, s *Scheduler, req *Request) output {
	t.Helper()
	task, err := s.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, task)
}

func sampling(seed uint64) sample.Params {
	p := sample.Defaults(seed)
	p.Temperature = 0.9
	return p
}

// endless samples like sampling but never ends by itself: the
// end-of-generation tokens are banned, so only MaxTokens, the context or
// a cancel stop it.
func endless(e *env, seed uint64) sample.Params {
	p := sampling(seed)
	p.LogitBias = eogBans(e)
	return p
}

func TestAloneEqualsBatched(t *testing.T) {
	e := loadEnv(t)
	const n = 8
	reqs := make([]*Request, n)
	for i := range reqs {
		reqs[i] = &Request{ID: fmt.Sprint(i), Prompt: e.encode(t, infertest.Story(0, 10+13*i)), MaxTokens: 20 + i,
			Sampling: sampling(uint64(100 + i)), Logprobs: 2, NoCache: true}
	}
	alone := e.newSched(t, nil, nil)
	want := make([]output, n)
	for i, r := range reqs {
		want[i] = run(t, alone, r)
		if want[i].err != nil || len(want[i].res.Generated) == 0 {
			t.Fatalf("request %d alone: err %v, %d tokens", i, want[i].err, len(want[i].res.Generated))
		}
	}
	batched := e.newSched(t, nil, func(c *Config) { c.Slots = n })
	got := make([]output, n)
	var wg sync.WaitGroup
	tasks := make([]*Task, n)
	for i, r := range reqs {
		task, err := batched.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		tasks[i] = task
	}
	for i := range tasks {
		wg.Go(func() { got[i] = collect(t, tasks[i]) })
	}
	wg.Wait()
	for i := range reqs {
		if !slices.Equal(got[i].res.Generated, want[i].res.Generated) || got[i].text != want[i].text {
			t.Errorf("request %d: batched gave %v %q, alone %v %q", i, got[i].res.Generated, got[i].text, want[i].res.Generated, want[i].text)
		}
		if got[i].res.Finish != FinishLength || got[i].res.Finish != want[i].res.Finish {
			t.Errorf("request %d: finish %v batched, %v alone, want length", i, got[i].res.Finish, want[i].res.Finish)
		}
	}
}

func TestPrefixReuseThroughStore(t *testing.T) {
	e := loadEnv(t)
	dir := t.TempDir()
	st := openStore(t, dir)
	s := e.newSched(t, st, nil)
	base := e.encode(t, infertest.Story(0, 150))
	if len(base) < 2*st.BlockTokens() {
		t.Fatalf("prompt of %d tokens is shorter than two blocks", len(base))
	}
	first := run(t, s, &Request{ID: "a", Prompt: base, MaxTokens: 8, Sampling: sample.Params{}})
	if first.res.CachedTokens != 0 {
		t.Fatalf("first request: got %d cached tokens, want 0", first.res.CachedTokens)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	second := append(slices.Clone(base), e.encode(t, " and then they went home")[1:]...)
	req := &Request{ID: "b", Prompt: second, MaxTokens: 12, Sampling: sampling(7)}
	warm := run(t, s, req)
	cold := run(t, e.newSched(t, nil, nil), &Request{ID: "c", Prompt: second, MaxTokens: 12, Sampling: sampling(7), NoCache: true})
	b := st.BlockTokens()
	if want := len(base) / b * b; warm.res.CachedTokens != want || warm.res.CacheSource != "store" {
		t.Fatalf("second request: got %d cached tokens from %q, want %d (the full blocks of the shared prefix) from the store",
			warm.res.CachedTokens, warm.res.CacheSource, want)
	}
	if !slices.Equal(warm.res.Generated, cold.res.Generated) || warm.text != cold.text {
		t.Errorf("with cache %v %q, without %v %q", warm.res.Generated, warm.text, cold.res.Generated, cold.text)
	}

	// After a restart: a new scheduler on the reopened store.
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2 := openStore(t, dir)
	defer st2.Close()
	s2 := e.newSched(t, st2, nil)
	again := run(t, s2, &Request{ID: "d", Prompt: second, MaxTokens: 12, Sampling: sampling(7)})
	if again.res.CachedTokens == 0 {
		t.Errorf("after restart: got 0 cached tokens, want > 0")
	}
	if !slices.Equal(again.res.Generated, cold.res.Generated) {
		t.Errorf("after restart %v, without cache %v", again.res.Generated, cold.res.Generated)
	}
}

func TestSaltIsolation(t *testing.T) {
	e := loadEnv(t)
	st := openStore(t, t.TempDir())
	defer st.Close()
	s := e.newSched(t, st, func(c *Config) { c.SlotReuse = true })
	p := e.encode(t, infertest.Story(0, 120))
	a := run(t, s, &Request{Prompt: p, Salt: []byte("tenant-a"), MaxTokens: 4})
	s.Sync(context.Background())
	b := run(t, s, &Request{Prompt: p, Salt: []byte("tenant-b"), MaxTokens: 4})
	if a.res.CachedTokens != 0 || b.res.CachedTokens != 0 {
		t.Errorf("got %d and %d cached tokens for two salts, want 0 and 0", a.res.CachedTokens, b.res.CachedTokens)
	}
	s.Sync(context.Background())
	a2 := run(t, s, &Request{Prompt: p, Salt: []byte("tenant-a"), MaxTokens: 4})
	if a2.res.CachedTokens == 0 {
		t.Errorf("same salt again: got 0 cached tokens, want > 0")
	}
}

func TestSlotReuse(t *testing.T) {
	e := loadEnv(t)
	st := openStore(t, t.TempDir())
	defer st.Close()
	s := e.newSched(t, st, func(c *Config) { c.SlotReuse = true })
	p := e.encode(t, infertest.Story(0, 40)) // shorter than a block: only the slot can help
	first := run(t, s, &Request{Prompt: p, Salt: []byte("x"), MaxTokens: 4})
	s.Sync(context.Background())
	p2 := append(slices.Clone(p), first.res.Generated...)
	second := run(t, s, &Request{Prompt: p2, Salt: []byte("x"), MaxTokens: 4})
	if second.res.CacheSource != "slot" || second.res.CachedTokens != len(p2)-1 {
		t.Errorf("got %d cached tokens from %q, want %d from the slot", second.res.CachedTokens, second.res.CacheSource, len(p2)-1)
	}
	cold := run(t, e.newSched(t, nil, nil), &Request{Prompt: p2, MaxTokens: 4, NoCache: true})
	if !slices.Equal(second.res.Generated, cold.res.Generated) {
		t.Errorf("reused slot gave %v, cold %v", second.res.Generated, cold.res.Generated)
	}
}

func TestRefusedRestoreIsAMiss(t *testing.T) {
	e := loadEnv(t)
	dir := t.TempDir()
	st := openStore(t, dir)
	defer st.Close()
	s := e.newSched(t, st, nil)
	p := e.encode(t, infertest.Story(0, 150))
	want := run(t, s, &Request{Prompt: p, MaxTokens: 6})
	s.Sync(context.Background())
	// Flip a byte in every chunk file.
	n := 0
	filepath.WalkDir(filepath.Join(dir, "chunks"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b[len(b)/2] ^= 0xff
		n++
		return os.WriteFile(path, b, 0o600)
	})
	if n == 0 {
		t.Fatal("no chunk files to corrupt")
	}
	got := run(t, s, &Request{Prompt: p, MaxTokens: 6})
	if got.res.CachedTokens != 0 || got.err != nil {
		t.Errorf("got %d cached tokens, err %v; want a miss", got.res.CachedTokens, got.err)
	}
	if !slices.Equal(got.res.Generated, want.res.Generated) {
		t.Errorf("after refusal %v, before %v", got.res.Generated, want.res.Generated)
	}
	rs, err := st.Receipts(store.ReceiptFilter{})
	if err != nil || len(rs) == 0 {
		t.Fatalf("got %d receipts (err %v), want at least 1", len(rs), err)
	}
	if rs[0].Reason != pack.ReasonChunkDigest {
		t.Errorf("got receipt reason %q, want %q", rs[0].Reason, pack.ReasonChunkDigest)
	}
}

func TestCancelFreesSlot(t *testing.T) {
	e := loadEnv(t)
	s := e.newSched(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	task, err := s.Submit(ctx, &Request{ID: "long", Prompt: e.encode(t, "Once upon a time"), Sampling: endless(e, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := task.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	if in := s.SlotInfos()[0]; in.RequestID != "long" {
		t.Errorf("slot shows request %q, want long", in.RequestID)
	}
	cancel()
	res, err := task.Wait(context.Background())
	if !errors.Is(err, ErrCancelled) || res.Finish != FinishCancelled {
		t.Fatalf("got finish %v, err %v; want cancelled", res.Finish, err)
	}
	// The slot serves the next request.
	o := run(t, s, &Request{Prompt: e.encode(t, "Lily"), MaxTokens: 3})
	if len(o.res.Generated) != 3 {
		t.Errorf("next request got %d tokens, want 3", len(o.res.Generated))
	}
}

func TestQueueFull(t *testing.T) {
	e := loadEnv(t)
	s := e.newSched(t, nil, func(c *Config) { c.MaxQueue = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var tasks []*Task
	for range 2 {
		task, err := s.Submit(ctx, &Request{Prompt: e.encode(t, "Once"), Sampling: endless(e, 1)})
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	// The first is running or about to; the second waits. A third that
	// arrives while both are there is refused.
	if _, _, err := tasks[0].Next(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(ctx, &Request{Prompt: e.encode(t, "Once")}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("got %v, want ErrQueueFull", err)
	}
	cancel()
	for _, task := range tasks {
		task.Wait(context.Background())
	}
}

func TestFinishReasons(t *testing.T) {
	e := loadEnv(t)
	s := e.newSched(t, nil, func(c *Config) { c.Ctx = 64 })
	p := e.encode(t, "Once upon a time")
	greedy := run(t, s, &Request{Prompt: p, MaxTokens: 30})
	if greedy.res.Finish != FinishLength && greedy.res.Finish != FinishStop {
		t.Fatalf("got %v", greedy.res.Finish)
	}
	if len(greedy.text) < 10 {
		t.Fatalf("greedy text %q is too short to cut", greedy.text)
	}
	stopAt := greedy.text[5:8]
	cut := run(t, s, &Request{Prompt: p, MaxTokens: 30, Stop: []string{"zzzz", stopAt}})
	if cut.res.Finish != FinishStop || cut.res.StopWord != stopAt || cut.text != greedy.text[:strings.Index(greedy.text, stopAt)] {
		t.Errorf("stop %q: got %q (finish %v, word %q), want %q", stopAt, cut.text, cut.res.Finish, cut.res.StopWord,
			greedy.text[:strings.Index(greedy.text, stopAt)])
	}
	full := run(t, s, &Request{Prompt: p, Sampling: sample.Params{LogitBias: eogBans(e)}})
	if full.res.Finish != FinishLength || len(p)+len(full.res.Generated) != 64+1 {
		t.Errorf("context: got finish %v after %d+%d tokens, want length at 64+1", full.res.Finish, len(p), len(full.res.Generated))
	}
	if _, err := s.Submit(context.Background(), &Request{Prompt: make([]int32, 64)}); !errors.As(err, new(*ContextError)) {
		t.Errorf("got %v, want a *ContextError", err)
	}
	if _, err := s.Submit(context.Background(), &Request{Prompt: []int32{1, 99999}}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("got %v, want ErrBadRequest", err)
	}
	if _, err := s.Submit(context.Background(), &Request{Prompt: p, Sampling: sample.Params{TopP: 2}}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("got %v, want ErrBadRequest", err)
	}
}

func eogBans(e *env) map[int32]float64 {
	bans := map[int32]float64{}
	for _, id := range e.tok.EOGs() {
		bans[id] = -1e9
	}
	return bans
}

func TestPrefillOnly(t *testing.T) {
	e := loadEnv(t)
	st := openStore(t, t.TempDir())
	defer st.Close()
	s := e.newSched(t, st, nil)
	p := e.encode(t, infertest.Story(0, 150))
	task, err := s.Submit(context.Background(), &Request{Prompt: p, PrefillOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := task.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Generated) != 0 || res.Pack.IsZero() {
		t.Fatalf("got %d tokens and pack %v, want none and a pack", len(res.Generated), res.Pack)
	}
	info, err := st.Pack(res.Pack)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(p) / st.BlockTokens() * st.BlockTokens(); info.Tokens != want {
		t.Errorf("pack holds %d tokens, want %d", info.Tokens, want)
	}
}

// TestWholePromptCached: when the store holds every block of a prompt,
// only its last token is computed.
func TestWholePromptCached(t *testing.T) {
	e := loadEnv(t)
	st := openStore(t, t.TempDir())
	defer st.Close()
	s := e.newSched(t, st, nil)
	p := e.encode(t, infertest.Story(0, 200))
	p = p[:len(p)/st.BlockTokens()*st.BlockTokens()] // a whole number of blocks
	first := run(t, s, &Request{Prompt: p, MaxTokens: 5, Sampling: sampling(3)})
	s.Sync(context.Background())
	again := run(t, s, &Request{Prompt: p, MaxTokens: 5, Sampling: sampling(3)})
	if again.res.CachedTokens != len(p)-1 {
		t.Errorf("got %d cached tokens of %d, want %d", again.res.CachedTokens, len(p), len(p)-1)
	}
	if !slices.Equal(again.tokens, first.tokens) {
		t.Errorf("cached %v, computed %v", again.res.Generated, first.res.Generated)
	}
}

// TestCancelledWhileQueued: a request cancelled while it waits leaves the
// queue at once, freeing its place.
func TestCancelledWhileQueued(t *testing.T) {
	e := loadEnv(t)
	s := e.newSched(t, nil, func(c *Config) { c.MaxQueue = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	running, err := s.Submit(ctx, &Request{Prompt: e.encode(t, "Once"), Sampling: endless(e, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := running.Next(ctx); err != nil {
		t.Fatal(err)
	}
	qctx, qcancel := context.WithCancel(context.Background())
	queued, err := s.Submit(qctx, &Request{Prompt: e.encode(t, "Once")})
	if err != nil {
		t.Fatal(err)
	}
	qcancel()
	if _, err := queued.Wait(context.Background()); !errors.Is(err, ErrCancelled) {
		t.Fatalf("got %v, want ErrCancelled", err)
	}
	if d := s.QueueDepth(); d != 0 {
		t.Errorf("queue depth %d after the cancel, want 0", d)
	}
	// Its place is free again.
	again, err := s.Submit(ctx, &Request{Prompt: e.encode(t, "Once")})
	if err != nil {
		t.Fatalf("got %v, want the request queued", err)
	}
	cancel()
	again.Wait(context.Background())
	running.Wait(context.Background())
}

// TestHooks: OnPublish sees every publish, RemotePrefill is asked before
// each restore, and its error fails the request (ErrRemotePrefill).
func TestHooks(t *testing.T) {
	e := loadEnv(t)
	st := openStore(t, t.TempDir())
	defer st.Close()
	var (
		mu        sync.Mutex
		published []PublishEvent
		asked     [][]int32
	)
	refuse := errors.New("the producer refused (test)")
	s := e.newSched(t, st, func(c *Config) {
		c.SlotReuse = true
		c.OnPublish = func(ev PublishEvent) {
			mu.Lock()
			published = append(published, ev)
			mu.Unlock()
		}
		c.RemotePrefill = func(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) error {
			mu.Lock()
			asked = append(asked, slices.Clone(tokens))
			mu.Unlock()
			if string(salt) == "fail" {
				return refuse
			}
			return nil
		}
	})
	p := e.encode(t, infertest.Story(0, 150))
	failed := run(t, s, &Request{ID: "refused", Prompt: p, Salt: []byte("fail"), MaxTokens: 3})
	if !errors.Is(failed.err, ErrRemotePrefill) || !errors.Is(failed.err, refuse) {
		t.Errorf("request whose RemotePrefill failed: got %v, want an error wrapping ErrRemotePrefill and the hook's error", failed.err)
	}
	// The slot it held serves the next request.
	first := run(t, s, &Request{ID: "hooked", Prompt: p, Salt: []byte("s"), MaxTokens: 3})
	if first.err != nil {
		t.Fatal(first.err)
	}
	// That slot's KV covers
	// every whole block of the prompt, so it is reused and no producer is
	// asked.
	again := run(t, s, &Request{ID: "again", Prompt: p, Salt: []byte("s"), MaxTokens: 3})
	if again.err != nil || !slices.Equal(again.tokens, first.tokens) {
		t.Errorf("the same request again: got %v, %v; want %v, nil", again.tokens, again.err, first.tokens)
	}
	if again.res.CacheSource != "slot" {
		t.Errorf("same prompt again: cache source %q, want slot", again.res.CacheSource)
	}
	// A slot covering less than the prompt's whole blocks is not reused:
	// the producer is asked instead.
	q := slices.Clone(p)
	q[70] = p[3]
	if q[70] == p[70] {
		q[70] = p[4]
	}
	if r := run(t, s, &Request{ID: "diverging", Prompt: q, Salt: []byte("s"), MaxTokens: 3}); r.err != nil || r.res.CacheSource == "slot" {
		t.Errorf("prompt diverging at token 70: cache source %q, %v; want the store path", r.res.CacheSource, r.err)
	}
	s.Sync(context.Background())
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 || !slices.Equal(asked[1], p) || !slices.Equal(asked[2], q) {
		t.Errorf("RemotePrefill asked %d times, want three times: the failing request, the first one, the diverging one", len(asked))
	}
	if len(published) < 2 || published[0].RequestID != "hooked" || string(published[0].Salt) != "s" || published[0].Result.Pack.IsZero() {
		t.Fatalf("OnPublish got %+v, want the first request's publish first, and the diverging one's", published)
	}
	info, err := st.Pack(published[0].Result.Pack)
	if err != nil || info.Tokens != published[0].Tokens {
		t.Errorf("published pack: %+v, %v; want %d tokens", info, err, published[0].Tokens)
	}
}

// TestRestoreHook: Config.Restore restores each request's prefix in
// place of the store's Restore; a hook that fails after it handed the
// engine a block leaves the request to a local prefill of the whole
// prompt, with the same answer (the engine discarded the block).
func TestRestoreHook(t *testing.T) {
	e := loadEnv(t)
	st := openStore(t, t.TempDir())
	defer st.Close()
	var calls, handed atomic.Int32
	fault := errors.New("the read-through failed after a block (test)")
	s := e.newSched(t, st, func(c *Config) {
		c.Restore = func(ctx context.Context, id pack.Identity, salt []byte, tokens []int32, put func(int, []byte) error) (int, error) {
			calls.Add(1)
			if string(salt) != "broken" {
				return st.Restore(ctx, id, salt, tokens, put)
			}
			// The blocks of salt s, the first handed over, then a fault.
			_, err := st.Restore(ctx, id, []byte("s"), tokens, func(block int, kv []byte) error {
				if block > 0 {
					return fault
				}
				handed.Add(1)
				return put(block, kv)
			})
			return 0, err
		}
	})
	p := e.encode(t, infertest.Story(0, 150))
	first := run(t, s, &Request{ID: "cold", Prompt: p, Salt: []byte("s"), MaxTokens: 3})
	if first.err != nil || first.res.CachedTokens != 0 {
		t.Fatalf("cold request: %d cached tokens, %v; want 0, nil", first.res.CachedTokens, first.err)
	}
	s.Sync(context.Background())
	warm := run(t, s, &Request{ID: "warm", Prompt: p, Salt: []byte("s"), MaxTokens: 3})
	if warm.err != nil || warm.res.CachedTokens == 0 || warm.res.CacheSource != "store" || !slices.Equal(warm.tokens, first.tokens) {
		t.Fatalf("warm request: %d cached tokens from %q, %v, %v; want the hook's blocks and %v", warm.res.CachedTokens,
			warm.res.CacheSource, warm.tokens, warm.err, first.tokens)
	}
	broken := run(t, s, &Request{ID: "broken", Prompt: p, Salt: []byte("broken"), MaxTokens: 3})
	if broken.err != nil || broken.res.CachedTokens != 0 || !slices.Equal(broken.tokens, first.tokens) {
		t.Fatalf("request whose restore failed after a block: %d cached tokens, %v, %v; want 0 and %v", broken.res.CachedTokens,
			broken.tokens, broken.err, first.tokens)
	}
	if n, h := calls.Load(), handed.Load(); n != 3 || h != 1 {
		t.Fatalf("the hook was called %d times and handed %d blocks of the broken restore, want 3 and 1", n, h)
	}
}

// TestCommitKV: with CommitKV every slot's cache holds Ctx tokens of
// memory before the first request, and requests give the same tokens
// and text as on a scheduler whose slots grow their caches.
func TestCommitKV(t *testing.T) {
	e := loadEnv(t)
	const ctx = 512
	committed := e.newSched(t, nil, func(c *Config) { c.Slots, c.Ctx, c.CommitKV = 2, ctx, true })
	ref, err := e.model.NewSequence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	if err := ref.KV().Reserve(ctx); err != nil {
		t.Fatal(err)
	}
	for _, sl := range committed.slots {
		if got, want := sl.seq.KV().Bytes(), ref.KV().Bytes(); got != want {
			t.Errorf("slot %d: %d bytes of KV before any request, want %d (%d tokens)", sl.id, got, want, ctx)
		}
		if sl.seq.Len() != 0 {
			t.Errorf("slot %d: %d tokens after the commit, want 0", sl.id, sl.seq.Len())
		}
	}
	growing := e.newSched(t, nil, func(c *Config) { c.Slots, c.Ctx = 2, ctx })
	if b := growing.slots[0].seq.KV().Bytes(); b != 0 {
		t.Errorf("without CommitKV: %d bytes of KV before any request, want 0", b)
	}
	for i := range 3 {
		req := &Request{ID: fmt.Sprint(i), Prompt: e.encode(t, infertest.Story(i, 40+50*i)), MaxTokens: 24,
			Sampling: sampling(uint64(7 + i)), Logprobs: 2, NoCache: true}
		got, want := run(t, committed, req), run(t, growing, req)
		if !slices.Equal(got.res.Generated, want.res.Generated) || got.text != want.text {
			t.Errorf("request %d: committed slots gave %v %q, growing ones %v %q", i, got.res.Generated, got.text, want.res.Generated, want.text)
		}
	}
}
