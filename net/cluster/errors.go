package cluster

import (
	"errors"
	"fmt"
)

// ErrNotInitialized is returned when the data directory holds no cluster
// identity: neither `muser cluster init` nor `muser node join` ran there.
var ErrNotInitialized = errors.New("no cluster identity")

// ErrInitialized is returned by Init and Join when the data directory
// already holds a cluster identity.
var ErrInitialized = errors.New("cluster identity already present")

// ErrNodeNotFound is returned when a named peer is not in the registry.
var ErrNodeNotFound = errors.New("node not found")

// ErrRegistryFull is returned when a new peer would take the registry
// beyond MaxPeers entries, which it could then not be read with.
var ErrRegistryFull = errors.New("the registry is full")

// ErrNotCAHolder is returned when enrolling a node on a node that does not
// hold the cluster CA's private key.
var ErrNotCAHolder = errors.New("not a CA holder")

// ErrBadRegistry is returned when peers.json or cluster.json does not
// decode or breaks a limit. Errors wrapping it name the file.
var ErrBadRegistry = errors.New("bad cluster file")

// FileError is a fault in one of the cluster files: Path names the file.
type FileError struct {
	Path string
	Err  error
}

// Error names the file and the fault.
func (e *FileError) Error() string { return fmt.Sprintf("%s: %v", e.Path, e.Err) }

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }
