package sched

import (
	"github.com/muserhq/muser/infer/engine"
)

// A HiddenDrafter is a Drafter that conditions on the target model's
// hidden states (a block drafter): when WantsHidden reports true, each of
// its DraftRequests carries DraftRequest.Hidden. The scheduler asks once,
// in New, so the answer must not change over the drafter's life.
type HiddenDrafter interface {
	Drafter
	// WantsHidden reports whether Draft needs DraftRequest.Hidden.
	WantsHidden() bool
}

// WantsHidden reports whether d is a HiddenDrafter that wants hidden
// states. A nil d wants none.
func WantsHidden(d Drafter) bool {
	hd, ok := d.(HiddenDrafter)
	return ok && hd.WantsHidden()
}

// CheckDraftHidden returns nil when d does not want hidden states or m's
// backend returns them; otherwise a *DraftHiddenError (wrapping
// ErrDraftNeedsHidden and the engine's *engine.DeviceError) naming the
// lane that wants them and m's device. New runs it; a caller may run it
// earlier to refuse a configuration before building a scheduler.
func CheckDraftHidden(m *engine.Model, d Drafter) error {
	if !WantsHidden(d) {
		return nil
	}
	err := m.CheckHiddenStates()
	if err == nil {
		return nil
	}
	return &DraftHiddenError{Lane: hiddenLane(d), Device: m.Device().Name(), Err: err}
}

// hiddenLane names the lane of d that wants hidden states: the first such
// lane of a ChainDrafter (whose own name is "a+b"), else d's name.
func hiddenLane(d Drafter) string {
	if c, ok := d.(*ChainDrafter); ok {
		for _, l := range c.lanes {
			if WantsHidden(l) {
				return hiddenLane(l)
			}
		}
	}
	return d.Name()
}

// slotHidden is a decoding slot's hidden states for a HiddenDrafter: the
// rows its last step returned and, for a request with N > 1 choices, the
// state after the prompt's last token, from which every choice starts.
// Only the loop goroutine touches it; with a drafter that does not want
// hidden states it stays empty.
type slotHidden struct {
	// buf holds the last step's states, rows of Config.Hidden floats; it
	// is the step's engine.Step.HiddenStates, reused from step to step.
	buf []float32
	// rows is how many states buf holds (0: none valid), and end the
	// sequence length after the last of them: row i is the state after
	// the sequence's first end-rows+1+i tokens.
	rows, end int
	// prompt is the state after the first promptLen tokens (the
	// request's prompt) when promptLen > 0.
	prompt    []float32
	promptLen int
}

// reset forgets every state: the slot starts a new request.
func (h *slotHidden) reset() { h.rows, h.promptLen = 0, 0 }

// at returns the state after the sequence's first n tokens, a slice of
// buf or prompt of H floats, or nil when the slot has none. The rows are
// still the sequence's: a step's tokens are only ever cut back (verify,
// a new choice) before the next step, which replaces them.
func (h *slotHidden) at(n, H int) []float32 {
	if first := h.end - h.rows + 1; h.rows > 0 && n >= first && n <= h.end {
		i := n - first
		return h.buf[i*H : (i+1)*H]
	}
	if h.promptLen > 0 && n == h.promptLen {
		return h.prompt
	}
	return nil
}

// stepHidden returns the hidden states a slot's step asks for on behalf
// of the drafter: the step's own output mode (the logits rows: the last
// token's for a plain decode step or a prompt's last chunk, every token's
// for a verification step), nothing when the drafter wants none or the
// step returns no logits, and the slot's buffer to fill.
func (s *Scheduler) stepHidden(sl *slot, out engine.Output) (engine.Output, []float32) {
	if !s.wantHidden {
		return engine.OutputNone, nil
	}
	return out, sl.hid.buf
}

// keepHidden takes back a finished step's hidden states into the slot for
// the drafter: the step had st.Tokens appended to the sequence, which now
// holds sl.seq.Len() tokens (before verify cuts it back). A step that
// asked for none (a prompt chunk before the last) leaves the slot without
// states.
func (s *Scheduler) keepHidden(sl *slot, st *engine.Step) {
	if !s.wantHidden || sl.task.req.Hidden != engine.OutputNone {
		return
	}
	h := &sl.hid
	switch st.Hidden {
	case engine.OutputLast:
		h.rows = 1
	case engine.OutputAll:
		h.rows = len(st.Tokens)
	default:
		h.rows = 0
		return
	}
	h.buf, h.end = st.HiddenStates, sl.seq.Len()
	st.HiddenStates = nil
}

// keepPromptHidden saves the state after the prompt of a request with
// N > 1 choices when the drafter wants hidden states: each choice starts
// from the prompt again (nextChoice), after the steps of the one before
// have replaced the slot's rows.
func (s *Scheduler) keepPromptHidden(sl *slot) {
	if !s.wantHidden || sl.task.multi == nil {
		return
	}
	h := &sl.hid
	n := len(sl.task.req.Prompt)
	p := h.at(n, s.hidden)
	if p == nil {
		h.promptLen = 0
		return
	}
	h.prompt = append(h.prompt[:0], p...)
	h.promptLen = n
}
