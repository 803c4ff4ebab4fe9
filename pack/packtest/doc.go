// Package packtest provides fixtures for tests of the pack format and of
// its users.
//
// # Fixtures
//
// Identity and Digest make deterministic identities and digests; Tokens
// makes deterministic token streams; KV makes synthetic chunk bytes that
// depend only on a block key; Manifest builds a valid manifest and its
// chunks.
package packtest
