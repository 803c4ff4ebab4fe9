package draftlane

import (
	"context"
	"errors"
	"fmt"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/serve/sched"
)

// BlockDrafter drafts with a block drafter (infer/blockdraft,
// docs/blockdraft.md): a small model trained for the target that, from the
// target's hidden state after the last token it computed and the token it
// sampled there, proposes up to BlockSize-1 tokens in one forward pass,
// every slot's block in the same matrix products. It keeps no state per
// slot: each draft needs only sched.DraftRequest.Hidden and the history's last
// token, so a draft costs the same at any context length.
type BlockDrafter struct {
	model  *blockdraft.Model
	run    blockdraft.Runner // model, or its binding on a device
	device string            // where run computes: "cpu" or the device's name
	own    bool              // Close closes model
	reqs   []blockdraft.Request
	owner  []int // index into the Draft call's requests of each of reqs
}

// NewBlockDrafter returns a drafter on an open block drafter, computed on
// the CPU, which the caller keeps open while the drafter is used and
// closes after it. The drafter must have been trained for the target
// (CheckTarget) with the target's tokenizer (sched.CheckDraftTokenizer).
func NewBlockDrafter(m *blockdraft.Model) *BlockDrafter {
	return &BlockDrafter{model: m, run: m, device: "cpu"}
}

// BindBlockDrafter returns a drafter on an open block drafter, computed on
// dev when dev runs drafters (blockdraft.Binder: the CUDA device, where
// the drafter's weights are then copied) and on the CPU otherwise. The
// caller keeps m open while the drafter is used and closes it after the
// drafter; the drafter's Close frees the device's copies. Both compute
// the same drafts.
func BindBlockDrafter(m *blockdraft.Model, dev engine.Device) (*BlockDrafter, error) {
	d := NewBlockDrafter(m)
	b, ok := dev.(blockdraft.Binder)
	if !ok {
		return d, nil
	}
	r, err := b.BindBlockDrafter(m)
	if err != nil {
		return nil, fmt.Errorf("block drafter on %s: %w", dev.Name(), err)
	}
	d.run, d.device = r, dev.Name()
	return d, nil
}

// OpenBlockDrafter opens the block drafter at path for target, whose
// tokenizer is tok, and returns a drafter that owns it (Close closes it).
// The drafter computes on the target's device when that device runs
// drafters (the CUDA device) unless onCPU is set; otherwise on the CPU
// with threads workers (0: one per CPU). A drafter made for another hidden
// size or vocabulary is an error wrapping blockdraft.ErrTargetMismatch,
// one with another tokenizer an error wrapping a
// *sched.TokenizerMismatchError, and a target whose backend returns no
// hidden states an error wrapping sched.ErrDraftNeedsHidden.
func OpenBlockDrafter(path string, threads int, onCPU bool, target *engine.Model, tok *tokenizer.Tokenizer) (*BlockDrafter, error) {
	m, err := blockdraft.Open(path, threads)
	if err != nil {
		return nil, err
	}
	d := NewBlockDrafter(m)
	if err := d.check(target, tok); err != nil {
		m.Close()
		return nil, fmt.Errorf("block drafter %s: %w", path, err)
	}
	if !onCPU {
		// Checked first: nothing is copied to a device for a drafter
		// that cannot serve the target.
		if d, err = BindBlockDrafter(m, target.Device()); err != nil {
			m.Close()
			return nil, fmt.Errorf("block drafter %s: %w", path, err)
		}
	}
	d.own = true
	return d, nil
}

// check refuses a drafter that cannot serve target.
func (d *BlockDrafter) check(target *engine.Model, tok *tokenizer.Tokenizer) error {
	cfg := target.Config()
	if err := d.model.CheckTarget(cfg.Hidden, cfg.Vocab); err != nil {
		return err
	}
	dtok, err := tokenizer.FromGGUF(d.model.File().Meta)
	if err != nil {
		return err
	}
	if err := sched.CheckDraftTokenizer(tok, dtok); err != nil {
		return err
	}
	return sched.CheckDraftHidden(target, d)
}

// Model returns the block drafter.
func (d *BlockDrafter) Model() *blockdraft.Model { return d.model }

// Device names where the drafter computes: "cpu" or the device's name.
func (d *BlockDrafter) Device() string { return d.device }

// Name returns "block".
func (*BlockDrafter) Name() string { return "block" }

// WantsHidden reports true: every draft conditions on the target's hidden
// state.
func (*BlockDrafter) WantsHidden() bool { return true }

// FixedCost reports true (sched.FixedCostDrafter): one forward pass
// drafts the whole block, so a call costs the same whatever the length
// asked.
func (*BlockDrafter) FixedCost() bool { return true }

// Forget does nothing: the drafter keeps no state per slot.
func (*BlockDrafter) Forget(int) {}

// Close frees the drafter's copy on a device, if any, and closes the
// block drafter if the drafter opened it.
func (d *BlockDrafter) Close() error {
	var err error
	if d.run != blockdraft.Runner(d.model) {
		err = d.run.Close()
		d.run = d.model
	}
	if d.own {
		d.own = false
		err = errors.Join(err, d.model.Close())
	}
	return err
}

// Draft proposes, for every request with a hidden state, the block that
// follows its history's last token, all requests in one forward pass.
func (d *BlockDrafter) Draft(ctx context.Context, reqs []sched.DraftRequest) error {
	d.reqs, d.owner = d.reqs[:0], d.owner[:0]
	for i := range reqs {
		r := &reqs[i]
		r.Tokens = r.Tokens[:0]
		if r.Hidden == nil || len(r.History) == 0 || r.Max < 1 {
			continue
		}
		d.reqs = append(d.reqs, blockdraft.Request{Hidden: r.Hidden, Anchor: r.History[len(r.History)-1], Max: r.Max, Tokens: r.Tokens})
		d.owner = append(d.owner, i)
	}
	if len(d.reqs) == 0 {
		return nil
	}
	err := d.run.Draft(ctx, d.reqs)
	for j, i := range d.owner {
		if err == nil {
			reqs[i].Tokens = d.reqs[j].Tokens
		}
		d.reqs[j] = blockdraft.Request{} // hold no caller memory
	}
	return err
}
