package serve

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotLoopback is returned by New and Serve when the server would listen
// beyond the loopback interface without API keys (--api-keys): without
// keys every client is the one local tenant, so the server refuses to be
// reachable from other hosts.
var ErrNotLoopback = errors.New("refusing to listen beyond loopback without --api-keys")

// ErrOptions is returned by New when an option is out of range; an
// *OptionError names it.
var ErrOptions = errors.New("bad server option")

// OptionError names the option at fault.
type OptionError struct {
	// Option is the flag's name: "--ctx", "--parallel", ...
	Option string
	// Reason says what is wrong with its value.
	Reason string
}

func (e *OptionError) Error() string { return fmt.Sprintf("%s %s", e.Option, e.Reason) }

// Unwrap returns ErrOptions.
func (e *OptionError) Unwrap() error { return ErrOptions }

// apiError is an error answered to a client: an HTTP status and the
// fields every route family's error shape is built from.
type apiError struct {
	Status  int
	Type    string // OpenAI error type: "invalid_request_error", ...
	Code    string // machine-readable code: "unknown_field", "context_length_exceeded", ...
	Param   string // the request field at fault, when one is
	Message string
}

func (e *apiError) Error() string { return e.Message }

// Error types, as OpenAI names them (llama.cpp adds unavailable_error).
const (
	typeInvalid     = "invalid_request_error"
	typeAuth        = "authentication_error"
	typeNotFound    = "not_found_error"
	typeRateLimit   = "rate_limit_error"
	typeServer      = "server_error"
	typeUnavailable = "unavailable_error"
)

func badRequest(code, param, format string, a ...any) *apiError {
	return &apiError{Status: 400, Type: typeInvalid, Code: code, Param: param, Message: fmt.Sprintf(format, a...)}
}

// unsupported is the 400 for a field muser knows but does not support yet.
func unsupported(param, format string, a ...any) *apiError {
	msg := fmt.Sprintf(format, a...)
	if msg == "" {
		msg = fmt.Sprintf("%s is not supported yet by muser", param)
	} else if !strings.Contains(msg, param) {
		msg = param + ": " + msg
	}
	return &apiError{Status: 400, Type: typeInvalid, Code: "unsupported_field", Param: param, Message: msg}
}
