package pack

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrCorrupt marks bytes that do not decode, exceed a limit, or do not match
// their digest. Errors from every decoder and verifier in muser wrap it, so
// any layer can recognise corruption with errors.Is.
var ErrCorrupt = errors.New("corrupt")

// ErrRefused marks input that muser refused to use (fail closed): an
// identity mismatch, a digest or seal that does not verify, a replay. The
// refusing layer records a receipt; errors.Is(err, ErrRefused) maps to the
// CLI's exit status 4.
var ErrRefused = errors.New("refused")

// ErrInvalid is returned when a caller passes a value that breaks a rule of
// the format: a negative token, an empty or over-long identity field, a
// token count that is not a whole number of blocks, a seal key that is too
// short. It marks a programming or configuration error, not corrupt input.
var ErrInvalid = errors.New("invalid argument")

// FormatError is returned by a decoder when its input does not follow the
// byte layout of docs/kvpack.md. It names the object and field at fault and
// the byte offset where decoding stopped. It wraps ErrCorrupt, and also
// io.ErrUnexpectedEOF when the input ended early.
type FormatError struct {
	Object  string // "manifest", "identity", "seal", "export file"
	Field   string // the field being decoded, e.g. "chunk count"
	Offset  int64  // byte offset of the field within the object
	Problem string // what is wrong, e.g. "unknown version 7"
	Err     error  // underlying cause (io.ErrUnexpectedEOF for truncation), or nil
}

// Error names the object, field and offset at fault.
func (e *FormatError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: field %q at offset %d: %s", e.Object, e.Field, e.Offset, e.Problem)
	if e.Err != nil && e.Problem == "" {
		fmt.Fprintf(&b, "%v", e.Err)
	}
	return b.String()
}

// Unwrap returns ErrCorrupt and the underlying cause.
func (e *FormatError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrCorrupt, e.Err}
	}
	return []error{ErrCorrupt}
}

// LimitError is returned when a count or length read from input exceeds
// the limit docs/kvpack.md sets for it, before anything is allocated. It
// wraps ErrCorrupt.
type LimitError struct {
	Object string // "manifest", "export file", ...
	Field  string // "token count", "chunk size", ...
	Got    uint64
	Max    uint64
}

// Error names the field, its value and its limit.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %s %d exceeds the limit %d", e.Object, e.Field, e.Got, e.Max)
}

// Unwrap returns ErrCorrupt.
func (e *LimitError) Unwrap() error { return ErrCorrupt }

// DigestKind says which digest of the format a DigestError is about.
type DigestKind int

// The digests a DigestError can be about.
const (
	// DigestChunk is a chunk ID: BLAKE3 of the chunk's bytes.
	DigestChunk DigestKind = iota + 1
	// DigestMerkleRoot is a manifest's Merkle root over its chunk IDs.
	DigestMerkleRoot
	// DigestManifest is a pack ID: the digest of the manifest's bytes.
	DigestManifest
	// DigestFile is an export file's trailer digest.
	DigestFile
)

// String names the digest kind, as receipts and messages print it.
func (k DigestKind) String() string {
	switch k {
	case DigestChunk:
		return "chunk digest"
	case DigestMerkleRoot:
		return "merkle root"
	case DigestManifest:
		return "manifest digest"
	case DigestFile:
		return "file digest"
	}
	return fmt.Sprintf("digest kind %d", int(k))
}

// DigestError is returned when bytes do not hash to the digest that names
// or seals them. It carries both digests and wraps ErrCorrupt.
type DigestError struct {
	Kind     DigestKind
	Object   string // what was hashed, e.g. "chunk 7" or "manifest"; may be empty
	Expected Digest // the digest the format promised
	Actual   Digest // the digest of the bytes found
}

// Error names what was hashed and both digests.
func (e *DigestError) Error() string {
	msg := fmt.Sprintf("%s mismatch: expected %s, actual %s", e.Kind, e.Expected, e.Actual)
	if e.Object == "" {
		return msg
	}
	return e.Object + ": " + msg
}

// Unwrap returns ErrCorrupt.
func (e *DigestError) Unwrap() error { return ErrCorrupt }

// IdentityError is returned when a pack's identity differs from the one
// its user expects. Diffs names every differing field with both values. It
// wraps ErrRefused: a pack is usable only when all eight fields are equal.
type IdentityError struct {
	Diffs []FieldDiff
}

// Error lists every differing field with both values.
func (e *IdentityError) Error() string {
	parts := make([]string, len(e.Diffs))
	for i, d := range e.Diffs {
		parts[i] = d.String()
	}
	return "identity mismatch: " + strings.Join(parts, "; ")
}

// Unwrap returns ErrRefused.
func (e *IdentityError) Unwrap() error { return ErrRefused }

// SealError is returned when a manifest's seal does not verify: the MAC is
// wrong, or no key is known for its producer. It wraps ErrRefused.
type SealError struct {
	Producer string
	Problem  string
}

// Error names the producer and the problem.
func (e *SealError) Error() string {
	return fmt.Sprintf("seal of producer %q: %s", e.Producer, e.Problem)
}

// Unwrap returns ErrRefused.
func (e *SealError) Unwrap() error { return ErrRefused }

// truncated reports whether err says the input ended early.
func truncated(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }
