package adminapi

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/muserhq/muser/pack"
	"github.com/muserhq/muser/store"
)

// ErrNoServer is returned when a home has no serve file, or its server is
// not running or does not answer.
var ErrNoServer = errors.New("no running muser server for this home")

// ErrBadServeFile is returned when a serve file is not what a server
// writes (ParseServeFile).
var ErrBadServeFile = errors.New("malformed serve file")

// ErrUnauthorized is returned when the admin endpoint refuses the caller:
// not on loopback and no admin key, or a wrong key.
var ErrUnauthorized = errors.New("admin access refused")

// Error codes of the wire error shape.
const (
	CodeNotFound     = "not_found"    // a pack or receipt does not exist
	CodeAmbiguous    = "ambiguous_id" // an ID prefix matches more than one
	CodeRefused      = "refused"      // input refused with a receipt
	CodeInvalid      = "invalid"      // a bad request field
	CodeCorrupt      = "corrupt"      // the store found damage
	CodeUnauthorized = "unauthorized" // admin access refused
	CodeFailed       = "failed"       // anything else
)

// Error is an error answered by the admin endpoint. It unwraps to the
// sentinel its code stands for, so errors.Is sees through the network.
type Error struct {
	// Status is the HTTP status.
	Status int `json:"status"`
	// Code is one of the Code constants.
	Code string `json:"code"`
	// Message is the error's text.
	Message string `json:"message"`
}

// Error returns the message as the server's store phrased it.
func (e *Error) Error() string { return e.Message }

// Unwrap returns the sentinel of e's code, if any.
func (e *Error) Unwrap() error {
	switch e.Code {
	case CodeNotFound:
		return store.ErrNotFound
	case CodeAmbiguous:
		return store.ErrAmbiguousID
	case CodeRefused:
		return pack.ErrRefused
	case CodeInvalid:
		return pack.ErrInvalid
	case CodeCorrupt:
		return pack.ErrCorrupt
	case CodeUnauthorized:
		return ErrUnauthorized
	}
	return nil
}

// ErrorOf classifies err for the wire: its HTTP status and code.
func ErrorOf(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	e := &Error{Status: http.StatusInternalServerError, Code: CodeFailed, Message: err.Error()}
	switch {
	case errors.Is(err, store.ErrNotFound):
		e.Status, e.Code = http.StatusNotFound, CodeNotFound
	case errors.Is(err, store.ErrAmbiguousID):
		e.Status, e.Code = http.StatusBadRequest, CodeAmbiguous
	case errors.Is(err, pack.ErrRefused):
		e.Status, e.Code = http.StatusUnprocessableEntity, CodeRefused
	case errors.Is(err, pack.ErrInvalid):
		e.Status, e.Code = http.StatusBadRequest, CodeInvalid
	case errors.Is(err, ErrUnauthorized):
		e.Status, e.Code = http.StatusUnauthorized, CodeUnauthorized
	case errors.Is(err, pack.ErrCorrupt):
		e.Code = CodeCorrupt
	}
	return e
}

// invalidf returns an *Error with CodeInvalid naming field.
func invalidf(field, format string, a ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: CodeInvalid, Message: field + ": " + fmt.Sprintf(format, a...)}
}
