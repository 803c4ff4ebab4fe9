package kvcache

import (
	"errors"
	"fmt"
)

// ErrFull is returned when a cache is asked to hold more tokens than its
// maximum (the sequence's context length).
var ErrFull = errors.New("kv cache full")

// ErrChunkSize is returned when imported chunk bytes do not have the size
// the cache's shape and dtype give for the block.
var ErrChunkSize = errors.New("kv chunk has the wrong size")

// ErrBadShape is returned when a cache shape, dtype or range is invalid.
var ErrBadShape = errors.New("bad kv cache shape")

// RangeError names a token range a cache cannot serve.
type RangeError struct {
	First, N int // the range [First, First+N)
	Cap, Max int // tokens allocated and the maximum
	Err      error
}

func (e *RangeError) Error() string {
	return fmt.Sprintf("kv range [%d,%d) (max %d tokens): %v", e.First, e.First+e.N, e.Max, e.Err)
}

// Unwrap returns the cause (ErrFull or ErrBadShape).
func (e *RangeError) Unwrap() error { return e.Err }
