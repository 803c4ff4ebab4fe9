package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kvcache"
	"github.com/muserhq/muser/infer/tokenizer"
	"github.com/muserhq/muser/pack"
)

// NumericsVersion is the version of muser's exact numerics, the N of the
// identity's engine field "muser-cpu/N". It must be bumped whenever a
// change to the forward pass or to the kernels (kernels.NumericsVersion,
// whose value a test pins) can change a single bit of K, V or logits, in
// every backend that computes these numerics at once, so packs computed by
// an older build are refused instead of mixed with new ones.
const NumericsVersion = 2

// EngineName names muser's exact numerics: the identity's engine field of
// every backend that computes them bit for bit (the CPU engine, which
// defines them, and the CUDA backend's exact mode). It names the
// arithmetic, not the device, so KV made on either is one cache.
var EngineName = fmt.Sprintf("muser-cpu/%d", NumericsVersion)

// ErrSkipped is the cause an IdentityError gives for the model field when
// IdentityOptions.SkipWeights asked not to compute it.
var ErrSkipped = errors.New("skipped")

// KVString returns the identity's kv field for caches of element type kv
// in blocks of blockTokens tokens: "f16;block=64;layout=lkv1".
func KVString(kv kvcache.DType, blockTokens int) string {
	return fmt.Sprintf("%s;block=%d;layout=lkv1", kv, blockTokens)
}

// KVString returns the identity's kv field for this model's KV dtype and a
// store of blockTokens-token blocks.
func (m *Model) KVString(blockTokens int) string { return KVString(m.kv, blockTokens) }

// WeightsDigest returns gguf.WeightsDigest of the model's file, computed on
// first use (it reads every byte of the weights) and remembered.
func (m *Model) WeightsDigest() [32]byte {
	m.digestOnce.Do(func() { m.digest = gguf.WeightsDigest(m.file) })
	return m.digest
}

// IdentityOptions are the inputs of a pack identity beyond the model file.
type IdentityOptions struct {
	// KV is the element type of the caches.
	KV kvcache.DType
	// BlockTokens is the store's block size.
	BlockTokens int
	// Numerics is the backend's numerics name; "" means EngineName.
	Numerics string
	// SkipWeights leaves the model field zero (the weights digest reads
	// every byte of the file); the IdentityError then lists it, with
	// cause ErrSkipped.
	SkipWeights bool

	// weights, when set, is the weights digest already computed.
	weights *[32]byte
	// cfg, when set, is the model's bound configuration.
	cfg *Config
}

// FieldError says why one identity field could not be computed.
type FieldError struct {
	// Field is the field's name as pack inspect spells it ("tokenizer").
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *FieldError) Unwrap() error { return e.Err }

// IdentityError lists the identity fields of a file that could not be
// computed, in field order; the identity returned beside it holds the
// others.
type IdentityError struct {
	// Path is the model file.
	Path   string
	Fields []FieldError
}

func (e *IdentityError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: identity incomplete:", e.Path)
	for i, f := range e.Fields {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " the %s field cannot be computed: %v", f.Field, f.Err)
	}
	return b.String()
}

// Unwrap returns the causes.
func (e *IdentityError) Unwrap() []error {
	errs := make([]error, len(e.Fields))
	for i := range e.Fields {
		errs[i] = &e.Fields[i]
	}
	return errs
}

// Identity is the one constructor of the pack identity: the eight fields
// under which KV computed from the model in f, with KV type o.KV, in
// o.BlockTokens-token blocks, by a backend of numerics o.Numerics, is
// published and restored. serve, run, model inspect and pack import all
// compute it here, so two hosts share KV exactly when every field is
// equal:
//
//   - format: pack.FormatVersion;
//   - model: gguf.WeightsDigest of f;
//   - arch: Config.ArchString of the bound model (everything that shapes K
//     and V);
//   - tokenizer: the digest of the tokenizer f's vocabulary loads;
//   - template: gguf.ChatTemplateDigest of f;
//   - quant: gguf.QuantName of f;
//   - kv: KVString(o.KV, o.BlockTokens);
//   - engine: the numerics name.
//
// A field that cannot be computed (a vocabulary the tokenizer does not
// load, an architecture the engine does not run: then kv and engine too,
// as no KV is ever computed for it) is left zero and listed in an
// *IdentityError; the other fields are returned filled. A chat template
// that is not a string is an error of its own.
func Identity(f *gguf.File, o IdentityOptions) (pack.Identity, error) {
	id := pack.Identity{Format: pack.FormatVersion, Quant: gguf.QuantName(f)}
	td, err := gguf.ChatTemplateDigest(f)
	if err != nil {
		return id, fmt.Errorf("%s: %s: %w", f.Path(), gguf.KeyChatTemplate, err)
	}
	id.Template = td
	ie := &IdentityError{Path: f.Path()}
	missing := func(field string, err error) { ie.Fields = append(ie.Fields, FieldError{Field: field, Err: err}) }
	switch {
	case o.weights != nil:
		id.Model = *o.weights
	case o.SkipWeights:
		missing("model", ErrSkipped)
	default:
		id.Model = gguf.WeightsDigest(f)
	}
	if tok, err := tokenizer.FromGGUF(f.Meta); err != nil {
		missing("tokenizer", fmt.Errorf("the tokenizer cannot load this vocabulary: %w", err))
	} else {
		id.Tokenizer = tok.Digest()
	}
	cfg := o.cfg
	if cfg == nil {
		cfg, err = boundConfig(f)
	}
	if err != nil {
		err = fmt.Errorf("the engine cannot load this model: %w", err)
		missing("arch", err)
		missing("kv", err)
		missing("engine", err)
	} else {
		id.Arch = cfg.ArchString()
		id.KV = KVString(o.KV, o.BlockTokens)
		id.Engine = o.Numerics
		if id.Engine == "" {
			id.Engine = EngineName
		}
	}
	if len(ie.Fields) > 0 {
		return id, ie
	}
	return id, nil
}

// boundConfig reads f's architecture and binds its tensors (checking every
// shape) to complete its configuration, without a backend.
func boundConfig(f *gguf.File) (*Config, error) {
	a, cfg, err := readArch(f)
	if err != nil {
		return nil, err
	}
	if _, err := bindWeights(f, a, cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Identity returns the pack identity of KV this model computes, in a store
// of blockTokens-token blocks: Identity of its file with its KV type and
// its backend's numerics (the weights digest is computed once per Model).
func (m *Model) Identity(blockTokens int) (pack.Identity, error) {
	d := m.WeightsDigest()
	cfg := m.w.Config
	return Identity(m.file, IdentityOptions{KV: m.kv, BlockTokens: blockTokens, Numerics: m.be.Numerics(), weights: &d, cfg: &cfg})
}
