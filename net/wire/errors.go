package wire

import (
	"errors"
	"fmt"

	"github.com/muserhq/muser/pack"
)

// ErrMalformed is returned when a frame or message does not decode: an
// unknown type, a length over its bound, a payload too short or too long,
// an invalid field. Errors wrapping it also wrap pack.ErrCorrupt.
var ErrMalformed = errors.New("malformed message")

// ErrUnexpected is returned by Read when a frame decodes but its type is
// not one the caller expects in its state.
var ErrUnexpected = errors.New("unexpected message")

// FrameError is a fault in one frame: Type is the frame's type byte and
// Field the part of the payload at fault.
type FrameError struct {
	Type  Type
	Field string
	Err   error
}

// Error names the frame type, the field at fault and the fault.
func (e *FrameError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%v: %s frame: %v", ErrMalformed, e.Type, e.Err)
	}
	return fmt.Sprintf("%v: %s frame: %s: %v", ErrMalformed, e.Type, e.Field, e.Err)
}

// Unwrap returns ErrMalformed, pack.ErrCorrupt and the cause.
func (e *FrameError) Unwrap() []error { return []error{ErrMalformed, pack.ErrCorrupt, e.Err} }
