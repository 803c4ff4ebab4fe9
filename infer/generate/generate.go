package generate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/muserhq/muser/infer"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/pack"
)

// ErrPrompt is returned when the prompt is empty or does not fit the
// context.
var ErrPrompt = errors.New("bad prompt")

// Finish says why a run ended.
type Finish string

// Finish reasons.
const (
	FinishStop    Finish = "stop"    // end-of-generation token or stop string
	FinishLength  Finish = "length"  // MaxTokens generated
	FinishContext Finish = "context" // the context is full
)

// Request is one completion.
type Request struct {
	// Prompt is the prompt's tokens (BOS included if the model wants it).
	Prompt []int32
	// MaxTokens bounds the generated tokens; 0 means until the context
	// is full.
	MaxTokens int
	// Context is the sequence's context length; 0 means the model's
	// training context.
	Context int
	// Sampling configures the sampler.
	Sampling sample.Params
	// Stop strings end the run; the text from the first one on is not
	// emitted.
	Stop []string
	// IgnoreEOG keeps generating past end-of-generation tokens (which
	// are then emitted like any other token).
	IgnoreEOG bool

	// Store, if set, is the prefix cache: the prompt's longest cached
	// prefix is restored from it and new full blocks are published to it.
	Store infer.PrefixStore
	// Identity is the pack identity of this model and tokenizer for Store
	// (engine.Model.Identity).
	Identity pack.Identity
	// Salt isolates tenants in Store (nil for a single user).
	Salt []byte
	// NoPublish skips publishing after the run.
	NoPublish bool

	// OnText receives the generated text as it becomes final. An error
	// from it ends the run with that error.
	OnText func(text string) error
	// Warn receives errors that do not stop the run (a refused restore, a
	// failed publish).
	Warn func(err error)
}

// Result describes a finished run.
type Result struct {
	Tokens       []int32 // generated tokens (an ending EOG token excluded)
	Text         string  // the emitted text
	Finish       Finish
	PromptTokens int
	CachedTokens int // prompt tokens restored from the store
	Published    int // tokens covered by the blocks offered to the store
	Restore      time.Duration
	Prefill      time.Duration // prefill of the uncached prompt tokens
	TTFT         time.Duration // from the start of the run to the first sampled token
	Decode       time.Duration // from the first sampled token to the end
}

// Run performs req on model m with tokenizer tok.
func Run(ctx context.Context, m *engine.Model, tok *tokenizer.Tokenizer, req Request) (*Result, error) {
	start := time.Now()
	if len(req.Prompt) == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrPrompt)
	}
	seq, err := m.NewSequence(req.Context)
	if err != nil {
		return nil, err
	}
	if len(req.Prompt) >= seq.Max() {
		return nil, fmt.Errorf("%w: %d tokens do not fit a context of %d with room to generate", ErrPrompt, len(req.Prompt), seq.Max())
	}
	smp, err := sample.New(req.Sampling, m.Config().Vocab)
	if err != nil {
		return nil, err
	}
	warn := req.Warn
	if warn == nil {
		warn = func(error) {}
	}
	res := &Result{PromptTokens: len(req.Prompt)}
	if req.Store != nil {
		t0 := time.Now()
		n, err := m.RestorePrefix(ctx, req.Store, req.Identity, req.Salt, seq, req.Prompt)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			warn(fmt.Errorf("prefix cache not used: %w", err))
		default:
			res.CachedTokens = n
		}
		res.Restore = time.Since(t0)
	}
	for _, t := range req.Prompt {
		smp.Accept(t)
	}

	t0 := time.Now()
	st := []engine.Step{{Seq: seq, Tokens: req.Prompt[seq.Len():], Output: engine.OutputLast}}
	if err := m.Forward(ctx, st); err != nil {
		return nil, err
	}
	res.Prefill = time.Since(t0)

	dec := tok.NewStreamDecoder()
	stop := sample.NewStop(req.Stop)
	var text []byte
	emit := func(s string) error {
		if s == "" {
			return nil
		}
		text = append(text, s...)
		if req.OnText != nil {
			return req.OnText(s)
		}
		return nil
	}
	var decodeStart time.Time
	for {
		t, err := smp.Sample(st[0].Logits)
		if err != nil {
			return nil, err
		}
		if decodeStart.IsZero() {
			decodeStart = time.Now()
			res.TTFT = decodeStart.Sub(start)
		}
		if !req.IgnoreEOG && tok.IsEOG(t) {
			res.Finish = FinishStop
			break
		}
		smp.Accept(t)
		res.Tokens = append(res.Tokens, t)
		out, stopped := stop.Write(dec.Write(t))
		if err := emit(out); err != nil {
			return nil, err
		}
		if stopped {
			res.Finish = FinishStop
			break
		}
		if req.MaxTokens > 0 && len(res.Tokens) >= req.MaxTokens {
			res.Finish = FinishLength
			break
		}
		if seq.Len() >= seq.Max() {
			res.Finish = FinishContext
			break
		}
		st[0].Tokens = []int32{t}
		if err := m.Forward(ctx, st); err != nil {
			return nil, err
		}
	}
	if !stop.Stopped() {
		tail, stopped := stop.Write(dec.Flush())
		if !stopped {
			tail += stop.Flush()
		}
		if err := emit(tail); err != nil {
			return nil, err
		}
	}
	res.Text = string(text)
	res.Decode = time.Since(decodeStart)
	if req.Store != nil && !req.NoPublish {
		n, err := m.PublishPrefix(ctx, req.Store, req.Identity, req.Salt, seq)
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			warn(fmt.Errorf("publishing to the prefix cache: %w", err))
		}
		res.Published = n
	}
	return res, nil
}
