package prefill

import "errors"

// ErrRemoteFailed is returned by Prepare under FallbackFail when the
// producer could not supply the prefix; it wraps the cause.
var ErrRemoteFailed = errors.New("remote prefill failed")

// ErrBadFallback is returned by ParseFallback for an unknown policy name.
var ErrBadFallback = errors.New("unknown prefill fallback")
