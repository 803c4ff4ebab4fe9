package sample

import (
	"errors"
	"fmt"
)

// ErrBadParams is returned when sampling parameters are out of range
// (negative temperature or top-k, top-p or min-p outside [0, 1], a
// non-positive repetition penalty, a logit bias for a token outside the
// vocabulary, a non-finite value).
var ErrBadParams = errors.New("bad sampling parameters")

// ErrNoCandidates is returned when every logit is -Inf or NaN (for example
// when a logit bias bans the whole vocabulary), so nothing can be sampled.
var ErrNoCandidates = errors.New("no token can be sampled")

// ParamError names the sampling parameter at fault and why.
type ParamError struct {
	Param  string // "temperature", "top_p", "logit_bias[7]", ...
	Reason string
}

func (e *ParamError) Error() string {
	return fmt.Sprintf("%v: %s %s", ErrBadParams, e.Param, e.Reason)
}

// Unwrap returns ErrBadParams.
func (e *ParamError) Unwrap() error { return ErrBadParams }
