package gguf

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrMalformed is returned when a file is not a well-formed GGUF file that
// this package accepts: bad magic, unsupported version, truncated, absurd
// counts or lengths, bad alignment, duplicate keys or tensor names,
// overlapping or out-of-range tensor data, unknown types, or dimensions
// that overflow. It is a marker: every *FormatError matches it with
// errors.Is, whatever more specific error it wraps.
var ErrMalformed = errors.New("malformed GGUF file")

// ErrMagic is returned when a file does not start with the bytes "GGUF".
var ErrMagic = errors.New("not a GGUF file (bad magic)")

// ErrVersion is returned when a file's GGUF version is not 2 or 3.
var ErrVersion = errors.New("unsupported GGUF version")

// ErrTruncated is returned when a file ends before a field it announces.
var ErrTruncated = errors.New("file truncated")

// ErrLimit is returned when a count, length or size exceeds a limit
// documented in doc.go, or is more than the rest of the file can hold.
var ErrLimit = errors.New("exceeds limit")

// ErrDuplicate is returned when a metadata key or tensor name appears twice.
var ErrDuplicate = errors.New("duplicate")

// ErrAlignment is returned when general.alignment is not a power of two, or
// a tensor's offset is not a multiple of the alignment.
var ErrAlignment = errors.New("bad alignment")

// ErrUnknownType is returned when a metadata value type or tensor type id is
// not one this package knows.
var ErrUnknownType = errors.New("unknown type")

// ErrRange is returned when tensor data lies outside the file or overlaps
// another tensor's data, or a shape's element or byte count overflows.
var ErrRange = errors.New("out of range")

// ErrInvalid is returned when a field holds a value the format forbids (an
// empty key or tensor name, a boolean that is neither 0 nor 1, a tensor row
// that is not a whole number of blocks).
var ErrInvalid = errors.New("invalid value")

// ErrMissingKey is returned when a metadata key that is asked for is absent.
var ErrMissingKey = errors.New("missing metadata key")

// ErrWrongType is returned when a metadata value does not have a type the
// accessor accepts.
var ErrWrongType = errors.New("wrong metadata value type")

// ErrValueRange is returned when a metadata value has an accepted type but
// its value does not fit the type asked for (a negative count, a uint64
// that overflows uint32).
var ErrValueRange = errors.New("metadata value out of range")

// ErrBuilder is returned when a Builder is given something it cannot write:
// a duplicate or empty name, a bad shape, data of the wrong length.
var ErrBuilder = errors.New("gguf builder")

// FormatError reports a malformed GGUF file. It names the field at fault
// and the byte offset where that field starts. It matches ErrMalformed
// with errors.Is and unwraps to a more specific sentinel (ErrTruncated,
// ErrLimit, ...).
type FormatError struct {
	Path   string // the file, or "" for Parse over bytes
	Offset int64  // byte offset of the field in the file
	Field  string // the field at fault: "kv_count", `tensor[3] "output.weight".offset`
	Err    error
}

func (e *FormatError) Error() string {
	prefix := "gguf: "
	if e.Path != "" {
		prefix += e.Path + ": "
	}
	return prefix + "offset " + strconv.FormatInt(e.Offset, 10) + ": " + e.Field + ": " + e.Err.Error()
}

// Unwrap returns the specific error.
func (e *FormatError) Unwrap() error { return e.Err }

// Is reports whether target is ErrMalformed, which every FormatError is.
func (e *FormatError) Is(target error) bool { return target == ErrMalformed }

// KeyError reports a metadata key that is missing or holds a value of the
// wrong type. It wraps ErrMissingKey, ErrWrongType or ErrValueRange.
type KeyError struct {
	Key  string // the metadata key
	Want string // what the accessor accepts ("uint32", "array of string")
	Have string // what the file holds ("" when the key is missing)
	Err  error
}

func (e *KeyError) Error() string {
	switch {
	case errors.Is(e.Err, ErrMissingKey):
		return fmt.Sprintf("gguf: metadata key %q: %v", e.Key, e.Err)
	case e.Have != "":
		return fmt.Sprintf("gguf: metadata key %q: %v: want %s, have %s", e.Key, e.Err, e.Want, e.Have)
	default:
		return fmt.Sprintf("gguf: metadata key %q: %v (want %s)", e.Key, e.Err, e.Want)
	}
}

// Unwrap returns the specific error.
func (e *KeyError) Unwrap() error { return e.Err }
