package ggml

import (
	"errors"
	"fmt"
)

// ErrUnknownType is returned when a type id or name is not a ggml type this
// package knows.
var ErrUnknownType = errors.New("unknown ggml type")

// ErrUnsupported is returned when a known type cannot be dequantized or
// quantized by this package.
var ErrUnsupported = errors.New("unsupported ggml type for this operation")

// ErrSize is returned when an element count is not a whole number of
// blocks, or a buffer's length does not match the element count.
var ErrSize = errors.New("bad size")

// TypeError is an error about data of one ggml type. It carries the type
// at fault and wraps ErrUnknownType, ErrUnsupported or ErrSize.
type TypeError struct {
	Type Type   // the type at fault
	Op   string // "dequantize", "quantize" or "" for size computations
	Err  error
}

func (e *TypeError) Error() string {
	if e.Op != "" {
		return fmt.Sprintf("ggml: %s %s: %v", e.Op, e.Type, e.Err)
	}
	return fmt.Sprintf("ggml: %s: %v", e.Type, e.Err)
}

// Unwrap returns the underlying error.
func (e *TypeError) Unwrap() error { return e.Err }
