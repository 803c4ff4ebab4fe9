package sched

import (
	"fmt"
	"slices"
	"time"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/sample"
)

// MaxChoices is the most choices (Request.N) one request may ask for.
const MaxChoices = 16

// ChoiceResult is the outcome of one choice of a request with N > 1.
type ChoiceResult struct {
	// Generated holds the choice's sampled tokens, an end-of-generation
	// token included.
	Generated []int32
	// Finish says why the choice ended (FinishStop or FinishLength).
	Finish Finish
	// EOG is set when an end-of-generation token ended it.
	EOG bool
	// StopWord is the stop string that ended it, if one did.
	StopWord string
}

// choices is the state of a request with N > 1: the prompt's logits,
// kept from its one prefill, and the sampler and constraint of each choice
// to come.
type choices struct {
	index        int // the choice being generated
	promptLogits []float32
	samplers     []*sample.Sampler   // choice i's at i; [0] is unused (Task.sampler)
	constraints  []sample.Constraint // choice i's at i, cloned before any token
	done         []ChoiceResult
}

// checkChoices validates Request.N.
func checkChoices(req *Request) error {
	if req.N > MaxChoices {
		return &RequestError{Field: "n", Reason: fmt.Sprintf("is %d; at most %d choices are allowed", req.N, MaxChoices)}
	}
	if req.N > 1 && req.PrefillOnly {
		return &RequestError{Field: "n", Reason: "is more than 1 on a prefill-only request"}
	}
	if req.N > 1 && req.Hidden != engine.OutputNone {
		return &RequestError{Field: "n", Reason: "is more than 1 on an embeddings request"}
	}
	return nil
}

// choiceSeed is the seed of choice i: the request's seed plus i, so choice
// 0 of a request is what the same request with n = 1 generates.
func choiceSeed(seed uint64, i int) uint64 { return seed + uint64(i) }

// initChoices prepares the samplers (each having accepted the prompt) and
// constraint copies of choices 1 to N-1.
func (s *Scheduler) initChoices(t *Task) error {
	req := t.req
	if req.N <= 1 {
		return nil
	}
	m := &choices{samplers: make([]*sample.Sampler, req.N), constraints: make([]sample.Constraint, req.N)}
	for i := 1; i < req.N; i++ {
		p := req.Sampling
		p.Seed = choiceSeed(req.Sampling.Seed, i)
		sm, err := sample.New(p, s.vocab)
		if err != nil {
			return &RequestError{Field: "sampling", Reason: err.Error(), Err: err}
		}
		for _, tok := range req.Prompt {
			sm.Accept(tok)
		}
		m.samplers[i] = sm
		if req.Constraint != nil {
			m.constraints[i] = req.Constraint.Clone()
		}
	}
	t.multi = m
	return nil
}

// keepPromptLogits saves the logits after the prompt, from which every
// choice draws its first token.
func keepPromptLogits(sl *slot) {
	if m := sl.task.multi; m != nil && m.promptLogits == nil {
		m.promptLogits = slices.Clone(sl.logits)
	}
}

// nextChoice is called when a choice ends with f. When the request has a
// choice left and f is a normal end, it records the choice, rewinds the
// slot to the prompt (its KV is kept: the prompt is computed once), samples
// the next choice's first token from the prompt's logits, and returns
// true; otherwise it returns false and the request ends.
func (s *Scheduler) nextChoice(sl *slot, f Finish) bool {
	t := sl.task
	m := t.multi
	if m == nil || m.index+1 >= t.req.N || (f != FinishStop && f != FinishLength) || t.ctx.Err() != nil {
		return false
	}
	m.done = append(m.done, ChoiceResult{Generated: sl.res.Generated, Finish: f, EOG: sl.res.EOG, StopWord: sl.res.StopWord})
	m.index++
	sl.res.Generated, sl.res.EOG, sl.res.StopWord = nil, false, ""
	t.sampler = m.samplers[m.index]
	m.samplers[m.index] = nil
	t.constraint = m.constraints[m.index]
	sl.truncate(len(t.req.Prompt))
	// The step's drafts (if it verified any) followed the choice that
	// ended: the new choice's first token is a plain sample.
	sl.draft = sl.draft[:0]
	sl.dec = s.cfg.Tokenizer.NewStreamDecoder()
	sl.stop = sample.NewStop(t.req.Stop)
	sl.text.Reset()
	s.setState(sl, stDecode)
	s.next(sl, m.promptLogits, time.Now())
	return true
}

// finishChoices folds the choices into the result of the request's end.
func finishChoices(t *Task, res *Result) {
	m := t.multi
	if m == nil {
		return
	}
	all := append(m.done, ChoiceResult{Generated: res.Generated, Finish: res.Finish, EOG: res.EOG, StopWord: res.StopWord})
	var gen []int32
	for _, c := range all {
		gen = append(gen, c.Generated...)
	}
	res.Choices, res.Generated = all, gen
}
