package engine

import (
	"errors"
	"fmt"
)

// ErrUnknownArch is returned when a model's general.architecture names an
// architecture no one registered.
var ErrUnknownArch = errors.New("unknown architecture")

// ErrUnsupported is returned when a model uses a feature the engine does
// not implement (a RoPE scaling type, value heads of another size than
// key heads, a weight type the kernels cannot multiply).
var ErrUnsupported = errors.New("unsupported model feature")

// ErrHParams is returned when a model's hyperparameters are missing,
// malformed or inconsistent (zero layers, heads that do not divide the
// hidden size, an odd RoPE dimension).
var ErrHParams = errors.New("bad hyperparameters")

// ErrTensor is returned when a tensor the architecture needs is missing or
// has the wrong shape or type.
var ErrTensor = errors.New("bad tensor")

// ErrBatch is returned when a Forward batch is invalid: an empty step, a
// token outside the vocabulary, a sequence of another model, the same
// sequence twice, or more tokens than the sequence's context holds.
var ErrBatch = errors.New("invalid batch")

// ErrClosed is returned when a closed Model is used.
var ErrClosed = errors.New("model closed")

// HParamError names the metadata key (or derived hyperparameter) at fault.
type HParamError struct {
	Key    string // "llama.attention.head_count", ...
	Reason string
	Err    error // ErrHParams, ErrUnsupported, or a gguf metadata error
}

func (e *HParamError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("%s: %v", e.Key, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Key, e.Reason)
}

// Unwrap returns the cause.
func (e *HParamError) Unwrap() error { return e.Err }

// TensorError names a tensor the architecture cannot use.
type TensorError struct {
	Name   string // "blk.3.attn_k.weight"
	Reason string // "missing", "shape [64 100], want [64 128]", ...
	Err    error  // ErrTensor or ErrUnsupported, possibly joined with a cause
}

func (e *TensorError) Error() string {
	return fmt.Sprintf("tensor %s: %s", e.Name, e.Reason)
}

// Unwrap returns the cause.
func (e *TensorError) Unwrap() error { return e.Err }

// BatchError names the step of a Forward batch at fault.
type BatchError struct {
	Step   int
	Reason string
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("%v: step %d: %s", ErrBatch, e.Step, e.Reason)
}

// Unwrap returns ErrBatch.
func (e *BatchError) Unwrap() error { return ErrBatch }

// ErrPrefix is returned when a prefix restore or publish cannot proceed:
// the sequence is not empty, the identity's kv field does not match the
// model and the store's block size, or the store's answer is inconsistent.
var ErrPrefix = errors.New("prefix cache")

// ErrNoHiddenStates is returned by Model.CheckHiddenStates when the
// model's backend does not return hidden states (embeddings): it does not
// implement HiddenBackend. Forward refuses a step that asks for them with
// a *BatchError.
var ErrNoHiddenStates = errors.New("the device does not return hidden states")

// DeviceError names the device that cannot do what was asked.
type DeviceError struct {
	Device string // Device.Name(): "cpu", "cuda:0 NVIDIA H200"
	Op     string // what was asked
	Err    error  // ErrNoHiddenStates, ...
}

func (e *DeviceError) Error() string {
	return fmt.Sprintf("device %s: %s: %v", e.Device, e.Op, e.Err)
}

// Unwrap returns the cause.
func (e *DeviceError) Unwrap() error { return e.Err }
