package tokenizer

import (
	"errors"
	"fmt"
)

var (
	// ErrUnknownModel is returned when tokenizer.ggml.model names a
	// tokenizer llama.cpp does not know either.
	ErrUnknownModel = errors.New("tokenizer: unknown tokenizer model")
	// ErrUnsupportedModel is returned when tokenizer.ggml.model names a
	// tokenizer llama.cpp knows but this package does not implement (WPM,
	// UGM, RWKV, PLaMo-2, ...), or a vocab-less model ("no_vocab").
	ErrUnsupportedModel = errors.New("tokenizer: unsupported tokenizer model")
	// ErrUnknownPre is returned when tokenizer.ggml.pre names a
	// pre-tokenizer llama.cpp does not know either.
	ErrUnknownPre = errors.New("tokenizer: unknown pre-tokenizer")
	// ErrUnsupportedPre is returned when tokenizer.ggml.pre names a
	// pre-tokenizer llama.cpp knows but this package does not implement.
	ErrUnsupportedPre = errors.New("tokenizer: unsupported pre-tokenizer")
	// ErrInvalidVocab is returned when a vocabulary is malformed: no
	// tokens, duplicate tokens, arrays shorter than the token list, a
	// missing merge list, a special token the rules require but the
	// vocabulary lacks. The wrapping *VocabError names the field.
	ErrInvalidVocab = errors.New("tokenizer: invalid vocabulary")
	// ErrTokenRange is returned when a token id is negative or not below
	// the vocabulary size. The wrapping *TokenError carries the id.
	ErrTokenRange = errors.New("tokenizer: token id out of range")
	// ErrNoByteToken is returned when SentencePiece byte fallback needs a
	// byte token (<0xXX>) the vocabulary does not have.
	ErrNoByteToken = errors.New("tokenizer: no byte-fallback token")
	// ErrNoSpecialToken is returned when encoding must add BOS or EOS and
	// the vocabulary has none.
	ErrNoSpecialToken = errors.New("tokenizer: special token not defined")
	// ErrInvalidText is returned when text cannot be encoded: it holds a
	// byte sequence that decodes to a value above U+10FFFF, which
	// llama.cpp's byte-level BPE refuses too, or one fragment of it is
	// over 1 GiB.
	ErrInvalidText = errors.New("tokenizer: text not encodable")
)

// VocabError reports what is wrong with one field of a vocabulary. Field
// is the GGUF key (or Vocab field) at fault; Index is the array index,
// or -1 when the error concerns the field as a whole.
type VocabError struct {
	Field string
	Index int
	Err   error
}

func (e *VocabError) Error() string {
	if e.Index >= 0 {
		return fmt.Sprintf("tokenizer: %s[%d]: %v", e.Field, e.Index, e.Err)
	}
	return fmt.Sprintf("tokenizer: %s: %v", e.Field, e.Err)
}

// Unwrap returns the underlying error.
func (e *VocabError) Unwrap() error { return e.Err }

// vocabErr returns a *VocabError whose Err wraps ErrInvalidVocab.
func vocabErr(field string, index int, format string, a ...any) error {
	return &VocabError{Field: field, Index: index, Err: fmt.Errorf("%w: "+format, append([]any{ErrInvalidVocab}, a...)...)}
}

// TokenError reports a token id that cannot be used.
type TokenError struct {
	ID  int32
	Err error
}

func (e *TokenError) Error() string {
	return fmt.Sprintf("tokenizer: token %d: %v", e.ID, e.Err)
}

// Unwrap returns the underlying error.
func (e *TokenError) Unwrap() error { return e.Err }
