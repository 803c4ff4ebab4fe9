package cukernels

import (
	"errors"
	"fmt"
)

// ErrShape is returned when a launch's dimensions do not fit its kernel:
// a count that is not positive, columns that are not a multiple of the
// weight type's block size, a head dimension larger than the attention
// kernels take, a scratch buffer the kernels need left out, or a grid
// larger than CUDA allows.
var ErrShape = errors.New("cukernels: dimensions do not fit the kernel")

// ErrType is returned when a weight type has no kernel (the IQ and TQ
// families, integer types, F64, MXFP4 and the activation-only types).
var ErrType = errors.New("cukernels: no kernel for the weight type")

// ErrManifest is returned when a kernel manifest is malformed: an unknown
// or repeated key, a missing field, a bad digest, size or name.
var ErrManifest = errors.New("cukernels: malformed manifest")

// LaunchError is the error of a launch builder: it names the kernel (or
// the operation, when no kernel was chosen) and wraps ErrShape or ErrType.
type LaunchError struct {
	Kernel string
	Err    error
}

// Error describes the launch and the problem.
func (e *LaunchError) Error() string { return fmt.Sprintf("cukernels: %s: %v", e.Kernel, e.Err) }

// Unwrap returns the cause.
func (e *LaunchError) Unwrap() error { return e.Err }

// ManifestError names the manifest line at fault (1-based; 0 for a
// problem of the whole manifest, such as a missing field) and wraps
// ErrManifest.
type ManifestError struct {
	Line int
	Err  error
}

// Error describes the line and the problem.
func (e *ManifestError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("cukernels: manifest: %v", e.Err)
	}
	return fmt.Sprintf("cukernels: manifest line %d: %v", e.Line, e.Err)
}

// Unwrap returns the cause.
func (e *ManifestError) Unwrap() error { return e.Err }
