package tokenizer

// TokenType is a token's type as a GGUF file stores it in
// tokenizer.ggml.token_type (llama.cpp's llama_token_type).
type TokenType int32

// Token types.
const (
	TypeUndefined   TokenType = 0
	TypeNormal      TokenType = 1
	TypeUnknown     TokenType = 2
	TypeControl     TokenType = 3
	TypeUserDefined TokenType = 4
	TypeUnused      TokenType = 5
	TypeByte        TokenType = 6
)

// TokenAttr is the set of attributes the tokenizer acts on for a token,
// llama.cpp's llama_token_attr: derived from the token type, then adjusted
// by llama.cpp's rules (end-of-generation texts become control tokens,
// Phi-3 special tokens strip the space after them, ...). The bit values
// are llama.cpp's.
type TokenAttr uint32

// Token attributes.
const (
	AttrUndefined   TokenAttr = 0
	AttrUnknown     TokenAttr = 1 << 0
	AttrUnused      TokenAttr = 1 << 1
	AttrNormal      TokenAttr = 1 << 2
	AttrControl     TokenAttr = 1 << 3
	AttrUserDefined TokenAttr = 1 << 4
	AttrByte        TokenAttr = 1 << 5
	AttrNormalized  TokenAttr = 1 << 6
	AttrLStrip      TokenAttr = 1 << 7
	AttrRStrip      TokenAttr = 1 << 8
	AttrSingleWord  TokenAttr = 1 << 9
)

// attrOfType maps a token type to its initial attributes.
func attrOfType(t TokenType) TokenAttr {
	switch t {
	case TypeUnknown:
		return AttrUnknown
	case TypeUnused:
		return AttrUnused
	case TypeNormal:
		return AttrNormal
	case TypeControl:
		return AttrControl
	case TypeUserDefined:
		return AttrUserDefined
	case TypeByte:
		return AttrByte
	}
	return AttrUndefined
}

// Special names a special-token role. Each has a GGUF key,
// tokenizer.ggml.<Key()>.
type Special int

// Special-token roles, in the order llama.cpp reads their keys.
const (
	SpecialBOS Special = iota
	SpecialEOS
	SpecialEOT
	SpecialEOM
	SpecialUNK
	SpecialSEP
	SpecialPAD
	SpecialMASK
	SpecialFIMPre
	SpecialFIMSuf
	SpecialFIMMid
	SpecialFIMPad
	SpecialFIMRep
	SpecialFIMSep
	numSpecial
)

var specialKeys = [numSpecial]string{
	"bos_token_id", "eos_token_id", "eot_token_id", "eom_token_id",
	"unknown_token_id", "seperator_token_id", "padding_token_id", "mask_token_id",
	"fim_pre_token_id", "fim_suf_token_id", "fim_mid_token_id",
	"fim_pad_token_id", "fim_rep_token_id", "fim_sep_token_id",
}

// Key returns the GGUF metadata key of the role, for example
// "tokenizer.ggml.bos_token_id" (the separator key keeps llama.cpp's
// spelling, "seperator").
func (s Special) Key() string {
	if s < 0 || s >= numSpecial {
		return ""
	}
	return "tokenizer.ggml." + specialKeys[s]
}

// Vocab is a tokenizer as a GGUF file describes it, before llama.cpp's
// defaults and rules are applied. FromGGUF fills one from metadata; tests
// and tools may build one by hand. New validates it and never changes it.
type Vocab struct {
	// Model is tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2"
	// (byte-level BPE). "gemma4" is BPE with SentencePiece-style spaces.
	Model string
	// Pre is tokenizer.ggml.pre, the BPE pre-tokenizer; empty when the key
	// is absent. SentencePiece vocabularies ignore it.
	Pre string
	// Tokens is tokenizer.ggml.tokens: the text of every token, by id.
	Tokens []string
	// Scores is tokenizer.ggml.scores; nil means every score is 0.
	Scores []float32
	// Types is tokenizer.ggml.token_type; nil means every token is normal.
	Types []TokenType
	// Merges is tokenizer.ggml.merges, in rank order ("a b" merges a and
	// b). BPE requires it (it may be empty); SentencePiece ignores it.
	Merges []string
	// SpecialIDs holds the special-token ids the metadata gives. A role
	// that is absent, or whose id is not below len(Tokens), keeps
	// llama.cpp's default for the model.
	SpecialIDs map[Special]uint32
	// AddBOS, AddEOS and AddSpacePrefix are tokenizer.ggml.add_bos_token,
	// add_eos_token and add_space_prefix; nil means absent, and the
	// model's default applies.
	AddBOS, AddEOS, AddSpacePrefix *bool
	// Name is general.name and Architecture is general.architecture.
	// llama.cpp changes some tokens' attributes by them (Phi-3's special
	// tokens strip the white space that follows them).
	Name, Architecture string
}
