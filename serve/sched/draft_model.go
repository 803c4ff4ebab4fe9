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
//
// The draft sequence holds at most Window tokens: past them it holds the
// history's first token followed by its most recent tokens (about half a
// window, recomputed when the window fills again). A small model drafts
// well only within the context it was trained for (past it, its RoPE
// positions are ones it never saw and its text degenerates), and a draft
// token's cost must not grow with the target's context; the draft decides
// speed only, so what it sees changes no output.
type ModelDrafter struct {
	// Chunk is the most history tokens one slot computes per step
	// (DefaultDraftChunk when zero).
	Chunk int
	// Window is the most tokens a draft sequence holds (0: the draft
	// model's training context; less than 0: no window, the whole
	// history).
	Window int

	model *engine.Model
	own   bool // Close closes model
	slots map[int]*draftSlot
	steps []engine.Step
	live  []int // indexes into the Draft call's requests still drafting
}

// draftSlot is a ModelDrafter's state for one slot.
type draftSlot struct {
	seq *engine.Sequence
	// start is where the window begins in the history: the sequence
	// holds History[0] and then History[start:] (0: the whole history).
	start int
	// logits keeps the slot's logits buffer across calls.
	logits []float32
}

// DefaultDraftChunk is ModelDrafter.Chunk's default: the CPU engine's
// rows per backend call.
const DefaultDraftChunk = 512

// NewModelDrafter returns a drafter on a loaded model, which the caller
// keeps open while the drafter is used and closes after it. The model's
// tokenizer must be the target's (CheckDraftTokenizer).
func NewModelDrafter(model *engine.Model) *ModelDrafter {
	return &ModelDrafter{model: model, slots: make(map[int]*draftSlot)}
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
	if st := d.slots[slot]; st != nil {
		st.seq.Close()
		delete(d.slots, slot)
	}
}

// Close releases every draft sequence, and the model if the drafter
// opened it.
func (d *ModelDrafter) Close() error {
	var err error
	for id, st := range d.slots {
		err = errors.Join(err, st.seq.Close())
		delete(d.slots, id)
	}
	if d.own {
		err = errors.Join(err, d.model.Close())
		d.own = false
	}
	return err
}

// window returns the most tokens a draft sequence holds for a request
// whose target sequence holds ctx.
func (d *ModelDrafter) window(ctx int) int {
	w := d.Window
	if w == 0 {
		w = d.model.Config().CtxTrain
	}
	if w <= 0 {
		return ctx
	}
	return min(w, ctx)
}

// Draft catches each slot's draft sequence up with its history (or the
// window of it) and decodes greedily from there.
func (d *ModelDrafter) Draft(ctx context.Context, reqs []DraftRequest) error {
	V := d.model.Config().Vocab
	d.steps, d.live = d.steps[:0], d.live[:0]
	var catchUp []engine.Step
	for i := range reqs {
		r := &reqs[i]
		r.Tokens = r.Tokens[:0]
		h := r.History
		if len(h) == 0 {
			continue
		}
		w := d.window(r.Ctx)
		st := d.slots[r.Slot]
		if st == nil {
			seq, err := d.model.NewSequence(w)
			if err != nil {
				return fmt.Errorf("draft sequence for slot %d: %w", r.Slot, err)
			}
			st = &draftSlot{seq: seq}
			d.slots[r.Slot] = st
		}
		// The window: the history's first token, then History[start:],
		// leaving room for r.Max drafts. Past it, the window moves on to
		// the last half window of the history.
		start, stable := st.start, r.Stable
		if start >= len(h) {
			start = 0 // the history was cut back into the window
		}
		if viewLen(h, start)+r.Max > w {
			start = max(1, len(h)-w/2+1)
			if viewLen(h, start)+r.Max > w {
				start = len(h) - (w - r.Max) + 1
			}
			if start < 1 || start >= len(h) {
				// Not even the last token and the drafts fit: no
				// draft, and the sequence starts afresh next time.
				if err := st.seq.Truncate(0); err != nil {
					return err
				}
				st.start = 0
				continue
			}
		}
		if start != st.start {
			stable = min(stable, 1) // the first token keeps its place
			st.start = start
		}
		off := 0
		if start > 0 {
			off = start - 1 // view[i] = h[off+i] for i ≥ 1
		}
		// The sequence holds a prefix of the window it held at the
		// previous call (then the drafts fed after it); what is still the
		// window's is kept. The last token is always fed again: its
		// logits are the first draft's.
		vl := viewLen(h, start)
		seqT := st.seq.Tokens()
		keep := min(len(seqT), vl-1)
		sk := 0
		if start == 0 {
			sk = min(stable, keep)
		} else if stable > off {
			sk = min(1+stable-start, keep)
		}
		if sk < 1 && keep > 0 {
			if seqT[0] != h[0] {
				keep = 0
			} else {
				sk = 1
			}
		}
		if keep > 0 {
			keep = sk + commonPrefix(seqT[sk:keep], h[off+sk:off+keep])
		}
		if err := st.seq.Truncate(keep); err != nil {
			return err
		}
		r.Max = min(r.Max, w-vl+1)
		if r.Max <= 0 {
			continue
		}
		rest := h[off+keep:]
		if keep == 0 && start > 0 {
			rest = append([]int32{h[0]}, h[start:]...)
		}
		chunk := d.Chunk
		if chunk <= 0 {
			chunk = DefaultDraftChunk
		}
		if len(rest) > chunk {
			catchUp = append(catchUp, engine.Step{Seq: st.seq, Tokens: rest[:chunk], Output: engine.OutputNone})
			continue
		}
		d.steps = append(d.steps, engine.Step{Seq: st.seq, Tokens: rest, Output: engine.OutputLast, Logits: st.logits})
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
			d.slots[r.Slot].logits = st.Logits
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

// viewLen returns the length of a history h's window that starts at
// start (0: the whole history; otherwise h[0] and h[start:]).
func viewLen(h []int32, start int) int {
	if start == 0 {
		return len(h)
	}
	return 1 + len(h) - start
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
