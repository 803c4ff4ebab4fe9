package template

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer follows Jinja2's (jinja2/lexer.py) with the settings
// transformers uses: delimiters {{ }}, {% %}, {# #}; trim_blocks and
// lstrip_blocks on; keep_trailing_newline off; newlines normalised to "\n".

type tokKind uint8

const (
	tData       tokKind = iota // template text outside tags
	tVarBegin                  // {{
	tVarEnd                    // }}
	tBlockBegin                // {%
	tBlockEnd                  // %}
	tName                      // identifier or keyword
	tString                    // string literal (val holds the decoded text)
	tInt                       // integer literal
	tFloat                     // float literal
	tOp                        // operator or punctuation (val holds it)
	tEOF
)

type token struct {
	kind tokKind
	val  string
	i    int64
	f    float64
	pos  int // byte offset in the normalised source
}

// describe names a token the way syntax errors quote it.
func (t token) describe() string {
	switch t.kind {
	case tData:
		return "template data"
	case tVarBegin:
		return "begin of print statement '{{'"
	case tVarEnd:
		return "end of print statement '}}'"
	case tBlockBegin:
		return "begin of statement block '{%'"
	case tBlockEnd:
		return "end of statement block '%}'"
	case tName:
		return fmt.Sprintf("'%s'", t.val)
	case tString:
		return "string literal"
	case tInt, tFloat:
		return "number"
	case tOp:
		return fmt.Sprintf("'%s'", t.val)
	}
	return "end of template"
}

// source is a normalised template text with a line table for positions.
type source struct {
	text  string
	lines []int // byte offset of the start of each line
}

func newSource(raw string) *source {
	// Normalise \r\n, \r and \n to \n, then drop one trailing newline
	// (keep_trailing_newline=False).
	s := raw
	if strings.IndexByte(s, '\r') >= 0 {
		s = strings.ReplaceAll(s, "\r\n", "\n")
		s = strings.ReplaceAll(s, "\r", "\n")
	}
	s = strings.TrimSuffix(s, "\n")
	src := &source{text: s, lines: []int{0}}
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			src.lines = append(src.lines, i+1)
		}
	}
	return src
}

// pos converts a byte offset to a 1-based line and column (in code points).
func (s *source) pos(off int) Pos {
	if off > len(s.text) {
		off = len(s.text)
	}
	lo, hi := 0, len(s.lines)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if s.lines[mid] <= off {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return Pos{Line: lo + 1, Col: utf8.RuneCountInString(s.text[s.lines[lo]:off]) + 1}
}

// pyIsSpace is str.isspace for one code point (also what Python's \s
// matches in a str pattern).
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f
}

// skipSpace returns the offset of the first non-space at or after i.
func skipSpace(s string, i int) int {
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !pyIsSpace(r) {
			break
		}
		i += size
	}
	return i
}

type lexer struct {
	src  *source
	toks []token
	// lineStarting is Jinja2's line_starting: the previous match ended
	// with a newline (or nothing has been matched yet).
	lineStarting bool
}

func (l *lexer) errf(off int, format string, a ...any) error {
	return &Error{Kind: ErrSyntax, Pos: l.src.pos(off), Msg: fmt.Sprintf(format, a...)}
}

// lex splits src into tokens.
func lex(src *source) ([]token, error) {
	l := &lexer{src: src, lineStarting: true}
	if err := l.run(); err != nil {
		return nil, err
	}
	l.toks = append(l.toks, token{kind: tEOF, pos: len(src.text)})
	return l.toks, nil
}

// findOpen returns the offset of the first "{{", "{%" or "{#" at or after
// i, or -1.
func findOpen(s string, i int) int {
	for {
		j := strings.IndexByte(s[i:], '{')
		if j < 0 || i+j+1 >= len(s) {
			return -1
		}
		i += j
		switch s[i+1] {
		case '{', '%', '#':
			return i
		}
		i++
	}
}

// stripBefore applies whitespace control to the text before a tag: "-"
// strips all trailing whitespace; otherwise, for block and comment tags,
// lstrip_blocks removes spaces and tabs between the last newline (or the
// start of a line) and the tag.
func (l *lexer) stripBefore(text string, sign byte, isVar bool) string {
	if sign == '-' {
		return strings.TrimRightFunc(text, pyIsSpace)
	}
	if sign == '+' || isVar {
		return text
	}
	lpos := strings.LastIndexByte(text, '\n') + 1
	if lpos > 0 || l.lineStarting {
		rest := text[lpos:]
		if rest != "" && strings.TrimLeftFunc(rest, pyIsSpace) == "" {
			return text[:lpos]
		}
	}
	return text
}

func (l *lexer) emit(kind tokKind, val string, pos int) {
	l.toks = append(l.toks, token{kind: kind, val: val, pos: pos})
}

func (l *lexer) run() error {
	s := l.src.text
	pos := 0
	for pos < len(s) {
		open := findOpen(s, pos)
		if open < 0 {
			l.emit(tData, s[pos:], pos)
			return nil
		}
		text := s[pos:open]
		kind := s[open+1]
		after := open + 2
		var sign byte
		if after < len(s) && (s[after] == '-' || s[after] == '+') {
			sign = s[after]
			after++
		}
		if kind == '%' {
			if end, ok := matchRawBegin(s, after); ok {
				if t := l.stripBefore(text, sign, false); t != "" {
					l.emit(tData, t, pos)
				}
				l.lineStarting = s[end-1] == '\n'
				next, err := l.raw(end, open)
				if err != nil {
					return err
				}
				pos = next
				continue
			}
		}
		if t := l.stripBefore(text, sign, kind == '{'); t != "" {
			l.emit(tData, t, pos)
		}
		l.lineStarting = false
		var err error
		switch kind {
		case '#':
			pos, err = l.comment(after, open)
		case '%':
			l.emit(tBlockBegin, "", open)
			pos, err = l.tag(after, false)
		default:
			l.emit(tVarBegin, "", open)
			pos, err = l.tag(after, true)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// matchRawBegin matches `\s*raw\s*(-%}\s*|%})` at i (after "{%" and its
// sign) and returns the offset after it.
func matchRawBegin(s string, i int) (int, bool) {
	i = skipSpace(s, i)
	if !strings.HasPrefix(s[i:], "raw") {
		return 0, false
	}
	i = skipSpace(s, i+3)
	switch {
	case strings.HasPrefix(s[i:], "-%}"):
		return skipSpace(s, i+3), true
	case strings.HasPrefix(s[i:], "%}"):
		return i + 2, true
	}
	return 0, false
}

// raw emits the text of a {% raw %} block up to its {% endraw %}.
func (l *lexer) raw(i, open int) (int, error) {
	s := l.src.text
	for j := i; ; {
		k := strings.Index(s[j:], "{%")
		if k < 0 {
			return 0, l.errf(open, "missing end of raw directive")
		}
		k += j
		p := k + 2
		var sign byte
		if p < len(s) && (s[p] == '-' || s[p] == '+') {
			sign = s[p]
			p++
		}
		p = skipSpace(s, p)
		if strings.HasPrefix(s[p:], "endraw") {
			q := skipSpace(s, p+6)
			end := -1
			switch {
			case strings.HasPrefix(s[q:], "+%}"):
				end = q + 3
			case strings.HasPrefix(s[q:], "-%}"):
				end = skipSpace(s, q+3)
			case strings.HasPrefix(s[q:], "%}"):
				end = q + 2
				if end < len(s) && s[end] == '\n' {
					end++
				}
			}
			if end >= 0 {
				if t := l.stripBefore(s[i:k], sign, false); t != "" {
					l.emit(tData, t, i)
				}
				l.lineStarting = s[end-1] == '\n'
				return end, nil
			}
		}
		j = k + 2
	}
}

// comment skips a comment whose body starts at i.
func (l *lexer) comment(i, open int) (int, error) {
	s := l.src.text
	for j := i; j < len(s); j++ {
		switch {
		case strings.HasPrefix(s[j:], "+#}"):
			l.lineStarting = false
			return j + 3, nil
		case strings.HasPrefix(s[j:], "-#}"):
			end := skipSpace(s, j+3)
			l.lineStarting = s[end-1] == '\n'
			return end, nil
		case strings.HasPrefix(s[j:], "#}"):
			end := j + 2
			if end < len(s) && s[end] == '\n' {
				end++
			}
			l.lineStarting = s[end-1] == '\n'
			return end, nil
		}
	}
	return 0, l.errf(open, "missing end of comment tag")
}

var closers = map[string]string{"(": ")", "[": "]", "{": "}"}

// tag lexes the inside of a {{ }} (isVar) or {% %} tag from i to its end
// delimiter, inclusive.
func (l *lexer) tag(i int, isVar bool) (int, error) {
	s := l.src.text
	var balance []string
	for {
		if i >= len(s) {
			if isVar {
				return 0, l.errf(i, "unexpected end of template, expected end of print statement '}}'")
			}
			return 0, l.errf(i, "unexpected end of template, expected end of statement block '%%}'")
		}
		if len(balance) == 0 {
			rest := s[i:]
			if isVar {
				if strings.HasPrefix(rest, "-}}") {
					l.emit(tVarEnd, "", i)
					end := skipSpace(s, i+3)
					l.lineStarting = s[end-1] == '\n'
					return end, nil
				}
				if strings.HasPrefix(rest, "}}") {
					l.emit(tVarEnd, "", i)
					l.lineStarting = false
					return i + 2, nil
				}
			} else {
				if strings.HasPrefix(rest, "+%}") {
					l.emit(tBlockEnd, "", i)
					l.lineStarting = false
					return i + 3, nil
				}
				if strings.HasPrefix(rest, "-%}") {
					l.emit(tBlockEnd, "", i)
					end := skipSpace(s, i+3)
					l.lineStarting = s[end-1] == '\n'
					return end, nil
				}
				if strings.HasPrefix(rest, "%}") {
					l.emit(tBlockEnd, "", i)
					end := i + 2
					if end < len(s) && s[end] == '\n' {
						end++
					}
					l.lineStarting = s[end-1] == '\n'
					return end, nil
				}
			}
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if pyIsSpace(r) {
			i = skipSpace(s, i)
			continue
		}
		if n, tok, ok, err := l.number(i); err != nil {
			return 0, err
		} else if ok {
			l.toks = append(l.toks, tok)
			i = n
			continue
		}
		if r == '_' || unicode.IsLetter(r) {
			j := i + size
			for j < len(s) {
				r2, sz := utf8.DecodeRuneInString(s[j:])
				if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) && !unicode.In(r2, unicode.Mn, unicode.Mc, unicode.Pc) {
					break
				}
				j += sz
			}
			l.emit(tName, s[i:j], i)
			i = j
			continue
		}
		if r == '\'' || r == '"' {
			j, val, err := l.str(i)
			if err != nil {
				return 0, err
			}
			l.emit(tString, val, i)
			i = j
			continue
		}
		op := ""
		for _, cand := range []string{"//", "**", "==", "!=", ">=", "<="} {
			if strings.HasPrefix(s[i:], cand) {
				op = cand
				break
			}
		}
		if op == "" && strings.ContainsRune("+-/*%~[](){}><=.:|,;", r) {
			op = string(r)
		}
		if op == "" {
			return 0, l.errf(i, "unexpected char %q", r)
		}
		switch op {
		case "(", "[", "{":
			balance = append(balance, closers[op])
		case ")", "]", "}":
			if len(balance) == 0 {
				return 0, l.errf(i, "unexpected '%s'", op)
			}
			want := balance[len(balance)-1]
			if want != op {
				return 0, l.errf(i, "unexpected '%s', expected '%s'", op, want)
			}
			balance = balance[:len(balance)-1]
		}
		l.emit(tOp, op, i)
		i += len(op)
	}
}

// digitsUnderscore matches (\d+_)*\d+ at i and returns the end, or i.
func digitsUnderscore(s string, i int, isDigit func(byte) bool) int {
	j := i
	for {
		k := j
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if k == j {
			return j
		}
		j = k
		if j+1 < len(s) && s[j] == '_' && isDigit(s[j+1]) {
			j++
			continue
		}
		return j
	}
}

func isDec(c byte) bool { return c >= '0' && c <= '9' }

// number lexes a float or integer literal at i, Jinja2's float rule first.
func (l *lexer) number(i int) (int, token, bool, error) {
	s := l.src.text
	if !isDec(s[i]) {
		return 0, token{}, false, nil
	}
	// Float: (?<!\.)(\d+_)*\d+((\.(\d+_)*\d+)?e[+\-]?(\d+_)*\d+|\.(\d+_)*\d+)
	if i == 0 || s[i-1] != '.' {
		j := digitsUnderscore(s, i, isDec)
		k := j
		frac := false
		if k+1 < len(s) && s[k] == '.' && isDec(s[k+1]) {
			k = digitsUnderscore(s, k+1, isDec)
			frac = true
		}
		exp := false
		if k < len(s) && (s[k] == 'e' || s[k] == 'E') {
			m := k + 1
			if m < len(s) && (s[m] == '+' || s[m] == '-') {
				m++
			}
			if m < len(s) && isDec(s[m]) {
				k = digitsUnderscore(s, m, isDec)
				exp = true
			}
		}
		if frac || exp {
			text := strings.ReplaceAll(s[i:k], "_", "")
			f, err := strconv.ParseFloat(text, 64)
			if err != nil && !math.IsInf(f, 0) {
				return 0, token{}, false, l.errf(i, "invalid float literal %q", s[i:k])
			}
			return k, token{kind: tFloat, f: f, pos: i}, true, nil
		}
	}
	// Integer: 0b.., 0o.., 0x.., [1-9](_?\d)*, 0(_?0)*
	base := 10
	j := i
	if s[i] == '0' && i+1 < len(s) {
		switch s[i+1] {
		case 'b', 'B':
			base = 2
		case 'o', 'O':
			base = 8
		case 'x', 'X':
			base = 16
		}
	}
	if base != 10 {
		isD := func(c byte) bool {
			switch base {
			case 2:
				return c == '0' || c == '1'
			case 8:
				return c >= '0' && c <= '7'
			}
			return isDec(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
		}
		k := i + 2
		for {
			m := k
			if m < len(s) && s[m] == '_' {
				m++
			}
			if m < len(s) && isD(s[m]) {
				k = m + 1
				continue
			}
			break
		}
		if k == i+2 {
			base = 10 // just "0", followed by a name
		} else {
			j = k
		}
	}
	if base == 10 {
		if s[i] == '0' {
			j = i + 1
			for {
				m := j
				if m < len(s) && s[m] == '_' {
					m++
				}
				if m < len(s) && s[m] == '0' {
					j = m + 1
					continue
				}
				break
			}
		} else {
			j = digitsUnderscore(s, i, isDec)
		}
	}
	text := strings.ReplaceAll(s[i:j], "_", "")
	if base != 10 {
		text = text[2:]
	}
	v, err := strconv.ParseInt(text, base, 64)
	if err != nil {
		return 0, token{}, false, &Error{Kind: ErrUnsupported, Pos: l.src.pos(i), Construct: "integer literal",
			Msg: fmt.Sprintf("integer literal %s does not fit in 64 bits", s[i:j])}
	}
	return j, token{kind: tInt, i: v, pos: i}, true, nil
}

// str lexes a quoted string at i and decodes it as Jinja2 does: the body
// is encoded to ASCII with backslashreplace and decoded with Python's
// unicode-escape codec.
func (l *lexer) str(i int) (int, string, error) {
	s := l.src.text
	q := s[i]
	j := i + 1
	for j < len(s) && s[j] != q {
		if s[j] == '\\' {
			j++
		}
		j++
	}
	if j >= len(s) {
		return 0, "", l.errf(i, "unterminated string literal")
	}
	val, err := unicodeEscape(s[i+1 : j])
	if e, ok := err.(*Error); ok {
		e.Pos = l.src.pos(i)
		return 0, "", e
	}
	if err != nil {
		return 0, "", l.errf(i, "string literal: %v", err)
	}
	return j + 1, val, nil
}

// unicodeEscape decodes body.encode("ascii", "backslashreplace") with
// Python's unicode-escape codec.
func unicodeEscape(body string) (string, error) {
	if strings.IndexByte(body, '\\') < 0 {
		return body, nil
	}
	// Encode: non-ASCII code points become \xhh, \uhhhh or \Uhhhhhhhh.
	var enc strings.Builder
	for _, r := range body {
		switch {
		case r < utf8.RuneSelf:
			enc.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&enc, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&enc, `\u%04x`, r)
		default:
			fmt.Fprintf(&enc, `\U%08x`, r)
		}
	}
	e := enc.String()
	var out strings.Builder
	hex := func(k, n int) (rune, error) {
		if k+n > len(e) {
			return 0, fmt.Errorf("truncated escape at position %d", k-2)
		}
		v, err := strconv.ParseUint(e[k:k+n], 16, 32)
		if err != nil {
			return 0, fmt.Errorf("truncated escape at position %d", k-2)
		}
		return rune(v), nil
	}
	writeCP := func(r rune) {
		if r > unicode.MaxRune || r >= 0xd800 && r <= 0xdfff {
			r = utf8.RuneError // a lone surrogate has no UTF-8 form
		}
		out.WriteRune(r)
	}
	for k := 0; k < len(e); {
		c := e[k]
		if c != '\\' {
			out.WriteByte(c)
			k++
			continue
		}
		if k+1 >= len(e) {
			return "", fmt.Errorf("\\ at end of string")
		}
		c = e[k+1]
		k += 2
		switch c {
		case '\n':
		case '\\', '\'', '"':
			out.WriteByte(c)
		case 'a':
			out.WriteByte(7)
		case 'b':
			out.WriteByte(8)
		case 'f':
			out.WriteByte(12)
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'v':
			out.WriteByte(11)
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			r, err := hex(k, n)
			if err != nil {
				return "", err
			}
			if r > unicode.MaxRune {
				return "", fmt.Errorf("illegal Unicode character in \\U escape")
			}
			writeCP(r)
			k += n
		case 'N':
			return "", &Error{Kind: ErrUnsupported, Construct: `\N{...} escape`, Msg: `named Unicode escapes (\N{...}) are not supported`}
		default:
			if c >= '0' && c <= '7' {
				v := rune(c - '0')
				for n := 0; n < 2 && k < len(e) && e[k] >= '0' && e[k] <= '7'; n++ {
					v = v*8 + rune(e[k]-'0')
					k++
				}
				writeCP(v)
				continue
			}
			// Unknown escapes stay as written.
			out.WriteByte('\\')
			out.WriteByte(c)
		}
	}
	return out.String(), nil
}
