package engine

import (
	"context"
	"fmt"
	"slices"

	"github.com/muserhq/muser/infer/kvcache"
)

// Output says which logits a Step wants.
type Output uint8

// Output values.
const (
	OutputNone Output = iota // KV only (a prefill chunk that is not the last)
	OutputLast               // the logits after the step's last token
	OutputAll                // the logits after every token of the step
)

// Step is one sequence's part of a Forward batch: tokens to append to
// Seq, and which logits to return.
type Step struct {
	Seq    *Sequence
	Tokens []int32
	Output Output
	// Logits receives the logits, Vocab floats per wanted token (one row
	// for OutputLast, len(Tokens) rows for OutputAll). Forward reuses the
	// slice if it is large enough and allocates otherwise.
	Logits []float32
	// Hidden says which final-normed hidden states (embeddings) a Step
	// wants, as Output does for logits: none, the last token's, or every
	// token's. The logits are computed the same either way.
	Hidden Output
	// HiddenStates receives them, Config.Hidden floats per wanted token;
	// Forward reuses the slice if it is large enough and allocates
	// otherwise.
	HiddenStates []float32
}

// Forward runs one batch: for each step, appends its tokens to its
// sequence (computing and caching their K and V in every layer) and
// returns the logits it asks for in step.Logits. The batch's tokens, from
// every step, go to the backend as rows, up to Options.BatchSize at a time,
// so prefill chunks and decode tokens of several requests share the weight
// traffic; the backend's numerics make each token's K, V and logits
// bit-identical however tokens are grouped into steps and calls (doc.go,
// "Exactness").
//
// The batch is checked before anything runs; a *BatchError names the bad
// step. If ctx is cancelled midway, Forward returns its error and each
// sequence keeps the tokens of the calls that completed.
func (m *Model) Forward(ctx context.Context, batch []Step) error {
	if err := m.checkBatch(batch); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	V, H := m.w.Config.Vocab, m.w.Config.Hidden
	for i := range batch {
		st := &batch[i]
		if err := st.Seq.kv.Reserve(st.Seq.Len() + len(st.Tokens)); err != nil {
			return err
		}
		rows := 0
		switch st.Output {
		case OutputLast:
			rows = 1
		case OutputAll:
			rows = len(st.Tokens)
		}
		st.Logits = slices.Grow(st.Logits[:0], rows*V)[:rows*V]
		if st.Hidden != OutputNone {
			hr := 1
			if st.Hidden == OutputAll {
				hr = len(st.Tokens)
			}
			st.HiddenStates = slices.Grow(st.HiddenStates[:0], hr*H)[:hr*H]
		}
	}
	rows, seqs := m.rows[:0], make([]*Sequence, 0, len(batch))
	for i := range batch {
		st := &batch[i]
		base := st.Seq.Len()
		for j, t := range st.Tokens {
			var out []float32
			switch {
			case st.Output == OutputAll:
				out = st.Logits[j*V : (j+1)*V]
			case st.Output == OutputLast && j == len(st.Tokens)-1:
				out = st.Logits
			}
			var hid []float32
			switch {
			case st.Hidden == OutputAll:
				hid = st.HiddenStates[j*H : (j+1)*H]
			case st.Hidden == OutputLast && j == len(st.Tokens)-1:
				hid = st.HiddenStates
			}
			rows = append(rows, Row{KV: st.Seq.kv, Token: t, Pos: base + j, Logits: out, Hidden: hid})
		}
		seqs = append(seqs, st.Seq)
	}
	m.rows = rows
	defer clear(m.rows) // drop references to caches and logits
	owner := make(map[KV]*Sequence, len(seqs))
	for _, s := range seqs {
		owner[s.kv] = s
	}
	for lo := 0; lo < len(rows); lo += m.batch {
		win := rows[lo:min(lo+m.batch, len(rows))]
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := m.be.Forward(ctx, win); err != nil {
			return err
		}
		for _, r := range win {
			s := owner[r.KV]
			s.tokens = append(s.tokens, r.Token)
		}
	}
	return nil
}

// checkBatch validates a batch before anything runs.
func (m *Model) checkBatch(batch []Step) error {
	V := m.w.Config.Vocab
	seen := make(map[*Sequence]bool, len(batch))
	for i, st := range batch {
		switch {
		case st.Seq == nil:
			return &BatchError{Step: i, Reason: "no sequence"}
		case st.Seq.m != m:
			return &BatchError{Step: i, Reason: "the sequence belongs to another model"}
		case seen[st.Seq]:
			return &BatchError{Step: i, Reason: "the sequence appears twice in the batch"}
		case len(st.Tokens) == 0:
			return &BatchError{Step: i, Reason: "no tokens"}
		case st.Output > OutputAll:
			return &BatchError{Step: i, Reason: fmt.Sprintf("unknown output mode %d", st.Output)}
		case st.Hidden > OutputAll:
			return &BatchError{Step: i, Reason: fmt.Sprintf("unknown hidden-state mode %d", st.Hidden)}
		case st.Hidden != OutputNone && !m.HiddenStates():
			return &BatchError{Step: i, Reason: fmt.Sprintf("hidden states (embeddings): %v", m.errNoHidden())}
		case len(st.Tokens) > st.Seq.Max()-st.Seq.Len():
			return &BatchError{Step: i, Reason: fmt.Sprintf("%d tokens after %d do not fit a context of %d (%v)",
				len(st.Tokens), st.Seq.Len(), st.Seq.Max(), kvcache.ErrFull)}
		}
		seen[st.Seq] = true
		for j, t := range st.Tokens {
			if t < 0 || int(t) >= V {
				return &BatchError{Step: i, Reason: fmt.Sprintf("token %d (index %d) is outside the vocabulary of %d", t, j, V)}
			}
		}
	}
	return nil
}
