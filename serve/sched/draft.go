package sched

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/sample"
)

// A Drafter proposes tokens that may follow a sequence: the draft lane of
// speculative decoding (doc.go, "Speculative decoding"). The scheduler
// verifies every proposal against the target model, so a drafter decides
// speed only, never output: a poor or wrong proposal costs the rows it
// occupies in a step and nothing else. The scheduler calls a Drafter from
// its loop goroutine only.
type Drafter interface {
	// Name names the lane in metrics and logs ("model", "lookup").
	Name() string
	// Draft fills each request's Tokens with at most Max tokens proposed
	// to follow its History. A request may get fewer, or none. An error
	// leaves the step without drafts (it is logged, never returned to a
	// client).
	Draft(ctx context.Context, reqs []DraftRequest) error
	// Forget drops whatever the drafter keeps for a slot; the slot's next
	// History may share nothing with its last.
	Forget(slot int)
	// Close releases the drafter's resources.
	Close() error
}

// DraftRequest is one slot's part of a Drafter.Draft call.
type DraftRequest struct {
	// Slot numbers the slot (stable for a scheduler's life), the key of
	// whatever state a drafter keeps per sequence.
	Slot int
	// History is the slot's prompt and output so far; the proposal
	// follows its last token. It must not be modified or retained.
	// Between two calls for a slot without Forget it may have been cut
	// back: each choice of a request with N > 1 starts again after the
	// prompt.
	History []int32
	// Stable is how many leading tokens of History are the same as in
	// the previous call for the slot (since its last Forget; 0 when
	// there was none): a drafter that keeps a sequence per slot need
	// compare only the tokens after them.
	Stable int
	// Max is the most tokens to propose (at least 1).
	Max int
	// Ctx is the most tokens the slot's sequence holds (Config.Ctx).
	Ctx int
	// Tokens receives the proposal; the drafter appends to Tokens[:0].
	Tokens []int32
	// Hidden, for a HiddenDrafter that wants hidden states, is the
	// target's final-normed hidden state (engine.Config.Hidden floats:
	// the output norm's result, the input of the output projection)
	// after History[len(History)-2], the last token the target has
	// computed; History's last token is the one sampled from that
	// position's logits, not yet fed. It is bit-identical to the state
	// a Forward of History[:len(History)-1] on a fresh sequence returns
	// for its last token. It is nil for a drafter that does not want
	// hidden states, and for a slot the scheduler has none for, which
	// does not happen for a decoding slot (every step of one asks the
	// engine for them). It is valid during the Draft call only: the
	// drafter must neither modify nor retain it.
	Hidden []float32
}

// Draft lengths.
const (
	// DefaultDraftMax is the most draft tokens verified in one step
	// when Config.DraftMax is zero.
	DefaultDraftMax = 8
	// draftGain is the least expected acceptance of the last draft
	// token proposed: the i-th draft token is accepted with probability
	// about α^i, where α is the slot's measured per-token acceptance
	// rate, and one is drafted only while α^i ≥ draftGain.
	draftGain = 0.4
	// draftDecay weighs the slot's earlier verification steps against
	// the latest in the acceptance estimate.
	draftDecay = 0.9
)

// specState is one slot's draft lane: the acceptance estimate for its
// request and the request's counts.
type specState struct {
	task *Task // the request the state belongs to
	// acc and rej are decayed counts of accepted draft tokens and of
	// rejections (a verification step ends at its first rejection).
	acc, rej float64
	// hist is the History of the slot's last Draft call, kept and
	// extended rather than copied anew each step: its first low tokens
	// are still the sequence's (truncate lowers low).
	hist []int32
	low  int
	// off and on count the slot's steps in a row for which its lane
	// did not pay, and did (probeEvery).
	off, on int
}

// alpha returns the slot's per-token acceptance estimate.
func (sp *specState) alpha() float64 { return (sp.acc + 1) / (sp.acc + sp.rej + 2) }

// truncate cuts the slot's sequence back to n tokens; the draft lane's
// history keeps only what is still the sequence's.
func (sl *slot) truncate(n int) {
	// Cannot fail for n within the sequence; past its end it does
	// nothing.
	_ = sl.seq.Truncate(n)
	sl.spec.low = min(sl.spec.low, n)
}

// draftLen returns how many tokens to draft for a slot whose measured
// per-token acceptance is (acc+1)/(acc+rej+2), at most max and at least 1.
func draftLen(acc, rej float64, max int) int {
	alpha := (acc + 1) / (acc + rej + 2)
	k, p := 1, alpha
	for k < max {
		p *= alpha
		if p < draftGain {
			break
		}
		k++
	}
	return k
}

// DraftStats counts the draft lane's work since the scheduler started.
type DraftStats struct {
	// Lane names the drafter ("" when speculation is off).
	Lane string
	// Drafted is the draft tokens verified.
	Drafted int64
	// Accepted is the draft tokens that equalled the token the target
	// model then sampled.
	Accepted int64
	// Steps is the verification steps: slot steps that carried at least
	// one draft token.
	Steps int64
	// Tokens is the tokens those steps generated (accepted drafts plus
	// the one token each step samples after them).
	Tokens int64
}

// AcceptanceRate returns Accepted/Drafted, 0 before any draft.
func (d DraftStats) AcceptanceRate() float64 {
	if d.Drafted == 0 {
		return 0
	}
	return float64(d.Accepted) / float64(d.Drafted)
}

// TokensPerStep returns the tokens one verification step generated on
// average (1 is plain decoding's rate), 0 before any step.
func (d DraftStats) TokensPerStep() float64 {
	if d.Steps == 0 {
		return 0
	}
	return float64(d.Tokens) / float64(d.Steps)
}

// draftCounters are the scheduler's DraftStats, updated by the loop and
// read by anyone.
type draftCounters struct {
	drafted, accepted, steps, tokens atomic.Int64
}

// DraftStats returns the draft lane's counts so far.
func (s *Scheduler) DraftStats() DraftStats {
	d := DraftStats{
		Drafted:  s.draftN.drafted.Load(),
		Accepted: s.draftN.accepted.Load(),
		Steps:    s.draftN.steps.Load(),
		Tokens:   s.draftN.tokens.Load(),
	}
	if s.cfg.Drafter != nil {
		d.Lane = s.cfg.Drafter.Name()
	}
	return d
}

// propose sets every slot's draft for this step: for a decoding slot, the
// drafter's proposal (capped so that every token fits the context and no
// draft lies past the request's MaxTokens); for any other, none. The
// draft length is the one that makes the most tokens per second by the
// measured acceptance and costs (bestDraftLen), or without them yet, or
// with Config.DraftIgnoreCost, by the acceptance alone (draftLen).
func (s *Scheduler) propose() {
	var reqs []DraftRequest
	var owners []*slot
	rows := 0 // the step's decode rows: one per slot, plus drafts
	for _, sl := range s.slots {
		if sl.state == stDecode {
			rows++
		}
	}
	grown := 0 // the most history tokens any slot gained since its last draft
	for _, sl := range s.slots {
		sl.draft = sl.draft[:0]
		if sl.state != stDecode {
			continue
		}
		if sl.spec.task != sl.task {
			sl.spec = specState{task: sl.task, hist: sl.spec.hist[:0]}
			if s.cfg.Drafter != nil {
				s.cfg.Drafter.Forget(sl.id)
			}
		}
		if s.cfg.Drafter == nil {
			continue
		}
		k := s.draftLen(sl, rows-1)
		// The step feeds last and k drafts: all must fit the context.
		k = min(k, sl.seq.Max()-sl.seq.Len()-1)
		if mt := sl.task.req.MaxTokens; mt > 0 {
			// A step emits at most k+1 tokens; more drafts than the
			// tokens left less one can never be accepted.
			k = min(k, mt-len(sl.res.Generated)-1)
		}
		if k <= 0 {
			continue
		}
		rows += k
		// The history: what is left of the last one, then the tokens
		// fed since and last.
		toks := sl.seq.Tokens()
		n := min(sl.spec.low, len(sl.spec.hist), len(toks))
		grown = max(grown, len(toks)+1-n)
		h := append(sl.spec.hist[:n], toks[n:]...)
		h = append(h, sl.last)
		sl.spec.hist, sl.spec.low = h, len(toks)
		r := DraftRequest{Slot: sl.id, History: h, Stable: n, Max: k, Ctx: sl.seq.Max(), Tokens: sl.draft[:0]}
		if s.wantHidden {
			r.Hidden = sl.hid.at(len(toks), s.hidden)
		}
		reqs = append(reqs, r)
		owners = append(owners, sl)
	}
	if len(reqs) == 0 {
		return
	}
	t0 := time.Now()
	err := s.cfg.Drafter.Draft(s.ctx, reqs)
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Warn("drafting failed; decoding this step without drafts", "lane", s.cfg.Drafter.Name(), "err", err)
		}
		return
	}
	if grown <= s.cfg.DraftMax+2 {
		// A slot further behind (a new request, or one whose lane was
		// off) made the drafter catch up: not a draft token's cost.
		kmax := 0
		for _, r := range reqs {
			kmax = max(kmax, r.Max)
		}
		s.costs.noteDraft(kmax, time.Since(t0))
	}
	for i, sl := range owners {
		d := reqs[i].Tokens
		if len(d) > reqs[i].Max {
			d = d[:reqs[i].Max]
		}
		ok := true
		for _, t := range d {
			if t < 0 || int(t) >= s.vocab {
				ok = false // a drafter's bug must not fail the step
				break
			}
		}
		if ok {
			sl.draft = allowedPrefix(sl.task.constraint, d)
		}
	}
}

// draftLen returns how many tokens to draft for a decoding slot whose
// step also carries base rows of other slots.
func (s *Scheduler) draftLen(sl *slot, base int) int {
	sp := &sl.spec
	rule := draftLen(sp.acc, sp.rej, s.cfg.DraftMax)
	switch {
	case s.cfg.DraftIgnoreCost:
		return rule
	case !s.costs.known():
		if s.costs.step[1] == 0 {
			return 0 // a plain step measures the cost of one row
		}
		return rule // a draft measures the drafter's cost
	}
	k := bestDraftLen(sp.alpha(), s.cfg.DraftMax, base, s.costs)
	// Now and then the other choice, to measure again: a plain step
	// while the lane pays, a draft while it does not.
	if k > 0 {
		sp.off = 0
		sp.on++
		if sp.on%probeEvery == 0 {
			return 0
		}
		return k
	}
	// A draft while the lane is off: two steps in a row, as the first
	// catches the drafter up with the history, which the second's
	// timing leaves out.
	sp.on = 0
	sp.off++
	if p := sp.off % probeEvery; p == 0 || (p == 1 && sp.off > 1) {
		return rule
	}
	return 0
}

// allowedPrefix returns the longest prefix of draft that the constraint c
// (nil: none) allows, checked on a clone so c itself does not move. A
// draft token c does not allow can never equal the token sampled there
// (sampling draws from the allowed set only), so the cut saves rows and
// changes nothing.
func allowedPrefix(c sample.Constraint, draft []int32) []int32 {
	if c == nil || len(draft) == 0 {
		return draft
	}
	cc := c.Clone()
	for i, t := range draft {
		if cc.Accept(t) != nil {
			return draft[:i]
		}
	}
	return draft
}

// decodeStep returns a decoding slot's part of a step: its last sampled
// token, followed by its draft tokens if it has any (then with the logits
// after every token, to verify them). For a drafter that wants hidden
// states it asks for them where it asks for logits (keepHidden takes
// them back).
func (s *Scheduler) decodeStep(sl *slot) engine.Step {
	if len(sl.draft) == 0 {
		hid, buf := s.stepHidden(sl, engine.OutputLast)
		return engine.Step{Seq: sl.seq, Tokens: []int32{sl.last}, Output: engine.OutputLast, Logits: sl.logits,
			Hidden: hid, HiddenStates: buf}
	}
	toks := make([]int32, 0, 1+len(sl.draft))
	toks = append(toks, sl.last)
	toks = append(toks, sl.draft...)
	hid, buf := s.stepHidden(sl, engine.OutputAll)
	return engine.Step{Seq: sl.seq, Tokens: toks, Output: engine.OutputAll, Logits: sl.logits,
		Hidden: hid, HiddenStates: buf}
}

// verify handles a decoding slot's step that fed last and k draft tokens
// d1..dk, whose logits rows L0..Lk are in sl.logits. It does exactly what
// k+1 plain decode steps would have done, stopping where they would
// diverge: row j is the logits after last, d1..dj, which the kernels'
// batch invariance makes bit-identical to plain decoding's after the
// same tokens, so for j = 0, 1, ... the slot's sequence counts as holding
// those tokens (verifyLen; end and endVerify cut it back to them before
// anything reads it), the sampler samples from row j (advancing its generator
// and penalty window as a plain step does) and the token is handled as
// a plain step handles it (stop strings, end of generation, limits). If
// the request goes on and the token equals d(j+1), the next row is what
// plain decoding would see next; otherwise the step ends there, the KV
// rows past the cut are never read again (the next step overwrites them),
// and the sampled token is fed at the next step, as in plain decoding.
func (s *Scheduler) verify(sl *slot, now time.Time) {
	V := s.vocab
	draft := sl.draft
	k := len(draft)
	base := sl.seq.Len() - 1 - k // the sequence before last
	// The counts are updated before each token is handled: a request
	// that ends hands its Result to the client at once, and the
	// scheduler's counts must already include it.
	s.draftN.steps.Add(1)
	accepted, rejected := 0, false
	for j := 0; j <= k; j++ {
		// Plain decoding samples row j with last, d1..dj fed.
		sl.verifyLen = base + 1 + j
		s.draftN.tokens.Add(1)
		if !s.next(sl, sl.logits[j*V:(j+1)*V], now) {
			break // the request ended (end cut the sequence back)
		}
		if j == k {
			break
		}
		sl.res.Drafted++
		s.draftN.drafted.Add(1)
		if sl.last != draft[j] {
			rejected = true
			break
		}
		sl.res.Accepted++
		s.draftN.accepted.Add(1)
		accepted++
	}
	sl.endVerify()
	sl.draft = sl.draft[:0]
	// The acceptance estimate counts only compared drafts: a request that
	// ended within the step compared fewer.
	sl.spec.acc = sl.spec.acc*draftDecay + float64(accepted)
	sl.spec.rej *= draftDecay
	if rejected {
		sl.spec.rej++
	}
}

// fed returns the number of tokens the slot's sequence holds for the
// token being sampled: its length, or while drafts are verified, the
// length plain decoding would have.
func (sl *slot) fed() int {
	if sl.verifyLen > 0 {
		return sl.verifyLen
	}
	return sl.seq.Len()
}

// endVerify cuts the sequence back to the tokens plain decoding would
// have fed (the verified row's): the KV rows of rejected drafts past it
// are never read, and the next step overwrites them.
func (sl *slot) endVerify() {
	if sl.verifyLen > 0 {
		// verifyLen is within the tokens the step appended.
		sl.truncate(sl.verifyLen)
		sl.verifyLen = 0
	}
}

// lookupHistoryMax bounds the history a lookup drafter searches (the most
// recent tokens), so a step's cost stays bounded in long contexts.
const lookupHistoryMax = 1 << 16

// LookupDrafter drafts by prompt lookup: it finds the most recent earlier
// occurrence of the history's last n tokens (n from MaxN down to MinN,
// the longest match wins) and proposes the tokens that followed it. It
// needs no model; it pays off where output repeats its context (code,
// structured text, quoting, summaries).
type LookupDrafter struct {
	// MinN and MaxN bound the n-gram sizes tried (defaults 2 and 4).
	MinN, MaxN int
}

// Default n-gram sizes of LookupDrafter.
const (
	DefaultLookupMinN = 2
	DefaultLookupMaxN = 4
)

// Name returns "lookup".
func (*LookupDrafter) Name() string { return "lookup" }

// Forget does nothing: the lookup keeps no state.
func (*LookupDrafter) Forget(int) {}

// Close does nothing.
func (*LookupDrafter) Close() error { return nil }

// Draft proposes, for each request, the continuation of the most recent
// earlier occurrence of its history's longest matching suffix n-gram.
func (l *LookupDrafter) Draft(_ context.Context, reqs []DraftRequest) error {
	lo, hi := l.MinN, l.MaxN
	if lo <= 0 {
		lo = DefaultLookupMinN
	}
	if hi <= 0 {
		hi = DefaultLookupMaxN
	}
	for i := range reqs {
		r := &reqs[i]
		r.Tokens = lookup(r.Tokens[:0], r.History, lo, hi, r.Max)
	}
	return nil
}

// lookup appends to dst at most max tokens that followed the most recent
// earlier occurrence of h's last n tokens, trying n = hi down to lo.
func lookup(dst, h []int32, lo, hi, max int) []int32 {
	if len(h) > lookupHistoryMax {
		h = h[len(h)-lookupHistoryMax:]
	}
	L := len(h)
	for n := min(hi, L-1); n >= lo && n >= 1; n-- {
		suf := h[L-n:]
		// An occurrence at i must leave at least one token after it
		// before the suffix itself: i+n < L.
		for i := L - n - 1; i >= 0; i-- {
			if h[i+n-1] != suf[n-1] || h[i] != suf[0] {
				continue
			}
			match := true
			for j := 1; j < n-1; j++ {
				if h[i+j] != suf[j] {
					match = false
					break
				}
			}
			if match {
				end := min(i+n+max, L)
				return append(dst, h[i+n:end]...)
			}
		}
	}
	return dst
}
