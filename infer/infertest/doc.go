// Package infertest holds test helpers for the inference engine, like
// net/http/httptest: MemStore, an in-memory infer.PrefixStore with the
// same block semantics as muser's durable store, and fault injection for
// fail-closed tests. Production code never imports it.
//
// # MemStore keys
//
// Block i of a token list under (identity, salt) is keyed by SHA-256 of
// the identity's printed fields, the salt and tokens[:(i+1)·B], so a block
// is found only after the same identity, salt and whole prefix. This is a
// test double: the real store's block-key chain is in docs/kvpack.md.
package infertest
