package template

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// CPython's str.upper, lower, title, capitalize and swapcase use the full
// case mappings of Unicode: the one-to-one mappings of UnicodeData.txt
// (Go's unicode.ToUpper, ToLower, ToTitle), the unconditional
// one-to-many mappings of SpecialCasing.txt ("ß".upper() is "SS",
// "ﬁ".upper() is "FI", "İ".lower() is "i̇"), and the one conditional
// mapping that is not language-specific, Final_Sigma: a capital sigma at
// the end of a word lowers to "ς".

// upperFull and titleFull are the one-to-many mappings of
// SpecialCasing.txt; lowerFull is its only lower-case one.
var lowerFull = map[rune]string{0x0130: "i\u0307"}

var upperFull = map[rune]string{
	0x00DF: "\u0053\u0053", 0x0149: "\u02BC\u004E", 0x01F0: "\u004A\u030C",
	0x0390: "\u0399\u0308\u0301", 0x03B0: "\u03A5\u0308\u0301", 0x0587: "\u0535\u0552",
	0x1E96: "\u0048\u0331", 0x1E97: "\u0054\u0308", 0x1E98: "\u0057\u030A",
	0x1E99: "\u0059\u030A", 0x1E9A: "\u0041\u02BE", 0x1F50: "\u03A5\u0313",
	0x1F52: "\u03A5\u0313\u0300", 0x1F54: "\u03A5\u0313\u0301", 0x1F56: "\u03A5\u0313\u0342",
	0x1F80: "\u1F08\u0399", 0x1F81: "\u1F09\u0399", 0x1F82: "\u1F0A\u0399",
	0x1F83: "\u1F0B\u0399", 0x1F84: "\u1F0C\u0399", 0x1F85: "\u1F0D\u0399",
	0x1F86: "\u1F0E\u0399", 0x1F87: "\u1F0F\u0399", 0x1F88: "\u1F08\u0399",
	0x1F89: "\u1F09\u0399", 0x1F8A: "\u1F0A\u0399", 0x1F8B: "\u1F0B\u0399",
	0x1F8C: "\u1F0C\u0399", 0x1F8D: "\u1F0D\u0399", 0x1F8E: "\u1F0E\u0399",
	0x1F8F: "\u1F0F\u0399", 0x1F90: "\u1F28\u0399", 0x1F91: "\u1F29\u0399",
	0x1F92: "\u1F2A\u0399", 0x1F93: "\u1F2B\u0399", 0x1F94: "\u1F2C\u0399",
	0x1F95: "\u1F2D\u0399", 0x1F96: "\u1F2E\u0399", 0x1F97: "\u1F2F\u0399",
	0x1F98: "\u1F28\u0399", 0x1F99: "\u1F29\u0399", 0x1F9A: "\u1F2A\u0399",
	0x1F9B: "\u1F2B\u0399", 0x1F9C: "\u1F2C\u0399", 0x1F9D: "\u1F2D\u0399",
	0x1F9E: "\u1F2E\u0399", 0x1F9F: "\u1F2F\u0399", 0x1FA0: "\u1F68\u0399",
	0x1FA1: "\u1F69\u0399", 0x1FA2: "\u1F6A\u0399", 0x1FA3: "\u1F6B\u0399",
	0x1FA4: "\u1F6C\u0399", 0x1FA5: "\u1F6D\u0399", 0x1FA6: "\u1F6E\u0399",
	0x1FA7: "\u1F6F\u0399", 0x1FA8: "\u1F68\u0399", 0x1FA9: "\u1F69\u0399",
	0x1FAA: "\u1F6A\u0399", 0x1FAB: "\u1F6B\u0399", 0x1FAC: "\u1F6C\u0399",
	0x1FAD: "\u1F6D\u0399", 0x1FAE: "\u1F6E\u0399", 0x1FAF: "\u1F6F\u0399",
	0x1FB2: "\u1FBA\u0399", 0x1FB3: "\u0391\u0399", 0x1FB4: "\u0386\u0399",
	0x1FB6: "\u0391\u0342", 0x1FB7: "\u0391\u0342\u0399", 0x1FBC: "\u0391\u0399",
	0x1FC2: "\u1FCA\u0399", 0x1FC3: "\u0397\u0399", 0x1FC4: "\u0389\u0399",
	0x1FC6: "\u0397\u0342", 0x1FC7: "\u0397\u0342\u0399", 0x1FCC: "\u0397\u0399",
	0x1FD2: "\u0399\u0308\u0300", 0x1FD3: "\u0399\u0308\u0301", 0x1FD6: "\u0399\u0342",
	0x1FD7: "\u0399\u0308\u0342", 0x1FE2: "\u03A5\u0308\u0300", 0x1FE3: "\u03A5\u0308\u0301",
	0x1FE4: "\u03A1\u0313", 0x1FE6: "\u03A5\u0342", 0x1FE7: "\u03A5\u0308\u0342",
	0x1FF2: "\u1FFA\u0399", 0x1FF3: "\u03A9\u0399", 0x1FF4: "\u038F\u0399",
	0x1FF6: "\u03A9\u0342", 0x1FF7: "\u03A9\u0342\u0399", 0x1FFC: "\u03A9\u0399",
	0xFB00: "\u0046\u0046", 0xFB01: "\u0046\u0049", 0xFB02: "\u0046\u004C",
	0xFB03: "\u0046\u0046\u0049", 0xFB04: "\u0046\u0046\u004C", 0xFB05: "\u0053\u0054",
	0xFB06: "\u0053\u0054", 0xFB13: "\u0544\u0546", 0xFB14: "\u0544\u0535",
	0xFB15: "\u0544\u053B", 0xFB16: "\u054E\u0546", 0xFB17: "\u0544\u053D",
}

var titleFull = map[rune]string{
	0x00DF: "\u0053\u0073", 0x0149: "\u02BC\u004E", 0x01F0: "\u004A\u030C",
	0x0390: "\u0399\u0308\u0301", 0x03B0: "\u03A5\u0308\u0301", 0x0587: "\u0535\u0582",
	0x1E96: "\u0048\u0331", 0x1E97: "\u0054\u0308", 0x1E98: "\u0057\u030A",
	0x1E99: "\u0059\u030A", 0x1E9A: "\u0041\u02BE", 0x1F50: "\u03A5\u0313",
	0x1F52: "\u03A5\u0313\u0300", 0x1F54: "\u03A5\u0313\u0301", 0x1F56: "\u03A5\u0313\u0342",
	0x1FB2: "\u1FBA\u0345", 0x1FB4: "\u0386\u0345", 0x1FB6: "\u0391\u0342",
	0x1FB7: "\u0391\u0342\u0345", 0x1FC2: "\u1FCA\u0345", 0x1FC4: "\u0389\u0345",
	0x1FC6: "\u0397\u0342", 0x1FC7: "\u0397\u0342\u0345", 0x1FD2: "\u0399\u0308\u0300",
	0x1FD3: "\u0399\u0308\u0301", 0x1FD6: "\u0399\u0342", 0x1FD7: "\u0399\u0308\u0342",
	0x1FE2: "\u03A5\u0308\u0300", 0x1FE3: "\u03A5\u0308\u0301", 0x1FE4: "\u03A1\u0313",
	0x1FE6: "\u03A5\u0342", 0x1FE7: "\u03A5\u0308\u0342", 0x1FF2: "\u1FFA\u0345",
	0x1FF4: "\u038F\u0345", 0x1FF6: "\u03A9\u0342", 0x1FF7: "\u03A9\u0342\u0345",
	0xFB00: "\u0046\u0066", 0xFB01: "\u0046\u0069", 0xFB02: "\u0046\u006C",
	0xFB03: "\u0046\u0066\u0069", 0xFB04: "\u0046\u0066\u006C", 0xFB05: "\u0053\u0074",
	0xFB06: "\u0053\u0074", 0xFB13: "\u0544\u0576", 0xFB14: "\u0544\u0565",
	0xFB15: "\u0544\u056B", 0xFB16: "\u054E\u0576", 0xFB17: "\u0544\u056D",
}

// pyUpper is str.upper().
func pyUpper(s string) string {
	var b strings.Builder
	for _, c := range s {
		writeUpper(&b, c)
	}
	return b.String()
}

// pyLower is str.lower().
func pyLower(s string) string {
	var b strings.Builder
	for i, c := range s {
		writeLower(&b, s, i, c)
	}
	return b.String()
}

func writeUpper(b *strings.Builder, c rune) {
	if m, ok := upperFull[c]; ok {
		b.WriteString(m)
		return
	}
	b.WriteRune(unicode.ToUpper(c))
}

func writeTitle(b *strings.Builder, c rune) {
	if m, ok := titleFull[c]; ok {
		b.WriteString(m)
		return
	}
	b.WriteRune(unicode.ToTitle(c))
}

// writeLower writes the lower case of c, which is at byte i of s: the
// context decides the case of a capital sigma.
func writeLower(b *strings.Builder, s string, i int, c rune) {
	if c == 'Σ' {
		if finalSigma(s, i) {
			b.WriteRune('ς')
		} else {
			b.WriteRune('σ')
		}
		return
	}
	if m, ok := lowerFull[c]; ok {
		b.WriteString(m)
		return
	}
	b.WriteRune(unicode.ToLower(c))
}

// finalSigma reports whether the capital sigma at byte i of s is in
// Unicode's Final_Sigma context: a cased letter before it and none after
// it, looking past case-ignorable characters on both sides.
func finalSigma(s string, i int) bool {
	before := strings.TrimRightFunc(s[:i], isCaseIgnorable)
	c, _ := utf8.DecodeLastRuneInString(before)
	if before == "" || !isCased(c) {
		return false
	}
	after := strings.TrimLeftFunc(s[i+len("Σ"):], isCaseIgnorable)
	c, _ = utf8.DecodeRuneInString(after)
	return after == "" || !isCased(c)
}

// isUpperProp and isLowerProp are Unicode's Uppercase and Lowercase
// properties, which CPython's isupper, islower and swapcase use.
func isUpperProp(c rune) bool { return unicode.IsUpper(c) || unicode.Is(unicode.Other_Uppercase, c) }

func isLowerProp(c rune) bool { return unicode.IsLower(c) || unicode.Is(unicode.Other_Lowercase, c) }

// isCased is Unicode's Cased property.
func isCased(c rune) bool { return isUpperProp(c) || isLowerProp(c) || unicode.IsTitle(c) }

// isCaseIgnorable is Unicode's Case_Ignorable property: marks, format
// characters, modifier letters and symbols, and the characters whose
// Word_Break property is MidLetter, MidNumLet or Single_Quote.
func isCaseIgnorable(c rune) bool {
	switch c {
	case '\'', '.', ':', 0x00B7, 0x0387, 0x055F, 0x05F4, 0x2018, 0x2019, 0x2024, 0x2027,
		0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A:
		return true
	}
	return unicode.In(c, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}
