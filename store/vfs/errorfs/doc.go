// Package errorfs wraps a vfs.FS and injects errors into chosen operations,
// for tests of the store's behaviour under write failures (the idea of
// pebble's vfs/errorfs).
//
// # Use
//
// An Injector sees every operation (its kind and path) before it runs and
// returns the error to fail it with, or nil to let it through. OnNth fails
// the n-th operation of the given kinds; Count only counts.
package errorfs
