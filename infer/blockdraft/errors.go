package blockdraft

import (
	"errors"
	"fmt"
)

// ErrNotBlockDrafter is returned when a file's general.architecture is
// missing or is not "muser-blockdraft".
var ErrNotBlockDrafter = errors.New("not a block drafter")

// ErrHParams is returned when a drafter's metadata is missing, of the
// wrong type, out of range or inconsistent (block_size 1, heads that do
// not divide the embedding length, an odd head dimension, no vocabulary).
var ErrHParams = errors.New("bad block drafter metadata")

// ErrShape is returned when a tensor the drafter needs is missing, has
// other dimensions than the metadata implies, or holds the wrong number
// of bytes.
var ErrShape = errors.New("bad block drafter tensor")

// ErrUnsupported is returned when a tensor is stored in a type the
// drafter cannot compute with: a matrix of a type infer/kernels does not
// multiply, an embedding of a type ggml cannot decode, a norm vector that
// is not F32.
var ErrUnsupported = errors.New("unsupported block drafter tensor type")

// ErrRequest is returned by Draft for a request it cannot compute: a
// hidden state of the wrong length, an anchor outside the vocabulary, a
// Max below 1.
var ErrRequest = errors.New("invalid draft request")

// ErrTargetMismatch is returned by CheckTarget when the drafter was not
// made for the target model: another hidden size or vocabulary size.
var ErrTargetMismatch = errors.New("the block drafter does not fit the model")

// ErrClosed is returned when a closed Model is used.
var ErrClosed = errors.New("block drafter closed")

// HParamError names the metadata key at fault.
type HParamError struct {
	Key    string // "muser-blockdraft.block_size", ...
	Reason string // "is 1, want 2..64"; empty when Err says it all
	Err    error  // ErrNotBlockDrafter, ErrHParams, or a gguf metadata error
}

// Error names the key and what is wrong with it.
func (e *HParamError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("%s: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Key, e.Reason)
}

// Unwrap returns the cause.
func (e *HParamError) Unwrap() error { return e.Err }

// TensorError names a tensor the drafter cannot use.
type TensorError struct {
	Name   string // "blk.0.attn_q.weight"
	Reason string // "missing", "shape [64 100], want [64 128]", ...
	Err    error  // ErrShape or ErrUnsupported, possibly joined with a cause
}

// Error names the tensor and what is wrong with it.
func (e *TensorError) Error() string {
	return fmt.Sprintf("tensor %s: %s", e.Name, e.Reason)
}

// Unwrap returns the cause.
func (e *TensorError) Unwrap() error { return e.Err }

// RequestError names the request of a Draft call at fault.
type RequestError struct {
	Index  int    // the request's index in the call
	Field  string // "Hidden", "Anchor", "Max"
	Reason string
}

// Error names the request, its field and what is wrong with it.
func (e *RequestError) Error() string {
	return fmt.Sprintf("%v: request %d: %s %s", ErrRequest, e.Index, e.Field, e.Reason)
}

// Unwrap returns ErrRequest.
func (e *RequestError) Unwrap() error { return ErrRequest }

// TargetMismatchError names what differs between a drafter and the target
// model it is meant for.
type TargetMismatchError struct {
	Field   string // "hidden size" or "vocabulary size"
	Drafter int    // the drafter's value
	Target  int    // the target's value
}

// Error names what differs and both values.
func (e *TargetMismatchError) Error() string {
	return fmt.Sprintf("%v: %s is %d in the drafter, %d in the model", ErrTargetMismatch, e.Field, e.Drafter, e.Target)
}

// Unwrap returns ErrTargetMismatch.
func (e *TargetMismatchError) Unwrap() error { return ErrTargetMismatch }
