package wire

import (
	"context"
	"errors"
	"fmt"

	"github.com/muserhq/muser/pack"
)

// Code is a protocol error code (docs/replication.md, "Error codes"). The
// same values are used in Refuse messages and as QUIC application error
// codes.
type Code uint16

// Protocol error codes. Refusal codes (fail-closed decisions about the
// data offered) have the receipt reason of the same name.
const (
	// CodeOK is no error: a normal close.
	CodeOK Code = 0x00
	// CodeMalformed: a frame or message that does not decode.
	CodeMalformed Code = 0x01
	// CodeOversize: a length, count or size over a protocol or store limit.
	CodeOversize Code = 0x02
	// CodeUnauthorized: the peer is not (or no longer) admitted.
	CodeUnauthorized Code = 0x03
	// CodeIdentityMismatch: the offered pack's identity differs from what
	// the receiver accepts or asked for; the detail names the fields.
	CodeIdentityMismatch Code = 0x04
	// CodeBadSeal: the offer's seal does not verify under the link secret.
	CodeBadSeal Code = 0x05
	// CodeReplay: the offer's nonce was accepted before.
	CodeReplay Code = 0x06
	// CodeStaleGeneration: the offer's generation is not greater than the
	// last one accepted from that producer.
	CodeStaleGeneration Code = 0x07
	// CodeChunkDigest: chunk bytes whose BLAKE3 is not their chunk ID.
	CodeChunkDigest Code = 0x08
	// CodeMerkleRoot: a manifest whose Merkle root does not match its
	// chunk IDs, or a pack ID that does not match the manifest.
	CodeMerkleRoot Code = 0x09
	// CodeTruncated: the sender stopped before every needed chunk arrived.
	CodeTruncated Code = 0x0a
	// CodeNotFound: a pulled pack that the server does not hold.
	CodeNotFound Code = 0x0b
	// CodeProtocol: a message that is valid but not expected in this state.
	CodeProtocol Code = 0x0c
	// CodeInternal: the peer failed for a reason of its own (disk, store).
	CodeInternal Code = 0x0d
	// CodeUnavailable: the peer does not offer this service (for example a
	// prefill request to a node that is not a producer) or is shutting down.
	CodeUnavailable Code = 0x0e
	// CodePrefillFailed: the producer could not prefill the request.
	CodePrefillFailed Code = 0x0f
	// CodeCanceled: the side that raised it gave up (interrupt, deadline).
	CodeCanceled Code = 0x10
	// CodeRevoked: the peer was removed from the registry while connected.
	CodeRevoked Code = 0x11
	// CodeManifestDigest: a manifest whose bytes do not hash to the pack ID
	// it was offered or asked for under.
	CodeManifestDigest Code = 0x12
	// CodeMissingChunk: a chunk the pack needs is neither held nor sent.
	CodeMissingChunk Code = 0x13
	// CodeDivergent: the receiver holds different KV for the same
	// identity, tenant and tokens.
	CodeDivergent Code = 0x14
	// CodeBlockSize: the pack's block size differs from the receiver's.
	CodeBlockSize Code = 0x15
)

var codeNames = map[Code]string{
	CodeOK:               "ok",
	CodeMalformed:        "malformed",
	CodeOversize:         "oversize",
	CodeUnauthorized:     "unauthorized",
	CodeIdentityMismatch: "identity-mismatch",
	CodeBadSeal:          "bad-seal",
	CodeReplay:           "replay",
	CodeStaleGeneration:  "stale-generation",
	CodeChunkDigest:      "chunk-digest",
	CodeMerkleRoot:       "merkle-root",
	CodeTruncated:        "truncated",
	CodeNotFound:         "not-found",
	CodeProtocol:         "protocol",
	CodeInternal:         "internal",
	CodeUnavailable:      "unavailable",
	CodePrefillFailed:    "prefill-failed",
	CodeCanceled:         "canceled",
	CodeRevoked:          "revoked",
	CodeManifestDigest:   "manifest-digest",
	CodeMissingChunk:     "missing-chunk",
	CodeDivergent:        "divergent",
	CodeBlockSize:        "block-size",
}

// reasonCodes maps the store's receipt reasons to protocol codes; every
// pack.Reason has one.
var reasonCodes = map[pack.Reason]Code{
	pack.ReasonIdentityMismatch: CodeIdentityMismatch,
	pack.ReasonChunkDigest:      CodeChunkDigest,
	pack.ReasonMerkleRoot:       CodeMerkleRoot,
	pack.ReasonManifestDigest:   CodeManifestDigest,
	pack.ReasonBadSeal:          CodeBadSeal,
	pack.ReasonReplay:           CodeReplay,
	pack.ReasonStaleGeneration:  CodeStaleGeneration,
	pack.ReasonTruncated:        CodeTruncated,
	pack.ReasonMalformed:        CodeMalformed,
	pack.ReasonOversize:         CodeOversize,
	pack.ReasonUnauthorized:     CodeUnauthorized,
	pack.ReasonMissingChunk:     CodeMissingChunk,
	pack.ReasonDivergent:        CodeDivergent,
	pack.ReasonBlockSize:        CodeBlockSize,
}

// CodeForReason returns the protocol code of a receipt reason
// (CodeMalformed for a reason this build does not know).
func CodeForReason(r pack.Reason) Code {
	if c, ok := reasonCodes[r]; ok {
		return c
	}
	return CodeMalformed
}

// String returns the code's name, the receipt reason for refusal codes.
func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("code-%#x", uint16(c))
}

// Refusal reports whether the code is a fail-closed refusal of offered
// data or of the peer (it maps to pack.ErrRefused and CLI exit status 4).
func (c Code) Refusal() bool {
	switch c {
	case CodeMalformed, CodeOversize, CodeUnauthorized, CodeIdentityMismatch, CodeBadSeal,
		CodeReplay, CodeStaleGeneration, CodeChunkDigest, CodeMerkleRoot, CodeTruncated, CodeRevoked,
		CodeManifestDigest, CodeMissingChunk, CodeDivergent, CodeBlockSize:
		return true
	}
	return false
}

// Error is a protocol error: its code, which side raised it, the peer on
// the other end, the receipt the refusing side recorded (if any) and a
// human-readable detail.
type Error struct {
	// Code is the protocol error code.
	Code Code
	// Remote is true when the peer raised the error and told us about it;
	// false when this node raised it.
	Remote bool
	// Peer names the node on the other end of the connection.
	Peer string
	// Receipt is the ID of the receipt the refusing side recorded, or "".
	Receipt string
	// Detail says what went wrong, naming the field, chunk or pack at fault.
	Detail string
}

// Error prints the code, the side that raised it, the peer, the detail
// and the receipt.
func (e *Error) Error() string {
	side := "local"
	if e.Remote {
		side = "remote"
	}
	s := fmt.Sprintf("%s (%s, peer %q)", e.Code, side, e.Peer)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	if e.Receipt != "" {
		s += " [receipt " + e.Receipt + "]"
	}
	return s
}

// Is makes errors.Is(err, pack.ErrRefused) true for refusal codes,
// errors.Is(err, pack.ErrCorrupt) true for chunk-digest and merkle-root, and
// errors.Is(err, &Error{Code: c}) true for any error with code c.
func (e *Error) Is(target error) bool {
	switch target {
	case pack.ErrRefused:
		return e.Code.Refusal()
	case pack.ErrCorrupt:
		return e.Code == CodeChunkDigest || e.Code == CodeMerkleRoot || e.Code == CodeManifestDigest || e.Code == CodeMalformed
	}
	if t, ok := target.(*Error); ok {
		return t.Code == e.Code
	}
	return false
}

// Errorf returns a local *Error with code c for peer.
func Errorf(c Code, peer, format string, a ...any) *Error {
	return &Error{Code: c, Peer: peer, Detail: fmt.Sprintf(format, a...)}
}

// CodeOf returns the protocol code of err: the code of an *Error in its
// chain, CodeCanceled for context cancellation, CodeInternal otherwise.
func CodeOf(err error) Code {
	var e *Error
	switch {
	case err == nil:
		return CodeOK
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return CodeCanceled
	}
	return CodeInternal
}
