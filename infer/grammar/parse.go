package grammar

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Parse parses GBNF, llama.cpp's grammar notation:
//
//	root  ::= "{" ws pair ("," ws pair)* "}"   # a comment
//	pair  ::= [a-z]+ ":" ws [0-9]{1,3}
//	ws    ::= [ \t\n]*
//
// A rule is a name ([A-Za-z0-9_-]+), "::=" and alternatives separated by
// "|"; an alternative is a sequence of items; an item is a "string"
// literal, a [character class] (ranges a-z, negation [^...]), "." (any
// character), a rule name, a (group), or a token reference, followed by
// at most one of *, +, ?, {m}, {m,}, {m,n}. Escapes in literals and
// classes: \xHH, \uHHHH, \UHHHHHHHH, \t, \n, \r, \\, \", \[, \], \-, \^.
// A rule ends at a newline outside parentheses (a newline right after
// "::=" or "|", or before a line that starts with "|", continues it). A token reference matches one vocabulary
// token: <[N]> by id, <name> the token whose text is "<name>", <"text">
// the token whose text is text; see Compile for how it resolves. The
// grammar must define "root".
func Parse(src string) (*Grammar, error) {
	if !utf8.ValidString(src) {
		return nil, &SyntaxError{Offset: 0, Line: 1, Col: 1, Reason: "the grammar is not valid UTF-8"}
	}
	p := &parser{src: src, names: map[string]int{}}
	if err := p.grammar(); err != nil {
		return nil, err
	}
	p.uniqueNames()
	g := &Grammar{rules: p.rules}
	for i, r := range p.rules {
		if !p.defined[i] {
			return nil, &RuleError{Rule: r.name, Reason: "is referenced but not defined"}
		}
	}
	root, ok := p.names["root"]
	if !ok {
		return nil, &RuleError{Rule: "root", Reason: "is not defined; a grammar starts at rule root"}
	}
	g.root = root
	for _, r := range g.rules {
		for _, a := range r.alts {
			g.size += len(a) + 1
		}
	}
	if g.size > MaxElements {
		return nil, &RuleError{Rule: "root", Reason: fmt.Sprintf("expands to %d elements, more than %d", g.size, MaxElements)}
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return g, nil
}

// MustParse is Parse for grammars written in the program; it panics on
// an error, so it must never be given input.
func MustParse(src string) *Grammar {
	g, err := Parse(src)
	if err != nil {
		panic(err)
	}
	return g
}

type parser struct {
	src       string
	pos       int
	rules     []rule
	defined   []bool
	names     map[string]int // rules of the source, by name
	generated []int          // rules made for groups and repetitions
	size      int            // elements so far, to stop runaway repetition early
}

func (p *parser) errorf(format string, a ...any) error {
	line, col := 1, 1
	for i := 0; i < p.pos && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Offset: p.pos, Line: line, Col: col, Reason: fmt.Sprintf(format, a...)}
}

// space skips blanks and comments; newlines only when newlines is set.
func (p *parser) space(newlines bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '\r' || c == '\n':
			if !newlines {
				return
			}
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *parser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// ruleID returns the index of the named rule, creating it undefined.
func (p *parser) ruleID(name string) int {
	if id, ok := p.names[name]; ok {
		return id
	}
	p.names[name] = len(p.rules)
	p.rules = append(p.rules, rule{name: name})
	p.defined = append(p.defined, false)
	return len(p.rules) - 1
}

// newRule adds a generated rule named after base. Generated rules are
// not in p.names, so a rule of the source never refers to one; their
// names are made unique against the source's after parsing.
func (p *parser) newRule(base string, alts [][]elem) int {
	id := len(p.rules)
	p.rules = append(p.rules, rule{name: base + "-" + strconv.Itoa(id), alts: alts})
	p.defined = append(p.defined, true)
	p.generated = append(p.generated, id)
	return id
}

// uniqueNames renames generated rules whose names a source rule uses.
func (p *parser) uniqueNames() {
	taken := make(map[string]bool, len(p.rules))
	for name := range p.names {
		taken[name] = true
	}
	for _, id := range p.generated {
		name := p.rules[id].name
		for i := 0; taken[name]; i++ {
			name = p.rules[id].name + "-" + strconv.Itoa(i)
		}
		taken[name] = true
		p.rules[id].name = name
	}
}

func (p *parser) grammar() error {
	p.space(true)
	if p.pos == len(p.src) {
		return p.errorf("the grammar is empty")
	}
	for p.pos < len(p.src) {
		start := p.pos
		name := p.name()
		if name == "" {
			return p.errorf("expected a rule name, found %q", p.rest())
		}
		p.space(false)
		if !p.consume("::=") {
			return p.errorf("expected ::= after rule name %q", name)
		}
		id := p.ruleID(name)
		if p.defined[id] {
			p.pos = start
			return p.errorf("rule %q is defined twice", name)
		}
		p.defined[id] = true // before the body, which may refer to it
		p.space(true)
		alts, err := p.alternatives(name, false)
		if err != nil {
			return err
		}
		p.rules[id].alts = alts
		if p.pos < len(p.src) && p.src[p.pos] != '\n' && p.src[p.pos] != '\r' {
			return p.errorf("expected the end of rule %q, found %q", name, p.rest())
		}
		p.space(true)
	}
	return nil
}

func (p *parser) rest() string {
	r := p.src[p.pos:]
	if len(r) > 12 {
		r = r[:12] + "…"
	}
	return r
}

func (p *parser) consume(s string) bool {
	if len(p.src)-p.pos >= len(s) && p.src[p.pos:p.pos+len(s)] == s {
		p.pos += len(s)
		return true
	}
	return false
}

func (p *parser) alternatives(name string, nested bool) ([][]elem, error) {
	var alts [][]elem
	for {
		seq, err := p.sequence(name, nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			p.space(true)
			continue
		}
		if !nested { // a line that starts with | continues the rule
			save := p.pos
			p.space(true)
			if p.pos < len(p.src) && p.src[p.pos] == '|' {
				p.pos++
				p.space(true)
				continue
			}
			p.pos = save
		}
		return alts, nil
	}
}

func (p *parser) grow(n int) error {
	p.size += n
	if p.size > MaxElements {
		return p.errorf("the grammar expands to more than %d elements", MaxElements)
	}
	return nil
}

func (p *parser) sequence(name string, nested bool) ([]elem, error) {
	var seq []elem
	for p.pos < len(p.src) {
		last := len(seq) // where the last item starts
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.pos++
			for {
				if p.pos >= len(p.src) {
					return nil, p.errorf("unterminated string literal")
				}
				if p.src[p.pos] == '"' {
					p.pos++
					break
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				seq = append(seq, elem{kind: elChar, ranges: []runeRange{{r, r}}})
			}
			if len(seq) == last {
				// "" is the empty sequence; a repetition of it is too.
				p.space(nested)
				p.repetitionOfNothing()
				continue
			}
		case c == '[':
			e, err := p.class()
			if err != nil {
				return nil, err
			}
			seq = append(seq, e)
		case c == '.':
			p.pos++
			seq = append(seq, elem{kind: elChar, neg: true})
		case c == '<':
			e, err := p.token()
			if err != nil {
				return nil, err
			}
			seq = append(seq, e)
		case c == '(':
			p.pos++
			p.space(true)
			alts, err := p.alternatives(name, true)
			if err != nil {
				return nil, err
			}
			if p.pos >= len(p.src) || p.src[p.pos] != ')' {
				return nil, p.errorf("expected ) to close the group")
			}
			p.pos++
			seq = append(seq, elem{kind: elRule, rule: p.newRule(name, alts)})
		case isNameChar(c):
			save := p.pos
			ref := p.name()
			p.space(false)
			if p.consume("::=") {
				p.pos = save
				return nil, p.errorf("expected the end of the rule before the definition of %q (a rule ends at a newline)", ref)
			}
			p.pos = save + len(ref)
			seq = append(seq, elem{kind: elRule, rule: p.ruleID(ref)})
		default:
			return seq, nil
		}
		if err := p.grow(len(seq) - last); err != nil {
			return nil, err
		}
		p.space(nested)
		var err error
		if seq, err = p.repetition(name, seq, last); err != nil {
			return nil, err
		}
		p.space(nested)
	}
	return seq, nil
}

// repetitionOfNothing skips an operator after an empty literal.
func (p *parser) repetitionOfNothing() {
	if p.pos < len(p.src) {
		switch p.src[p.pos] {
		case '*', '+', '?':
			p.pos++
		case '{':
			for p.pos < len(p.src) && p.src[p.pos] != '}' {
				p.pos++
			}
			if p.pos < len(p.src) {
				p.pos++
			}
		}
	}
}

// repetition applies a repetition operator, if one follows, to the item
// seq[last:], rewriting it into rules.
func (p *parser) repetition(name string, seq []elem, last int) ([]elem, error) {
	if p.pos >= len(p.src) {
		return seq, nil
	}
	lo, hi := 0, -1 // hi -1: unbounded
	switch p.src[p.pos] {
	case '*':
		p.pos++
	case '+':
		p.pos++
		lo = 1
	case '?':
		p.pos++
		hi = 1
	case '{':
		p.pos++
		p.space(true)
		var err error
		if lo, err = p.int(); err != nil {
			return nil, err
		}
		p.space(true)
		switch {
		case p.consume("}"):
			hi = lo
		case p.consume(","):
			p.space(true)
			if p.pos < len(p.src) && p.src[p.pos] != '}' {
				if hi, err = p.int(); err != nil {
					return nil, err
				}
				p.space(true)
			}
			if !p.consume("}") {
				return nil, p.errorf("expected } to close the repetition")
			}
		default:
			return nil, p.errorf("expected , or } in the repetition")
		}
		if hi >= 0 && hi < lo {
			return nil, p.errorf("repetition {%d,%d} has a maximum below its minimum", lo, hi)
		}
	default:
		return seq, nil
	}
	item := append([]elem(nil), seq[last:]...)
	seq = seq[:last]
	if len(item) > 1 { // a literal of several characters: one rule
		item = []elem{{kind: elRule, rule: p.newRule(name, [][]elem{item})}}
	}
	n := lo
	if hi > lo {
		n = hi
	}
	if err := p.grow(n + 4); err != nil {
		return nil, err
	}
	for range lo {
		seq = append(seq, item[0])
	}
	switch {
	case hi < 0: // item*: star ::= item star | ε
		star := p.newRule(name, nil)
		p.rules[star].alts = [][]elem{{item[0], {kind: elRule, rule: star}}, {}}
		seq = append(seq, elem{kind: elRule, rule: star})
	case hi > lo: // hi-lo optional items, nested: opt_k ::= item opt_{k-1} | ε
		next := -1
		for k := 0; k < hi-lo; k++ {
			alt := []elem{item[0]}
			if next >= 0 {
				alt = append(alt, elem{kind: elRule, rule: next})
			}
			next = p.newRule(name, [][]elem{alt, {}})
		}
		seq = append(seq, elem{kind: elRule, rule: next})
	}
	return seq, nil
}

func (p *parser) int() (int, error) {
	start := p.pos
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		p.pos++
	}
	if start == p.pos {
		return 0, p.errorf("expected a number in the repetition")
	}
	n, err := strconv.Atoi(p.src[start:p.pos])
	if err != nil || n > MaxRepeat {
		p.pos = start
		return 0, p.errorf("repetition count %s is above %d", p.src[start:p.pos+min(len(p.src)-p.pos, 10)], MaxRepeat)
	}
	return n, nil
}

// char reads one character of a literal or class, resolving escapes.
func (p *parser) char() (rune, error) {
	c := p.src[p.pos]
	if c != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += n
		return r, nil
	}
	p.pos++
	if p.pos >= len(p.src) {
		return 0, p.errorf("a backslash ends the grammar")
	}
	e := p.src[p.pos]
	p.pos++
	switch e {
	case 'x':
		return p.hex(2)
	case 'u':
		return p.hex(4)
	case 'U':
		return p.hex(8)
	case 't':
		return '\t', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case '\\', '"', '[', ']', '-', '^':
		return rune(e), nil
	}
	p.pos -= 2
	return 0, p.errorf("unknown escape \\%c", e)
}

func (p *parser) hex(n int) (rune, error) {
	if len(p.src)-p.pos < n {
		return 0, p.errorf("expected %d hex digits", n)
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
	if err != nil || v > 0x10FFFF {
		return 0, p.errorf("bad escape: %q is not %d hex digits of a code point", p.src[p.pos:p.pos+n], n)
	}
	p.pos += n
	return rune(v), nil
}

func (p *parser) class() (elem, error) {
	p.pos++ // [
	e := elem{kind: elChar}
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		e.neg = true
		p.pos++
	}
	for {
		if p.pos >= len(p.src) {
			return e, p.errorf("unterminated character class")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			break
		}
		lo, err := p.char()
		if err != nil {
			return e, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, err = p.char(); err != nil {
				return e, err
			}
			if hi < lo {
				return e, p.errorf("range %q-%q runs backwards", lo, hi)
			}
		}
		e.ranges = append(e.ranges, runeRange{lo, hi})
	}
	e.ranges = normalize(e.ranges)
	if !e.neg && len(e.ranges) == 0 {
		return e, p.errorf("empty character class [] matches nothing")
	}
	return e, nil
}

func (p *parser) token() (elem, error) {
	start := p.pos
	p.pos++ // <
	e := elem{kind: elToken, tokID: -1}
	switch {
	case p.consume("["):
		s := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		id, err := strconv.ParseInt(p.src[s:p.pos], 10, 32)
		if err != nil || !p.consume("]>") {
			p.pos = start
			return e, p.errorf("bad token reference: want <[id]>")
		}
		e.tokID = int32(id)
	case p.pos < len(p.src) && p.src[p.pos] == '"':
		s := p.pos
		for p.pos++; p.pos < len(p.src) && p.src[p.pos] != '"'; p.pos++ {
			if p.src[p.pos] == '\\' {
				p.pos++
			}
		}
		if p.pos >= len(p.src) {
			p.pos = start
			return e, p.errorf("unterminated token reference")
		}
		p.pos++
		txt, err := strconv.Unquote(p.src[s:p.pos])
		if err != nil || txt == "" || !p.consume(">") {
			p.pos = start
			return e, p.errorf(`bad token reference: want <"text">`)
		}
		e.tokTxt = txt
	default:
		s := p.pos
		for p.pos < len(p.src) && p.src[p.pos] != '>' && p.src[p.pos] != '\n' && p.src[p.pos] != ' ' {
			p.pos++
		}
		if p.pos == s || !p.consume(">") {
			p.pos = start
			return e, p.errorf("bad token reference: want <name>, <[id]> or <\"text\">")
		}
		e.tokTxt = p.src[start:p.pos]
	}
	return e, nil
}
