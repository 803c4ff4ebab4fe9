package main

import (
	"errors"

	"github.com/muserhq/muser/infer/sample"
)

// samplingFlags maps the parameter names of sample.ParamError to the
// flags of run and bench that set them.
var samplingFlags = map[string]string{
	"temperature":    "--temperature",
	"top_k":          "--top-k",
	"top_p":          "--top-p",
	"min_p":          "--min-p",
	"repeat_penalty": "--repeat-penalty",
}

// checkSampling validates p as the flags of cmd set it (before any model
// is loaded: no flag sets a logit bias, the one check that needs the
// vocabulary) and returns a usage error of cmd naming the flag at fault.
func checkSampling(cmd *command, p sample.Params) error {
	err := p.Validate(0)
	if err == nil {
		return nil
	}
	var pe *sample.ParamError
	if errors.As(err, &pe) {
		if flag, ok := samplingFlags[pe.Param]; ok {
			return usagef(cmd, "%s %s", flag, pe.Reason)
		}
	}
	return usagef(cmd, "%v", err)
}
