package sched

import (
	"context"
	"errors"
	"fmt"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/sample"
	"github.com/muserhq/muser/infer/tokenizer"
)

// ModelDrafter drafts with a smaller (or more coarsely quantized) model of
// the same tokenizer: the draft model decodes greedily from the slot's
// history. It keeps one sequence per slot and, at each step, computes only
// the history it has not yet seen (the tokens the target accepted since),
// all slots in one Forward, then one Forward per draft token. A slot more
// than Chunk tokens behind (a new request's prompt) catches up by Chunk
// tokens per step and drafts nothing meanwhile, so a long prompt delays
// the other slots' steps by a bounded amount, as a prefill chunk does.
type ModelDrafter struct {
	// Chunk is the most history tokens one slot computes per step
	// (DefaultDraftChunk when zero).
	Chunk int

	model *engine.Model
	own   bool // Close closes model
	seqs  map[int]*engine.Sequence
	// logits keeps each slot's logits buffer across calls.
	logits map[int][]float32
	steps  []engine.Step
	live   []int // indexes into the Draft call's requests still drafting
}

// DefaultDraftChunk is ModelDrafter.Chunk's default: the CPU engine's
// rows per backend call.
const DefaultDraftChunk = 512

// NewModelDrafter returns a drafter on a loaded model, which the caller
// keeps open while the drafter is used and closes after it. The model's
// tokenizer must be the target's (CheckDraftTokenizer).
func NewModelDrafter(model *engine.Model) *ModelDrafter {
	return &ModelDrafter{model: model, seqs: make(map[int]*engine.Sequence), logits: make(map[int][]float32)}
}

// OpenModelDrafter opens the GGUF file at path with opts as the draft
// model of a target whose tokenizer is target, and returns a drafter that
// owns it (Close closes it). A draft model whose tokenizer differs is an
// error wrapping a *TokenizerMismatchError.
func OpenModelDrafter(path string, opts engine.Options, target *tokenizer.Tokenizer) (*ModelDrafter, error) {
	m, err := engine.Open(path, opts)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(m.File().Meta)
	if err == nil {
		err = CheckDraftTokenizer(target, tok)
	}
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("draft model %s: %w", path, err)
	}
	d := NewModelDrafter(m)
	d.own = true
	return d, nil
}

// Model returns the draft model.
func (d *ModelDrafter) Model() *engine.Model { return d.model }

// Name returns "model".
func (*ModelDrafter) Name() string { return "model" }

// Forget releases the slot's draft sequence.
func (d *ModelDrafter) Forget(slot int) {
	if seq := d.seqs[slot]; seq != nil {
		seq.Close()
		delete(d.seqs, slot)
	}
	delete(d.logits, slot)
}

// Close releases every draft sequence, and the model if the drafter
// opened it.
func (d *ModelDrafter) Close() error {
	var err error
	for id, seq := range d.seqs {
		err = errors.Join(err, seq.Close())
		delete(d.seqs, id)
	}
	if d.own {
		err = errors.Join(err, d.model.Close())
		d.own = false
	}
	return err
}

// Draft catches each slot's draft sequence up with its history and
// decodes greedily from there.
func (d *ModelDrafter) Draft(ctx context.Context, reqs []DraftRequest) error {
	V := d.model.Config().Vocab
	d.steps, d.live = d.steps[:0], d.live[:0]
	var catchUp []engine.Step
	for i := range reqs {
		r := &reqs[i]
		r.Tokens = r.Tokens[:0]
		seq := d.seqs[r.Slot]
		if seq == nil {
			var err error
			if seq, err = d.model.NewSequence(r.Ctx); err != nil {
				return fmt.Errorf("draft sequence for slot %d: %w", r.Slot, err)
			}
			d.seqs[r.Slot] = seq
		}
		h := r.History
		// The last history token is always fed again: its logits are
		// the first draft's.
		keep := min(commonPrefix(seq.Tokens(), h), len(h)-1)
		if err := seq.Truncate(keep); err != nil {
			return err
		}
		room := seq.Max() - len(h)
		if room < 0 {
			continue // the target's context is longer than the draft's
		}
		r.Max = min(r.Max, room+1)
		chunk := d.Chunk
		if chunk <= 0 {
			chunk = DefaultDraftChunk
		}
		if len(h)-keep > chunk {
			catchUp = append(catchUp, engine.Step{Seq: seq, Tokens: h[keep : keep+chunk], Output: engine.OutputNone})
			continue
		}
		d.steps = append(d.steps, engine.Step{Seq: seq, Tokens: h[keep:], Output: engine.OutputLast, Logits: d.logits[r.Slot]})
		d.live = append(d.live, i)
	}
	if len(catchUp) > 0 {
		// Behind by more than a chunk: catch up, with the drafting slots'
		// first tokens in the same Forward.
		d.steps = append(d.steps, catchUp...)
	}
	for round := 0; len(d.steps) > 0; round++ {
		if err := d.model.Forward(ctx, d.steps); err != nil {
			return fmt.Errorf("draft model: %w", err)
		}
		steps, live := d.steps[:0], d.live[:0]
		for j, st := range d.steps[:len(d.live)] {
			r := &reqs[d.live[j]]
			d.logits[r.Slot] = st.Logits
			t := sample.Argmax(st.Logits[:V], nil)
			if t < 0 || int(t) >= V {
				continue
			}
			r.Tokens = append(r.Tokens, t)
			if len(r.Tokens) >= r.Max {
				continue // the last draft is not fed: the target verifies it
			}
			st.Tokens = r.Tokens[len(r.Tokens)-1:]
			steps, live = append(steps, st), append(live, d.live[j])
		}
		d.steps, d.live = steps, live
	}
	return nil
}

// CheckDraftTokenizer reports whether a draft model's tokenizer gives
// every token id the meaning the target's does: the same vocabulary size,
// pieces and token types, special ids and end-of-generation set. A
// difference is a *TokenizerMismatchError naming the first one.
func CheckDraftTokenizer(target, draft *tokenizer.Tokenizer) error {
	mismatch := func(field, t, d string) error {
		return &TokenizerMismatchError{Field: field, Target: t, Draft: d}
	}
	if a, b := target.VocabSize(), draft.VocabSize(); a != b {
		return mismatch("vocabulary size", fmt.Sprint(a), fmt.Sprint(b))
	}
	for id := range int32(target.VocabSize()) {
		if a, b := target.Token(id), draft.Token(id); a != b {
			return mismatch(fmt.Sprintf("piece of token %d", id), fmt.Sprintf("%q", a), fmt.Sprintf("%q", b))
		}
		if a, b := target.Type(id), draft.Type(id); a != b {
			return mismatch(fmt.Sprintf("type of token %d", id), fmt.Sprint(a), fmt.Sprint(b))
		}
	}
	for sp := tokenizer.SpecialBOS; sp <= tokenizer.SpecialFIMSep; sp++ {
		if a, b := target.SpecialID(sp), draft.SpecialID(sp); a != b {
			return mismatch(sp.Key(), fmt.Sprint(a), fmt.Sprint(b))
		}
	}
	if a, b := target.EOGs(), draft.EOGs(); fmt.Sprint(a) != fmt.Sprint(b) {
		return mismatch("end-of-generation tokens", fmt.Sprint(a), fmt.Sprint(b))
	}
	return nil
}
