package pack

import (
	"errors"
	"fmt"
)

// Reason is the code a refusal receipt records: why muser would not use a
// pack. The codes are part of docs/kvpack.md ("Receipts") and stable.
type Reason string

// Refusal reasons.
const (
	// ReasonIdentityMismatch: the pack's identity differs from the one
	// expected in at least one of its eight fields.
	ReasonIdentityMismatch Reason = "identity-mismatch"
	// ReasonChunkDigest: a chunk's bytes do not hash to its ID.
	ReasonChunkDigest Reason = "chunk-digest"
	// ReasonMerkleRoot: the Merkle root over the chunk IDs is not the
	// manifest's root.
	ReasonMerkleRoot Reason = "merkle-root"
	// ReasonManifestDigest: a manifest's bytes do not hash to its pack ID,
	// or an export file's bytes do not hash to its trailer digest.
	ReasonManifestDigest Reason = "manifest-digest"
	// ReasonBadSeal: a seal's MAC does not verify.
	ReasonBadSeal Reason = "bad-seal"
	// ReasonReplay: a seal's nonce was seen before from that producer.
	ReasonReplay Reason = "replay"
	// ReasonStaleGeneration: a seal's generation is not greater than the
	// last one accepted from that producer.
	ReasonStaleGeneration Reason = "stale-generation"
	// ReasonTruncated: input ended before its declared length.
	ReasonTruncated Reason = "truncated"
	// ReasonMalformed: input does not follow the byte layout.
	ReasonMalformed Reason = "malformed"
	// ReasonOversize: a count or length exceeds its limit.
	ReasonOversize Reason = "oversize"
	// ReasonUnauthorized: no key is known for the producer, or the pack
	// belongs to another tenant.
	ReasonUnauthorized Reason = "unauthorized"
	// ReasonMissingChunk: a chunk the pack references is not on disk.
	ReasonMissingChunk Reason = "missing-chunk"
	// ReasonDivergent: the store already holds different KV bytes for the
	// same identity, tenant and tokens; batch-invariant engines never
	// produce this, so it is refused rather than guessed.
	ReasonDivergent Reason = "divergent"
	// ReasonBlockSize: the pack's block size differs from the store's.
	ReasonBlockSize Reason = "block-size"
)

// Reasons lists every reason code in documentation order.
var Reasons = []Reason{
	ReasonIdentityMismatch, ReasonChunkDigest, ReasonMerkleRoot, ReasonManifestDigest,
	ReasonBadSeal, ReasonReplay, ReasonStaleGeneration, ReasonTruncated, ReasonMalformed,
	ReasonOversize, ReasonUnauthorized, ReasonMissingChunk, ReasonDivergent, ReasonBlockSize,
}

// ParseReason returns the Reason named by s, or an error wrapping
// ErrInvalid that lists the known codes.
func ParseReason(s string) (Reason, error) {
	for _, r := range Reasons {
		if string(r) == s {
			return r, nil
		}
	}
	return "", fmt.Errorf("%w: unknown reason %q (known: %v)", ErrInvalid, s, Reasons)
}

// ReasonOf classifies an error from this package into the reason code a
// receipt records. It returns ReasonMalformed for errors it does not know.
func ReasonOf(err error) Reason {
	var (
		ie *IdentityError
		de *DigestError
		le *LimitError
		se *SealError
	)
	switch {
	case errors.As(err, &ie):
		return ReasonIdentityMismatch
	case errors.As(err, &se):
		return ReasonBadSeal
	case errors.As(err, &de):
		switch de.Kind {
		case DigestChunk:
			return ReasonChunkDigest
		case DigestMerkleRoot:
			return ReasonMerkleRoot
		default:
			return ReasonManifestDigest
		}
	case errors.As(err, &le):
		return ReasonOversize
	case truncated(err):
		return ReasonTruncated
	}
	return ReasonMalformed
}
