package mtls

import (
	"errors"
	"fmt"

	"github.com/muserhq/muser/pack"
)

// ErrBadName is returned when a node name is not a DNS label of lower-case
// letters, digits and hyphens.
var ErrBadName = errors.New("bad node name")

// ErrBadBundle is returned when an enrollment bundle does not decode: wrong
// magic or version, a length out of bounds, a checksum mismatch, or a
// certificate or key that does not parse. Errors that wrap it also wrap
// pack.ErrCorrupt.
var ErrBadBundle = errors.New("bad enrollment bundle")

// ErrBadCredential is returned when a certificate and key do not belong
// together, a certificate does not chain to the cluster CA, or it does not
// name the node it is said to belong to.
var ErrBadCredential = errors.New("bad node credential")

// ErrUnauthorized is returned when a peer presents a valid certificate but
// this node's registry does not admit it (unknown or removed node).
var ErrUnauthorized = errors.New("peer not authorized")

// BundleError is a fault in an enrollment bundle: Field names the part of
// the bundle at fault ("magic", "version", "node certificate", ...).
type BundleError struct {
	Field string
	Err   error
}

// Error names the bundle field at fault and the fault.
func (e *BundleError) Error() string {
	return fmt.Sprintf("%v: %s: %v", ErrBadBundle, e.Field, e.Err)
}

// Unwrap returns ErrBadBundle, pack.ErrCorrupt and the underlying cause.
func (e *BundleError) Unwrap() []error { return []error{ErrBadBundle, pack.ErrCorrupt, e.Err} }

// PeerError is a refusal of a peer during the TLS handshake: Name is the
// node name its certificate carries (empty when none could be read).
type PeerError struct {
	Name string
	Err  error
}

// Error names the refused peer and the reason.
func (e *PeerError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("peer refused: %v", e.Err)
	}
	return fmt.Sprintf("peer %q refused: %v", e.Name, e.Err)
}

// Unwrap returns the cause of the refusal.
func (e *PeerError) Unwrap() error { return e.Err }
