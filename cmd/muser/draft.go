package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/serve/sched"
)

// draftOptions are the speculative-decoding flags of run, serve and bench.
type draftOptions struct {
	model  string
	lookup bool
	max    int
}

func (o *draftOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.model, "draft-model", "", "speculative decoding with this GGUF draft model (the model's tokenizer); the output does not change")
	fs.BoolVar(&o.lookup, "draft-lookup", false, "speculative decoding by prompt lookup (4- to 2-token n-grams of the prompt and output); with --draft-model, lookup first and the draft model where it finds nothing; the output does not change")
	fs.IntVar(&o.max, "draft-max", 0, fmt.Sprintf("most draft tokens verified per step; the length adapts below it (0: %d)", sched.DefaultDraftMax))
}

// check validates the flags.
func (o *draftOptions) check() error {
	if o.max < 0 {
		return fmt.Errorf("--draft-max %d: want 1 or more (0: %d)", o.max, sched.DefaultDraftMax)
	}
	return nil
}

// enabled reports whether a draft lane is asked for.
func (o *draftOptions) enabled() bool { return o.model != "" || o.lookup }

// open builds the lane for a target whose tokenizer is tok (nil when none
// is asked for): prompt lookup, a draft model, or both chained (lookup
// first). A draft model whose tokenizer differs is a usage error (exit
// status 2) naming the difference.
func (o *draftOptions) open(dev engine.Device, kv kvcache.DType, tok *tokenizer.Tokenizer) (sched.Drafter, error) {
	if o.model == "" {
		if o.lookup {
			return &sched.LookupDrafter{}, nil
		}
		return nil, nil
	}
	d, err := sched.OpenModelDrafter(o.model, engine.Options{Device: dev, KV: kv}, tok)
	if errors.Is(err, sched.ErrTokenizerMismatch) {
		return nil, &usageError{err: fmt.Errorf("--draft-model: %w", err)}
	}
	if err != nil || !o.lookup {
		return d, err
	}
	return sched.NewChainDrafter(&sched.LookupDrafter{}, d), nil
}
