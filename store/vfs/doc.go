// Package vfs is the file-system layer under muser's store: the handful of
// operations the store's durability rules need (create a temporary file,
// write, fsync, rename, fsync a directory, remove, read), behind an
// interface so that tests can inject faults (package errorfs).
//
// # Durability
//
// SyncDir exists because a rename is durable only once its directory is
// fsynced; the store's write ordering (docs/kvpack.md, "Read and write
// ordering") relies on it.
package vfs
