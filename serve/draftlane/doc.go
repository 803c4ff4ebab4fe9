// Package draftlane builds the draft lanes of speculative decoding that
// muser run, serve and bench name by flag (--draft-lookup, --draft-model,
// --draft-block): Open returns the serve/sched Drafter for them, alone or
// chained after prompt lookup, after checking that each can serve the
// model (its tokenizer; for a block drafter its hidden size and
// vocabulary, and a device that returns hidden states).
//
// It also holds the block lane, BlockDrafter: a block drafter
// (infer/blockdraft, docs/blockdraft.md) trained for the target drafts a
// whole block in one forward pass, conditioned on the target's hidden
// state after the last token it computed and on the token sampled there.
// The drafter computes on the target's device where that device can
// (blockdraft.Binder: the CUDA device), else, or with Lanes.BlockOnCPU,
// on the CPU; the drafts are the same bits either way. The lane lives here rather than in
// serve/sched because the block drafter is a model of its own, outside
// the engine front the scheduler drives; the scheduler sees the lane as a
// sched.HiddenDrafter.
package draftlane
