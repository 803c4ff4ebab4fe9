package tokenizer

import (
	"fmt"

	"github.com/muserhq/muser/infer/gguf"
)

// GGUF metadata keys the tokenizer reads.
const (
	KeyModel          = "tokenizer.ggml.model"
	KeyPre            = "tokenizer.ggml.pre"
	KeyTokens         = "tokenizer.ggml.tokens"
	KeyScores         = "tokenizer.ggml.scores"
	KeyTokenType      = "tokenizer.ggml.token_type"
	KeyMerges         = "tokenizer.ggml.merges"
	KeyAddBOS         = "tokenizer.ggml.add_bos_token"
	KeyAddEOS         = "tokenizer.ggml.add_eos_token"
	KeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix"
	KeyName           = "general.name"
	KeyArchitecture   = "general.architecture"
)

// deprecatedFIM are older keys for three fill-in-the-middle roles;
// llama.cpp reads them after the current keys, so they win.
var deprecatedFIM = []struct {
	key  string
	role Special
}{
	{"tokenizer.ggml.prefix_token_id", SpecialFIMPre},
	{"tokenizer.ggml.suffix_token_id", SpecialFIMSuf},
	{"tokenizer.ggml.middle_token_id", SpecialFIMMid},
}

// FromGGUF builds the tokenizer a GGUF file's metadata describes. It needs
// only the tokenizer.* and general.* keys, so vocab-only files work.
func FromGGUF(meta gguf.Metadata) (*Tokenizer, error) {
	v, err := VocabFromGGUF(meta)
	if err != nil {
		return nil, err
	}
	return New(v)
}

// VocabFromGGUF reads the tokenizer keys of GGUF metadata into a Vocab.
// Types are checked as strictly as llama.cpp checks them: a key holding a
// value of another type is an error wrapping gguf.ErrWrongType, even where
// a conversion would be lossless.
func VocabFromGGUF(meta gguf.Metadata) (*Vocab, error) {
	m := &meta
	v := &Vocab{}
	var err error
	if v.Model, err = str(m, KeyModel, true); err != nil {
		return nil, err
	}
	if v.Pre, err = str(m, KeyPre, false); err != nil {
		return nil, err
	}
	if v.Name, err = str(m, KeyName, false); err != nil {
		return nil, err
	}
	if v.Architecture, err = str(m, KeyArchitecture, false); err != nil {
		return nil, err
	}
	if err := arrayOf(m, KeyTokens, true, gguf.TypeString); err != nil {
		return nil, err
	}
	if v.Tokens, err = m.Strings(KeyTokens); err != nil {
		return nil, err
	}
	if val, ok := m.Get(KeyScores); ok {
		switch {
		case val.IsArray() && val.ElemType() == gguf.TypeFloat32:
			if v.Scores, err = m.Float32s(KeyScores); err != nil {
				return nil, err
			}
		case val.IsArray() && val.ElemType() == gguf.TypeInt32:
			ints, err := m.Int32s(KeyScores)
			if err != nil {
				return nil, err
			}
			v.Scores = make([]float32, len(ints))
			for i, x := range ints {
				v.Scores[i] = float32(x)
			}
		default:
			return nil, wrongType(KeyScores, "array of float32 or int32", val)
		}
	}
	if err := arrayOf(m, KeyTokenType, false, gguf.TypeInt32); err != nil {
		return nil, err
	}
	if m.Has(KeyTokenType) {
		ints, err := m.Int32s(KeyTokenType)
		if err != nil {
			return nil, err
		}
		v.Types = make([]TokenType, len(ints))
		for i, x := range ints {
			v.Types[i] = TokenType(x)
		}
	}
	if err := arrayOf(m, KeyMerges, false, gguf.TypeString); err != nil {
		return nil, err
	}
	if m.Has(KeyMerges) {
		if v.Merges, err = m.Strings(KeyMerges); err != nil {
			return nil, err
		}
	}

	v.SpecialIDs = map[Special]uint32{}
	n := uint32(len(v.Tokens))
	for s := Special(0); s < numSpecial; s++ {
		id, ok, err := u32(m, s.Key())
		if err != nil {
			return nil, err
		}
		if ok {
			v.SpecialIDs[s] = id
		}
	}
	for _, d := range deprecatedFIM {
		id, ok, err := u32(m, d.key)
		if err != nil {
			return nil, err
		}
		// As in llama.cpp, an out-of-range id leaves the role as it was.
		if ok && id < n {
			v.SpecialIDs[d.role] = id
		}
	}
	for _, f := range []struct {
		key string
		dst **bool
	}{{KeyAddBOS, &v.AddBOS}, {KeyAddEOS, &v.AddEOS}, {KeyAddSpacePrefix, &v.AddSpacePrefix}} {
		val, ok := m.Get(f.key)
		if !ok {
			continue
		}
		if val.IsArray() || val.Type() != gguf.TypeBool {
			return nil, wrongType(f.key, "bool", val)
		}
		b, _ := val.AsBool()
		*f.dst = &b
	}
	return v, nil
}

func wrongType(key, want string, v gguf.Value) error {
	return &gguf.KeyError{Key: key, Want: want, Have: v.TypeName(), Err: gguf.ErrWrongType}
}

// str reads a string key; an absent optional key reads as "".
func str(m *gguf.Metadata, key string, required bool) (string, error) {
	val, ok := m.Get(key)
	if !ok {
		if required {
			_, err := m.String(key)
			return "", err
		}
		return "", nil
	}
	if val.IsArray() || val.Type() != gguf.TypeString {
		return "", wrongType(key, "string", val)
	}
	s, _ := val.AsString()
	return s, nil
}

// u32 reads an optional key that llama.cpp requires to be a uint32.
func u32(m *gguf.Metadata, key string) (uint32, bool, error) {
	val, ok := m.Get(key)
	if !ok {
		return 0, false, nil
	}
	if val.IsArray() || val.Type() != gguf.TypeUint32 {
		return 0, false, wrongType(key, "uint32", val)
	}
	x, _ := val.AsUint64()
	return uint32(x), true, nil
}

// arrayOf checks that key, if present, is an array of elem; a required key
// must be present.
func arrayOf(m *gguf.Metadata, key string, required bool, elem gguf.ValueType) error {
	val, ok := m.Get(key)
	if !ok {
		if required {
			_, err := m.Strings(key)
			if err == nil {
				err = fmt.Errorf("%s: missing", key)
			}
			return err
		}
		return nil
	}
	if !val.IsArray() || val.ElemType() != elem {
		return wrongType(key, "array of "+elem.String(), val)
	}
	return nil
}
