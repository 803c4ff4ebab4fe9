package repl

import "errors"

// ErrNoAddress is returned when a peer to dial has no address in the
// registry.
var ErrNoAddress = errors.New("peer has no address")

// ErrClosed is returned by operations on a closed Node.
var ErrClosed = errors.New("replication node closed")

// ErrNotListening is returned by Serve on a Node that did not Listen.
var ErrNotListening = errors.New("replication node does not listen")
