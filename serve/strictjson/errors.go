package strictjson

import (
	"errors"
	"fmt"
)

// ErrSyntax is returned when the body is not exactly one well-formed JSON
// value: malformed JSON, an empty body, or data after the value.
var ErrSyntax = errors.New("malformed JSON")

// ErrUnknownField is returned when an object holds a key that the target
// type has no field for.
var ErrUnknownField = errors.New("unknown field")

// ErrDuplicateField is returned when an object holds the same key twice.
var ErrDuplicateField = errors.New("duplicate field")

// ErrType is returned when a value has the wrong JSON kind for its field,
// or is a number that does not fit it.
var ErrType = errors.New("wrong type")

// ErrDepth is returned when the body nests arrays and objects deeper than
// MaxDepth.
var ErrDepth = errors.New("nested too deeply")

// Error says what is wrong with a body and where. It wraps one of the
// package's sentinel errors.
type Error struct {
	// Path locates the value at fault: "" for the body itself, else a
	// path such as "messages[1].content" (for an unknown or duplicate
	// field, the path of the field itself).
	Path string
	// Offset is the byte offset in the body where the problem was found.
	Offset int64
	// Msg says what is wrong, in words, without the path.
	Msg string
	// Err is the sentinel.
	Err error
}

func (e *Error) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }
