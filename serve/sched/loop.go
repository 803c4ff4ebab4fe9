package sched

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/muserhq/muser/infer"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// slotState is where a slot is in serving a request.
type slotState uint8

const (
	stIdle       slotState = iota
	stRestoring            // a goroutine is restoring the prefix into seq
	stPrefill              // computing the prompt, a chunk per step
	stDecode               // generating, a token per step
	stPublishing           // a goroutine is copying new blocks out of seq
	stSlotOp               // a WithSlot operation owns seq (slotops.go)
)

func (st slotState) String() string {
	return [...]string{"idle", "restoring", "prefill", "decode", "publishing", "maintenance"}[st]
}

// slot is one sequence and the request it serves. Only the loop goroutine
// touches a slot, except seq while a restore or export goroutine owns it
// (states stRestoring and stPublishing).
type slot struct {
	id    int
	seq   *engine.Sequence
	state slotState
	task  *Task
	// salt is the salt of the KV seq holds (for in-slot reuse); nil when
	// seq holds nothing reusable.
	salt []byte

	logits  []float32
	dec     *tokenizer.StreamDecoder
	stop    *sample.Stop
	text    strings.Builder // all decoded output, for naming the stop word
	last    int32           // the last sampled token, fed at the next step
	lastAt  time.Time
	res     Result
	lastUse time.Time

	// The draft lane (draft.go): the drafts fed after last in this step,
	// the lane's state, and, while drafts are verified, the length the
	// sequence has for the token being verified (0 otherwise).
	draft     []int32
	spec      specState
	verifyLen int
	// hid holds the target's hidden states for a drafter that wants
	// them (draft_hidden.go).
	hid slotHidden

	// opDone answers the WithSlot call whose operation holds the slot;
	// pendingOp waits for the slot's publish to end (slotops.go).
	opDone    chan error
	pendingOp *slotOp
}

type restoreResult struct {
	slot *slot
	n    int
	err  error
	// remote is Config.RemotePrefill's error: the request fails with it.
	remote error
	// remoteDone and prefillAt: when RemotePrefill returned, and the
	// producer it reported (NotePrefillAt).
	remoteDone time.Time
	prefillAt  string
}

// loop is the scheduler's engine goroutine.
func (s *Scheduler) loop() {
	defer close(s.loopDone)
	rr := 0 // first slot offered prefill budget, rotating
	for {
		s.drain()
		if s.ctx.Err() != nil {
			s.abortAll()
			if s.quiet() {
				return
			}
		}
		s.reap()
		s.admit()
		steps, owners := s.gather(&rr)
		if len(steps) == 0 {
			s.mu.Lock()
			done := s.closing && len(s.queue) == 0 && s.quietLocked()
			s.mu.Unlock()
			if done {
				return
			}
			s.waitSignal()
			continue
		}
		t0 := time.Now()
		err := s.forward(steps)
		if err == nil {
			s.noteStepCost(steps, owners, time.Since(t0))
		}
		if err != nil {
			s.log.Error("forward pass failed", "err", err, "steps", len(steps))
			for _, sl := range owners {
				sl.seq.Truncate(0)
				sl.salt = nil
				s.end(sl, FinishError, fmt.Errorf("forward pass: %w", err), false)
			}
			continue
		}
		now := time.Now()
		for i, sl := range owners {
			s.keepHidden(sl, &steps[i])
			collectHidden(sl, &steps[i])
			s.after(sl, steps[i].Logits, now)
			steps[i].Logits = nil
		}
		s.publishInfos()
	}
}

// forward runs one step's batch. A batch of decode tokens only is split
// into Forward calls of at most DecodeBatch tokens (see Config); a batch
// with a prompt chunk runs as one call, its decode tokens riding along.
// Kernels are batch-invariant, so the split never changes a result.
func (s *Scheduler) forward(steps []engine.Step) error {
	g := s.cfg.DecodeBatch
	if g <= 0 || len(steps) <= g {
		return s.cfg.Model.Forward(s.ctx, steps)
	}
	for _, st := range steps {
		if len(st.Tokens) > 1 {
			return s.cfg.Model.Forward(s.ctx, steps)
		}
	}
	for i := 0; i < len(steps); i += g {
		if err := s.cfg.Model.Forward(s.ctx, steps[i:min(i+g, len(steps))]); err != nil {
			return err
		}
	}
	return nil
}

// quiet reports whether no slot is owned by a goroutine or a request.
func (s *Scheduler) quiet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.quietLocked()
}

func (s *Scheduler) quietLocked() bool {
	for _, sl := range s.slots {
		if sl.state != stIdle {
			return false
		}
	}
	return true
}

// waitSignal blocks until something may have changed.
func (s *Scheduler) waitSignal() {
	done := s.ctx.Done()
	if s.ctx.Err() != nil {
		done = nil // already handled: wait for the goroutines still out
	}
	select {
	case <-s.wake:
	case r := <-s.restored:
		s.onRestored(r)
	case id := <-s.freed:
		s.onFreed(id)
	case op := <-s.ops:
		s.onSlotOp(op)
	case <-done:
	}
}

// drain handles every pending restore result and freed slot.
func (s *Scheduler) drain() {
	for {
		select {
		case r := <-s.restored:
			s.onRestored(r)
		case id := <-s.freed:
			s.onFreed(id)
		case op := <-s.ops:
			s.onSlotOp(op)
		default:
			return
		}
	}
}

func (s *Scheduler) onFreed(id int) {
	sl := s.slots[id]
	s.setState(sl, stIdle)
	s.slotOpDone(sl)
	s.poke()
}

func (s *Scheduler) onRestored(r restoreResult) {
	sl := r.slot
	sl.res.Restored = time.Now()
	sl.res.RemoteDone, sl.res.PrefillAt = r.remoteDone, r.prefillAt
	if r.remote != nil {
		s.end(sl, FinishError, r.remote, false)
		return
	}
	if r.err != nil {
		var re *store.RefusalError
		if errors.As(r.err, &re) {
			s.obs.Refused(string(re.Receipt.Reason))
			s.log.Warn("prefix restore refused; computing the prompt instead", "request_id", sl.task.req.ID,
				"reason", re.Receipt.Reason, "receipt", re.Receipt.ID, "err", r.err)
		} else if sl.task.ctx.Err() == nil {
			s.log.Warn("prefix restore failed; computing the prompt instead", "request_id", sl.task.req.ID, "err", r.err)
		}
		r.n = 0 // RestorePrefix left the sequence empty
	}
	if r.n > 0 {
		sl.res.CachedTokens, sl.res.CacheSource = r.n, "store"
	}
	s.obs.Prefix(len(sl.task.req.Prompt), sl.res.CachedTokens, sl.res.CacheSource)
	s.setState(sl, stPrefill)
}

// abortAll cancels every queued task and every slot's task after the
// scheduler's context ended (a shutdown past its grace period).
func (s *Scheduler) abortAll() {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.queueChangedLocked()
	s.mu.Unlock()
	for _, t := range q {
		t.finish(t.res, fmt.Errorf("%w: the server is shutting down", ErrCancelled))
	}
	for _, sl := range s.slots {
		if sl.state == stPrefill || sl.state == stDecode {
			s.end(sl, FinishCancelled, fmt.Errorf("%w: the server is shutting down", ErrCancelled), true)
		}
	}
}

// reap ends the tasks of slots whose request was cancelled. (A cancelled
// request still queued has left the queue already: Submit's AfterFunc
// dequeues it, and admit skips one whose context ended meanwhile.)
func (s *Scheduler) reap() {
	for _, sl := range s.slots {
		if (sl.state == stPrefill || sl.state == stDecode) && sl.task.ctx.Err() != nil {
			s.end(sl, FinishCancelled, fmt.Errorf("%w: %w", ErrCancelled, sl.task.ctx.Err()), true)
		}
	}
}

// admit gives idle slots to queued tasks, oldest first.
func (s *Scheduler) admit() {
	for {
		sl := s.anyIdle()
		if sl == nil {
			return
		}
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		t := s.queue[0]
		s.queue = s.queue[1:]
		s.queueChangedLocked()
		s.mu.Unlock()
		if t.ctx.Err() != nil {
			t.finishQueued()
			continue
		}
		s.start(t)
	}
}

func (s *Scheduler) anyIdle() *slot {
	for _, sl := range s.slots {
		if sl.state == stIdle {
			return sl
		}
	}
	return nil
}

// start puts t in the best idle slot: one whose KV covers more of the
// prompt than the store does (SlotReuse), else the least recently used,
// and restores its prefix from the store. With RemotePrefill, a slot is
// reused only when it covers every whole block of the prompt (what a
// producer could supply).
func (s *Scheduler) start(t *Task) {
	req := t.req
	limit := len(req.Prompt) - 1 // the last prompt token is always computed
	var (
		best  *slot
		reuse int
	)
	if s.cfg.SlotReuse && !req.NoCache && !req.everyRow() {
		for _, sl := range s.slots {
			if sl.state != stIdle || sl.salt == nil || !bytes.Equal(sl.salt, req.Salt) {
				continue
			}
			n := commonPrefix(sl.seq.Tokens(), req.Prompt[:limit])
			if n > reuse {
				best, reuse = sl, n
			}
		}
	}
	if s.cfg.Store != nil && !req.NoCache && reuse > 0 {
		if (s.cfg.RemotePrefill != nil || s.cfg.Restore != nil) && reuse < min(len(req.Prompt)/s.block*s.block, limit) {
			best, reuse = nil, 0 // a prefill producer or a read-through can supply every whole block
		} else if m, err := s.cfg.Store.Match(s.cfg.Identity, req.Salt, req.Prompt); err == nil && min(m.Tokens, limit) > reuse {
			best, reuse = nil, 0 // the store holds more
		}
	}
	if best == nil {
		for _, sl := range s.slots {
			if sl.state == stIdle && (best == nil || sl.lastUse.Before(best.lastUse)) {
				best = sl
			}
		}
	}
	sl := best
	sl.task = t
	sl.res = t.res
	sl.res.Slot = sl.id
	sl.res.Started = time.Now()
	t.assigned(sl.id)
	sl.dec = s.cfg.Tokenizer.NewStreamDecoder()
	sl.stop = sample.NewStop(req.Stop)
	sl.text.Reset()
	sl.hid.reset()
	sl.lastUse = sl.res.Started
	if reuse > 0 {
		sl.seq.Truncate(reuse)
		sl.res.CachedTokens, sl.res.CacheSource = reuse, "slot"
	} else {
		sl.seq.Truncate(0)
	}
	sl.salt = slices.Clone(req.Salt)
	if reuse == 0 && s.cfg.Store != nil && !req.NoCache && !req.everyRow() && len(req.Prompt) >= s.block {
		s.setState(sl, stRestoring)
		go s.restore(sl, t)
		return
	}
	s.obs.Prefix(len(req.Prompt), sl.res.CachedTokens, sl.res.CacheSource)
	s.setState(sl, stPrefill)
}

// restore runs in its own goroutine, owning sl.seq until it reports.
func (s *Scheduler) restore(sl *slot, t *Task) {
	req := t.req
	var (
		remoteDone time.Time
		at         string
	)
	if s.cfg.RemotePrefill != nil {
		note := &prefillNote{}
		err := s.cfg.RemotePrefill(context.WithValue(t.ctx, prefillNoteKey{}, note), s.cfg.Identity, req.Salt, req.Prompt)
		remoteDone, at = time.Now(), note.get()
		if err != nil && t.ctx.Err() == nil {
			s.log.Warn("remote prefill failed; failing the request", "request_id", req.ID, "err", err)
			s.restored <- restoreResult{slot: sl, remote: fmt.Errorf("%w: %w", ErrRemotePrefill, err), remoteDone: remoteDone}
			return
		}
	}
	var ps infer.PrefixStore = s.cfg.Store
	if s.cfg.Restore != nil {
		ps = restoreHook{Store: s.cfg.Store, restore: s.cfg.Restore}
	}
	n, err := s.cfg.Model.RestorePrefix(t.ctx, ps, s.cfg.Identity, req.Salt, sl.seq, req.Prompt)
	s.restored <- restoreResult{slot: sl, n: n, err: err, remoteDone: remoteDone, prefillAt: at}
}

// restoreHook is the store with Config.Restore in place of its Restore.
type restoreHook struct {
	Store
	restore func(ctx context.Context, id pack.Identity, salt []byte, tokens []int32, put func(block int, kv []byte) error) (int, error)
}

// Restore calls Config.Restore.
func (h restoreHook) Restore(ctx context.Context, id pack.Identity, salt []byte, tokens []int32,
	put func(block int, kv []byte) error) (int, error) {
	return h.restore(ctx, id, salt, tokens, put)
}

func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// gather builds one step: a decode token for every decoding slot, and
// prompt chunks within the step's budget for prefilling ones.
func (s *Scheduler) gather(rr *int) ([]engine.Step, []*slot) {
	var (
		steps  []engine.Step
		owners []*slot
	)
	s.propose()
	for _, sl := range s.slots {
		if sl.state == stDecode {
			steps = append(steps, s.decodeStep(sl))
			owners = append(owners, sl)
		}
	}
	budget := s.cfg.StepTokens
	n := len(s.slots)
	for k := range n {
		sl := s.slots[(*rr+k)%n]
		if sl.state != stPrefill || budget == 0 {
			continue
		}
		prompt := sl.task.req.Prompt
		rest := prompt[sl.seq.Len():]
		c := min(len(rest), s.cfg.PrefillChunk, budget)
		out := engine.OutputNone
		if c == len(rest) && !sl.task.req.PrefillOnly && sl.task.req.Hidden == engine.OutputNone {
			out = engine.OutputLast
		}
		st := engine.Step{Seq: sl.seq, Tokens: rest[:c], Output: out, Logits: sl.logits,
			Hidden: hiddenOutput(sl.task.req, c == len(rest))}
		if out == engine.OutputLast {
			// The prompt's last token: its state starts the drafts.
			st.Hidden, st.HiddenStates = s.stepHidden(sl, engine.OutputLast)
		}
		steps = append(steps, st)
		owners = append(owners, sl)
		budget -= c
	}
	*rr = (*rr + 1) % n
	return steps, owners
}

// after handles one slot's part of a finished step.
func (s *Scheduler) after(sl *slot, logits []float32, now time.Time) {
	if logits != nil {
		sl.logits = logits
	}
	req := sl.task.req
	if sl.state == stPrefill {
		if req.OnPrefill != nil {
			req.OnPrefill(sl.seq.Len()-sl.res.CachedTokens, len(req.Prompt)-sl.res.CachedTokens)
		}
		if sl.seq.Len() < len(req.Prompt) {
			return // more chunks to come
		}
		sl.res.PrefillDone = now
		keepPromptLogits(sl)
		s.keepPromptHidden(sl)
		if req.PrefillOnly || req.Hidden != engine.OutputNone {
			s.end(sl, FinishStop, nil, true)
			return
		}
	}
	if len(sl.draft) > 0 {
		s.verify(sl, now)
		return
	}
	s.next(sl, sl.logits, now)
}

// next samples the slot's next token from logits (the row after its last
// fed token), emits it and ends the request if it should end; it reports
// whether generation goes on (sl.last then holds the token to feed).
func (s *Scheduler) next(sl *slot, logits []float32, now time.Time) bool {
	req := sl.task.req
	var allowed sample.TokenSet
	c := sl.task.constraint
	if c != nil {
		if sl.task.allowed == nil {
			sl.task.allowed = sample.NewTokenSet(s.vocab)
		}
		allowed = sl.task.allowed
		allowed.Clear()
		if err := c.Allowed(allowed); err != nil {
			s.end(sl, FinishError, &RequestError{Field: "constraint", Reason: err.Error(), Err: err}, true)
			return false
		}
	}
	tok, err := sl.task.sampler.SampleAllowed(logits, allowed)
	if err != nil && allowed != nil && errors.Is(err, sample.ErrNoCandidates) && c.CanEnd() {
		// The output is complete and every token that could follow is
		// banned (the end-of-generation tokens by ignore_eos or a
		// logit bias): the constraint ends the request.
		s.end(sl, FinishStop, nil, true)
		return false
	}
	if err != nil {
		field := "logit_bias"
		if allowed != nil {
			field = "constraint"
		}
		s.end(sl, FinishError, &RequestError{Field: field, Reason: err.Error(), Err: err}, true)
		return false
	}
	if c != nil {
		if err := c.Accept(tok); err != nil {
			s.end(sl, FinishError, &RequestError{Field: "constraint", Reason: err.Error(), Err: err}, true)
			return false
		}
	}
	sl.task.sampler.Accept(tok)
	sl.res.Generated = append(sl.res.Generated, tok)
	if sl.res.FirstToken.IsZero() {
		sl.res.FirstToken = now
	} else {
		s.obs.InterToken(now.Sub(sl.lastAt))
	}
	sl.lastAt = now
	if s.cfg.Tokenizer.IsEOG(tok) {
		sl.res.EOG = true
		s.end(sl, FinishStop, nil, true)
		return false
	}
	ev := Event{Token: tok, Time: now}
	if req.Logprobs >= 0 {
		lp, top := sample.Logprobs(logits, tok, req.Logprobs)
		ev.Logprob, ev.Top = &lp, top
	}
	piece := sl.dec.Write(tok)
	sl.text.WriteString(piece)
	out, stopped := sl.stop.Write(piece)
	ev.Text = out
	sl.task.emit(ev)
	switch {
	case stopped:
		sl.res.StopWord = firstStop(sl.text.String(), req.Stop)
		s.end(sl, FinishStop, nil, true)
	case req.MaxTokens > 0 && len(sl.res.Generated) >= req.MaxTokens:
		s.end(sl, FinishLength, nil, true)
	case sl.fed() >= sl.seq.Max():
		s.end(sl, FinishLength, nil, true) // no room to feed tok
	default:
		sl.last = tok
		if sl.state != stDecode {
			s.setState(sl, stDecode)
		}
		return true
	}
	return false
}

// firstStop names the stop string that occurs earliest in text.
func firstStop(text string, stops []string) string {
	best, at := "", -1
	for _, x := range stops {
		if x == "" {
			continue
		}
		if i := strings.Index(text, x); i >= 0 && (at < 0 || i < at || i == at && len(x) > len(best)) {
			best, at = x, i
		}
	}
	return best
}

// end finishes the slot's task: emits the held-back text, hands the
// slot's new full blocks to the publisher (when publish is set and there
// is a store), and frees the slot.
func (s *Scheduler) end(sl *slot, f Finish, err error, publish bool) {
	sl.endVerify()
	t := sl.task
	if f == FinishStop || f == FinishLength || f == FinishCancelled {
		tail := sl.dec.Flush()
		if !sl.stop.Stopped() {
			out, stopped := sl.stop.Write(tail)
			if stopped {
				sl.text.WriteString(tail)
				sl.res.StopWord = firstStop(sl.text.String(), t.req.Stop)
			} else {
				out += sl.stop.Flush()
			}
			if out != "" && f != FinishCancelled {
				t.emit(Event{Token: NoToken, Text: out, Time: time.Now()})
			}
		}
	}
	if s.nextChoice(sl, f) {
		return
	}
	sl.res.Finish = f
	finishChoices(t, &sl.res)
	sl.res.Done = time.Now()
	res := sl.res
	s.obs.Finished(t.req, res)
	sl.task, sl.dec, sl.stop = nil, nil, nil
	canPublish := publish && s.cfg.Store != nil && !t.req.NoCache && s.block > 0 && sl.seq.Len() >= s.block
	if t.req.PrefillOnly {
		if !canPublish {
			s.setState(sl, stIdle)
			t.finish(res, err)
			return
		}
		s.setState(sl, stPublishing)
		s.addPending(1)
		go s.export(sl, t.req, func(pres store.PublishResult, perr error) {
			if perr == nil {
				res.Pack = pres.Pack
			}
			t.finish(res, perr)
		})
		return
	}
	if !canPublish {
		s.setState(sl, stIdle)
		t.finish(res, err)
		return
	}
	// Counted as pending before the client hears the request is done, so
	// a Sync after the answer waits for this publish.
	s.setState(sl, stPublishing)
	s.addPending(1)
	t.finish(res, err)
	go s.export(sl, t.req, nil)
}

// setState changes a slot's state and its /slots snapshot.
func (s *Scheduler) setState(sl *slot, st slotState) {
	sl.state = st
	s.mu.Lock()
	s.infoLocked(sl)
	busy := 0
	for _, x := range s.slots {
		if x.state == stRestoring || x.state == stPrefill || x.state == stDecode {
			busy++
		}
	}
	s.mu.Unlock()
	s.obs.Busy(busy)
}

func (s *Scheduler) infoLocked(sl *slot) {
	in := SlotInfo{ID: sl.id, State: sl.state.String(), Ctx: s.cfg.Ctx}
	if sl.state != stRestoring && sl.state != stPublishing && sl.state != stSlotOp {
		in.Tokens = sl.seq.Len()
	}
	if t := sl.task; t != nil {
		in.RequestID, in.Tenant = t.req.ID, t.req.Tenant
		in.PromptTokens, in.CachedTokens, in.Generated = len(t.req.Prompt), sl.res.CachedTokens, len(sl.res.Generated)
	}
	s.infos[sl.id] = in
}

// publishInfos refreshes the /slots snapshot of active slots after a step.
func (s *Scheduler) publishInfos() {
	s.mu.Lock()
	for _, sl := range s.slots {
		if sl.state == stPrefill || sl.state == stDecode {
			s.infoLocked(sl)
		}
	}
	s.mu.Unlock()
}
