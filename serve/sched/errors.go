package sched

import (
	"errors"
	"fmt"
)

// ErrQueueFull is returned by Submit when every slot is busy and the queue
// of waiting requests is full; the server answers 429.
var ErrQueueFull = errors.New("queue full")

// ErrClosed is returned by Submit after Close has begun.
var ErrClosed = errors.New("scheduler closed")

// ErrBadRequest is returned when a request cannot be run as given: an
// empty prompt, a token outside the vocabulary, a prompt that does not
// fit the context, bad sampling parameters. A *RequestError or
// *ContextError wrapping it says which.
var ErrBadRequest = errors.New("bad request")

// ErrRemotePrefill is returned (as a task's error) when Config.RemotePrefill
// failed the request: the prefill producer could not supply the prompt's
// prefix and the consumer's policy is to fail (--prefill-fallback fail).
var ErrRemotePrefill = errors.New("remote prefill failed")

// ErrCancelled is a task's error when its context was cancelled (the
// client went away, or the server shut down) before it finished.
var ErrCancelled = errors.New("request cancelled")

// ContextError is returned when a prompt does not fit a slot's context.
type ContextError struct {
	Prompt int // prompt tokens
	Ctx    int // tokens a slot holds
}

func (e *ContextError) Error() string {
	return fmt.Sprintf("the prompt is %d tokens, more than the context of %d tokens leaves room for (at most %d prompt tokens)",
		e.Prompt, e.Ctx, e.Ctx-1)
}

// Unwrap returns ErrBadRequest.
func (e *ContextError) Unwrap() error { return ErrBadRequest }

// RequestError names the request field at fault.
type RequestError struct {
	// Field is the field at fault: "prompt", "temperature",
	// "logit_bias[7]", ...
	Field string
	// Reason says what is wrong with it.
	Reason string
	// Err is the cause, when there is one (a *sample.ParamError).
	Err error
}

func (e *RequestError) Error() string { return e.Field + " " + e.Reason }

// Unwrap returns ErrBadRequest and the cause.
func (e *RequestError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrBadRequest, e.Err}
	}
	return []error{ErrBadRequest}
}

// ErrTokenizerMismatch is returned when a draft model's tokenizer does not
// give token ids the target's meaning; a *TokenizerMismatchError wrapping
// it says where they differ.
var ErrTokenizerMismatch = errors.New("the draft model's tokenizer differs from the model's")

// TokenizerMismatchError names the first difference between a draft
// model's tokenizer and the target's.
type TokenizerMismatchError struct {
	// Field is what differs: "vocabulary size", "piece of token 7",
	// "tokenizer.ggml.eos_token_id", ...
	Field string
	// Target and Draft are the two values.
	Target, Draft string
}

func (e *TokenizerMismatchError) Error() string {
	return fmt.Sprintf("%v: %s is %s in the model, %s in the draft model", ErrTokenizerMismatch, e.Field, e.Target, e.Draft)
}

// Unwrap returns ErrTokenizerMismatch.
func (e *TokenizerMismatchError) Unwrap() error { return ErrTokenizerMismatch }

// ErrSlotBusy is returned by WithSlot when the slot serves a request (or
// another slot operation) at the time.
var ErrSlotBusy = errors.New("slot busy")

// SlotError names the slot a WithSlot call cannot use.
type SlotError struct {
	Slot   int
	Reason string
	Err    error // ErrSlotBusy or ErrBadRequest
}

func (e *SlotError) Error() string { return fmt.Sprintf("slot %d: %s", e.Slot, e.Reason) }

// Unwrap returns the cause.
func (e *SlotError) Unwrap() error { return e.Err }

// ErrDraftNeedsHidden is returned by New (and CheckDraftHidden) when the
// Drafter conditions on the model's hidden states (a HiddenDrafter that
// wants them) and the model's device does not return them; a
// *DraftHiddenError wrapping it names the lane and the device.
var ErrDraftNeedsHidden = errors.New("the draft lane needs the model's hidden states")

// DraftHiddenError names the draft lane that wants hidden states and the
// device that does not return them.
type DraftHiddenError struct {
	// Lane is the lane that wants them (Drafter.Name; within a
	// ChainDrafter, the first lane that does).
	Lane string
	// Device names the model's device (engine.Device.Name).
	Device string
	// Err is the engine's refusal (an *engine.DeviceError wrapping
	// engine.ErrNoHiddenStates).
	Err error
}

func (e *DraftHiddenError) Error() string {
	return fmt.Sprintf("%v: draft lane %q conditions on them, and device %s does not return them", ErrDraftNeedsHidden, e.Lane, e.Device)
}

// Unwrap returns ErrDraftNeedsHidden and the engine's error.
func (e *DraftHiddenError) Unwrap() []error { return []error{ErrDraftNeedsHidden, e.Err} }
