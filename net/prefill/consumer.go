package prefill

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/muserhq/muser/net/repl"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// Fallback says what a consumer does when the producer cannot help.
type Fallback int

// Fallback policies (muser serve --prefill-fallback).
const (
	// FallbackLocal prefills locally, after logging why (the default).
	FallbackLocal Fallback = iota
	// FallbackFail fails the request.
	FallbackFail
)

// String returns the policy's flag value, "local" or "fail".
func (f Fallback) String() string {
	if f == FallbackFail {
		return "fail"
	}
	return "local"
}

// ParseFallback parses "local" or "fail".
func ParseFallback(s string) (Fallback, error) {
	switch s {
	case "local", "":
		return FallbackLocal, nil
	case "fail":
		return FallbackFail, nil
	}
	return 0, fmt.Errorf("%w %q: want local or fail", ErrBadFallback, s)
}

// Consumer gets prompts' KV from a producer node.
type Consumer struct {
	// Node is this server's replication node.
	Node *repl.Node
	// Store is this server's store (the one Node publishes to).
	Store *store.Store
	// Producer names the producer node.
	Producer string
	// Fallback is the policy when the producer cannot help.
	Fallback Fallback
	// Logger receives the reasons for falling back (nil discards).
	Logger *slog.Logger
}

// Outcome says what Prepare did.
type Outcome struct {
	// Remote is true when the producer supplied the prefix.
	Remote bool `json:"remote"`
	// Skipped says why no remote call was made ("" when one was).
	Skipped string `json:"skipped,omitempty"`
	// Cached is the number of leading tokens the local store held before.
	Cached int `json:"cached"`
	// Result is the transfer, when one ran.
	Result repl.Result `json:"result"`
	// Err is the remote failure the consumer fell back from, if any.
	Err error `json:"-"`
	// Duration is the time Prepare took.
	Duration time.Duration `json:"duration_ns"`
}

// Prepare makes the local store hold the KV of every whole block of tokens
// under (id, salt), fetching what it lacks from the producer. A nil error
// means the caller goes on with its usual restore and prefill (which then
// computes at most the tail of the prompt, or everything after a
// fallback); under FallbackFail a remote failure is an error wrapping
// ErrRemoteFailed.
func (c *Consumer) Prepare(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) (Outcome, error) {
	start := time.Now()
	var out Outcome
	b := c.Store.BlockTokens()
	whole := len(tokens) / b * b
	if whole == 0 {
		out.Skipped = fmt.Sprintf("the prompt's %d tokens are less than one %d-token block", len(tokens), b)
		out.Duration = time.Since(start)
		return out, nil
	}
	m, err := c.Store.Match(id, salt, tokens[:whole])
	if err != nil {
		return out, err
	}
	out.Cached = m.Tokens
	if m.Tokens >= whole {
		out.Skipped = "every whole block is cached locally"
		out.Duration = time.Since(start)
		return out, nil
	}
	res, err := c.Node.Prefill(ctx, c.Producer, id, salt, tokens[:whole], m.Tokens)
	out.Result = res
	out.Duration = time.Since(start)
	if err == nil {
		out.Remote = true
		return out, nil
	}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	out.Err = err
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if c.Fallback == FallbackFail {
		log.Warn("remote prefill failed; failing the request (--prefill-fallback fail)", "producer", c.Producer, "tokens", whole, "err", err)
		return out, fmt.Errorf("%w: producer %s: %w", ErrRemoteFailed, c.Producer, err)
	}
	log.Warn("remote prefill failed; prefilling locally", "producer", c.Producer, "tokens", whole, "err", err)
	return out, nil
}
