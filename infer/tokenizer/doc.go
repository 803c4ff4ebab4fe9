// Package tokenizer turns text into token ids and back exactly as
// llama.cpp does, for the vocabularies GGUF files carry: SentencePiece-style
// ("llama": Llama 2, Phi-3, Baichuan, TinyStories) and byte-level BPE
// ("gpt2": GPT-2, Llama 3, Qwen 2, DeepSeek, Falcon, StarCoder, MPT,
// GPT-NeoX, ...). Exactness is the point: a KV pack is keyed by token ids, so
// a tokenizer that differs from the engine that produced a pack on one id
// would miss the cache or, worse, restore the wrong prefix.
//
// # Building a tokenizer
//
// FromGGUF reads the tokenizer.* keys of a GGUF file's metadata (vocab-only
// files are enough) and builds a Tokenizer. VocabFromGGUF stops halfway and
// returns the Vocab, the metadata as given, which New validates and turns
// into a Tokenizer by applying llama.cpp's defaults and rules in the order
// llama_vocab::load applies them: default special ids and add-BOS/EOS per
// model type and pre-tokenizer, metadata overrides, empty tokens renamed
// "[EMPTY_<id>]", end-of-turn and fill-in-the-middle tokens recognised by
// their text and made control tokens, the end-of-generation set, and
// per-model attribute tweaks (Phi-3's special tokens swallow the white
// space after them). Duplicate tokens, short arrays, a BPE vocabulary
// without merges and the like are errors wrapping ErrInvalidVocab; a
// tokenizer model or pre-tokenizer this package does not implement is
// ErrUnsupportedModel or ErrUnsupportedPre.
//
// # Encoding
//
// Encode(text, EncodeOptions{AddSpecial, ParseSpecial}) is llama_tokenize:
//
//  1. The text is partitioned on special tokens, longest first. User-defined
//     tokens are always recognised; control and unknown tokens only with
//     ParseSpecial.
//  2. SentencePiece: each text fragment gets a leading space when it starts
//     the text or follows a special token (if add_space_prefix), spaces
//     become U+2581, the fragment is split into UTF-8 characters, adjacent
//     symbols are merged highest-scoring token first (a heap, ties to the
//     left), and symbols that are not tokens fall back to <0xXX> byte
//     tokens.
//  3. BPE: each fragment is decoded into code points the way llama.cpp
//     decodes them (lenient; an invalid byte becomes U+FFFD), cut into
//     words by the pre-tokenizer that tokenizer.ggml.pre names, each word is
//     byte-encoded GPT-2 style and its characters merged lowest merge rank
//     first (a heap, ties to the left), and whatever is not a token falls
//     back to single-byte tokens.
//  4. With AddSpecial, BOS and EOS are added as the vocabulary says.
//
// The pre-tokenizers are hand-written scanners, one per regex llama.cpp
// uses, over llama.cpp's own view of Unicode: its category of each code
// point (Unicode 15.1; see unicode.go), its White_Space set, and its
// rewriting of \p{..} classes for std::regex, which turns every non-ASCII
// code point into a placeholder for its category. split.go explains how
// the scanners reproduce std::regex's ECMAScript matching. Scanners rather
// than Go's regexp: regexp has no lookahead (\s+(?!\S), (?=\p{L})), and
// its \p classes follow Go's Unicode tables rather than llama.cpp's
// collapsed classes; a scanner states each rule once, exactly, and runs in
// one linear pass.
// PreTokenizers lists the supported names: 77 of the 87 llama.cpp knows;
// the other 10 (Kimi K2, AFMoE, Tiny Aya, SuperBPE, Chameleon, Youtu,
// EXAONE MoE, Granite embedding 97M, Cohere 2 MoE, whitespace) fail with
// ErrUnsupportedPre, as do the WPM, UGM, RWKV and PLaMo-2 tokenizer models
// with ErrUnsupportedModel.
//
// # Decoding
//
// Decode is llama_detokenize: control tokens render as nothing (as their
// text with DecodeOptions.RenderSpecial), SentencePiece's U+2581 becomes a
// space and the first token loses one leading space, byte tokens become
// their byte, byte-level BPE text is mapped back to bytes, and vocabularies
// that ask for it get llama.cpp's clean-up of spaces before punctuation.
// Piece renders one token (llama_token_to_piece). Decode returns bytes
// and may return invalid UTF-8 when the ids do; a StreamDecoder returns
// only complete, valid UTF-8, holding back a character until the token
// that completes it arrives.
//
// Round trip: Decode(Encode(s)) == s for every s the vocabulary can
// represent. For SentencePiece that is every string without U+2581 whose
// bytes all have a token or a byte-fallback token, bar one llama.cpp
// quirk: a byte that starts no valid UTF-8 sequence takes the bytes its
// top bits announce into its symbol, so a space among them stays escaped
// and comes back as U+2581. For byte-level BPE it is every valid UTF-8
// string, except where llama.cpp's clean-up of spaces before punctuation
// (" ." → ".") applies; invalid bytes come back as U+FFFD. Control tokens
// that Encode finds by merging ordinary text render as nothing unless
// RenderSpecial is set, and text right after a user-defined token gets
// SentencePiece's space prefix too.
//
// # Digest
//
// Digest is the tokenizer field of a pack identity: BLAKE3 over a
// canonical encoding of everything that decides the ids Encode produces and
// the text Decode renders. Integers are little-endian; str(s) is a u64 byte
// length followed by the bytes; flag is one byte, 0 or 1. In order:
//
//	str("muser/tokenizer/v1")
//	str(tokenizer.ggml.model)
//	str(pre-tokenizer name)    // "" for SentencePiece, which ignores it
//	flag(add BOS) flag(add EOS) flag(add space prefix)
//	flag(clean spaces) flag(escape spaces) flag(ignore merges)
//	u64(number of tokens)
//	per token: str(text) u32(score as float32 bits) u32(type) u32(attributes)
//	u64(14), then u32 of each special id (BOS, EOS, EOT, EOM, UNK, SEP, PAD,
//	  MASK, FIM prefix, suffix, middle, pad, repo, file separator;
//	  0xFFFFFFFF for none)
//	u64(number of end-of-generation ids), then u32 of each, increasing
//	u64(number of merges), then str of each, in rank order (BPE only; 0
//	  for SentencePiece)
//
// The values are those in effect after New applied llama.cpp's rules, so
// two files that differ only in metadata the tokenizer ignores digest
// alike, and any difference that could change a token id changes it.
//
// # Fidelity
//
// TestParity compares every vocabulary in ../shared/vocab, stories260K, and
// variants of them that select the other pre-tokenizers with llama.cpp's
// own output (scripts/parity). Where llama.cpp's result depends on the
// iteration order of a hash map or on an unstable sort, this package picks
// a documented order: the first text in its list when a vocabulary holds
// several candidates for end-of-turn or a fill-in-the-middle role, and id
// order among special tokens of equal length that overlap in a text.
package tokenizer
