package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// DecodeOptions are llama_detokenize's two flags.
type DecodeOptions struct {
	// RenderSpecial renders control and unknown tokens as their text
	// (llama.cpp's unparse_special); otherwise they render as nothing.
	// User-defined tokens always render as their text.
	RenderSpecial bool
	// RemoveSpecial drops a leading BOS and a trailing EOS where the
	// vocabulary adds them (llama.cpp's remove_special).
	RemoveSpecial bool
}

// Decode turns ids back into text as llama.cpp's llama_detokenize(ids,
// remove_special=false, unparse_special=false) does: control tokens render
// as nothing, SentencePiece's leading space is removed from the first
// token, byte tokens become their byte, and BPE vocabularies that ask for
// it get llama.cpp's clean-up of spaces before punctuation. The result is
// bytes: a sequence that ends inside a multi-byte character, or that holds
// byte tokens spelling invalid UTF-8, decodes to invalid UTF-8, as in
// llama.cpp. Use a StreamDecoder for text that must always be valid.
func (t *Tokenizer) Decode(ids []int32) (string, error) {
	return t.DecodeWith(ids, DecodeOptions{})
}

// DecodeWith is Decode with llama_detokenize's flags.
func (t *Tokenizer) DecodeWith(ids []int32, opt DecodeOptions) (string, error) {
	removeSpace := t.addSpacePrefix
	if opt.RemoveSpecial && t.addBOS && len(ids) > 0 && ids[0] == t.special[SpecialBOS] {
		removeSpace = false
		ids = ids[1:]
	}
	if opt.RemoveSpecial && t.addEOS && len(ids) > 0 && ids[len(ids)-1] == t.special[SpecialEOS] {
		ids = ids[:len(ids)-1]
	}
	b := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		start := len(b)
		var err error
		b, err = t.appendPiece(b, id, opt.RenderSpecial)
		if err != nil {
			return "", err
		}
		if removeSpace && len(b) > start && b[start] == ' ' {
			b = append(b[:start], b[start+1:]...)
		}
		removeSpace = false
	}
	if t.cleanSpaces {
		b = cleanSpaces(b)
	}
	return string(b), nil
}

// Piece returns the text of one token as llama.cpp's
// llama_token_to_piece(id, lstrip=0, special) renders it.
func (t *Tokenizer) Piece(id int32, special bool) (string, error) {
	b, err := t.appendPiece(nil, id, special)
	return string(b), err
}

// appendPiece appends the rendering of token id.
func (t *Tokenizer) appendPiece(b []byte, id int32, special bool) ([]byte, error) {
	if id < 0 || int(id) >= len(t.tokens) {
		return b, &TokenError{ID: id, Err: fmt.Errorf("%w: vocabulary has %d tokens", ErrTokenRange, len(t.tokens))}
	}
	if !special && t.attrs[id]&(AttrUnknown|AttrControl) != 0 {
		return b, nil
	}
	start := uint32(0)
	if id > 0 {
		start = t.pieceEnd[id-1]
	}
	return append(b, t.pieceText[start:t.pieceEnd[id]]...), nil
}

// appendUnescaped appends text with every U+2581 (SentencePiece's
// space) turned back into a space.
func appendUnescaped(b []byte, text string) []byte {
	for {
		i := strings.Index(text, "\u2581")
		if i < 0 {
			return append(b, text...)
		}
		b = append(append(b, text[:i]...), ' ')
		text = text[i+len("\u2581"):]
	}
}

// appendByteLevel appends the bytes a byte-level BPE token's text spells,
// as llama.cpp's llama_decode_text does: each code point of the GPT-2
// byte mapping becomes its byte; any other code point c becomes
// "[UNK_BYTE_0x<hex of c's UTF-8>" followed by the whole token text and
// "]".
func appendByteLevel(b []byte, text string) []byte {
	for i := 0; i < len(text); {
		c, n := decodeRune(text, i)
		i += n
		if c < rune(len(byteOfRune)) && byteOfRune[c] >= 0 {
			b = append(b, byte(byteOfRune[c]))
			continue
		}
		b = append(b, "[UNK_BYTE_0x"...)
		enc, _ := appendRune(nil, c)
		for _, x := range enc {
			b = fmt.Appendf(b, "%02x", x)
		}
		b = append(b, text...)
		b = append(b, ']')
	}
	return b
}

// byteOfRune inverts the GPT-2 byte mapping: byteOfRune[c] is the byte
// code point c stands for, or -1.
var byteOfRune = func() [0x144]int16 {
	var t [0x144]int16
	for i := range t {
		t[i] = -1
	}
	for b := 0; b < 256; b++ {
		t[byteToRune[b]] = int16(b)
	}
	return t
}()

// byteOfToken returns the byte a byte token stands for: llama.cpp parses
// the two characters after "<0x" with strtol(..., 16). New has checked
// that the text is at least three bytes long.
func byteOfToken(text string) byte {
	s := text[3:min(5, len(text))]
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if i+2 < len(s) && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') && hexVal(s[i+2]) >= 0 {
		i += 2
	}
	v := 0
	for ; i < len(s) && hexVal(s[i]) >= 0; i++ {
		v = v*16 + hexVal(s[i])
	}
	if neg {
		v = -v
	}
	return byte(v)
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// cleanSpaces is llama.cpp's clean_up_tokenization_spaces, three passes
// over the bytes, kept exactly as llama.cpp writes them (in place, the
// second pass blanking the space it skips): drop a space before ? ! . ,;
// turn " ' " into "'"; drop the space before 's 'm 're 've.
func cleanSpaces(text []byte) []byte {
	total := len(text)
	if total == 0 {
		return text
	}
	// First pass: " ?", " !", " .", " ,".
	n := total
	total = 1
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		text[total] = x
		total++
	}
	// Second pass: " ' ".
	n = total
	total = 1
	for i := 1; i < n; i++ {
		x := text[i]
		if x == '\'' && i+1 < n && text[i-1] == ' ' && text[i+1] == ' ' {
			total--
			i++
			text[i] = 0
		}
		text[total] = x
		total++
	}
	// Third pass: " 's", " 'm", " 're", " 've".
	n = total
	total = 1
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < n {
			x1 := text[i+1]
			switch {
			case x1 == 't' || x1 == 'd':
			case x1 == 's' || x1 == 'm':
				total--
			case i+2 < n:
				x2 := text[i+2]
				if x1 == 'r' && x2 == 'e' || x1 == 'v' && x2 == 'e' {
					total--
				}
			}
		}
		text[total] = x
		total++
	}
	return text[:total]
}

// StreamDecoder turns tokens into text one at a time, as a server streams
// generated text: each token renders as llama.cpp's token_to_piece (no
// leading-space removal, no clean-up), and Write returns only whole UTF-8
// characters, keeping an unfinished one until the tokens that complete it
// arrive. Bytes that can never be valid UTF-8 become U+FFFD, one for each
// maximal ill-formed subsequence, so the concatenated output is always
// valid UTF-8. A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t       *Tokenizer
	special bool
	pending []byte
	err     error
}

// NewStreamDecoder returns a stream decoder that renders control tokens
// as nothing.
func (t *Tokenizer) NewStreamDecoder() *StreamDecoder {
	return t.NewStreamDecoderWith(DecodeOptions{})
}

// NewStreamDecoderWith returns a stream decoder; opt.RenderSpecial renders
// control tokens as their text. RemoveSpecial does not apply to streams.
func (t *Tokenizer) NewStreamDecoderWith(opt DecodeOptions) *StreamDecoder {
	return &StreamDecoder{t: t, special: opt.RenderSpecial}
}

// Write adds one token and returns the text that is now complete. An id
// outside the vocabulary adds nothing and is reported by Err.
func (d *StreamDecoder) Write(id int32) string {
	p, err := d.t.appendPiece(d.pending, id, d.special)
	if err != nil {
		if d.err == nil {
			d.err = err
		}
		return ""
	}
	d.pending = p
	keep := incompleteTail(d.pending)
	out := string(appendValidUTF8(nil, d.pending[:len(d.pending)-keep]))
	d.pending = append(d.pending[:0], d.pending[len(d.pending)-keep:]...)
	return out
}

// Flush returns what Write has held back, an unfinished character, as
// U+FFFD, and resets the decoder for a new stream (Err is kept).
func (d *StreamDecoder) Flush() string {
	out := string(appendValidUTF8(nil, d.pending))
	d.pending = d.pending[:0]
	return out
}

// Err returns the first bad token id Write was given, as a *TokenError.
func (d *StreamDecoder) Err() error { return d.err }

// seqPrefix returns how many bytes at the start of b form a valid prefix
// of one UTF-8 sequence (Unicode table 3-7), and the full length that
// sequence needs; 0, 1 for a byte that starts no valid sequence.
func seqPrefix(b []byte) (valid, need int) {
	c := b[0]
	var lo, hi byte = 0x80, 0xBF
	switch {
	case c < 0x80:
		return 1, 1
	case c >= 0xC2 && c <= 0xDF:
		need = 2
	case c >= 0xE0 && c <= 0xEF:
		need = 3
		if c == 0xE0 {
			lo = 0xA0
		} else if c == 0xED {
			hi = 0x9F
		}
	case c >= 0xF0 && c <= 0xF4:
		need = 4
		if c == 0xF0 {
			lo = 0x90
		} else if c == 0xF4 {
			hi = 0x8F
		}
	default:
		return 0, 1
	}
	valid = 1
	for valid < need && valid < len(b) {
		x := b[valid]
		if valid == 1 && (x < lo || x > hi) || valid > 1 && (x < 0x80 || x > 0xBF) {
			break
		}
		valid++
	}
	return valid, need
}

// incompleteTail returns the length of the unfinished UTF-8 sequence at
// the end of b (one that more bytes could still complete), or 0.
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		i := len(b) - k
		if b[i] < 0x80 {
			return 0
		}
		if utf8.RuneStart(b[i]) {
			valid, need := seqPrefix(b[i:])
			if valid == k && need > k {
				return k
			}
			return 0
		}
	}
	return 0
}

// appendValidUTF8 appends b with every maximal ill-formed subsequence
// replaced by U+FFFD (the WHATWG and V8 practice).
func appendValidUTF8(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		valid, need := seqPrefix(b[i:])
		if valid == need {
			dst = append(dst, b[i:i+valid]...)
			i += valid
			continue
		}
		dst = append(dst, "\uFFFD"...)
		i += max(valid, 1)
	}
	return dst
}
