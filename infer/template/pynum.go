package template

import (
	"errors"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unicode"
)

// The |int and |float filters call CPython's int(str, base) and
// float(str). These functions parse the same texts: surrounding white
// space, any Unicode decimal digit, underscores between digits, the 0x,
// 0o and 0b prefixes, and float's inf, infinity and nan in any case.

// pyNumberText does what CPython does to a str before it parses a number:
// it strips white space and replaces every Unicode decimal digit by its
// ASCII digit. Any other non-ASCII character becomes '?', which no number
// syntax accepts.
func pyNumberText(s string) string {
	s = strings.TrimFunc(s, pyIsSpace)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r < 0x80:
			b.WriteRune(r)
		case unicode.IsDigit(r):
			b.WriteByte(byte('0' + decimalValue(r)))
		default:
			b.WriteByte('?')
		}
	}
	return b.String()
}

// decimalValue returns the value of a Unicode decimal digit (category
// Nd). Every range of the Nd table is made of whole runs of ten digits,
// each starting at zero.
func decimalValue(r rune) int {
	for _, rg := range unicode.Nd.R16 {
		if lo, hi := rune(rg.Lo), rune(rg.Hi); r >= lo && r <= hi {
			return int(r-lo) % 10
		}
	}
	for _, rg := range unicode.Nd.R32 {
		if lo, hi := rune(rg.Lo), rune(rg.Hi); r >= lo && r <= hi {
			return int(r-lo) % 10
		}
	}
	return 0
}

// pyParseInt parses s as CPython's int(s, base) does. ok is false where
// CPython raises ValueError; big is true where the value is a valid
// integer beyond 64 bits.
func pyParseInt(s string, base int64) (v int64, ok, big bool) {
	if base != 0 && (base < 2 || base > 36) {
		return 0, false, false
	}
	s = pyNumberText(s)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	prefixed := false
	if len(s) >= 2 && s[0] == '0' {
		if p := prefixBase(s[1]); p != 0 && (base == 0 || base == p) {
			base, s, prefixed = p, s[2:], true
		}
	}
	if base == 0 {
		base = 10
		if strings.Trim(s, "0_") != "" && s != "" && s[0] == '0' {
			return 0, false, false // a leading zero: "010" is not an int literal
		}
	}
	if prefixed && s != "" && s[0] == '_' {
		s = s[1:]
	}
	digits, ok := withoutUnderscores(s)
	if !ok {
		return 0, false, false
	}
	var mag uint64
	for i := 0; i < len(digits); i++ {
		d := digitValue(digits[i])
		if d >= int(base) {
			return 0, false, false
		}
		hi, lo := bits.Mul64(mag, uint64(base))
		sum, carry := bits.Add64(lo, uint64(d), 0)
		if hi != 0 || carry != 0 {
			big = true
		}
		mag = sum
	}
	switch {
	case big || mag > 1<<63 || mag == 1<<63 && !neg:
		return 0, true, true
	case neg:
		return -int64(mag), true, false
	}
	return int64(mag), true, false
}

// prefixBase returns the base a 0x, 0o or 0b prefix names, or 0.
func prefixBase(c byte) int64 {
	switch c | 0x20 {
	case 'x':
		return 16
	case 'o':
		return 8
	case 'b':
		return 2
	}
	return 0
}

// digitValue returns the value of an ASCII digit or letter in bases up to
// 36, or 99 for any other byte.
func digitValue(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c|0x20 >= 'a' && c|0x20 <= 'z':
		return int(c|0x20-'a') + 10
	}
	return 99
}

// withoutUnderscores removes the underscores of a run of digits, which
// Python allows singly between two digits; ok is false for an empty run
// or a misplaced underscore.
func withoutUnderscores(s string) (string, bool) {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return "", false
	}
	return strings.ReplaceAll(s, "_", ""), true
}

// pyParseFloat parses s as CPython's float(s) does; ok is false where
// CPython raises ValueError. A value beyond the float range is ±inf, as in
// CPython.
func pyParseFloat(s string) (float64, bool) {
	s = pyNumberText(s)
	body := s
	if body != "" && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	switch strings.ToLower(body) {
	case "inf", "infinity":
		if s[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	case "nan":
		return math.NaN(), true
	}
	mant, exp, hasExp := strings.Cut(body, "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(body, "E")
	}
	whole, frac, hasDot := strings.Cut(mant, ".")
	var clean strings.Builder
	for i, part := range []string{whole, frac} {
		if part == "" {
			continue
		}
		d, ok := withoutUnderscores(part)
		if !ok || strings.Trim(d, "0123456789") != "" {
			return 0, false
		}
		if i == 1 {
			clean.WriteByte('.')
		}
		clean.WriteString(d)
	}
	if clean.Len() == 0 || hasDot && whole == "" && frac == "" {
		return 0, false
	}
	if hasExp {
		sign := ""
		if exp != "" && (exp[0] == '+' || exp[0] == '-') {
			sign, exp = exp[:1], exp[1:]
		}
		d, ok := withoutUnderscores(exp)
		if !ok || strings.Trim(d, "0123456789") != "" {
			return 0, false
		}
		clean.WriteString("e" + sign + d)
	}
	text := clean.String()
	if s[0] == '-' {
		text = "-" + text
	}
	f, err := strconv.ParseFloat(text, 64)
	// Out of range, ParseFloat returns ±Inf or zero, as CPython does.
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return f, true
}
