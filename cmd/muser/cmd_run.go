package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/muserhq/muser/cmd/muser/internal/progress"
	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/template"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/serve/sched"
	"github.com/muserhq/muser/store"
)

// runOptions are the flags of `muser run`.
type runOptions struct {
	model     string
	prompt    string
	chat      bool
	maxTokens int
	temp      float64
	seed      int64
	topK      int
	topP      float64
	minP      float64
	repeat    float64
	stop      []string
	threads   int
	mmap      bool // engine.Options.Mapped
	ctx       int
	kv        string
	noCache   bool
	verbose   bool
	device    string
	draft     draftOptions
}

func (o *runOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.model, "model", "m", "", "GGUF model file (default: the embedded default model)")
	fs.StringVarP(&o.prompt, "prompt", "p", "", "prompt text; - reads it from standard input")
	fs.BoolVar(&o.chat, "chat", false, "apply the model's chat template (ChatML if it has none) and print only the reply")
	fs.IntVarP(&o.maxTokens, "max-tokens", "n", 256, "most tokens to generate (0: until the context is full)")
	fs.Float64Var(&o.temp, "temperature", 0.8, "sampling temperature; 0 is greedy")
	fs.Int64Var(&o.seed, "seed", -1, "sampling seed; -1 picks one at random (printed with -v)")
	fs.IntVar(&o.topK, "top-k", 40, "keep the K most likely tokens (0: all)")
	fs.Float64Var(&o.topP, "top-p", 0.95, "nucleus sampling threshold (1: off)")
	fs.Float64Var(&o.minP, "min-p", 0.05, "drop tokens less likely than this times the best (0: off)")
	fs.Float64Var(&o.repeat, "repeat-penalty", 1, "penalty for the last 64 tokens (1: off)")
	fs.StringArrayVar(&o.stop, "stop", nil, "stop when this text appears (repeatable); it is not printed")
	fs.IntVarP(&o.threads, "threads", "t", runtime.NumCPU(), "worker threads (results do not depend on it)")
	addMmapFlag(fs, &o.mmap)
	fs.IntVar(&o.ctx, "ctx", 4096, "context length in tokens (capped at the model's)")
	fs.StringVar(&o.kv, "kv", "f16", "KV cache element type: f16 or f32")
	addDeviceFlag(fs, &o.device)
	fs.BoolVar(&o.noCache, "no-cache", false, "neither reuse nor publish KV in the store under --home")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "report cached tokens, time to first token and speed on stderr")
	o.draft.AddFlags(fs)
}

// sampling returns the sampling parameters the flags set, with seed.
func (o *runOptions) sampling(seed uint64) sample.Params {
	return sample.Params{
		Temperature: o.temp, TopK: o.topK, TopP: o.topP, MinP: o.minP,
		RepeatPenalty: o.repeat, PenaltyLastN: 64, Seed: seed,
	}
}

func newRunCommand() *command {
	o := &runOptions{}
	cmd := &command{
		name:    "run",
		summary: "generate text from a prompt with a GGUF model",
		help: `Without --model, muser's small embedded default model is used (and
named on stderr); it answers simple chat questions (--chat).

In plain mode the prompt is tokenized as it is (with BOS where the model
adds one), echoed, and followed by the completion, as llama2.c and
llama.cpp's CLI print it. With --chat the prompt becomes a one-message
conversation rendered with the model's chat template (ChatML when it has
none) and only the reply is printed; generation stops at the model's
end-of-generation token.

Unless --no-cache, the KV store under --home is used: the longest cached,
verified prefix of the prompt is restored instead of recomputed, and the
new full blocks of prompt and output are published afterwards, so a later
run with the same prefix starts warm. Output is the same either way. A
restore the store refuses is reported and recomputed. run's blocks carry
no tenant salt, and muser serve salts each tenant's: a server on the same
--home neither reuses run's packs nor run the server's (docs/engine.md).

A prefill that takes longer than a second shows its progress (tokens
computed, rate, time left) on stderr when it is a terminal, on a line of
its own that is erased when the output begins.

Sampling follows llama.cpp's default chain (penalties, top-k, top-p, min-p,
temperature); --temperature 0 is greedy. The same --seed gives the same
output on every run and platform.

--draft-model FILE (a model with the same tokenizer), --draft-block FILE
(a block drafter trained for the model: docs/blockdraft.md) or
--draft-lookup (n-grams of the prompt and output) turn on speculative
decoding: draft tokens are verified in one batched step (lookup with a
model lane: lookup first, the model where lookup finds nothing). The
output is byte-identical to decoding without them; only the speed changes
(-v reports the acceptance). A draft model or block drafter made for
another tokenizer (or, for a block drafter, another hidden size) gives
exit status 2, naming the difference.`,
		flags: o.AddFlags,
		home:  true,
	}
	cmd.run = func(ctx context.Context, env *cliEnv, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "takes no arguments, got %q (use -p TEXT)", args[0])
		}
		if o.threads <= 0 || o.ctx <= 0 || o.maxTokens < 0 {
			return usagef(cmd, "--threads and --ctx must be positive and --max-tokens not negative")
		}
		if err := checkSampling(cmd, o.sampling(0)); err != nil {
			return err
		}
		if err := o.draft.check(); err != nil {
			return usagef(cmd, "%v", err)
		}
		kv, err := kvcache.ParseDType(o.kv)
		if err != nil {
			return usagef(cmd, "--kv: %v", err)
		}
		kind, ordinal, err := parseDevice(o.device)
		if err != nil {
			return usagef(cmd, "%v", err)
		}
		dev, closeDev, err := openDevice(kind, ordinal, o.threads, false)
		if err != nil {
			return err
		}
		defer closeDev()
		if o.prompt == "-" {
			b, err := io.ReadAll(env.stdin)
			if err != nil {
				return fmt.Errorf("reading the prompt: %w", err)
			}
			o.prompt = string(b)
		}
		return runRun(ctx, env, o, kv, dev)
	}
	return cmd
}

func runRun(ctx context.Context, env *cliEnv, o *runOptions, kv kvcache.DType, dev engine.Device) error {
	logf := func(format string, a ...any) {
		if o.verbose {
			fmt.Fprintf(env.stderr, format+"\n", a...)
		}
	}
	t0 := time.Now()
	opts := engine.Options{Device: dev, KV: kv, Mapped: o.mmap}
	var m *engine.Model
	if o.model == "" {
		f, err := defaultmodel.File()
		if err != nil {
			return err
		}
		if m, err = engine.Load(f, opts); err != nil {
			return fmt.Errorf("the embedded default model: %w", err)
		}
		o.model = defaultmodel.Name
		fmt.Fprintf(env.stderr, "muser run: no --model given; using the embedded default model %s (%s, sha256 %s…)\n",
			defaultmodel.Name, humanBytes(defaultmodel.Size), defaultmodel.SHA256[:12])
	} else {
		var err error
		if m, err = engine.Open(o.model, opts); err != nil {
			return err
		}
	}
	defer m.Close()
	f := m.File()
	tok, err := tokenizer.FromGGUF(f.Meta)
	if err != nil {
		return fmt.Errorf("%s: %w", o.model, err)
	}
	cfg := m.Config()
	logf("model: %s (%s, %d layers, %s, %s)", o.model, cfg.Arch, cfg.Layers, gguf.QuantName(f), humanBytes(f.Size()))

	var prompt []int32
	if o.chat {
		prompt, err = chatPrompt(f, tok, o.prompt)
	} else {
		prompt, err = tok.Encode(o.prompt, tokenizer.EncodeOptions{AddSpecial: true, ParseSpecial: true})
	}
	if err != nil {
		return err
	}
	if len(prompt) == 0 {
		// An empty plain prompt starts from BOS, as llama2.c does.
		prompt = []int32{tok.BOS()}
	}

	seed := uint64(o.seed)
	if o.seed < 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	params := o.sampling(seed)
	if err := params.Validate(cfg.Vocab); err != nil {
		return &usageError{err: err}
	}
	var published int
	sc := sched.Config{
		Model:     m,
		Tokenizer: tok,
		Slots:     1,
		Ctx:       min(o.ctx, cfg.CtxTrain),
		OnPublish: func(ev sched.PublishEvent) { published = max(published, ev.Tokens) },
		Logger:    slog.New(&warnHandler{w: env.stderr, prefix: "muser run: warning: "}),
	}
	if !o.noCache {
		st, err := store.Open(env.home, store.Options{})
		if err != nil {
			if errors.Is(err, store.ErrLocked) {
				return fmt.Errorf("%w (or run with --no-cache)", err)
			}
			return err
		}
		defer st.Close()
		t1 := time.Now()
		if sc.Identity, err = m.Identity(st.BlockTokens()); err != nil {
			return err
		}
		sc.Store = st
		logf("identity: %s engine=%s kv=%s (weights digest in %v)", sc.Identity.Arch, sc.Identity.Engine, sc.Identity.KV, time.Since(t1).Round(time.Millisecond))
	}
	drafter, err := o.draft.open(m, kv, o.threads, tok)
	if err != nil {
		return err
	}
	if drafter != nil {
		defer drafter.Close()
		sc.Drafter, sc.DraftMax = drafter, o.draft.max
		logf("speculative decoding: %s lane", drafter.Name())
	}
	logf("loaded in %v; seed %d; %s", time.Since(t0).Round(time.Millisecond), seed, m.Device().Name())
	s, err := sched.New(sc)
	if err != nil {
		return err
	}
	// Close lets the request finish, then flushes the publisher: the
	// blocks are in the store before run returns.
	defer s.Close(context.Background())
	req := &sched.Request{ID: "run", Prompt: prompt, MaxTokens: o.maxTokens, Sampling: params, Stop: o.stop, Logprobs: -1}
	// A prefill longer than a second shows its progress on a terminal
	// stderr, on a line of its own that is erased before the output.
	meter := progress.New(env.stderr, "prefill", progress.Tokens, 0,
		progress.Options{Terminal: progress.IsTerminal(env.stderr), Delay: time.Second, OwnLine: true})
	req.OnPrefill = func(done, total int) {
		meter.SetTotal(int64(total))
		meter.Set(int64(done))
		if done >= total {
			meter.Finish()
		}
	}
	defer meter.Finish()
	if err := s.Check(req); err != nil {
		return err
	}

	if !o.chat {
		// Echo the prompt as llama2.c does: after BOS, SentencePiece's
		// leading space of the first piece is dropped.
		shown := prompt
		if len(shown) > 0 && shown[0] == tok.BOS() {
			shown = shown[1:]
		}
		echo, err := tok.Decode(shown)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(env.stdout, echo); err != nil {
			return err
		}
	}
	res, text, err := generate(ctx, s, req, env.stdout)
	if err != nil {
		return err
	}
	if err := s.Close(context.Background()); err != nil {
		return err
	}
	if !strings.HasSuffix(text, "\n") {
		fmt.Fprintln(env.stdout)
	}
	restored := res.Started
	if !res.Restored.IsZero() {
		restored = res.Restored
	}
	computed := res.PromptTokens - res.CachedTokens
	logf("prompt: %d tokens, %d cached (restored in %v), %d prefilled in %v (%.1f tok/s)",
		res.PromptTokens, res.CachedTokens, restored.Sub(res.Started).Round(time.Microsecond), computed,
		res.PrefillDone.Sub(restored).Round(time.Millisecond), rate(computed, res.PrefillDone.Sub(restored)))
	logf("time to first token: %v", res.FirstToken.Sub(res.Queued).Round(time.Millisecond))
	decoded := len(res.Generated)
	if res.EOG {
		decoded-- // the end-of-generation token is sampled, not printed
	}
	logf("generated: %d tokens in %v (%.2f tok/s), finish: %s", decoded, res.Done.Sub(res.FirstToken).Round(time.Millisecond),
		rate(decoded, res.Done.Sub(res.FirstToken)), res.Finish)
	if drafter != nil && res.Drafted > 0 {
		logf("draft (%s): %d of %d draft tokens accepted (%.0f%%)", drafter.Name(), res.Accepted, res.Drafted,
			100*float64(res.Accepted)/float64(res.Drafted))
	}
	switch {
	case sc.Store == nil:
	case published > 0:
		logf("published: %d tokens in full blocks", published)
	default:
		logf("published: nothing new (the store held every full block, or there was none)")
	}
	return nil
}

// generate runs req on s (muser run's one-slot scheduler: the one
// generation driver, which muser serve runs with --parallel slots), writes
// its text to w as it is decoded, and returns the result and the whole
// text.
func generate(ctx context.Context, s *sched.Scheduler, req *sched.Request, w io.Writer) (sched.Result, string, error) {
	req.Received = time.Now()
	task, err := s.Submit(ctx, req)
	if err != nil {
		return sched.Result{}, "", err
	}
	defer task.Cancel()
	var text strings.Builder
	for {
		evs, done, err := task.Next(ctx)
		if err != nil {
			return sched.Result{}, "", err
		}
		for _, ev := range evs {
			text.WriteString(ev.Text)
			if _, err := io.WriteString(w, ev.Text); err != nil {
				return sched.Result{}, "", err
			}
		}
		if done {
			return task.Result(), text.String(), task.Err()
		}
	}
}

// warnHandler is a slog.Handler that prints warnings and errors as one
// line each, prefix, the message and its "err" attribute, and drops the
// rest: the scheduler's logs as muser run's stderr shows them.
type warnHandler struct {
	w      io.Writer
	prefix string
	mu     sync.Mutex
}

func (h *warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			line += ": " + a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := fmt.Fprintln(h.w, h.prefix+line)
	return err
}

func (h *warnHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnHandler) WithGroup(string) slog.Handler      { return h }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// chatPrompt renders a one-message conversation with the model's chat
// template (ChatML when it has none) and tokenizes it, control tokens
// parsed. BOS is added where the vocabulary wants it unless the template
// already begins with it.
func chatPrompt(f *gguf.File, tok *tokenizer.Tokenizer, text string) ([]int32, error) {
	src, err := f.Meta.StringOr(gguf.KeyChatTemplate, "")
	if err != nil {
		return nil, err
	}
	t := template.ChatML()
	if src != "" {
		if t, err = template.Parse(src); err != nil {
			return nil, fmt.Errorf("chat template of %s: %w", f.Path(), err)
		}
	}
	bos, eos := "", ""
	if id := tok.BOS(); id >= 0 && int(id) < tok.VocabSize() {
		bos = tok.Token(id)
	}
	if id := tok.EOS(); id >= 0 && int(id) < tok.VocabSize() {
		eos = tok.Token(id)
	}
	rendered, err := t.Render(template.Context{
		Messages:            []template.Message{{Role: "user", Content: text}},
		AddGenerationPrompt: true,
		BOSToken:            bos,
		EOSToken:            eos,
	})
	if err != nil {
		return nil, fmt.Errorf("rendering the chat template: %w", err)
	}
	ids, err := tok.Encode(rendered, tokenizer.EncodeOptions{ParseSpecial: true})
	if err != nil {
		return nil, err
	}
	if tok.AddBOS() && (len(ids) == 0 || ids[0] != tok.BOS()) {
		ids = append([]int32{tok.BOS()}, ids...)
	}
	return ids, nil
}
