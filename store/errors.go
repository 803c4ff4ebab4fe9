package store

import (
	"errors"
	"fmt"
	"strings"

	"github.com/muserhq/muser/pack"
)

// ErrNotFound is returned when a named pack, chunk, receipt or store is not
// there.
var ErrNotFound = errors.New("not found")

// ErrAmbiguousID is returned when a hex ID prefix matches more than one pack
// or receipt.
var ErrAmbiguousID = errors.New("ambiguous ID prefix")

// ErrLocked is returned by Open when another process holds the store's
// ledger.
var ErrLocked = errors.New("store is in use by another process")

// ErrReadOnly is returned when a store opened with Options.ReadOnly is
// asked to change anything.
var ErrReadOnly = errors.New("store is open read-only")

// ErrClosed is returned by every method called after Close.
var ErrClosed = errors.New("store is closed")

// ErrQuarantined is returned when a quarantined pack is asked for its
// data: it failed verification and is kept only for inspection until it is
// removed.
var ErrQuarantined = errors.New("pack is quarantined")

// ErrMissingChunks marks a PublishPack whose manifest names chunks the
// store does not hold, and a publish whose chunk files left the store
// (quarantined by a concurrent restore) before its commit; the
// *MissingChunksError that wraps it lists them.
var ErrMissingChunks = errors.New("chunks missing")

// BlockSizeError is returned by Open when the configured block size
// differs from the one the store was created with.
type BlockSizeError struct {
	Dir        string
	Configured int
	Stored     int
}

// Error names the store and both block sizes.
func (e *BlockSizeError) Error() string {
	return fmt.Sprintf("store %s: configured block size %d tokens differs from the store's %d tokens (fixed when it was created)", e.Dir, e.Configured, e.Stored)
}

// MissingChunksError lists the chunks a manifest names that the store does
// not hold. It wraps ErrMissingChunks.
type MissingChunksError struct {
	Pack   pack.Digest
	Chunks []pack.Digest
}

// Error names the pack and how many chunks are missing.
func (e *MissingChunksError) Error() string {
	return fmt.Sprintf("pack %s: %d chunks missing (first %s)", e.Pack.Short(), len(e.Chunks), e.Chunks[0])
}

// Unwrap returns ErrMissingChunks.
func (e *MissingChunksError) Unwrap() error { return ErrMissingChunks }

// SourceError is returned by ChunkSink.Put when reading a chunk's bytes
// from its source failed or ended early (the connection broke, the sender
// stopped, a body was shorter than its chunk): the fault is the source's,
// not the chunk's. The bytes did not all arrive, so nothing was verified,
// refused or written, and no receipt names the pack; the caller decides
// what the failure means (a peer's stream broke, a tier is unavailable).
type SourceError struct {
	Chunk pack.Digest // the chunk being read
	Err   error       // the reader's error (io.ErrUnexpectedEOF for an early end)
}

// Error names the chunk and the reader's fault.
func (e *SourceError) Error() string {
	return fmt.Sprintf("reading chunk %s: %v", e.Chunk.Short(), e.Err)
}

// Unwrap returns the reader's error.
func (e *SourceError) Unwrap() error { return e.Err }

// RefusalError is returned when the store refused to use a pack (fail
// closed). Receipt is the receipt it recorded (its ID is empty when the
// store is read-only and could not record it). It wraps pack.ErrRefused
// and the error that caused the refusal, so errors.Is(err,
// pack.ErrCorrupt) also holds for digest failures.
type RefusalError struct {
	Receipt Receipt
	Err     error
}

// Error names the pack, the reason, the cause and the receipt.
func (e *RefusalError) Error() string {
	var b strings.Builder
	b.WriteString("refused")
	if !e.Receipt.Pack.IsZero() {
		fmt.Fprintf(&b, " pack %s", e.Receipt.Pack.Short())
	}
	fmt.Fprintf(&b, " (%s): %v", e.Receipt.Reason, e.Err)
	if e.Receipt.ID != "" {
		fmt.Fprintf(&b, " [receipt %s]", e.Receipt.ID)
	}
	return b.String()
}

// Unwrap returns pack.ErrRefused and the cause.
func (e *RefusalError) Unwrap() []error { return []error{pack.ErrRefused, e.Err} }

// LedgerError is a verify finding about a ledger record rather than a
// pack: an unreadable record, a reference count that disagrees with the
// packs. It wraps pack.ErrCorrupt.
type LedgerError struct {
	Bucket string
	Key    string
	Err    error
}

// Error names the bucket, the key and the fault.
func (e *LedgerError) Error() string {
	return fmt.Sprintf("ledger %s/%s: %v", e.Bucket, e.Key, e.Err)
}

// Unwrap returns pack.ErrCorrupt and the cause.
func (e *LedgerError) Unwrap() []error { return []error{pack.ErrCorrupt, e.Err} }

// PackError is a verify finding about one pack. It carries the pack's ID
// and wraps the fault (a *pack.DigestError, a *ChunkFault, ErrQuarantined,
// ...) and pack.ErrCorrupt.
type PackError struct {
	Pack pack.Digest
	Err  error
}

// Error names the pack and the fault.
func (e *PackError) Error() string { return fmt.Sprintf("pack %s: %v", e.Pack.Short(), e.Err) }

// Unwrap returns pack.ErrCorrupt and the fault.
func (e *PackError) Unwrap() []error { return []error{pack.ErrCorrupt, e.Err} }

// ChunkFault is a fault in one chunk of a pack: the block it holds, its ID
// and what is wrong (missing, wrong size, wrong digest).
type ChunkFault struct {
	Block int
	Chunk pack.Digest
	Err   error
}

// Error names the block, the chunk and the fault.
func (e *ChunkFault) Error() string {
	return fmt.Sprintf("chunk %d (%s): %v", e.Block, e.Chunk.Short(), e.Err)
}

// Unwrap returns the cause.
func (e *ChunkFault) Unwrap() error { return e.Err }
