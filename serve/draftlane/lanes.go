package draftlane

import (
	"errors"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/serve/sched"
)

// Lanes names the draft lanes of speculative decoding that Open builds:
// what muser run, serve and bench take as --draft-lookup, --draft-model
// and --draft-block.
type Lanes struct {
	// Lookup turns on prompt lookup (sched.LookupDrafter).
	Lookup bool
	// Model is a draft model's GGUF file (sched.ModelDrafter), "" for none.
	Model string
	// Block is a block drafter's GGUF file (BlockDrafter), "" for none.
	Block string
	// Engine opens the draft model (its device and KV type). Its Mapped
	// is set from target: a draft model's file is held as the target's
	// is (mapped, or resident).
	Engine engine.Options
	// Threads is the block drafter's worker goroutines on the CPU (0: one
	// per CPU).
	Threads int
	// BlockOnCPU keeps the block drafter on the CPU; by default it
	// computes on the target's device where that device can
	// (blockdraft.Binder: the CUDA device), else on the CPU.
	BlockOnCPU bool
}

// Open builds the drafter l names for target, whose tokenizer is tok:
// nil when l names none; one lane alone; or prompt lookup chained before
// the draft model or the block drafter (lookup first, the model where it
// finds nothing). A draft model and a block drafter together, or a lane
// that cannot serve target (another tokenizer, hidden size or vocabulary,
// or a backend without hidden states for the block drafter), is a
// *LaneError naming the lane.
func Open(l Lanes, target *engine.Model, tok *tokenizer.Tokenizer) (sched.Drafter, error) {
	var d sched.Drafter
	switch {
	case l.Model != "" && l.Block != "":
		return nil, &LaneError{Lane: "block", Err: ErrLaneConflict}
	case l.Model != "":
		eo := l.Engine
		eo.Mapped = target.File().Memory() == gguf.Mapped
		md, err := sched.OpenModelDrafter(l.Model, eo, tok)
		if err != nil {
			return nil, laneErr("model", err)
		}
		d = md
	case l.Block != "":
		bd, err := OpenBlockDrafter(l.Block, l.Threads, l.BlockOnCPU, target, tok)
		if err != nil {
			return nil, laneErr("block", err)
		}
		d = bd
	}
	switch {
	case d == nil && l.Lookup:
		return &sched.LookupDrafter{}, nil
	case d == nil:
		return nil, nil
	case l.Lookup:
		return sched.NewChainDrafter(&sched.LookupDrafter{}, d), nil
	}
	return d, nil
}

// laneErr wraps the errors a user fixes by choosing another file in a
// *LaneError; others (a file that cannot be read) stay as they are.
func laneErr(lane string, err error) error {
	if errors.Is(err, sched.ErrTokenizerMismatch) || errors.Is(err, sched.ErrDraftNeedsHidden) || errors.Is(err, blockdraft.ErrTargetMismatch) {
		return &LaneError{Lane: lane, Err: err}
	}
	return err
}

// ErrLaneConflict is returned by Open when a draft model and a block
// drafter are both asked for: a step drafts from one model lane.
var ErrLaneConflict = errors.New("a draft model and a block drafter cannot be combined (prompt lookup chains with either)")

// A LaneError is a draft lane Open cannot build for the model: Lane is
// "model" (--draft-model) or "block" (--draft-block).
type LaneError struct {
	Lane string
	Err  error
}

func (e *LaneError) Error() string { return e.Err.Error() }

// Unwrap returns the lane's error.
func (e *LaneError) Unwrap() error { return e.Err }
