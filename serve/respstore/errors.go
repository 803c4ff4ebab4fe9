package respstore

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned when the tenant holds no response with the ID.
var ErrNotFound = errors.New("respstore: no such response")

// ErrCorrupt is returned when a stored record does not decode.
var ErrCorrupt = errors.New("respstore: stored response is corrupt")

// ErrTooLarge is returned when a record is larger than MaxRecordBytes.
var ErrTooLarge = errors.New("respstore: response too large to store")

// RecordError names the response at fault.
type RecordError struct {
	// ID is the response ID.
	ID string
	// Err is ErrNotFound, ErrCorrupt or ErrTooLarge, possibly wrapped.
	Err error
}

func (e *RecordError) Error() string { return fmt.Sprintf("response %q: %v", e.ID, e.Err) }

// Unwrap returns the cause.
func (e *RecordError) Unwrap() error { return e.Err }
