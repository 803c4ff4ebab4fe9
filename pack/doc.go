// Package pack defines muser's KV pack format: the eight-field identity,
// block-key chains, content-addressed chunks, manifests sealed by a Merkle
// root, and the HMAC seal a manifest carries when it travels.
//
// docs/kvpack.md is the normative specification; this package implements it
// and imports nothing else of muser's.
package pack
