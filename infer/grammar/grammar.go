package grammar

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits on what a grammar may expand to.
const (
	// MaxElements bounds a grammar's elements once repetitions are
	// expanded.
	MaxElements = 1 << 18
	// MaxRepeat bounds the m and n of a {m,n} repetition.
	MaxRepeat = 4096
)

type elemKind uint8

const (
	elChar  elemKind = iota // a code point in (or, negated, out of) ranges
	elRule                  // a reference to a rule
	elToken                 // one vocabulary token, by id or by text
)

// runeRange is an inclusive range of code points.
type runeRange struct{ lo, hi rune }

// elem is one element of a sequence.
type elem struct {
	kind   elemKind
	neg    bool        // elChar: the class is negated
	ranges []runeRange // elChar: sorted, merged
	rule   int         // elRule: index into Grammar.rules
	tokID  int32       // elToken: the id, or -1 when named by text
	tokTxt string      // elToken: the text, when named by text
}

// rule is a named list of alternatives, each a sequence of elements.
type rule struct {
	name string
	alts [][]elem
}

// Grammar is a parsed GBNF grammar: rules whose alternatives are
// sequences of character classes, references to rules and token
// references, with repetitions already rewritten into rules. Its root rule
// is "root". A Grammar is immutable and safe for concurrent use; Compile
// binds it to a vocabulary.
type Grammar struct {
	rules []rule
	root  int
	size  int // elements in all alternatives
}

// String renders g as GBNF that Parse accepts and that describes the same
// language (generated rules for repetitions appear as rules of their own).
func (g *Grammar) String() string {
	var b strings.Builder
	for _, r := range g.rules {
		b.WriteString(r.name)
		b.WriteString(" ::=")
		for i, alt := range r.alts {
			if i > 0 {
				b.WriteString(" |")
			}
			if len(alt) == 0 {
				b.WriteString(` ""`)
			}
			for _, e := range alt {
				b.WriteByte(' ')
				g.writeElem(&b, e)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (g *Grammar) writeElem(b *strings.Builder, e elem) {
	switch e.kind {
	case elRule:
		b.WriteString(g.rules[e.rule].name)
	case elToken:
		if e.tokID >= 0 {
			fmt.Fprintf(b, "<[%d]>", e.tokID)
		} else {
			b.WriteString("<" + strconv.Quote(e.tokTxt) + ">")
		}
	case elChar:
		if !e.neg && len(e.ranges) == 1 && e.ranges[0].lo == e.ranges[0].hi {
			b.WriteByte('"')
			writeRune(b, e.ranges[0].lo, '"')
			b.WriteByte('"')
			return
		}
		b.WriteByte('[')
		if e.neg {
			b.WriteByte('^')
		}
		for _, r := range e.ranges {
			writeRune(b, r.lo, ']')
			if r.hi != r.lo {
				b.WriteByte('-')
				writeRune(b, r.hi, ']')
			}
		}
		b.WriteByte(']')
	}
}

func writeRune(b *strings.Builder, r rune, quote byte) {
	switch {
	case r == '\\' || r == rune(quote) || quote == ']' && (r == '^' || r == '-' || r == '['):
		b.WriteByte('\\')
		b.WriteRune(r)
	case r == '\n':
		b.WriteString(`\n`)
	case r == '\t':
		b.WriteString(`\t`)
	case r == '\r':
		b.WriteString(`\r`)
	case r < 0x20 || r == 0x7f:
		fmt.Fprintf(b, `\x%02X`, r)
	case r >= 0xD800 && r <= 0xDFFF || r > 0x10FFFF:
		fmt.Fprintf(b, `\U%08X`, r)
	default:
		b.WriteRune(r)
	}
}

// normalize sorts and merges ranges.
func normalize(rs []runeRange) []runeRange {
	if len(rs) < 2 {
		return rs
	}
	out := make([]runeRange, len(rs))
	copy(out, rs)
	for i := 1; i < len(out); i++ { // insertion sort: classes are small
		for j := i; j > 0 && out[j].lo < out[j-1].lo; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	m := out[:1]
	for _, r := range out[1:] {
		last := &m[len(m)-1]
		if r.lo <= last.hi+1 {
			last.hi = max(last.hi, r.hi)
			continue
		}
		m = append(m, r)
	}
	return m
}

// matches reports whether code point c is in the class of e.
func (e *elem) matches(c rune) bool {
	in := false
	for _, r := range e.ranges {
		if c < r.lo {
			break
		}
		if c <= r.hi {
			in = true
			break
		}
	}
	return in != e.neg
}

// matchesSome reports whether some code point in [lo, hi] is in the class.
func (e *elem) matchesSome(lo, hi rune) bool {
	if !e.neg {
		for _, r := range e.ranges {
			if r.lo <= hi && lo <= r.hi {
				return true
			}
		}
		return false
	}
	for _, r := range e.ranges { // merged: one range covers all or none does
		if r.lo <= lo && hi <= r.hi {
			return false
		}
	}
	return true
}
