package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/muserhq/muser/infer"
	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/generate"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/template"
	"github.com/muserhq/muser/infer/tokenizer"
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
	ctx       int
	kv        string
	noCache   bool
	verbose   bool
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
	fs.IntVar(&o.ctx, "ctx", 4096, "context length in tokens (capped at the model's)")
	fs.StringVar(&o.kv, "kv", "f16", "KV cache element type: f16 or f32")
	fs.BoolVar(&o.noCache, "no-cache", false, "neither reuse nor publish KV in the store under --home")
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "report cached tokens, time to first token and speed on stderr")
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
run (or muser serve) with the same prefix starts warm. Output is the same
either way. A restore the store refuses is reported and recomputed.

Sampling follows llama.cpp's default chain (penalties, top-k, top-p, min-p,
temperature); --temperature 0 is greedy. The same --seed gives the same
output on every run and platform.`,
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
		kv, err := kvcache.ParseDType(o.kv)
		if err != nil {
			return usagef(cmd, "--kv: %v", err)
		}
		if o.prompt == "-" {
			b, err := io.ReadAll(env.stdin)
			if err != nil {
				return fmt.Errorf("reading the prompt: %w", err)
			}
			o.prompt = string(b)
		}
		return runRun(ctx, env, o, kv)
	}
	return cmd
}

func runRun(ctx context.Context, env *cliEnv, o *runOptions, kv kvcache.DType) error {
	logf := func(format string, a ...any) {
		if o.verbose {
			fmt.Fprintf(env.stderr, format+"\n", a...)
		}
	}
	t0 := time.Now()
	opts := engine.Options{Threads: o.threads, KV: kv}
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
	params := sample.Params{
		Temperature: o.temp, TopK: o.topK, TopP: o.topP, MinP: o.minP,
		RepeatPenalty: o.repeat, PenaltyLastN: 64, Seed: seed,
	}
	if err := params.Validate(cfg.Vocab); err != nil {
		return &usageError{err: err}
	}
	req := generate.Request{
		Prompt:    prompt,
		MaxTokens: o.maxTokens,
		Context:   min(o.ctx, cfg.CtxTrain),
		Sampling:  params,
		Stop:      o.stop,
		OnText: func(s string) error {
			_, err := io.WriteString(env.stdout, s)
			return err
		},
		Warn: func(err error) { fmt.Fprintf(env.stderr, "muser run: warning: %v\n", err) },
	}
	if !o.noCache {
		ps, closeStore, err := openPrefixStore(env.home)
		if err != nil {
			return err
		}
		defer closeStore()
		tmpl, err := gguf.ChatTemplateDigest(f)
		if err != nil {
			return fmt.Errorf("%s: %w", o.model, err)
		}
		t1 := time.Now()
		req.Store = ps
		req.Identity = m.Identity(tok.Digest(), tmpl, ps.BlockTokens())
		logf("identity: %s engine=%s kv=%s (weights digest in %v)", req.Identity.Arch, req.Identity.Engine, req.Identity.KV, time.Since(t1).Round(time.Millisecond))
	}
	logf("loaded in %v; seed %d; %d threads", time.Since(t0).Round(time.Millisecond), seed, m.Threads())

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
	res, err := generate.Run(ctx, m, tok, req)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(res.Text, "\n") {
		fmt.Fprintln(env.stdout)
	}
	logf("prompt: %d tokens, %d cached (restored in %v), %d prefilled in %v (%.1f tok/s)",
		res.PromptTokens, res.CachedTokens, res.Restore.Round(time.Microsecond), res.PromptTokens-res.CachedTokens,
		res.Prefill.Round(time.Millisecond), rate(res.PromptTokens-res.CachedTokens, res.Prefill))
	logf("time to first token: %v", res.TTFT.Round(time.Millisecond))
	logf("generated: %d tokens in %v (%.2f tok/s), finish: %s", len(res.Tokens), res.Decode.Round(time.Millisecond),
		rate(len(res.Tokens), res.Decode), res.Finish)
	if req.Store != nil {
		logf("published: %d tokens in full blocks", res.Published)
	}
	return nil
}

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

// openPrefixStore opens the KV store under home for prefix reuse.
func openPrefixStore(home string) (infer.PrefixStore, func(), error) {
	s, err := store.Open(home, store.Options{})
	if err != nil {
		if errors.Is(err, store.ErrLocked) {
			return nil, nil, fmt.Errorf("%w (or run with --no-cache)", err)
		}
		return nil, nil, err
	}
	return s, func() { s.Close() }, nil
}
