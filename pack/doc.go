// Package pack defines muser's KV pack format: the eight-field identity,
// block-key chains, content-addressed chunks, manifests sealed by a Merkle
// root, the HMAC seal a manifest carries when it travels, and the export
// file that carries one pack. It imports nothing else of muser's.
//
// docs/kvpack.md is the normative specification; this package implements
// it, and its tests pin the specification's test vectors.
//
// # Identity
//
// An Identity names the engine state that KV bytes belong to. Its
// canonical, length-prefixed encoding (Identity.AppendBinary) is hashed
// into the identity key (Identity.Key). Identity.Diff and Identity.Check
// name every differing field with both values; a pack is usable only when
// all eight are equal.
//
// # Blocks, chunks and manifests
//
// Tokens are grouped in blocks. BlockKeys chains a key per block from the
// identity key, the tenant tag (TenantTag of the tenant's salt) and the
// tokens, so a key names the whole prefix before it. A chunk holds the KV
// of one block; its ID is ChunkID, BLAKE3 of its bytes. A Manifest lists
// the tokens and the chunk of each block and carries MerkleRoot of the
// chunk IDs; PackID of its canonical encoding (Manifest.Marshal) is the
// pack's ID. DecodeManifest bounds every count before allocating.
//
// # Seals and export files
//
// A Seal authenticates a manifest in transit with keyed BLAKE3 under a
// shared secret, binding the producer, a seal generation and a nonce for
// replay protection. FileWriter and FileReader write and read the export
// file: header, manifest, seal, each distinct chunk once, trailer digest;
// the reader verifies every byte before handing it out.
//
// # Errors
//
// Decoders and verifiers return *FormatError, *LimitError and
// *DigestError, which wrap ErrCorrupt; identity and seal failures return
// *IdentityError and *SealError, which wrap ErrRefused. ReasonOf maps any
// of them to the Reason code a receipt records.
package pack
