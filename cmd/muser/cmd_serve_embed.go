package main

import (
	"github.com/spf13/pflag"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/serve"
)

// serveModelOptions are the flags of `muser serve` that shape how the
// model is presented: its embeddings pooling and its name.
type serveModelOptions struct {
	pooling string
	alias   string
}

func (o *serveModelOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.pooling, "pooling", "", "embeddings pooling: none, mean, cls or last (default: the model's pooling_type; mean for the embedded default model; else none)")
	fs.StringVar(&o.alias, "alias", "", "the model's name in every API (model lists, responses); requests may name it or the model's own names")
}

// apply sets the options' fields of opts; defaultModel says whether the
// embedded default model is served.
func (o *serveModelOptions) apply(opts *serve.Options, defaultModel bool) {
	opts.Pooling = o.pooling
	if defaultModel {
		opts.FallbackPooling = defaultmodel.Pooling
	}
	opts.Alias = o.alias
}
