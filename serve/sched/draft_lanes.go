package sched

import (
	"errors"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/tokenizer"
)

// Lanes names the draft lanes of speculative decoding that OpenLanes
// builds: what muser run, serve and bench take as --draft-lookup,
// --draft-model and --draft-block.
type Lanes struct {
	// Lookup turns on prompt lookup (LookupDrafter).
	Lookup bool
	// Model is a draft model's GGUF file (ModelDrafter), "" for none.
	Model string
	// Block is a block drafter's GGUF file (BlockDrafter), "" for none.
	Block string
	// Engine opens the draft model (its device and KV type).
	Engine engine.Options
	// Threads is the block drafter's worker goroutines (0: one per CPU).
	Threads int
}

// OpenLanes builds the drafter l names for target, whose tokenizer is tok:
// nil when l names none; one lane alone; or prompt lookup chained before
// the draft model or the block drafter (lookup first, the model where it
// finds nothing). A draft model and a block drafter together, or a lane
// that cannot serve target (another tokenizer, hidden size or vocabulary,
// or a backend without hidden states for the block drafter), is a
// *LaneError naming the lane.
func OpenLanes(l Lanes, target *engine.Model, tok *tokenizer.Tokenizer) (Drafter, error) {
	var d Drafter
	switch {
	case l.Model != "" && l.Block != "":
		return nil, &LaneError{Lane: "block", Err: ErrLaneConflict}
	case l.Model != "":
		md, err := OpenModelDrafter(l.Model, l.Engine, tok)
		if err != nil {
			return nil, laneErr("model", err)
		}
		d = md
	case l.Block != "":
		bd, err := OpenBlockDrafter(l.Block, l.Threads, target, tok)
		if err != nil {
			return nil, laneErr("block", err)
		}
		d = bd
	}
	switch {
	case d == nil && l.Lookup:
		return &LookupDrafter{}, nil
	case d == nil:
		return nil, nil
	case l.Lookup:
		return NewChainDrafter(&LookupDrafter{}, d), nil
	}
	return d, nil
}

// laneErr wraps the errors a user fixes by choosing another file in a
// *LaneError; others (a file that cannot be read) stay as they are.
func laneErr(lane string, err error) error {
	if errors.Is(err, ErrTokenizerMismatch) || errors.Is(err, ErrDraftNeedsHidden) || errors.Is(err, blockdraft.ErrTargetMismatch) {
		return &LaneError{Lane: lane, Err: err}
	}
	return err
}
