package sched

import (
	"context"
	"sync"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/pack"
)

// Request is one generation request, already tokenized.
type Request struct {
	// ID is the request ID, shown in /slots and logs.
	ID string
	// Tenant names the tenant, for logs and /slots.
	Tenant string
	// Salt is the tenant's cache salt: prefixes are found and published
	// under (identity, Salt) only.
	Salt []byte
	// Prompt is the prompt's tokens (at least one; fewer than the context).
	Prompt []int32
	// MaxTokens is the most tokens to generate; ≤ 0 means until an
	// end-of-generation token, a stop string or a full context.
	MaxTokens int
	// Sampling configures the request's own sampler (and its seed).
	Sampling sample.Params
	// Constraint, when set, restricts every sampled token to those it
	// allows (a grammar or JSON schema): its mask is applied before the
	// sampler's chain, and each sampled token is passed to its Accept.
	// The scheduler owns it after Submit; one Constraint serves one
	// request. Log-probabilities still report the model's unconstrained
	// distribution. When the output is complete (CanEnd) and no allowed
	// token can be sampled (ignore_eos bans the end-of-generation
	// tokens), the request finishes with FinishStop.
	Constraint sample.Constraint
	// Stop lists stop strings: generation ends before the first one the
	// output contains, which is not returned.
	Stop []string
	// Logprobs asks for log-probabilities: < 0 none, 0 the chosen token's,
	// n > 0 the chosen token's and the n most likely.
	Logprobs int
	// NoCache skips prefix reuse (restore and in-slot reuse) and
	// publishing for this request (llama.cpp's cache_prompt=false).
	NoCache bool
	// PrefillOnly computes the prompt's KV, publishes its full blocks and
	// finishes without sampling (the producer side of disaggregated
	// prefill). Result.Pack names the pack.
	PrefillOnly bool
	// Hidden, when not engine.OutputNone, makes the request an embeddings
	// request: it computes the prompt's final-normed hidden states (the
	// last token's, or every token's), samples nothing, and finishes with
	// them in Result.Hidden (embed.go).
	Hidden engine.Output
	// OnPrefill, if not nil, is called on the scheduler's goroutine after
	// each prefill step of this request with the prompt tokens computed so
	// far and the number it computes in all (restored ones left out):
	// progress reporting. It must return quickly.
	OnPrefill func(done, total int)
	// Route is the HTTP route, for the Observer.
	Route string
	// N is the number of choices (completions of the one prompt) to
	// generate; ≤ 1 means one. See "Several choices" in the package doc.
	N int
	// Received is when the request arrived; time to first token counts
	// from it (from the submission when zero).
	Received time.Time
}

// NoToken marks an Event that carries only text: what was held back at
// the end of generation (an unfinished stop-string prefix or UTF-8
// sequence).
const NoToken int32 = -1

// Event is one generated token and the text it completes.
type Event struct {
	// Token is the token, or NoToken.
	Token int32
	// Text is the output text this event adds: it may be empty while a
	// possible stop string or an unfinished character is held back.
	Text string
	// Logprob is the token's log-probability, set when the request
	// asked for logprobs.
	Logprob *sample.TokenLogprob
	// Top holds the most likely tokens, when the request asked for them.
	Top []sample.TokenLogprob
	// Time is when the token was sampled.
	Time time.Time
	// Choice is the index of the choice the event belongs to (0 unless
	// Request.N > 1).
	Choice int
}

// Finish says why a request ended.
type Finish uint8

// Finish values.
const (
	// FinishNone: not finished.
	FinishNone Finish = iota
	// FinishStop: an end-of-generation token or a stop string.
	FinishStop
	// FinishLength: MaxTokens reached, or the context is full.
	FinishLength
	// FinishCancelled: the request's context was cancelled.
	FinishCancelled
	// FinishError: the engine or the sampler failed (Task.Err says how).
	FinishError
)

func (f Finish) String() string {
	switch f {
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishCancelled:
		return "cancelled"
	case FinishError:
		return "error"
	}
	return "none"
}

// Result describes a finished request.
type Result struct {
	// Slot is the slot that served the request (-1 if none did).
	Slot int
	// PromptTokens is the prompt's length.
	PromptTokens int
	// CachedTokens is how many prompt tokens were not computed because
	// their KV came from the store or was still in the slot.
	CachedTokens int
	// CacheSource says where they came from: "store", "slot" or "".
	CacheSource string
	// Generated holds the sampled tokens, an end-of-generation token
	// included.
	Generated []int32
	// Finish says why generation ended.
	Finish Finish
	// EOG is set when an end-of-generation token ended it.
	EOG bool
	// StopWord is the stop string that ended it, if one did.
	StopWord string
	// Times: submitted, given a slot, prompt computed, first token, done.
	Queued, Started, PrefillDone, FirstToken, Done time.Time
	// Restored is when the prefix restore (and the remote prefill before
	// it) ended; zero when none ran.
	Restored time.Time
	// RemoteDone is when Config.RemotePrefill returned; zero when it was
	// not called. The restore itself ran from RemoteDone to Restored.
	RemoteDone time.Time
	// PrefillAt names the producer node that computed the prompt's
	// uncached blocks, as Config.RemotePrefill reported it with
	// NotePrefillAt; "" when the prefill ran here.
	PrefillAt string
	// Pack is, for a PrefillOnly request, the pack that holds its prefix.
	Pack pack.Digest
	// Drafted is how many draft tokens were compared with the sampled
	// ones (speculative decoding), and Accepted how many of them matched.
	Drafted, Accepted int
	// Hidden holds, for a request with Hidden set, the hidden states it
	// asked for: Config.Hidden floats per token, in prompt order.
	Hidden []float32
	// Choices holds each choice's outcome, in index order, when
	// Request.N > 1 (nil otherwise). Generated then holds every choice's
	// tokens, one after the other, and Finish, EOG and StopWord are the
	// last choice's.
	Choices []ChoiceResult
}

// Task is a submitted request. Next delivers its events; the task ends
// when its events are drained and Next reports done.
type Task struct {
	s       *Scheduler
	req     *Request
	ctx     context.Context
	cancel  context.CancelFunc
	stopAF  func() bool
	sampler *sample.Sampler
	// constraint is the current choice's Constraint (Request.Constraint
	// for the first), allowed its set at each step.
	constraint sample.Constraint
	allowed    sample.TokenSet
	multi      *choices // the state of Request.N > 1; nil for one choice

	mu     sync.Mutex
	events []Event
	done   bool
	res    Result
	err    error
	notify chan struct{}
}

// Request returns the task's request.
func (t *Task) Request() *Request { return t.req }

// Cancel abandons the task: if it is queued it leaves the queue before
// Cancel returns (its place is free for the next Submit); if it runs, its
// slot is freed at the next step. Calling Cancel after the task finished
// does nothing. Handlers defer it.
func (t *Task) Cancel() {
	t.cancel()
	t.s.dequeue(t)
}

// Next waits until the task has events or is finished, and returns the
// events not yet returned. done is true once the task is finished and
// every event has been returned; then Result and Err are final. Next
// returns ctx's error if ctx ends first.
func (t *Task) Next(ctx context.Context) (events []Event, done bool, err error) {
	for {
		t.mu.Lock()
		if len(t.events) > 0 || t.done {
			events, t.events = t.events, nil
			done = t.done
			t.mu.Unlock()
			return events, done, nil
		}
		t.mu.Unlock()
		select {
		case <-t.notify:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// Wait waits for the task to finish, discarding events, and returns its
// result and error.
func (t *Task) Wait(ctx context.Context) (Result, error) {
	for {
		_, done, err := t.Next(ctx)
		if err != nil {
			return Result{}, err
		}
		if done {
			return t.Result(), t.Err()
		}
	}
}

// Result returns the result; it is final once Next reported done. Before
// that it holds what is known: Slot from the moment a slot takes the task
// (-1 while it is queued), the prompt's size and the queueing time.
func (t *Task) Result() Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.res
}

// Err returns why the task failed: nil when it finished normally (stop or
// length), an error wrapping ErrCancelled when it was cancelled, or the
// engine's or sampler's error.
func (t *Task) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

func (t *Task) emit(ev Event) {
	if t.multi != nil {
		ev.Choice = t.multi.index
	}
	t.mu.Lock()
	t.events = append(t.events, ev)
	t.mu.Unlock()
	t.signal()
}

// assigned records the slot that took the task, for Result while it runs.
func (t *Task) assigned(slot int) {
	t.mu.Lock()
	t.res.Slot = slot
	t.mu.Unlock()
}

func (t *Task) finish(res Result, err error) {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		return
	}
	t.res, t.err, t.done = res, err, true
	t.mu.Unlock()
	t.signal()
	t.stopAF()
	t.cancel()
}

func (t *Task) signal() {
	select {
	case t.notify <- struct{}{}:
	default:
	}
}
