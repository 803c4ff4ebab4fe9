package repl

import (
	"errors"
	"fmt"
)

// ErrNoAddress is returned when a peer to dial has no address in the
// registry.
var ErrNoAddress = errors.New("peer has no address")

// ErrClosed is returned by operations on a closed Node.
var ErrClosed = errors.New("replication node closed")

// ErrNotListening is returned by Serve on a Node that did not Listen.
var ErrNotListening = errors.New("replication node does not listen")

// DialError is returned when a connection to a peer could not be set up:
// no QUIC handshake with mutual authentication completed with it at its
// registered address (nothing answers, it timed out, or it refused our
// certificate or presented one we refuse). Err is the transport's error.
type DialError struct {
	Peer string // the peer's node name
	Addr string // the address dialled
	Err  error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("repl: cannot reach %s at %s: %v", e.Peer, e.Addr, e.Err)
}

// Unwrap returns the transport's error.
func (e *DialError) Unwrap() error { return e.Err }

// ErrStalled is returned (wrapped) when a transfer made no progress for
// the node's stall timeout (Config.StallTimeout): no chunk bytes crossed
// and no control frame arrived.
var ErrStalled = errors.New("transfer stalled")
