package prefill

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

	// After the producer could not be reached (repl.DialError), Prepare
	// does not dial it again until retryAt: the wait starts at
	// MinRedialWait and doubles with each further failure up to
	// MaxRedialWait, and a successful call resets it. Without this, every
	// request would wait out a handshake timeout before falling back.
	mu      sync.Mutex
	down    error     // the last dial failure, while backing off
	retryAt time.Time // no dial before this
	wait    time.Duration
	now     func() time.Time // the clock (tests replace it)
}

// Redial waits after a producer could not be reached (see Consumer).
const (
	MinRedialWait = 2 * time.Second
	MaxRedialWait = time.Minute
)

// backingOff returns the last dial failure while the consumer waits
// before dialling the producer again, else nil.
func (c *Consumer) backingOff() (until time.Time, down error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down != nil && c.clock().Before(c.retryAt) {
		return c.retryAt, c.down
	}
	return time.Time{}, nil
}

// noteResult records whether the producer could be reached and returns
// the wait before the next dial (0 when it was reached).
func (c *Consumer) noteResult(err error) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var de *repl.DialError
	if !errors.As(err, &de) {
		c.down, c.wait = nil, 0
		return 0
	}
	c.wait = min(max(2*c.wait, MinRedialWait), MaxRedialWait)
	c.down, c.retryAt = err, c.clock().Add(c.wait)
	return c.wait
}

func (c *Consumer) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
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
	log := c.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if until, down := c.backingOff(); down != nil {
		// Not dialled: it could not be reached a moment ago. Logged at
		// debug level; the failure itself was logged when it happened.
		out.Skipped = fmt.Sprintf("producer %s could not be reached; next attempt after %s", c.Producer, until.Format(time.RFC3339))
		out.Err = down
		out.Duration = time.Since(start)
		if c.Fallback == FallbackFail {
			log.Debug("remote prefill skipped; failing the request (--prefill-fallback fail)", "producer", c.Producer, "retry_at", until, "err", down)
			return out, fmt.Errorf("%w: producer %s (unreachable; next attempt after %s): %w", ErrRemoteFailed, c.Producer, until.Format(time.RFC3339), down)
		}
		log.Debug("remote prefill skipped; prefilling locally", "producer", c.Producer, "retry_at", until, "err", down)
		return out, nil
	}
	res, err := c.Node.Prefill(ctx, c.Producer, id, salt, tokens[:whole], m.Tokens)
	out.Result = res
	out.Duration = time.Since(start)
	if ctx.Err() != nil && err != nil {
		return out, ctx.Err()
	}
	wait := c.noteResult(err)
	if err == nil {
		out.Remote = true
		return out, nil
	}
	out.Err = err
	attrs := []any{"producer", c.Producer, "tokens", whole, "err", err}
	if wait > 0 {
		attrs = append(attrs, "redial_after", wait)
	}
	if c.Fallback == FallbackFail {
		log.Warn("remote prefill failed; failing the request (--prefill-fallback fail)", attrs...)
		return out, fmt.Errorf("%w: producer %s: %w", ErrRemoteFailed, c.Producer, err)
	}
	log.Warn("remote prefill failed; prefilling locally", attrs...)
	return out, nil
}
