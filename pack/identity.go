package pack

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"
)

// FormatVersion is the version of the pack format this build reads and
// writes: the value of Identity.Format, of the manifest's version field and
// of the export file's version field (docs/kvpack.md, "Versioning").
const FormatVersion uint32 = 1

// Limits on an identity (docs/kvpack.md, "Limits").
const (
	// MaxIdentityString is the longest Arch, Quant, KV or Engine, in bytes.
	MaxIdentityString = 1024
	// MaxIdentityBytes is the longest canonical identity encoding.
	MaxIdentityBytes = 4 + 32 + 4 + MaxIdentityString + 32 + 32 + 3*(4+MaxIdentityString)
)

// Identity says which engine state a pack's KV bytes belong to. A pack is
// usable only by an engine whose identity equals it in all eight fields;
// docs/kvpack.md gives the canonical encoding and the identity key.
type Identity struct {
	// Format is the pack format version (FormatVersion for packs this
	// build writes).
	Format uint32
	// Model is the digest of the weights: every tensor's name, type, shape
	// and data, not the file name.
	Model Digest
	// Arch is a canonical, human-readable description of everything that
	// shapes K and V: architecture, layers, heads, KV heads, head dim, RoPE
	// type/base/scaling, norm epsilon (for example
	// "llama;layers=5;heads=8;kv_heads=4;head_dim=8;rope=normal;rope_base=10000;eps=1e-05").
	Arch string
	// Tokenizer is the digest of the vocabulary, scores or merges, token
	// types, special ids, BOS/EOS behaviour and pre-tokenizer.
	Tokenizer Digest
	// Template is the digest of the chat template text.
	Template Digest
	// Quant names the weight quantization the KV was computed with
	// (for example "Q8_0", or "mixed:<digest>" when tensors differ).
	Quant string
	// KV names the KV dtype, block size and byte layout (for example
	// "f16;block=64;layout=lkv1").
	KV string
	// Engine names the engine and its numerics version, bumped whenever a
	// kernel change can change a result (for example "muser-cpu/1").
	Engine string
}

// IdentityFields lists the eight field names in canonical order, as
// FieldDiff.Field and receipts spell them.
var IdentityFields = [8]string{"format", "model", "arch", "tokenizer", "template", "quant", "kv", "engine"}

// FieldDiff is one identity field that differs between what a user of a
// pack expects (Want) and what the pack has (Got). Values are printed as
// decimal (format), 64 hex digits (digests) or Go-quoted strings.
type FieldDiff struct {
	Field string `json:"field"`
	Want  string `json:"want"`
	Got   string `json:"got"`
}

// String prints the difference as "field: want X, got Y".
func (d FieldDiff) String() string {
	return fmt.Sprintf("%s: want %s, got %s", d.Field, d.Want, d.Got)
}

// values returns the eight fields printed as FieldDiff prints them.
func (id Identity) values() [8]string {
	return [8]string{
		strconv.FormatUint(uint64(id.Format), 10),
		id.Model.String(),
		strconv.Quote(id.Arch),
		id.Tokenizer.String(),
		id.Template.String(),
		strconv.Quote(id.Quant),
		strconv.Quote(id.KV),
		strconv.Quote(id.Engine),
	}
}

// Diff compares the identity got (a pack's) against id (the one expected)
// and returns one FieldDiff per differing field, in canonical order. It
// returns nil when the identities are equal.
func (id Identity) Diff(got Identity) []FieldDiff {
	if id == got {
		return nil
	}
	want, have := id.values(), got.values()
	var out []FieldDiff
	for i := range want {
		if want[i] != have[i] {
			out = append(out, FieldDiff{Field: IdentityFields[i], Want: want[i], Got: have[i]})
		}
	}
	return out
}

// Check returns an *IdentityError naming every field in which got differs
// from id, or nil when they are equal.
func (id Identity) Check(got Identity) error {
	if d := id.Diff(got); d != nil {
		return &IdentityError{Diffs: d}
	}
	return nil
}

// Validate checks the rules docs/kvpack.md sets for an identity: Format is
// not zero, no digest is all zeros, and Arch, Quant, KV and Engine are
// non-empty, at most MaxIdentityString bytes of UTF-8 without control
// characters. Errors wrap ErrInvalid and name the field.
func (id Identity) Validate() error {
	if id.Format == 0 {
		return fmt.Errorf("%w: identity field format is 0", ErrInvalid)
	}
	for i, d := range []*Digest{&id.Model, &id.Tokenizer, &id.Template} {
		if d.IsZero() {
			return fmt.Errorf("%w: identity field %s is the zero digest", ErrInvalid, [...]string{"model", "tokenizer", "template"}[i])
		}
	}
	for i, s := range []string{id.Arch, id.Quant, id.KV, id.Engine} {
		if err := checkText(s, MaxIdentityString); err != nil {
			return fmt.Errorf("%w: identity field %s: %s", ErrInvalid, [...]string{"arch", "quant", "kv", "engine"}[i], err)
		}
	}
	return nil
}

// checkText returns a description of what is wrong with s as a short text
// field, or nil.
func checkText(s string, max int) error {
	switch {
	case s == "":
		return fmt.Errorf("is empty")
	case len(s) > max:
		return fmt.Errorf("is %d bytes, limit %d", len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("is not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("contains control character %U", r)
		}
	}
	return nil
}

// AppendBinary appends the canonical encoding of id to b (docs/kvpack.md,
// "Identity encoding"): format (u32), model (32 bytes), arch (u32 length +
// bytes), tokenizer, template (32 bytes each), quant, kv, engine (u32
// length + bytes each), integers little-endian. It fails if id does not
// Validate.
func (id Identity) AppendBinary(b []byte) ([]byte, error) {
	if err := id.Validate(); err != nil {
		return b, err
	}
	return id.appendRaw(b), nil
}

// MarshalBinary returns the canonical encoding of id.
func (id Identity) MarshalBinary() ([]byte, error) { return id.AppendBinary(nil) }

func (id Identity) appendRaw(b []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, id.Format)
	b = append(b, id.Model[:]...)
	b = appendString32(b, id.Arch)
	b = append(b, id.Tokenizer[:]...)
	b = append(b, id.Template[:]...)
	b = appendString32(b, id.Quant)
	b = appendString32(b, id.KV)
	b = appendString32(b, id.Engine)
	return b
}

func appendString32(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// Key returns the identity key: the derive-key BLAKE3 of the canonical
// encoding. It is defined for every identity, valid or not, so that a
// lookup with a bad identity misses rather than fails.
func (id Identity) Key() Digest {
	var buf [256]byte
	return sum(hIdentity, id.appendRaw(buf[:0]))
}

// String returns a one-line summary: the short identity key and the engine.
func (id Identity) String() string {
	return fmt.Sprintf("%s(%s)", id.Key().Short(), id.Engine)
}

// DecodeIdentity decodes a canonical identity encoding. It rejects
// trailing bytes, lengths over the limits, and identities that do not
// Validate; errors wrap ErrCorrupt.
func DecodeIdentity(b []byte) (Identity, error) {
	d := decoder{obj: "identity", b: b}
	id := d.identity()
	d.end()
	if d.err != nil {
		return Identity{}, d.err
	}
	return id, nil
}
