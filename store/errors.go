package store

import "errors"

// ErrNotFound is returned when a named pack, chunk or receipt is not in the
// store.
var ErrNotFound = errors.New("not found")

// ErrAmbiguousID is returned when a hex ID prefix matches more than one pack
// or receipt.
var ErrAmbiguousID = errors.New("ambiguous ID prefix")

// ErrLocked is returned by Open when another process holds the store's
// ledger.
var ErrLocked = errors.New("store is in use by another process")
