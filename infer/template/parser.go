package template

import (
	"fmt"
	"slices"
)

// The parser follows Jinja2's (jinja2/parser.py): the same statements, the
// same operator precedence (lowest first: if-else, or, and, not,
// comparisons and in, + -, ~, * / // %, **, unary - +, then primaries with
// postfix . [] () and filters | and tests is, which bind tightest).

// maxParseDepth bounds the nesting of expressions and statements, so that a
// hostile template cannot exhaust the stack.
const maxParseDepth = 200

type parser struct {
	src   *source
	toks  []token
	i     int
	depth int
	// macros is the stack of macros being parsed, innermost last, to note
	// which read varargs or kwargs.
	macros []*macroNode
	// loops counts the for loops enclosing the current statement (inside
	// the innermost macro), for break and continue.
	loops int
}

func (p *parser) cur() token { return p.toks[p.i] }

func (p *parser) peek() token {
	if p.i+1 < len(p.toks) {
		return p.toks[p.i+1]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) errAt(off int, format string, a ...any) error {
	return &Error{Kind: ErrSyntax, Pos: p.src.pos(off), Msg: fmt.Sprintf(format, a...)}
}

func (p *parser) unsupported(off int, construct, format string, a ...any) error {
	return &Error{Kind: ErrUnsupported, Pos: p.src.pos(off), Construct: construct, Msg: fmt.Sprintf(format, a...)}
}

func (p *parser) isOp(op string) bool {
	t := p.cur()
	return t.kind == tOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.cur()
	return t.kind == tName && t.val == name
}

func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.next()
		return true
	}
	return false
}

func (p *parser) skipName(name string) bool {
	if p.isName(name) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectOp(op string) (token, error) {
	if !p.isOp(op) {
		return token{}, p.errAt(p.cur().pos, "expected '%s', got %s", op, p.cur().describe())
	}
	return p.next(), nil
}

func (p *parser) expectKind(k tokKind, what string) (token, error) {
	if p.cur().kind != k {
		return token{}, p.errAt(p.cur().pos, "expected %s, got %s", what, p.cur().describe())
	}
	return p.next(), nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxParseDepth {
		return &Error{Kind: ErrLimit, Pos: p.src.pos(p.cur().pos), Msg: fmt.Sprintf("template nested deeper than %d levels", maxParseDepth)}
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// parseTemplate parses the whole token stream.
func (p *parser) parseTemplate() ([]node, error) {
	body, err := p.subparse(nil)
	if err != nil {
		return nil, err
	}
	if p.cur().kind != tEOF {
		return nil, p.errAt(p.cur().pos, "unexpected %s", p.cur().describe())
	}
	return body, nil
}

// subparse parses statements until a block tag whose name is in ends (left
// as the current token) or the end of the template.
func (p *parser) subparse(ends []string) ([]node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var body []node
	for {
		t := p.cur()
		switch t.kind {
		case tEOF:
			return body, nil
		case tData:
			p.next()
			body = append(body, &textNode{s: t.val})
		case tVarBegin:
			p.next()
			x, err := p.parseTuple(false, true, nil, false)
			if err != nil {
				return nil, err
			}
			if _, err := p.expectKind(tVarEnd, "end of print statement '}}'"); err != nil {
				return nil, err
			}
			body = append(body, &printNode{p: t.pos, x: x})
		case tBlockBegin:
			p.next()
			if p.cur().kind == tName && slices.Contains(ends, p.cur().val) {
				return body, nil
			}
			n, err := p.parseStatement(ends)
			if err != nil {
				return nil, err
			}
			if _, err := p.expectKind(tBlockEnd, "end of statement block '%}'"); err != nil {
				return nil, err
			}
			if n != nil {
				body = append(body, n)
			}
		default:
			return nil, p.errAt(t.pos, "unexpected %s", t.describe())
		}
	}
}

// parseStatements expects the end of the opening tag, then parses a body
// up to one of ends, which must be found. With drop it also consumes the
// end tag's name.
func (p *parser) parseStatements(ends []string, drop bool, open token) ([]node, error) {
	if _, err := p.expectKind(tBlockEnd, "end of statement block '%}'"); err != nil {
		return nil, err
	}
	body, err := p.subparse(ends)
	if err != nil {
		return nil, err
	}
	if p.cur().kind == tEOF {
		return nil, p.errAt(open.pos, "unexpected end of template: the '%s' tag opened here was never closed (looking for %s)", open.val, quoteList(ends))
	}
	if drop {
		p.next()
	}
	return body, nil
}

func quoteList(names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += " or "
		}
		s += "'" + n + "'"
	}
	return s
}

// unsupportedTags are Jinja2 tags this package does not implement.
var unsupportedTags = map[string]string{
	"include":    "templates cannot load other templates",
	"import":     "templates cannot load other templates",
	"from":       "templates cannot load other templates",
	"extends":    "template inheritance is not supported",
	"block":      "template inheritance is not supported",
	"call":       "call blocks are not supported",
	"autoescape": "autoescaping is not supported (chat templates render with autoescape off)",
	"do":         "the do extension is not enabled in transformers' environment",
	"trans":      "the i18n extension is not enabled in transformers' environment",
	"pluralize":  "the i18n extension is not enabled in transformers' environment",
}

func (p *parser) parseStatement(ends []string) (node, error) {
	t := p.cur()
	if t.kind != tName {
		return nil, p.errAt(t.pos, "tag name expected, got %s", t.describe())
	}
	switch t.val {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "filter":
		return p.parseFilterBlock()
	case "with":
		return p.parseWith()
	case "print":
		p.next()
		x, err := p.parseTuple(false, true, nil, false)
		if err != nil {
			return nil, err
		}
		return &printNode{p: t.pos, x: x}, nil
	case "break", "continue":
		p.next()
		if p.loops == 0 {
			return nil, p.errAt(t.pos, "'%s' outside of a for loop", t.val)
		}
		if t.val == "break" {
			return &breakNode{p: t.pos}, nil
		}
		return &continueNode{p: t.pos}, nil
	case "generation":
		p.next()
		body, err := p.parseStatements([]string{"endgeneration"}, true, t)
		if err != nil {
			return nil, err
		}
		return &generationNode{p: t.pos, body: body}, nil
	}
	if why, ok := unsupportedTags[t.val]; ok {
		return nil, p.unsupported(t.pos, fmt.Sprintf("tag '%s'", t.val), "%s", why)
	}
	if len(ends) > 0 {
		return nil, p.errAt(t.pos, "unknown tag '%s' (the innermost open block needs %s)", t.val, quoteList(ends))
	}
	return nil, p.errAt(t.pos, "unknown tag '%s'", t.val)
}

func (p *parser) parseIf() (node, error) {
	open := p.next()
	n := &ifNode{p: open.pos}
	for {
		cond, err := p.parseTuple(false, false, nil, false)
		if err != nil {
			return nil, err
		}
		body, err := p.parseStatements([]string{"elif", "else", "endif"}, false, open)
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		n.bodies = append(n.bodies, body)
		tok := p.next()
		switch tok.val {
		case "elif":
			continue
		case "else":
			n.els, err = p.parseStatements([]string{"endif"}, true, open)
			if err != nil {
				return nil, err
			}
		}
		return n, nil
	}
}

func (p *parser) parseFor() (node, error) {
	open := p.next()
	tg, err := p.parseAssignTarget(false, []string{"in"})
	if err != nil {
		return nil, err
	}
	if !p.skipName("in") {
		return nil, p.errAt(p.cur().pos, "expected 'in' in for loop, got %s", p.cur().describe())
	}
	iter, err := p.parseTuple(false, false, []string{"recursive"}, false)
	if err != nil {
		return nil, err
	}
	n := &forNode{p: open.pos, target: tg, iter: iter}
	if p.skipName("if") {
		if n.cond, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, p.unsupported(p.cur().pos, "recursive for loop", "recursive loops are not supported")
	}
	p.loops++
	n.body, err = p.parseStatements([]string{"endfor", "else"}, false, open)
	p.loops--
	if err != nil {
		return nil, err
	}
	if p.next().val == "else" {
		if n.els, err = p.parseStatements([]string{"endfor"}, true, open); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (p *parser) parseSet() (node, error) {
	open := p.next()
	tg, err := p.parseAssignTarget(true, nil)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		x, err := p.parseTuple(false, true, nil, false)
		if err != nil {
			return nil, err
		}
		return &setNode{p: open.pos, target: tg, x: x}, nil
	}
	filters, err := p.parseFilterChain(false)
	if err != nil {
		return nil, err
	}
	body, err := p.parseStatements([]string{"endset"}, true, open)
	if err != nil {
		return nil, err
	}
	return &setBlockNode{p: open.pos, target: tg, filters: filters, body: body}, nil
}

func (p *parser) parseMacro() (node, error) {
	open := p.next()
	name, err := p.expectKind(tName, "macro name")
	if err != nil {
		return nil, err
	}
	n := &macroNode{p: open.pos, name: name.val}
	if _, err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		if len(n.params) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		arg, err := p.expectKind(tName, "parameter name")
		if err != nil {
			return nil, err
		}
		if isReservedName(arg.val) {
			return nil, p.errAt(arg.pos, "cannot use '%s' as a parameter name", arg.val)
		}
		if p.skipOp("=") {
			d, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			n.defaults = append(n.defaults, d)
		} else if len(n.defaults) > 0 {
			return nil, p.errAt(arg.pos, "non-default argument follows default argument")
		}
		n.params = append(n.params, arg.val)
	}
	p.next()
	p.macros = append(p.macros, n)
	loops := p.loops
	p.loops = 0
	n.body, err = p.parseStatements([]string{"endmacro"}, true, open)
	p.loops = loops
	p.macros = p.macros[:len(p.macros)-1]
	if err != nil {
		return nil, err
	}
	return n, nil
}

func (p *parser) parseFilterBlock() (node, error) {
	open := p.next()
	filters, err := p.parseFilterChain(true)
	if err != nil {
		return nil, err
	}
	body, err := p.parseStatements([]string{"endfilter"}, true, open)
	if err != nil {
		return nil, err
	}
	return &filterBlockNode{p: open.pos, filters: filters, body: body}, nil
}

func (p *parser) parseWith() (node, error) {
	open := p.next()
	n := &withNode{p: open.pos}
	for p.cur().kind != tBlockEnd {
		if len(n.targets) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		tg, err := p.parseAssignTarget(false, nil)
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp("="); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, tg)
		n.vals = append(n.vals, v)
	}
	body, err := p.parseStatements([]string{"endwith"}, true, open)
	if err != nil {
		return nil, err
	}
	n.body = body
	return n, nil
}

func isReservedName(s string) bool {
	switch s {
	case "true", "false", "none", "True", "False", "None":
		return true
	}
	return false
}

// parseAssignTarget parses a name, a tuple of names, or (withNamespace)
// ns.attr.
func (p *parser) parseAssignTarget(withNamespace bool, extraEnds []string) (*target, error) {
	t := p.cur()
	if withNamespace && t.kind == tName && p.peek().kind == tOp && p.peek().val == "." {
		p.next()
		p.next()
		attr, err := p.expectKind(tName, "attribute name")
		if err != nil {
			return nil, err
		}
		return &target{p: t.pos, name: t.val, nsAttr: attr.val}, nil
	}
	x, err := p.parseTuple(true, false, extraEnds, false)
	if err != nil {
		return nil, err
	}
	return p.toTarget(x)
}

func (p *parser) toTarget(x expr) (*target, error) {
	switch e := x.(type) {
	case *nameExpr:
		if isReservedName(e.name) {
			return nil, p.errAt(e.p, "can't assign to '%s'", e.name)
		}
		return &target{p: e.p, name: e.name}, nil
	case *tupleExpr:
		tg := &target{p: e.p, items: []*target{}}
		for _, it := range e.items {
			sub, err := p.toTarget(it)
			if err != nil {
				return nil, err
			}
			tg.items = append(tg.items, sub)
		}
		return tg, nil
	}
	return nil, p.errAt(x.offset(), "can't assign to this expression")
}

// isTupleEnd reports whether the current token ends a tuple.
func (p *parser) isTupleEnd(extraEnds []string) bool {
	t := p.cur()
	switch t.kind {
	case tVarEnd, tBlockEnd, tEOF:
		return true
	case tOp:
		return t.val == ")"
	case tName:
		return slices.Contains(extraEnds, t.val)
	}
	return false
}

// parseTuple is Jinja2's parse_tuple: one expression, or several separated
// by commas (a tuple). simplified parses only primaries (assignment
// targets); withCond allows inline if-else.
func (p *parser) parseTuple(simplified, withCond bool, extraEnds []string, explicitParens bool) (expr, error) {
	start := p.cur().pos
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extraEnds) {
			break
		}
		var x expr
		var err error
		if simplified {
			x, err = p.parsePrimary()
		} else {
			x, err = p.parseExpression(withCond)
		}
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0], nil
		}
		if !explicitParens {
			return nil, p.errAt(p.cur().pos, "expected an expression, got %s", p.cur().describe())
		}
	}
	return &tupleExpr{p: start, items: items}, nil
}

func (p *parser) parseExpression(withCond bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	if withCond {
		return p.parseCondExpr()
	}
	return p.parseOr()
}

func (p *parser) parseCondExpr() (expr, error) {
	x, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.isName("if") {
		ifTok := p.next()
		test, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var els expr
		if p.skipName("else") {
			if els, err = p.parseCondExpr(); err != nil {
				return nil, err
			}
		}
		x = &condExpr{p: ifTok.pos, test: test, then: x, els: els}
	}
	return x, nil
}

func (p *parser) parseOr() (expr, error) {
	x, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	for p.isName("or") {
		t := p.next()
		r, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		x = &binExpr{p: t.pos, op: "or", l: x, r: r}
	}
	return x, nil
}

func (p *parser) parseAnd() (expr, error) {
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	for p.isName("and") {
		t := p.next()
		r, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		x = &binExpr{p: t.pos, op: "and", l: x, r: r}
	}
	return x, nil
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		t := p.next()
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &notExpr{p: t.pos, x: x}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	start := p.cur().pos
	x, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	var ops []cmpOp
	for {
		t := p.cur()
		var op string
		switch {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			op = t.val
			p.next()
		case p.isName("in"):
			op = "in"
			p.next()
		case p.isName("not") && p.peek().kind == tName && p.peek().val == "in":
			op = "notin"
			p.next()
			p.next()
		default:
			if len(ops) == 0 {
				return x, nil
			}
			return &compareExpr{p: start, first: x, ops: ops}, nil
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		ops = append(ops, cmpOp{op: op, x: r})
	}
}

func (p *parser) parseMath1() (expr, error) {
	x, err := p.parseConcat()
	if err != nil {
		return nil, err
	}
	for p.isOp("+") || p.isOp("-") {
		t := p.next()
		r, err := p.parseConcat()
		if err != nil {
			return nil, err
		}
		x = &binExpr{p: t.pos, op: t.val, l: x, r: r}
	}
	return x, nil
}

func (p *parser) parseConcat() (expr, error) {
	x, err := p.parseMath2()
	if err != nil {
		return nil, err
	}
	if !p.isOp("~") {
		return x, nil
	}
	c := &concatExpr{p: x.offset(), parts: []expr{x}}
	for p.skipOp("~") {
		r, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		c.parts = append(c.parts, r)
	}
	return c, nil
}

func (p *parser) parseMath2() (expr, error) {
	x, err := p.parsePow()
	if err != nil {
		return nil, err
	}
	for p.isOp("*") || p.isOp("/") || p.isOp("//") || p.isOp("%") {
		t := p.next()
		r, err := p.parsePow()
		if err != nil {
			return nil, err
		}
		x = &binExpr{p: t.pos, op: t.val, l: x, r: r}
	}
	return x, nil
}

func (p *parser) parsePow() (expr, error) {
	x, err := p.parseUnary(true)
	if err != nil {
		return nil, err
	}
	for p.isOp("**") {
		t := p.next()
		r, err := p.parseUnary(true)
		if err != nil {
			return nil, err
		}
		x = &binExpr{p: t.pos, op: "**", l: x, r: r}
	}
	return x, nil
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.cur()
	var x expr
	var err error
	if p.isOp("-") || p.isOp("+") {
		p.next()
		inner, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		x = &unaryExpr{p: t.pos, neg: t.val == "-", x: inner}
	} else if x, err = p.parsePrimary(); err != nil {
		return nil, err
	}
	if x, err = p.parsePostfix(x); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(x)
	}
	return x, nil
}

func (p *parser) parsePrimary() (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	t := p.cur()
	switch t.kind {
	case tName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{p: t.pos, v: true}, nil
		case "false", "False":
			return &constExpr{p: t.pos, v: false}, nil
		case "none", "None":
			return &constExpr{p: t.pos, v: nil}, nil
		}
		if n := len(p.macros); n > 0 {
			switch t.val {
			case "varargs":
				p.macros[n-1].catchVarargs = true
			case "kwargs":
				p.macros[n-1].catchKwargs = true
			case "caller":
				return nil, p.unsupported(t.pos, "caller()", "call blocks are not supported")
			}
		}
		return &nameExpr{p: t.pos, name: t.val}, nil
	case tString:
		p.next()
		s := t.val
		// Adjacent string literals are concatenated.
		for p.cur().kind == tString {
			s += p.next().val
		}
		return &constExpr{p: t.pos, v: s}, nil
	case tInt:
		p.next()
		return &constExpr{p: t.pos, v: t.i}, nil
	case tFloat:
		p.next()
		return &constExpr{p: t.pos, v: t.f}, nil
	case tOp:
		switch t.val {
		case "(":
			p.next()
			x, err := p.parseTuple(false, true, nil, true)
			if err != nil {
				return nil, err
			}
			if _, err := p.expectOp(")"); err != nil {
				return nil, err
			}
			return x, nil
		case "[":
			p.next()
			l := &listExpr{p: t.pos}
			for !p.isOp("]") {
				if len(l.items) > 0 {
					if _, err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("]") {
						break
					}
				}
				x, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, x)
			}
			p.next()
			return l, nil
		case "{":
			p.next()
			d := &dictExpr{p: t.pos}
			for !p.isOp("}") {
				if len(d.keys) > 0 {
					if _, err := p.expectOp(","); err != nil {
						return nil, err
					}
					if p.isOp("}") {
						break
					}
				}
				k, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				if _, err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.parseExpression(true)
				if err != nil {
					return nil, err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
			}
			p.next()
			return d, nil
		}
	}
	return nil, p.errAt(t.pos, "unexpected %s", t.describe())
}

func (p *parser) parsePostfix(x expr) (expr, error) {
	for {
		switch {
		case p.isOp(".") || p.isOp("["):
			var err error
			if x, err = p.parseSubscript(x); err != nil {
				return nil, err
			}
		case p.isOp("("):
			var err error
			if x, err = p.parseCall(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
	}
}

func (p *parser) parseFilterExpr(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			chain, err := p.parseFilterChain(false)
			if err != nil {
				return nil, err
			}
			for _, f := range chain {
				f.x = x
				x = f
			}
		case p.isName("is"):
			var err error
			if x, err = p.parseTest(x); err != nil {
				return nil, err
			}
		case p.isOp("("):
			var err error
			if x, err = p.parseCall(x); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
	}
}

func (p *parser) parseSubscript(x expr) (expr, error) {
	t := p.next()
	if t.val == "." {
		a := p.next()
		switch a.kind {
		case tName:
			return &attrExpr{p: t.pos, x: x, attr: a.val}, nil
		case tInt:
			return &itemExpr{p: t.pos, x: x, key: &constExpr{p: a.pos, v: a.i}}, nil
		}
		return nil, p.errAt(a.pos, "expected name or number after '.', got %s", a.describe())
	}
	var args []expr
	for !p.isOp("]") {
		if len(args) > 0 {
			if _, err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		a, err := p.parseSubscribed()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	p.next()
	switch len(args) {
	case 0:
		return nil, p.errAt(t.pos, "expected a subscript inside []")
	case 1:
		return &itemExpr{p: t.pos, x: x, key: args[0]}, nil
	}
	return &itemExpr{p: t.pos, x: x, key: &tupleExpr{p: t.pos, items: args}}, nil
}

func (p *parser) parseSubscribed() (expr, error) {
	start := p.cur().pos
	var parts [3]expr
	if p.isOp(":") {
		p.next()
	} else {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if !p.isOp(":") {
			return x, nil
		}
		p.next()
		parts[0] = x
	}
	endOfPart := func() bool { return p.isOp("]") || p.isOp(",") || p.isOp(":") }
	if !endOfPart() {
		x, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		parts[1] = x
	}
	if p.skipOp(":") {
		if !(p.isOp("]") || p.isOp(",")) {
			x, err := p.parseExpression(true)
			if err != nil {
				return nil, err
			}
			parts[2] = x
		}
	}
	return &sliceExpr{p: start, start: parts[0], stop: parts[1], step: parts[2]}, nil
}

// parseCallArgs parses "(args, name=value)". *args and **kwargs are not
// supported.
func (p *parser) parseCallArgs() ([]expr, []kwarg, error) {
	open, err := p.expectOp("(")
	if err != nil {
		return nil, nil, err
	}
	var args []expr
	var kwargs []kwarg
	first := true
	for !p.isOp(")") {
		if !first {
			if _, err := p.expectOp(","); err != nil {
				return nil, nil, err
			}
			if p.isOp(")") {
				break
			}
		}
		first = false
		if p.isOp("*") || p.isOp("**") {
			return nil, nil, p.unsupported(p.cur().pos, "argument unpacking", "*args and **kwargs in calls are not supported")
		}
		if p.cur().kind == tName && p.peek().kind == tOp && p.peek().val == "=" {
			name := p.next().val
			p.next()
			v, err := p.parseExpression(true)
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{name: name, val: v})
			continue
		}
		if len(kwargs) > 0 {
			return nil, nil, p.errAt(p.cur().pos, "positional argument follows keyword argument")
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, nil, err
		}
		args = append(args, v)
	}
	if p.cur().kind == tEOF {
		return nil, nil, p.errAt(open.pos, "unclosed '('")
	}
	p.next()
	return args, kwargs, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	start := p.cur().pos
	args, kwargs, err := p.parseCallArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{p: start, fn: fn, args: args, kwargs: kwargs}, nil
}

// parseFilterChain parses "| f1(args) | f2" (or, with inline, "f1 | f2" as
// in a filter block), checking each filter name against the known filters.
func (p *parser) parseFilterChain(inline bool) ([]*filterExpr, error) {
	var chain []*filterExpr
	for p.isOp("|") || inline {
		if !inline {
			p.next()
		}
		inline = false
		name, err := p.expectKind(tName, "filter name")
		if err != nil {
			return nil, err
		}
		full := name.val
		for p.isOp(".") {
			p.next()
			part, err := p.expectKind(tName, "filter name")
			if err != nil {
				return nil, err
			}
			full += "." + part.val
		}
		f := &filterExpr{p: name.pos, name: full}
		if p.isOp("(") {
			if f.args, f.kwargs, err = p.parseCallArgs(); err != nil {
				return nil, err
			}
		}
		def, err := lookupFilter(full)
		if err != nil {
			return nil, p.unsupported(name.pos, fmt.Sprintf("filter '%s'", full), "%v", err)
		}
		f.fn = def
		chain = append(chain, f)
	}
	return chain, nil
}

func (p *parser) parseTest(x expr) (expr, error) {
	isTok := p.next()
	negated := p.skipName("not")
	name, err := p.expectKind(tName, "test name")
	if err != nil {
		return nil, err
	}
	full := name.val
	for p.isOp(".") {
		p.next()
		part, err := p.expectKind(tName, "test name")
		if err != nil {
			return nil, err
		}
		full += "." + part.val
	}
	t := &testExpr{p: isTok.pos, x: x, name: full}
	cur := p.cur()
	switch {
	case p.isOp("("):
		if t.args, t.kwargs, err = p.parseCallArgs(); err != nil {
			return nil, err
		}
	case cur.kind == tName && cur.val != "else" && cur.val != "or" && cur.val != "and",
		cur.kind == tString, cur.kind == tInt, cur.kind == tFloat,
		cur.kind == tOp && (cur.val == "[" || cur.val == "{"):
		if p.isName("is") {
			return nil, p.errAt(cur.pos, "you cannot chain multiple tests with is")
		}
		a, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if a, err = p.parsePostfix(a); err != nil {
			return nil, err
		}
		t.args = []expr{a}
	}
	def, err := lookupTest(full)
	if err != nil {
		return nil, p.unsupported(name.pos, fmt.Sprintf("test '%s'", full), "%v", err)
	}
	t.fn = def
	if negated {
		return &notExpr{p: isTok.pos, x: t}, nil
	}
	return t, nil
}
