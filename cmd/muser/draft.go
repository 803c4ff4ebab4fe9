package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/serve/draftlane"
	"github.com/muserhq/muser/serve/sched"
)

// draftOptions are the speculative-decoding flags of run, serve and bench.
type draftOptions struct {
	model  string
	block  string
	device string // --draft-block-device
	lookup bool
	max    int
	fs     *pflag.FlagSet // the flag set AddFlags added to
}

func (o *draftOptions) AddFlags(fs *pflag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.model, "draft-model", "", "speculative decoding with this GGUF draft model (the model's tokenizer); the output does not change")
	fs.StringVar(&o.block, "draft-block", "", "speculative decoding with this block drafter, trained for the model: it drafts a block of tokens in one pass from the model's hidden state (docs/blockdraft.md; on the model's device unless --draft-block-device cpu); not with --draft-model; the output does not change")
	fs.StringVar(&o.device, "draft-block-device", "model", "with --draft-block: where the block drafter computes: model (the model's device: the GPU with --device cuda, else the CPU) or cpu; the same drafts either way")
	fs.BoolVar(&o.lookup, "draft-lookup", false, "speculative decoding by prompt lookup (4- to 2-token n-grams of the prompt and output); with --draft-model or --draft-block, lookup first and the model where it finds nothing; the output does not change")
	fs.IntVar(&o.max, "draft-max", 0, fmt.Sprintf("most draft tokens verified per step; the length adapts below it (0: %d)", sched.DefaultDraftMax))
}

// check validates the flags.
func (o *draftOptions) check() error {
	if o.max < 0 {
		return fmt.Errorf("--draft-max %d: want 1 or more (0: %d)", o.max, sched.DefaultDraftMax)
	}
	switch {
	case o.device != "cpu" && o.device != "model":
		return fmt.Errorf("--draft-block-device %q: want cpu or model", o.device)
	case o.block == "" && o.fs != nil && o.fs.Changed("draft-block-device"):
		return fmt.Errorf("--draft-block-device %s: only with --draft-block", o.device)
	}
	if o.model != "" && o.block != "" {
		return fmt.Errorf("--draft-model and --draft-block: %w", draftlane.ErrLaneConflict)
	}
	return nil
}

// enabled reports whether a draft lane is asked for.
func (o *draftOptions) enabled() bool { return o.model != "" || o.block != "" || o.lookup }

// open builds the lane for target, whose tokenizer is tok (nil when none
// is asked for): prompt lookup, a draft model or a block drafter, or
// lookup chained before either. A lane that cannot serve target (another
// tokenizer; for a block drafter another hidden size, or a device without
// hidden states) is a usage error (exit status 2) naming its flag.
func (o *draftOptions) open(target *engine.Model, kv kvcache.DType, threads int, tok *tokenizer.Tokenizer) (sched.Drafter, error) {
	d, err := draftlane.Open(draftlane.Lanes{
		Lookup: o.lookup, Model: o.model, Block: o.block,
		Engine: engine.Options{Device: target.Device(), KV: kv}, Threads: threads, BlockOnCPU: o.device == "cpu",
	}, target, tok)
	var le *draftlane.LaneError
	if errors.As(err, &le) {
		return nil, &usageError{err: fmt.Errorf("--draft-%s: %w", le.Lane, err)}
	}
	return d, err
}
