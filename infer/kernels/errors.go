package kernels

import (
	"errors"
	"fmt"

	"github.com/muserhq/muser/infer/ggml"
)

// ErrUnsupportedType is returned when a matrix's tensor type has no kernel
// (the IQ and TQ families, integer types, F64, and the activation-only
// types Q8_1 and Q8_K).
var ErrUnsupportedType = errors.New("kernels: no matmul kernel for tensor type")

// ErrShape is returned when a matrix's dimensions or data length are
// inconsistent: rows or columns not positive, columns not a multiple of the
// type's block size, or data of the wrong length.
var ErrShape = errors.New("kernels: bad matrix shape")

// MatrixError is the error NewMatrix returns; it names the matrix at fault.
type MatrixError struct {
	Type       ggml.Type
	Rows, Cols int
	Err        error // ErrUnsupportedType or ErrShape, possibly wrapped with detail
}

// Error describes the matrix and the problem.
func (e *MatrixError) Error() string {
	return fmt.Sprintf("kernels: matrix %s [%d rows × %d cols]: %v", e.Type, e.Rows, e.Cols, e.Err)
}

// Unwrap returns the underlying error, so errors.Is finds ErrShape or
// ErrUnsupportedType.
func (e *MatrixError) Unwrap() error { return e.Err }
