package tier

import (
	"errors"
	"fmt"

	"github.com/muserhq/muser/pack"
)

// ErrBadURL is returned when a tier URL is not s3://BUCKET[/PREFIX].
var ErrBadURL = errors.New("bad tier URL")

// ErrNoKey is returned when a tier is opened without a seal key of at
// least pack.MinSealKey bytes.
var ErrNoKey = errors.New("no tier seal key")

// ErrWrongKey is returned by GC when manifests exist but none verifies
// under the tier's key: collecting would delete every chunk.
var ErrWrongKey = errors.New("no manifest verifies under the tier key")

// ErrUnavailable is returned (inside an *OpError) when the bucket cannot
// be reached or refuses a request: the server is down or slow, the
// credentials are wrong, the bucket is missing or read-only.
var ErrUnavailable = errors.New("tier unavailable")

// ErrNotFound is returned when an object the tier should hold is absent.
var ErrNotFound = errors.New("object not found in the tier")

// ErrClosed is returned by Uploader.Enqueue after Close.
var ErrClosed = errors.New("uploader closed")

// ErrQueueFull is returned by Uploader.Enqueue when its queue is full.
var ErrQueueFull = errors.New("upload queue full")

// ErrTenant is returned (inside a refusal) by Restore when the pack
// belongs to another tenant than the request's salt.
var ErrTenant = errors.New("the pack belongs to another tenant")

// ErrFetchedUsed is returned by Fetched.Install after an Install or a
// Release of the same Fetched.
var ErrFetchedUsed = errors.New("fetched pack already installed or released")

// ErrTooSlow is returned when an upload runs past MaxUploadTime: its
// manifest is not written (docs/tier.md, rule G2).
var ErrTooSlow = errors.New("upload took longer than the tier allows")

// OpError is a failed request to the bucket: the operation, the object
// key and the cause. It wraps ErrUnavailable, or ErrNotFound for a
// missing object.
type OpError struct {
	Op  string
	Key string
	Err error
}

func (e *OpError) Error() string { return fmt.Sprintf("tier %s %s: %v", e.Op, e.Key, e.Err) }

// Unwrap returns the cause.
func (e *OpError) Unwrap() error { return e.Err }

// ObjectError is an object in the bucket that does not decode or verify:
// a manifest object with a bad header, seal or name, a chunk whose bytes
// do not hash to its name. It wraps pack.ErrCorrupt and the cause.
type ObjectError struct {
	Key string
	Err error
}

func (e *ObjectError) Error() string { return fmt.Sprintf("tier object %s: %v", e.Key, e.Err) }

// Unwrap returns pack.ErrCorrupt and the cause.
func (e *ObjectError) Unwrap() []error { return []error{pack.ErrCorrupt, e.Err} }
