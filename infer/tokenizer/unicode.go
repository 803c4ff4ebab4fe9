package tokenizer

import (
	"sync"
	"unicode"
)

// Code point classes, as llama.cpp's tokenizer sees them. llama.cpp gives
// every code point exactly one general-category class (derived from
// UnicodeData.txt of Unicode 15.1) plus a separate White_Space bit. The
// pre-tokenizers in this package test these bits, never Go's unicode
// predicates directly, so that every scanner agrees with llama.cpp on
// every code point.
const (
	cUndefined uint8 = 1 << iota // Cn: unassigned, or beyond U+10FFFF
	cNumber                      // \p{N}: Nd, Nl, No
	cLetter                      // \p{L}: Lu, Ll, Lt, Lm, Lo
	cSeparator                   // \p{Z}: Zs, Zl, Zp
	cMark                        // \p{M}: Mn, Mc, Me
	cPunct                       // \p{P}: Pc, Pd, Ps, Pe, Pi, Pf, Po
	cSymbol                      // \p{S}: Sm, Sc, Sk, So
	cControl                     // \p{C} but Cn: Cc, Cf, Co, Cs
)

// maxCodepoint is one past the largest code point with a category.
const maxCodepoint = 0x110000

var (
	classOnce  sync.Once
	classTable []uint8 // class of every code point below maxCodepoint
)

// unicode15_1 lists the code points that Unicode 15.1 assigned and Go's
// unicode tables (Unicode 15.0.0) still leave unassigned: llama.cpp's
// tables are generated from Unicode 15.1, so these must be classed as it
// classes them. TestUnicodeVersion fails when Go's tables move on, so this
// overlay is revisited then.
var unicode15_1 = []struct {
	lo, hi rune
	class  uint8
}{
	{0x2FFC, 0x2FFF, cSymbol},   // ideographic description characters
	{0x31EF, 0x31EF, cSymbol},   // CJK stroke HXG
	{0x2EBF0, 0x2EE5D, cLetter}, // CJK Unified Ideographs Extension I
}

// buildClasses fills classTable from Go's category tables.
func buildClasses() {
	t := make([]uint8, maxCodepoint)
	for i := range t {
		t[i] = cUndefined
	}
	groups := []struct {
		class uint8
		cats  []string
	}{
		{cLetter, []string{"Lu", "Ll", "Lt", "Lm", "Lo"}},
		{cMark, []string{"Mn", "Mc", "Me"}},
		{cNumber, []string{"Nd", "Nl", "No"}},
		{cPunct, []string{"Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"}},
		{cSymbol, []string{"Sm", "Sc", "Sk", "So"}},
		{cSeparator, []string{"Zs", "Zl", "Zp"}},
		{cControl, []string{"Cc", "Cf", "Co", "Cs"}},
	}
	for _, g := range groups {
		for _, name := range g.cats {
			rt := unicode.Categories[name]
			for _, r := range rt.R16 {
				for c := uint32(r.Lo); c <= uint32(r.Hi); c += uint32(r.Stride) {
					t[c] = g.class
				}
			}
			for _, r := range rt.R32 {
				for c := r.Lo; c <= r.Hi; c += r.Stride {
					t[c] = g.class
				}
			}
		}
	}
	for _, o := range unicode15_1 {
		for c := o.lo; c <= o.hi; c++ {
			t[c] = o.class
		}
	}
	classTable = t
}

// classOf returns the category class of code point c.
func classOf(c rune) uint8 {
	if c < 0x80 {
		return asciiClass[c]
	}
	if c >= maxCodepoint {
		return cUndefined
	}
	classOnce.Do(buildClasses)
	return classTable[c]
}

// asciiClass is classTable's first 128 entries, kept apart so that the
// common case needs no table build.
var asciiClass = func() [128]uint8 {
	var t [128]uint8
	for c := range t {
		r := rune(c)
		switch {
		case r < 0x20 || r == 0x7f:
			t[c] = cControl
		case r == ' ':
			t[c] = cSeparator
		case r >= '0' && r <= '9':
			t[c] = cNumber
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
			t[c] = cLetter
		case r == '$' || r == '+' || r == '<' || r == '=' || r == '>' || r == '^' || r == '`' || r == '|' || r == '~':
			t[c] = cSymbol
		default:
			t[c] = cPunct
		}
	}
	return t
}()

// isSpace reports whether c has Unicode's White_Space property, which is
// what both llama.cpp's hand-written splitters and its std::regex fallback
// (after it maps non-ASCII white space to U+000B) treat as \s.
func isSpace(c rune) bool {
	switch c {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x85, 0xA0, 0x1680,
		0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
		return true
	}
	return c >= 0x2000 && c <= 0x200A
}

func isLetter(c rune) bool { return classOf(c) == cLetter }
func isNumber(c rune) bool { return classOf(c) == cNumber }
func isPunct(c rune) bool  { return classOf(c) == cPunct }
func isSymbol(c rune) bool { return classOf(c) == cSymbol }
func isMark(c rune) bool   { return classOf(c) == cMark }

// decodeRune decodes one code point from s at i the way llama.cpp's
// unicode_cpt_from_utf8 does: it checks only that continuation bytes look
// like continuation bytes, so overlong forms, surrogates and values up to
// U+1FFFFF decode. A byte that starts no sequence, or a sequence cut short,
// gives U+FFFD and a size of 1.
func decodeRune(s string, i int) (rune, int) {
	b0 := s[i]
	switch {
	case b0 < 0x80:
		return rune(b0), 1
	case b0&0x40 == 0:
		return 0xFFFD, 1
	case b0&0x20 == 0:
		if i+1 >= len(s) || s[i+1]&0xC0 != 0x80 {
			return 0xFFFD, 1
		}
		return rune(b0&0x1F)<<6 | rune(s[i+1]&0x3F), 2
	case b0&0x10 == 0:
		if i+2 >= len(s) || s[i+1]&0xC0 != 0x80 || s[i+2]&0xC0 != 0x80 {
			return 0xFFFD, 1
		}
		return rune(b0&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
	case b0&0x08 == 0:
		if i+3 >= len(s) || s[i+1]&0xC0 != 0x80 || s[i+2]&0xC0 != 0x80 || s[i+3]&0xC0 != 0x80 {
			return 0xFFFD, 1
		}
		return rune(b0&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4
	}
	return 0xFFFD, 1
}

// appendRune appends the UTF-8 encoding of c the way llama.cpp's
// unicode_cpt_to_utf8 does: surrogates are encoded like any other value.
// It reports false for values above U+10FFFF, which llama.cpp refuses.
func appendRune(b []byte, c rune) ([]byte, bool) {
	switch {
	case c < 0:
		return b, false
	case c <= 0x7F:
		return append(b, byte(c)), true
	case c <= 0x7FF:
		return append(b, 0xC0|byte(c>>6), 0x80|byte(c)&0x3F), true
	case c <= 0xFFFF:
		return append(b, 0xE0|byte(c>>12), 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F), true
	case c <= 0x10FFFF:
		return append(b, 0xF0|byte(c>>18), 0x80|byte(c>>12)&0x3F, 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F), true
	}
	return b, false
}

// utf8Len is llama.cpp's unicode_len_utf8: the length of the sequence a
// byte would start, judged by its top four bits alone.
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// GPT-2's byte-level mapping: every byte becomes a printable code point, so
// that BPE merges work on text with no control characters or spaces. Bytes
// that are printable Latin-1 map to themselves; the others, in order, to
// U+0100 onwards.
var byteToRune = func() [256]rune {
	var t [256]rune
	n := rune(0)
	for b := 0; b < 256; b++ {
		if b >= 0x21 && b <= 0x7E || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			t[b] = rune(b)
		} else {
			t[b] = 256 + n
			n++
		}
	}
	return t
}()

// byteToText[b] is the UTF-8 text of byteToRune[b].
var byteToText = func() [256]string {
	var t [256]string
	for b, r := range byteToRune {
		t[b] = string(r)
	}
	return t
}()
