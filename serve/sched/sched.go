package sched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/muserhq/muser/infer"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// Store is what the scheduler needs from the prefix cache; *store.Store
// implements it.
type Store interface {
	infer.PrefixStore
	// Match finds the longest cached prefix without reading data.
	Match(id pack.Identity, salt []byte, tokens []int32) (store.Match, error)
	// PublishPrefix publishes blocks and says what it wrote.
	PublishPrefix(ctx context.Context, id pack.Identity, salt []byte, tokens []int32,
		get func(block int) ([]byte, error)) (store.PublishResult, error)
	// GC keeps the store under a byte budget.
	GC(ctx context.Context, opts store.GCOptions) (store.GCReport, error)
	// Stats sums the store up.
	Stats() (store.Stats, error)
}

// Defaults for Config fields left zero.
const (
	DefaultSlots        = 1
	DefaultMaxQueue     = 64
	DefaultPublishQueue = 16
	// DefaultCtx is the context per slot when neither Config.Ctx nor the
	// model's training context is smaller.
	DefaultCtx = 4096
)

// Config configures a Scheduler.
type Config struct {
	// Model runs the forward passes.
	Model *engine.Model
	// Tokenizer decodes the output and names the end-of-generation
	// tokens.
	Tokenizer *tokenizer.Tokenizer
	// Store is the prefix cache; nil disables restore and publish.
	Store Store
	// Identity is the engine's pack identity (engine.Model.Identity with
	// the store's block size).
	Identity pack.Identity
	// Slots is the number of sequences decoded together (--parallel).
	Slots int
	// Ctx is the most tokens (prompt and output) one slot holds (--ctx);
	// 0 means the model's training context, at most DefaultCtx.
	Ctx int
	// CommitKV allocates and writes every slot's KV memory for Ctx tokens
	// before New returns (engine.Sequence.Commit, --kv-commit), so that no
	// request pays for growing a slot's cache or for the first write of
	// its memory; off, a slot's cache grows with its context.
	CommitKV bool
	// MaxQueue is the most requests waiting for a busy slot
	// (--max-queue); beyond it Submit returns ErrQueueFull. Negative means
	// none wait. A slot that only copies out the blocks of the request it
	// finished is not busy: a request may always wait for it.
	MaxQueue int
	// PrefillChunk is the most prompt tokens one slot computes in one
	// step, and StepTokens the most prompt tokens all slots compute in one
	// step, so a long prompt delays the others' next token by a bounded
	// amount. Decode tokens are always included. 0 means the rows one
	// backend call takes (engine.Model.MaxRows: 512 on the CPU).
	PrefillChunk, StepTokens int
	// DecodeBatch is the most decode tokens one Forward call takes when a
	// step holds decode tokens only; a larger step is split into several
	// calls. 0 means the backend's preference (engine.Model.DecodeBatch);
	// negative means no split.
	DecodeBatch int
	// SlotReuse lets a request reuse the KV still held by an idle slot
	// that last served the same salt, when that covers more of its prompt
	// than the store does (llama.cpp's cache_prompt).
	SlotReuse bool
	// PublishQueue is the most finished requests whose blocks wait to be
	// published; beyond it a publish is dropped (never blocking decode).
	PublishQueue int
	// StoreMaxBytes, when positive, is the store's byte budget: after a
	// publish takes the store over it, gc evicts least recently used packs.
	StoreMaxBytes int64
	// OnPublish, when set, is called after each successful publish (from
	// the publisher goroutine): the hook for replication.
	OnPublish func(PublishEvent)
	// RemotePrefill, when set, is called before a request's local
	// restore with its identity, salt and prompt: the hook by which a
	// consumer asks a prefill producer to compute and ship the prefix.
	// A nil error proceeds with what the local store then holds (the hook
	// decides whether a producer's failure falls back to a local
	// prefill); an error fails the request with an error wrapping
	// ErrRemotePrefill.
	RemotePrefill func(ctx context.Context, id pack.Identity, salt []byte, tokens []int32) error
	// Restore, when set, restores a request's prefix in place of
	// Store.Restore, with its shape and contract (infer.PrefixStore): the
	// hook for a read-through (the fleet tier) that hands the engine
	// verified blocks as they arrive from elsewhere. As with
	// RemotePrefill, an idle slot's KV is reused only when it covers
	// every whole block of the prompt.
	Restore func(ctx context.Context, id pack.Identity, salt []byte, tokens []int32, put func(block int, kv []byte) error) (int, error)
	// Drafter, when set, proposes draft tokens that each decode step
	// verifies (speculative decoding, doc.go): it changes speed, never
	// output. The caller closes it after the scheduler. A HiddenDrafter
	// that wants hidden states gets them (DraftRequest.Hidden) and needs
	// a model whose device returns them: New refuses it otherwise
	// (CheckDraftHidden).
	Drafter Drafter
	// DraftMax is the most draft tokens one slot verifies in one step
	// (0: DefaultDraftMax); the draft length adapts below it to the
	// measured acceptance rate and the measured costs of steps and
	// drafts, and is 0 (a plain step) while no length pays.
	DraftMax int
	// DraftIgnoreCost adapts the draft length to the acceptance rate
	// alone, as if verifying and drafting cost nothing: every decode
	// step of a slot drafts, and the lengths do not depend on timing.
	// For tests; a lane that does not pay then slows decoding down.
	DraftIgnoreCost bool
	// testCosts, when set, replaces the draft lane's measured costs.
	testCosts *laneCosts
	// Observer receives measurements; nil discards them.
	Observer Observer
	// Logger receives the scheduler's logs; nil discards them.
	Logger *slog.Logger
}

// PublishEvent describes a publish, for Config.OnPublish.
type PublishEvent struct {
	// RequestID is the request whose blocks were published.
	RequestID string
	// Salt is the salt they were published under.
	Salt []byte
	// Tokens is the number of tokens the published pack covers.
	Tokens int
	// Result is what the store did (the pack's ID, new or not, bytes).
	Result store.PublishResult
}

// Scheduler runs requests on a model: a fixed set of slots, a bounded
// queue, and one goroutine that batches every active slot's work into one
// Forward per step. It is safe for concurrent use.
type Scheduler struct {
	cfg   Config
	obs   Observer
	log   *slog.Logger
	vocab int
	block int

	ctx    context.Context // the loop's life; cancelled by Close after draining
	cancel context.CancelFunc

	mu       sync.Mutex
	queue    []*Task
	closing  bool
	slots    []*slot
	infos    []SlotInfo
	wake     chan struct{}
	restored chan restoreResult
	freed    chan int
	ops      chan slotOp // WithSlot's operations (slotops.go)
	loopDone chan struct{}

	pub *publisher

	draftN draftCounters
	costs  *laneCosts // the draft lane's measured costs (draft_cost.go)
	// wantHidden is set when the Drafter wants hidden states
	// (HiddenDrafter); hidden is the length of one (engine.Config.Hidden).
	wantHidden bool
	hidden     int

	// pending counts exports and publishes not yet finished; idle is
	// closed whenever it is zero (Sync waits on it).
	pendMu  sync.Mutex
	pending int
	idle    chan struct{}
}

// New builds a Scheduler and starts its goroutines. Close stops them.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Model == nil || cfg.Tokenizer == nil {
		return nil, errors.New("sched: Config needs a Model and a Tokenizer")
	}
	mc := cfg.Model.Config()
	if cfg.Slots <= 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.Ctx <= 0 {
		cfg.Ctx = min(mc.CtxTrain, DefaultCtx)
		if cfg.Ctx <= 0 {
			cfg.Ctx = DefaultCtx
		}
	}
	if cfg.Ctx < 2 {
		return nil, fmt.Errorf("sched: a context of %d tokens cannot hold a prompt and a token", cfg.Ctx)
	}
	if cfg.MaxQueue == 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	if cfg.PrefillChunk <= 0 {
		cfg.PrefillChunk = cfg.Model.MaxRows()
	}
	if cfg.StepTokens <= 0 {
		cfg.StepTokens = cfg.Model.MaxRows()
	}
	if cfg.PublishQueue <= 0 {
		cfg.PublishQueue = DefaultPublishQueue
	}
	if cfg.DraftMax <= 0 {
		cfg.DraftMax = DefaultDraftMax
	}
	if cfg.DecodeBatch == 0 {
		cfg.DecodeBatch = cfg.Model.DecodeBatch()
	}
	if err := CheckDraftHidden(cfg.Model, cfg.Drafter); err != nil {
		return nil, fmt.Errorf("sched: %w", err)
	}
	s := &Scheduler{
		cfg:      cfg,
		costs:    cfg.testCosts,
		obs:      cfg.Observer,
		log:      cfg.Logger,
		vocab:    mc.Vocab,
		wake:     make(chan struct{}, 1),
		restored: make(chan restoreResult, cfg.Slots),
		freed:    make(chan int, cfg.Slots),
		ops:      make(chan slotOp),
		loopDone: make(chan struct{}),
		idle:     make(chan struct{}),
	}
	// A Drafter that wants hidden states gets them (draft_hidden.go); with
	// any other, no step asks for them.
	s.wantHidden, s.hidden = WantsHidden(cfg.Drafter), mc.Hidden
	close(s.idle)
	if s.costs == nil {
		s.costs = newLaneCosts()
	}
	s.costs.perCall = fixedCost(cfg.Drafter)
	if s.obs == nil {
		s.obs = nopObserver{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Store != nil {
		s.block = cfg.Store.BlockTokens()
		if want := cfg.Model.KVString(s.block); cfg.Identity.KV != want {
			return nil, fmt.Errorf("sched: identity kv %q does not match the model and the store's %d-token blocks (%q)",
				cfg.Identity.KV, s.block, want)
		}
	}
	for i := range cfg.Slots {
		seq, err := cfg.Model.NewSequence(cfg.Ctx)
		if err != nil {
			return nil, fmt.Errorf("sched: slot %d: %w", i, err)
		}
		if cfg.CommitKV {
			if err := seq.Commit(); err != nil {
				return nil, fmt.Errorf("sched: slot %d: %w", i, err)
			}
		}
		s.slots = append(s.slots, &slot{id: i, seq: seq})
		s.infos = append(s.infos, SlotInfo{ID: i, State: "idle", Ctx: cfg.Ctx})
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if cfg.Store != nil {
		s.pub = newPublisher(s)
	}
	s.obs.Queue(0)
	s.obs.Busy(0)
	go s.loop()
	return s, nil
}

// Ctx returns the tokens one slot holds.
func (s *Scheduler) Ctx() int { return s.cfg.Ctx }

// Slots returns the number of slots.
func (s *Scheduler) Slots() int { return len(s.slots) }

// Identity returns the pack identity the scheduler restores and publishes
// under.
func (s *Scheduler) Identity() pack.Identity { return s.cfg.Identity }

// Check validates a request as Submit would, without submitting it.
func (s *Scheduler) Check(req *Request) error {
	_, err := s.check(req)
	return err
}

func (s *Scheduler) check(req *Request) (*sample.Sampler, error) {
	if len(req.Prompt) == 0 {
		return nil, &RequestError{Field: "prompt", Reason: "is empty; want at least one token"}
	}
	if len(req.Prompt) >= s.cfg.Ctx {
		return nil, &ContextError{Prompt: len(req.Prompt), Ctx: s.cfg.Ctx}
	}
	for i, t := range req.Prompt {
		if t < 0 || int(t) >= s.vocab {
			return nil, &RequestError{Field: "prompt", Reason: fmt.Sprintf("token %d (at index %d) is outside the vocabulary of %d", t, i, s.vocab)}
		}
	}
	if err := checkChoices(req); err != nil {
		return nil, err
	}
	if err := s.checkHidden(req); err != nil {
		return nil, err
	}
	sm, err := sample.New(req.Sampling, s.vocab)
	if err != nil {
		var pe *sample.ParamError
		if errors.As(err, &pe) {
			return nil, &RequestError{Field: pe.Param, Reason: pe.Reason, Err: err}
		}
		return nil, &RequestError{Field: "sampling", Reason: err.Error(), Err: err}
	}
	return sm, nil
}

// Submit queues req. The task runs until it finishes, ctx is cancelled or
// Task.Cancel is called; a cancelled task frees its slot at the next
// step. Submit fails at once with ErrQueueFull when the queue is full,
// with ErrClosed after Close, or with an error wrapping ErrBadRequest.
func (s *Scheduler) Submit(ctx context.Context, req *Request) (*Task, error) {
	sm, err := s.check(req)
	if err != nil {
		return nil, err
	}
	// The prompt counts for the repetition penalties, as in llama.cpp's
	// server (a no-op when the penalties are off).
	for _, tok := range req.Prompt {
		sm.Accept(tok)
	}
	t := &Task{req: req, sampler: sm, constraint: req.Constraint, notify: make(chan struct{}, 1)}
	if err := s.initChoices(t); err != nil {
		return nil, err
	}
	t.ctx, t.cancel = context.WithCancel(ctx)
	t.res = Result{Slot: -1, PromptTokens: len(req.Prompt), Queued: time.Now()}
	t.s = s
	// A task whose context ends while it waits leaves the queue at once;
	// one that runs is ended by the loop (reap).
	t.stopAF = context.AfterFunc(t.ctx, func() {
		s.dequeue(t)
		s.poke()
	})
	s.mu.Lock()
	if s.closing || len(s.queue) >= max(s.cfg.MaxQueue, 0)+s.freeLocked() {
		closing := s.closing
		s.mu.Unlock()
		t.stopAF()
		t.cancel()
		if closing {
			return nil, ErrClosed
		}
		return nil, ErrQueueFull
	}
	s.queue = append(s.queue, t)
	s.queueChangedLocked()
	s.mu.Unlock()
	s.poke()
	return t, nil
}

// queueChangedLocked reports the queue's depth to the Observer. It is
// called with s.mu held, so that reports from Submit, dequeue and the loop
// arrive in the order of the changes and the last one is the depth now.
func (s *Scheduler) queueChangedLocked() { s.obs.Queue(len(s.queue)) }

// dequeue removes t from the queue, if it waits there, and finishes it as
// cancelled: an abandoned request gives its place up at once, not at the
// loop's next step, which may be a long forward pass away.
func (s *Scheduler) dequeue(t *Task) {
	s.mu.Lock()
	i := slices.Index(s.queue, t)
	if i < 0 {
		s.mu.Unlock()
		return
	}
	s.queue = slices.Delete(s.queue, i, i+1)
	s.queueChangedLocked()
	s.mu.Unlock()
	t.finishQueued()
}

// finishQueued finishes t, cancelled while it waited for a slot.
func (t *Task) finishQueued() {
	t.finish(t.res, fmt.Errorf("%w while queued: %w", ErrCancelled, t.ctx.Err()))
}

// freeLocked counts the slots that will take a queued request without
// waiting for any request to end: idle ones, and ones copying out the
// blocks of the request they just finished (the export frees them by
// itself, in a bounded time). The queue may hold that many beyond
// MaxQueue: a client that sends its next request as soon as the last one
// is answered is not refused while its slot publishes.
func (s *Scheduler) freeLocked() int {
	n := 0
	for _, in := range s.infos {
		if in.State == stIdle.String() || in.State == stPublishing.String() {
			n++
		}
	}
	return n
}

// QueueDepth returns the number of requests waiting for a slot.
func (s *Scheduler) QueueDepth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// SlotInfo is a snapshot of one slot, for /slots.
type SlotInfo struct {
	// ID numbers the slot from 0.
	ID int `json:"id"`
	// State is "idle", "restoring", "prefill", "decode", "publishing"
	// (copying its new blocks out for the publisher) or "maintenance" (a
	// slot save, restore or erase).
	State string `json:"state"`
	// RequestID and Tenant name the request in the slot, if any.
	RequestID string `json:"request_id,omitempty"`
	// Tenant is the tenant of the request in the slot.
	Tenant string `json:"tenant,omitempty"`
	// Ctx is the most tokens the slot holds.
	Ctx int `json:"n_ctx"`
	// Tokens is how many tokens' KV the slot holds now.
	Tokens int `json:"n_tokens"`
	// PromptTokens is the prompt length of the request in the slot.
	PromptTokens int `json:"n_prompt_tokens"`
	// CachedTokens is how much of that prompt came from the cache.
	CachedTokens int `json:"n_cached_tokens"`
	// Generated is how many tokens the request has generated.
	Generated int `json:"n_decoded"`
}

// Processing reports whether the slot is serving a request.
func (in SlotInfo) Processing() bool {
	return in.State == "restoring" || in.State == "prefill" || in.State == "decode"
}

// SlotInfos returns a snapshot of every slot.
func (s *Scheduler) SlotInfos() []SlotInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]SlotInfo(nil), s.infos...)
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close stops the scheduler: it refuses new requests, lets running and
// queued ones finish until ctx ends, then cancels the rest, stops the loop
// and flushes the publish queue (every finished request's blocks are
// published). It returns ctx's error if it had to cancel requests.
func (s *Scheduler) Close(ctx context.Context) error {
	s.mu.Lock()
	already := s.closing
	s.closing = true
	s.mu.Unlock()
	if already {
		<-s.loopDone
		return nil
	}
	s.poke()
	var err error
	select {
	case <-s.loopDone:
	case <-ctx.Done():
		err = ctx.Err()
		s.cancel() // cancels Forward and every task at the next step
		<-s.loopDone
	}
	s.cancel()
	if s.pub != nil {
		s.pub.close()
	}
	return err
}

// addPending counts an export or publish starting (+1) or ending (-1).
func (s *Scheduler) addPending(d int) {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	if s.pending == 0 && d > 0 {
		s.idle = make(chan struct{})
	}
	s.pending += d
	if s.pending == 0 {
		close(s.idle)
	}
}

// Pending returns the number of finished requests whose blocks are being
// copied out or published.
func (s *Scheduler) Pending() int {
	s.pendMu.Lock()
	defer s.pendMu.Unlock()
	return s.pending
}

// Sync waits until the blocks of every request finished so far are
// published (or their publish failed or was dropped), or ctx ends.
func (s *Scheduler) Sync(ctx context.Context) error {
	s.pendMu.Lock()
	idle := s.idle
	s.pendMu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
