package pack

import (
	"encoding/hex"
	"fmt"
	"hash"

	"github.com/muserhq/muser/internal/b3"
	"github.com/zeebo/blake3"
)

// Domain-separation contexts (docs/kvpack.md, "Hashing"). Every digest in
// the format except a chunk ID is BLAKE3 in derive-key mode under one of
// these context strings, so no two kinds of digest can ever collide with
// each other or with a chunk ID (BLAKE3 in plain hash mode).
const (
	ctxIdentity   = "muser kvpack v1 identity key"
	ctxTenant     = "muser kvpack v1 tenant tag"
	ctxBlockFirst = "muser kvpack v1 block key first"
	ctxBlockNext  = "muser kvpack v1 block key next"
	ctxLeaf       = "muser kvpack v1 merkle leaf"
	ctxNode       = "muser kvpack v1 merkle node"
	ctxPackID     = "muser kvpack v1 pack id"
	ctxSealKey    = "muser kvpack v1 seal key"
	ctxFile       = "muser kvpack v1 export file"
)

// Pre-initialised derive-key hashers; newHasher clones them so the context
// key is computed once per process.
var (
	hIdentity   = blake3.NewDeriveKey(ctxIdentity)
	hTenant     = blake3.NewDeriveKey(ctxTenant)
	hBlockFirst = blake3.NewDeriveKey(ctxBlockFirst)
	hBlockNext  = blake3.NewDeriveKey(ctxBlockNext)
	hLeaf       = blake3.NewDeriveKey(ctxLeaf)
	hNode       = blake3.NewDeriveKey(ctxNode)
	hPackID     = blake3.NewDeriveKey(ctxPackID)
	hFile       = blake3.NewDeriveKey(ctxFile)
)

// Digest is a 32-byte BLAKE3 digest.
type Digest [32]byte

// String returns the digest as 64 lowercase hex digits.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Short returns the first 12 hex digits, the form the CLI prints in tables.
func (d Digest) Short() string { return hex.EncodeToString(d[:6]) }

// IsZero reports whether every byte of d is zero.
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText encodes d as 64 hex digits (for JSON).
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes 64 hex digits.
func (d *Digest) UnmarshalText(b []byte) error {
	p, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// ParseDigest decodes a digest written as 64 hex digits.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 64 {
		return d, fmt.Errorf("%w: digest %q: want 64 hex digits, got %d characters", ErrInvalid, s, len(s))
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("%w: digest %q: %v", ErrInvalid, s, err)
	}
	return d, nil
}

// ChunkID returns the ID of a chunk: BLAKE3 (plain hash mode, 32 bytes) of
// its bytes. Chunks are the bulk of what muser hashes, so they go through
// internal/b3 (16 chunks at a time with AVX-512).
func ChunkID(data []byte) Digest { return b3.Sum256(data) }

// NewChunkHasher returns a hasher whose Sum gives the chunk ID of the bytes
// written to it, for callers that hash while streaming.
func NewChunkHasher() hash.Hash { return b3.New() }

// PackID returns the ID of a pack: the derive-key BLAKE3 of its canonical
// manifest bytes.
func PackID(manifest []byte) Digest { return sum(hPackID, manifest) }

// TenantTag returns the digest that stands for a tenant's salt in block
// keys and manifests. Only the tag is stored; the salt never is.
func TenantTag(salt []byte) Digest { return sum(hTenant, salt) }

// sum hashes b with a clone of the pre-initialised hasher h.
func sum(h *blake3.Hasher, b ...[]byte) Digest {
	c := h.Clone()
	for _, p := range b {
		_, _ = c.Write(p)
	}
	var d Digest
	c.Sum(d[:0])
	return d
}
