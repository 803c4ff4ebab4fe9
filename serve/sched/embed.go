package sched

import "github.com/muserhq/muser/infer/engine"

// Embeddings requests (Request.Hidden) are prefills: they take a slot,
// compute the prompt in chunks like any prompt, collect the hidden states
// each chunk returns, and end without sampling. Their full blocks are
// published like any prefill's (the KV is the same as a chat request's
// for the same tokens). A request that wants every token's state is
// computed whole: it neither restores a prefix from the store nor reuses
// a slot's KV, since the restored tokens would have no states; one that
// wants the last token's state restores and reuses as usual (the last
// prompt token is always computed).

// everyRow reports whether the request needs the hidden state of every
// prompt token.
func (r *Request) everyRow() bool { return r.Hidden == engine.OutputAll }

// hiddenOutput returns the hidden states a prompt chunk of r asks for;
// last says whether the chunk ends the prompt.
func hiddenOutput(r *Request, last bool) engine.Output {
	switch {
	case r.Hidden == engine.OutputAll:
		return engine.OutputAll
	case r.Hidden == engine.OutputLast && last:
		return engine.OutputLast
	}
	return engine.OutputNone
}

// collectHidden appends the hidden states a finished step of an
// embeddings request returned to the slot's result (the states a step
// asks for on a drafter's behalf are keepHidden's).
func collectHidden(sl *slot, st *engine.Step) {
	if sl.task.req.Hidden != engine.OutputNone && st.Hidden != engine.OutputNone {
		sl.res.Hidden = append(sl.res.Hidden, st.HiddenStates...)
		st.HiddenStates = nil
	}
}

// checkHidden refuses an unknown Hidden mode, and hidden states of a
// model whose device does not return them (the *engine.DeviceError).
func (s *Scheduler) checkHidden(req *Request) error {
	switch req.Hidden {
	case engine.OutputNone:
		return nil
	case engine.OutputLast, engine.OutputAll:
		return s.cfg.Model.CheckHiddenStates()
	}
	return &RequestError{Field: "hidden", Reason: "is not none, last or all"}
}
