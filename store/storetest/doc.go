// Package storetest provides helpers for tests that use a real store.
//
// # Checked stores
//
// Open creates a store in a temporary directory whose cleanup reopens it
// and runs a full verify (every chunk re-hashed, reference counts and the
// index compared with the ledger): the idea of bbolt's StrictMode. Tests
// that leave faults on purpose use OpenUnchecked.
//
// # Synthetic KV
//
// Publish, KV and Restore publish and restore packs whose chunks are
// packtest.KV of their block keys, as a batch-invariant engine's would be.
//
// # Crashes
//
// KillChild runs the test binary again in a child role and SIGKILLs it
// at a chosen instant, for tests that reopen what a crash left.
package storetest
