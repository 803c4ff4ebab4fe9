package template

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// limits guard against runaway templates. Real chat templates stay far
// below them.
type limits struct {
	// maxOutput bounds the bytes written to any output buffer over the
	// whole render (captured blocks and macro output included) and the
	// size of any single string value.
	maxOutput int
	// maxIterations bounds for-loop iterations over the whole render.
	maxIterations int
	// maxItems bounds the length of any list built while rendering.
	maxItems int
	// maxDepth bounds nested macro calls.
	maxDepth int
	// maxWork bounds the total size of all strings and lists built while
	// rendering (a list item counts 8), so that repeated building in a
	// loop cannot run for hours within the other limits.
	maxWork int
}

var defaultLimits = limits{
	maxOutput:     32 << 20,
	maxIterations: 1 << 21,
	maxItems:      1 << 21,
	maxDepth:      64,
	maxWork:       256 << 20,
}

// maxRange is the largest range() the Jinja2 sandbox allows (MAX_RANGE).
const maxRange = 100000

var errOutputTooLarge = errors.New("output too large")

// scope holds the variables of one frame: the template's top level, a for
// loop, a macro call or a with block. Lookups walk outwards.
type scope struct {
	vars   map[string]any
	parent *scope
}

func newScope(parent *scope) *scope { return &scope{vars: map[string]any{}, parent: parent} }

func (s *scope) lookup(name string) (any, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

// macroValue is a macro bound to the scope it was defined in.
type macroValue struct {
	def   *macroNode
	scope *scope
}

// builtin is a global function or a bound method.
type builtin struct {
	name string
	fn   func(r *renderer, pos int, args []any, kwargs []kwval) (any, error)
}

// kwval is an evaluated keyword argument.
type kwval struct {
	name string
	v    any
}

// loopValue is the `loop` variable of a for loop.
type loopValue struct {
	index0  int
	items   []any
	changed []any // last arguments of loop.changed(), nil before the first call
	called  bool
}

type flow uint8

const (
	flowNormal flow = iota
	flowBreak
	flowContinue
)

type renderer struct {
	src        *source
	lim        limits
	out        *strings.Builder
	written    int
	work       int
	iterations int
	depth      int
	now        func() time.Time
}

func (r *renderer) errf(kind error, off int, format string, a ...any) *Error {
	return &Error{Kind: kind, Pos: r.src.pos(off), Msg: fmt.Sprintf(format, a...)}
}

// undefErr is the error for using an undefined value.
func (r *renderer) undefErr(off int, u undefined) *Error {
	return r.errf(ErrRender, off, "%s", u.message())
}

func (r *renderer) write(off int, s string) error {
	r.written += len(s)
	if r.written > r.lim.maxOutput {
		return r.errf(ErrLimit, off, "output exceeds %d bytes", r.lim.maxOutput)
	}
	r.out.WriteString(s)
	return nil
}

// checkStr bounds the size of a string value about to be built (n bytes)
// and charges it to the work budget.
func (r *renderer) checkStr(off int, n int) error {
	if n > r.lim.maxOutput {
		return r.errf(ErrLimit, off, "string value exceeds %d bytes", r.lim.maxOutput)
	}
	return r.charge(off, n)
}

// bound checks a string size while it is being built, without charging
// the work budget (the final size is charged once with checkStr).
func (r *renderer) bound(off int, n int) error {
	if n > r.lim.maxOutput {
		return r.errf(ErrLimit, off, "string value exceeds %d bytes", r.lim.maxOutput)
	}
	return nil
}

// checkItems bounds the length of a list about to be built.
func (r *renderer) checkItems(off int, n int) error {
	if n > r.lim.maxItems {
		return r.errf(ErrLimit, off, "list exceeds %d items", r.lim.maxItems)
	}
	return r.charge(off, 8*n)
}

// sizeOf is what a value costs the work budget when an operation
// produces it.
func sizeOf(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case markup:
		return len(x)
	case *listValue:
		return 8 * len(x.items)
	case *dictValue:
		return 16 * x.len()
	}
	return 0
}

// scanCost is what reading a value costs the work budget: operations that
// walk a string or a list take time in proportion to it.
func scanCost(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case markup:
		return len(x)
	case *listValue:
		return len(x.items)
	case *dictValue:
		return x.len()
	}
	return 0
}

func (r *renderer) charge(off int, n int) error {
	r.work += n
	if r.work > r.lim.maxWork {
		return r.errf(ErrLimit, off, "template built more than %d bytes of values", r.lim.maxWork)
	}
	return nil
}

// capture runs body with output redirected and returns what it wrote.
func (r *renderer) capture(body []node, sc *scope) (string, flow, error) {
	saved := r.out
	var b strings.Builder
	r.out = &b
	fl, err := r.execBody(body, sc)
	r.out = saved
	return b.String(), fl, err
}

func (r *renderer) execBody(body []node, sc *scope) (flow, error) {
	for _, n := range body {
		fl, err := r.exec(n, sc)
		if err != nil || fl != flowNormal {
			return fl, err
		}
	}
	return flowNormal, nil
}

func (r *renderer) exec(n node, sc *scope) (flow, error) {
	switch n := n.(type) {
	case *textNode:
		return flowNormal, r.write(0, n.s)
	case *printNode:
		v, err := r.eval(n.x, sc)
		if err != nil {
			return flowNormal, err
		}
		s, err := r.str(n.x.offset(), v)
		if err != nil {
			return flowNormal, err
		}
		return flowNormal, r.write(n.p, s)
	case *ifNode:
		for i, c := range n.conds {
			v, err := r.eval(c, sc)
			if err != nil {
				return flowNormal, err
			}
			if truthy(v) {
				return r.execBody(n.bodies[i], sc)
			}
		}
		return r.execBody(n.els, sc)
	case *forNode:
		return r.execFor(n, sc)
	case *setNode:
		v, err := r.eval(n.x, sc)
		if err != nil {
			return flowNormal, err
		}
		return flowNormal, r.assign(n.target, v, sc)
	case *setBlockNode:
		s, fl, err := r.capture(n.body, sc)
		if err != nil {
			return flowNormal, err
		}
		if fl != flowNormal {
			return flowNormal, r.errf(ErrSyntax, n.p, "break or continue inside a set block")
		}
		v, err := r.applyFilters(n.filters, s, sc)
		if err != nil {
			return flowNormal, err
		}
		return flowNormal, r.assign(n.target, v, sc)
	case *macroNode:
		sc.vars[n.name] = &macroValue{def: n, scope: sc}
		return flowNormal, nil
	case *filterBlockNode:
		s, fl, err := r.capture(n.body, sc)
		if err != nil {
			return flowNormal, err
		}
		v, err := r.applyFilters(n.filters, s, sc)
		if err != nil {
			return flowNormal, err
		}
		out, err := r.str(n.p, v)
		if err != nil {
			return flowNormal, err
		}
		if err := r.write(n.p, out); err != nil {
			return flowNormal, err
		}
		return fl, nil
	case *withNode:
		inner := newScope(sc)
		for i, t := range n.targets {
			v, err := r.eval(n.vals[i], sc)
			if err != nil {
				return flowNormal, err
			}
			if err := r.assign(t, v, inner); err != nil {
				return flowNormal, err
			}
		}
		return r.execBody(n.body, inner)
	case *breakNode:
		return flowBreak, nil
	case *continueNode:
		return flowContinue, nil
	case *generationNode:
		return r.execBody(n.body, sc)
	}
	return flowNormal, fmt.Errorf("template: internal error: unknown node %T", n)
}

// applyFilters applies a filter chain (from a set or filter block) to s.
func (r *renderer) applyFilters(chain []*filterExpr, s string, sc *scope) (any, error) {
	var v any = s
	for _, f := range chain {
		var err error
		if v, err = r.callFilter(f, v, sc); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (r *renderer) execFor(n *forNode, sc *scope) (flow, error) {
	seq, err := r.eval(n.iter, sc)
	if err != nil {
		return flowNormal, err
	}
	items, err := r.iterate(n.iter.offset(), seq)
	if err != nil {
		return flowNormal, err
	}
	inner := newScope(sc)
	if n.cond != nil {
		var kept []any
		for _, it := range items {
			if err := r.tick(n.p); err != nil {
				return flowNormal, err
			}
			if err := r.assign(n.target, it, inner); err != nil {
				return flowNormal, err
			}
			c, err := r.eval(n.cond, inner)
			if err != nil {
				return flowNormal, err
			}
			if truthy(c) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return r.execBody(n.els, inner)
	}
	lv := &loopValue{items: items}
	inner.vars["loop"] = lv
	for i, it := range items {
		if err := r.tick(n.p); err != nil {
			return flowNormal, err
		}
		lv.index0 = i
		if err := r.assign(n.target, it, inner); err != nil {
			return flowNormal, err
		}
		fl, err := r.execBody(n.body, inner)
		if err != nil {
			return flowNormal, err
		}
		if fl == flowBreak {
			break
		}
	}
	return flowNormal, nil
}

func (r *renderer) tick(off int) error {
	r.iterations++
	if r.iterations > r.lim.maxIterations {
		return r.errf(ErrLimit, off, "more than %d loop iterations", r.lim.maxIterations)
	}
	return nil
}

// iterate returns the items a for loop (or a filter) visits in v.
func (r *renderer) iterate(off int, v any) ([]any, error) {
	switch x := demarkup(v).(type) {
	case *listValue:
		if x.kind == kindGen {
			if x.consumed {
				return nil, nil
			}
			x.consumed = true
		}
		return x.items, nil
	case *dictValue:
		return append([]any(nil), x.keys...), nil
	case string:
		if err := r.checkItems(off, runeLen(x)); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(x))
		for _, c := range x {
			out = append(out, string(c))
		}
		return out, nil
	case undefined:
		return nil, nil
	}
	return nil, r.errf(ErrRender, off, "'%s' object is not iterable", typeName(v))
}

// assign binds v to a target in sc.
func (r *renderer) assign(t *target, v any, sc *scope) error {
	switch {
	case t.nsAttr != "":
		obj, ok := sc.lookup(t.name)
		ns, isNS := obj.(*namespace)
		if !ok || !isNS {
			return r.errf(ErrRender, t.p, "cannot assign attribute on non-namespace object ('%s' is %s)", t.name, typeName(obj))
		}
		ns.attrs.set(t.nsAttr, v)
		return nil
	case t.items != nil:
		items, err := r.iterate(t.p, v)
		if err != nil {
			return r.errf(ErrRender, t.p, "cannot unpack non-iterable %s object", typeName(v))
		}
		if len(items) != len(t.items) {
			if len(items) > len(t.items) {
				return r.errf(ErrRender, t.p, "too many values to unpack (expected %d)", len(t.items))
			}
			return r.errf(ErrRender, t.p, "not enough values to unpack (expected %d, got %d)", len(t.items), len(items))
		}
		for i, sub := range t.items {
			if err := r.assign(sub, items[i], sc); err != nil {
				return err
			}
		}
		return nil
	}
	sc.vars[t.name] = v
	return nil
}

// str converts a value for output; values without a stable text form are
// an unsupported construct rather than a guess.
func (r *renderer) str(off int, v any) (string, error) {
	s, err := pyStrMax(v, r.lim.maxOutput)
	if err == errOutputTooLarge {
		return "", r.errf(ErrLimit, off, "value printed exceeds %d bytes", r.lim.maxOutput)
	}
	if err == nil {
		if _, plain := v.(string); !plain {
			err = r.charge(off, len(s))
		}
		return s, err
	}
	if err != nil {
		var np *notPrintableError
		if errors.As(err, &np) {
			return "", &Error{Kind: ErrUnsupported, Pos: r.src.pos(off), Construct: "printing a " + np.typ,
				Msg: "CPython would print an object address here; convert the value first (for example with |list)"}
		}
		return "", r.errf(ErrRender, off, "%v", err)
	}
	return s, nil
}

func (r *renderer) eval(e expr, sc *scope) (any, error) {
	switch e := e.(type) {
	case *constExpr:
		return e.v, nil
	case *nameExpr:
		if v, ok := sc.lookup(e.name); ok {
			return v, nil
		}
		return undefName(e.name), nil
	case *attrExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		return r.getAttr(e.p, x, e.attr)
	case *itemExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		if sl, ok := e.key.(*sliceExpr); ok {
			return r.evalSlice(x, sl, sc)
		}
		k, err := r.eval(e.key, sc)
		if err != nil {
			return nil, err
		}
		return r.getItem(e.p, x, k)
	case *callExpr:
		return r.evalCall(e, sc)
	case *filterExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		return r.callFilter(e, x, sc)
	case *testExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		args, kwargs, err := r.evalArgs(e.args, e.kwargs, sc)
		if err != nil {
			return nil, err
		}
		return r.runTest(e.p, e.fn, x, args, kwargs)
	case *notExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		return !truthy(x), nil
	case *unaryExpr:
		x, err := r.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		return r.unary(e.p, e.neg, x)
	case *binExpr:
		if e.op == "+" {
			return r.evalPlusChain(e, sc)
		}
		l, err := r.eval(e.l, sc)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "and":
			if !truthy(l) {
				return l, nil
			}
			return r.eval(e.r, sc)
		case "or":
			if truthy(l) {
				return l, nil
			}
			return r.eval(e.r, sc)
		}
		rv, err := r.eval(e.r, sc)
		if err != nil {
			return nil, err
		}
		return r.binary(e.p, e.op, l, rv)
	case *concatExpr:
		var b strings.Builder
		for _, p := range e.parts {
			v, err := r.eval(p, sc)
			if err != nil {
				return nil, err
			}
			s, err := r.str(p.offset(), v)
			if err != nil {
				return nil, err
			}
			if err := r.bound(e.p, b.Len()+len(s)); err != nil {
				return nil, err
			}
			b.WriteString(s)
		}
		return b.String(), r.charge(e.p, b.Len())
	case *compareExpr:
		l, err := r.eval(e.first, sc)
		if err != nil {
			return nil, err
		}
		for _, op := range e.ops {
			rv, err := r.eval(op.x, sc)
			if err != nil {
				return nil, err
			}
			ok, err := r.compare(op.x.offset(), op.op, l, rv)
			if err != nil {
				return nil, err
			}
			if !ok {
				return false, nil
			}
			l = rv
		}
		return true, nil
	case *condExpr:
		t, err := r.eval(e.test, sc)
		if err != nil {
			return nil, err
		}
		if truthy(t) {
			return r.eval(e.then, sc)
		}
		if e.els == nil {
			return undefined{hint: "the inline if-expression evaluated to false and no else section was defined"}, nil
		}
		return r.eval(e.els, sc)
	case *listExpr:
		items := make([]any, 0, len(e.items))
		for _, it := range e.items {
			v, err := r.eval(it, sc)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		return newList(items), nil
	case *tupleExpr:
		items := make([]any, 0, len(e.items))
		for _, it := range e.items {
			v, err := r.eval(it, sc)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		return newTuple(items...), nil
	case *dictExpr:
		d := newDict()
		for i := range e.keys {
			k, err := r.eval(e.keys[i], sc)
			if err != nil {
				return nil, err
			}
			v, err := r.eval(e.vals[i], sc)
			if err != nil {
				return nil, err
			}
			if !d.set(k, v) {
				return nil, r.errf(ErrRender, e.keys[i].offset(), "unhashable type: '%s'", typeName(k))
			}
		}
		return d, nil
	case *sliceExpr:
		return nil, r.errf(ErrSyntax, e.p, "a slice is only allowed inside []")
	}
	return nil, fmt.Errorf("template: internal error: unknown expression %T", e)
}

// evalPlusChain evaluates a left-associative chain a + b + c + ... in
// Python's order (each operand evaluated after the sums before it), but
// joins runs of str operands in one buffer instead of allocating every
// intermediate string.
func (r *renderer) evalPlusChain(e *binExpr, sc *scope) (any, error) {
	var ops []*binExpr
	var first expr = e
	for {
		b, ok := first.(*binExpr)
		if !ok || b.op != "+" {
			break
		}
		ops = append(ops, b)
		first = b.l
	}
	acc, err := r.eval(first, sc)
	if err != nil {
		return nil, err
	}
	var buf strings.Builder
	inBuf := false // acc's text is in buf
	for i := len(ops) - 1; i >= 0; i-- {
		op := ops[i]
		v, err := r.eval(op.r, sc)
		if err != nil {
			return nil, err
		}
		as, aStr := acc.(string)
		vs, vStr := v.(string)
		if inBuf || aStr && vStr {
			if vStr {
				if !inBuf {
					buf.Reset()
					buf.WriteString(as)
					inBuf = true
				}
				if err := r.bound(op.p, buf.Len()+len(vs)); err != nil {
					return nil, err
				}
				buf.WriteString(vs)
				continue
			}
			acc, inBuf = buf.String(), false
			if err := r.charge(op.p, len(acc.(string))); err != nil {
				return nil, err
			}
		}
		if acc, err = r.binary(op.p, "+", acc, v); err != nil {
			return nil, err
		}
	}
	if inBuf {
		s := buf.String()
		return s, r.charge(e.p, len(s))
	}
	return acc, nil
}

func (r *renderer) evalArgs(args []expr, kwargs []kwarg, sc *scope) ([]any, []kwval, error) {
	av := make([]any, 0, len(args))
	for _, a := range args {
		v, err := r.eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		av = append(av, v)
	}
	var kv []kwval
	for _, k := range kwargs {
		v, err := r.eval(k.val, sc)
		if err != nil {
			return nil, nil, err
		}
		kv = append(kv, kwval{name: k.name, v: v})
	}
	return av, kv, nil
}

func (r *renderer) evalCall(e *callExpr, sc *scope) (any, error) {
	fn, err := r.eval(e.fn, sc)
	if err != nil {
		return nil, err
	}
	args, kwargs, err := r.evalArgs(e.args, e.kwargs, sc)
	if err != nil {
		return nil, err
	}
	return r.call(e.p, fn, args, kwargs)
}

func (r *renderer) call(off int, fn any, args []any, kwargs []kwval) (any, error) {
	switch f := fn.(type) {
	case *builtin:
		return f.fn(r, off, args, kwargs)
	case *macroValue:
		return r.callMacro(off, f, args, kwargs)
	case undefined:
		return nil, r.undefErr(off, f)
	}
	return nil, r.errf(ErrRender, off, "'%s' object is not callable", typeName(fn))
}

func (r *renderer) callMacro(off int, m *macroValue, args []any, kwargs []kwval) (any, error) {
	def := m.def
	if r.depth >= r.lim.maxDepth {
		return nil, r.errf(ErrLimit, off, "macro calls nested deeper than %d", r.lim.maxDepth)
	}
	r.depth++
	defer func() { r.depth-- }()
	sc := newScope(m.scope)
	var varargs []any
	for i, a := range args {
		if i < len(def.params) {
			sc.vars[def.params[i]] = a
			continue
		}
		if !def.catchVarargs {
			return nil, r.errf(ErrRender, off, "macro '%s' takes not more than %d argument(s)", def.name, len(def.params))
		}
		varargs = append(varargs, a)
	}
	extra := newDict()
	for _, kw := range kwargs {
		known := false
		for i, p := range def.params {
			if p == kw.name {
				if i < len(args) {
					return nil, r.errf(ErrRender, off, "macro '%s' got multiple values for argument '%s'", def.name, p)
				}
				sc.vars[p] = kw.v
				known = true
			}
		}
		if !known {
			if !def.catchKwargs {
				return nil, r.errf(ErrRender, off, "macro '%s' takes no keyword argument '%s'", def.name, kw.name)
			}
			extra.set(kw.name, kw.v)
		}
	}
	firstDefault := len(def.params) - len(def.defaults)
	for i, p := range def.params {
		if _, ok := sc.vars[p]; ok {
			continue
		}
		if i >= firstDefault {
			v, err := r.eval(def.defaults[i-firstDefault], sc)
			if err != nil {
				return nil, err
			}
			sc.vars[p] = v
			continue
		}
		sc.vars[p] = undefined{hint: fmt.Sprintf("parameter '%s' was not provided", p)}
	}
	sc.vars["varargs"] = newTuple(varargs...)
	sc.vars["kwargs"] = extra
	s, _, err := r.capture(def.body, sc)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (r *renderer) unary(off int, neg bool, x any) (any, error) {
	if u, ok := x.(undefined); ok {
		return nil, r.undefErr(off, u)
	}
	i, f, isFloat, ok := asNumber(x)
	if !ok {
		op := "+"
		if neg {
			op = "-"
		}
		return nil, r.errf(ErrRender, off, "bad operand type for unary %s: '%s'", op, typeName(x))
	}
	if !neg {
		if isFloat {
			return f, nil
		}
		return i, nil
	}
	if isFloat {
		return -f, nil
	}
	if i == math.MinInt64 {
		return nil, r.errf(ErrUnsupported, off, "integer overflow (values beyond 64 bits are not supported)")
	}
	return -i, nil
}

// binary evaluates the arithmetic operators with Python's semantics.
func (r *renderer) binary(off int, op string, a, b any) (any, error) {
	if u, ok := a.(undefined); ok {
		return nil, r.undefErr(off, u)
	}
	if u, ok := b.(undefined); ok {
		return nil, r.undefErr(off, u)
	}
	typeErr := func() error {
		return r.errf(ErrRender, off, "unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(a), typeName(b))
	}
	// Markup + str escapes the str and stays Markup; Markup * n is Markup.
	_, aIsM := a.(markup)
	_, bIsM := b.(markup)
	if aIsM || bIsM {
		if op == "+" {
			escape := func(v any) (string, bool) {
				switch x := v.(type) {
				case markup:
					return string(x), true
				case string:
					return htmlEscape(x), true
				}
				return "", false
			}
			ls, ok1 := escape(a)
			rs, ok2 := escape(b)
			if !ok1 || !ok2 {
				return nil, typeErr()
			}
			if err := r.checkStr(off, len(ls)+len(rs)); err != nil {
				return nil, err
			}
			return markup(ls + rs), nil
		}
		v, err := r.binary(off, op, demarkup(a), demarkup(b))
		if s, ok := v.(string); ok && op == "*" && err == nil {
			return markup(s), nil
		}
		return v, err
	}
	ai, af, aFloat, aNum := asNumber(a)
	bi, bf, bFloat, bNum := asNumber(b)
	if aNum && bNum {
		return r.arith(off, op, ai, af, aFloat, bi, bf, bFloat)
	}
	switch op {
	case "+":
		switch x := a.(type) {
		case string:
			y, ok := b.(string)
			if !ok {
				return nil, r.errf(ErrRender, off, "can only concatenate str (not \"%s\") to str", typeName(b))
			}
			if err := r.checkStr(off, len(x)+len(y)); err != nil {
				return nil, err
			}
			return x + y, nil
		case *listValue:
			y, ok := b.(*listValue)
			if !ok || x.kind != y.kind || (x.kind != kindList && x.kind != kindTuple) {
				if x.kind == kindList {
					return nil, r.errf(ErrRender, off, "can only concatenate list (not \"%s\") to list", typeName(b))
				}
				return nil, typeErr()
			}
			if err := r.checkItems(off, len(x.items)+len(y.items)); err != nil {
				return nil, err
			}
			items := append(append(make([]any, 0, len(x.items)+len(y.items)), x.items...), y.items...)
			return &listValue{items: items, kind: x.kind}, nil
		}
	case "*":
		// Sequence repetition.
		seq, n := a, bi
		if aNum && !aFloat {
			seq, n = b, ai
		} else if !bNum || bFloat {
			return nil, typeErr()
		}
		if _, isBool := seq.(bool); isBool {
			return nil, typeErr()
		}
		if n < 0 {
			n = 0
		}
		switch x := seq.(type) {
		case string:
			if n > 0 && int64(len(x)) > int64(r.lim.maxOutput)/n {
				return nil, r.errf(ErrLimit, off, "string value exceeds %d bytes", r.lim.maxOutput)
			}
			if err := r.checkStr(off, len(x)*int(n)); err != nil {
				return nil, err
			}
			return strings.Repeat(x, int(n)), nil
		case *listValue:
			if x.kind != kindList && x.kind != kindTuple {
				return nil, typeErr()
			}
			if n > 0 && int64(len(x.items)) > int64(r.lim.maxItems)/n {
				return nil, r.errf(ErrLimit, off, "list exceeds %d items", r.lim.maxItems)
			}
			if err := r.checkItems(off, len(x.items)*int(n)); err != nil {
				return nil, err
			}
			items := make([]any, 0, len(x.items)*int(n))
			for k := int64(0); k < n; k++ {
				items = append(items, x.items...)
			}
			return &listValue{items: items, kind: x.kind}, nil
		}
	case "%":
		if _, ok := a.(string); ok {
			return nil, &Error{Kind: ErrUnsupported, Pos: r.src.pos(off), Construct: "printf-style string formatting",
				Msg: "the % operator on strings is not supported"}
		}
	}
	return nil, typeErr()
}

func (r *renderer) arith(off int, op string, ai int64, af float64, aFloat bool, bi int64, bf float64, bFloat bool) (any, error) {
	overflow := func() error {
		return r.errf(ErrUnsupported, off, "integer overflow in %s (values beyond 64 bits are not supported)", op)
	}
	zero := func(what string) error {
		return r.errf(ErrRender, off, "%s by zero", what)
	}
	if !aFloat && !bFloat {
		switch op {
		case "+":
			s := ai + bi
			if (s > ai) != (bi > 0) {
				return nil, overflow()
			}
			return s, nil
		case "-":
			s := ai - bi
			if (s < ai) != (bi > 0) {
				return nil, overflow()
			}
			return s, nil
		case "*":
			if ai != 0 && bi != 0 {
				p := ai * bi
				if p/bi != ai || (ai == -1 && bi == math.MinInt64) || (bi == -1 && ai == math.MinInt64) {
					return nil, overflow()
				}
				return p, nil
			}
			return int64(0), nil
		case "/":
			if bi == 0 {
				return nil, zero("division")
			}
			return float64(ai) / float64(bi), nil
		case "//":
			if bi == 0 {
				return nil, zero("integer division or modulo")
			}
			if ai == math.MinInt64 && bi == -1 {
				return nil, overflow()
			}
			q := ai / bi
			if (ai%bi != 0) && ((ai < 0) != (bi < 0)) {
				q--
			}
			return q, nil
		case "%":
			if bi == 0 {
				return nil, zero("integer division or modulo")
			}
			if bi == -1 {
				return int64(0), nil
			}
			m := ai % bi
			if m != 0 && ((m < 0) != (bi < 0)) {
				m += bi
			}
			return m, nil
		case "**":
			if bi < 0 {
				return math.Pow(float64(ai), float64(bi)), nil
			}
			res, base, e := int64(1), ai, bi
			for e > 0 {
				if e&1 == 1 {
					p := res * base
					if base != 0 && p/base != res {
						return nil, overflow()
					}
					res = p
				}
				e >>= 1
				if e > 0 {
					sq := base * base
					if base != 0 && sq/base != base {
						return nil, overflow()
					}
					base = sq
				}
			}
			return res, nil
		}
	}
	switch op {
	case "+":
		return af + bf, nil
	case "-":
		return af - bf, nil
	case "*":
		return af * bf, nil
	case "/":
		if bf == 0 {
			return nil, zero("float division")
		}
		return af / bf, nil
	case "//":
		if bf == 0 {
			return nil, zero("float floor division")
		}
		return math.Floor(af / bf), nil
	case "%":
		if bf == 0 {
			return nil, zero("float modulo")
		}
		m := math.Mod(af, bf)
		if m != 0 && (m < 0) != (bf < 0) {
			m += bf
		}
		return m, nil
	case "**":
		if af == 0 && bf < 0 {
			return nil, r.errf(ErrRender, off, "0.0 cannot be raised to a negative power")
		}
		return math.Pow(af, bf), nil
	}
	return nil, r.errf(ErrRender, off, "unknown operator %s", op)
}

// compare evaluates one comparison operator.
func (r *renderer) compare(off int, op string, a, b any) (bool, error) {
	if err := r.charge(off, scanCost(a)+scanCost(b)); err != nil {
		return false, err
	}
	switch op {
	case "==":
		return pyEqual(a, b), nil
	case "!=":
		return !pyEqual(a, b), nil
	case "in", "notin":
		in, err := r.contains(off, b, a)
		if err != nil {
			return false, err
		}
		return in == (op == "in"), nil
	}
	if u, ok := a.(undefined); ok {
		return false, r.undefErr(off, u)
	}
	if u, ok := b.(undefined); ok {
		return false, r.undefErr(off, u)
	}
	c, ok := pyCompare(a, b)
	if !ok {
		return false, r.errf(ErrRender, off, "'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
	}
	if _, af, fa, _ := asNumber(a); fa && math.IsNaN(af) {
		return false, nil
	}
	if _, bf, fb, _ := asNumber(b); fb && math.IsNaN(bf) {
		return false, nil
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// contains is Python's `needle in container`.
func (r *renderer) contains(off int, container, needle any) (bool, error) {
	needle = demarkup(needle)
	if err := r.charge(off, scanCost(container)); err != nil {
		return false, err
	}
	switch c := demarkup(container).(type) {
	case string:
		s, ok := needle.(string)
		if !ok {
			return false, r.errf(ErrRender, off, "'in <string>' requires string as left operand, not %s", typeName(needle))
		}
		return strings.Contains(c, s), nil
	case *dictValue:
		if _, ok := keyOf(needle); !ok {
			return false, r.errf(ErrRender, off, "unhashable type: '%s'", typeName(needle))
		}
		_, ok := c.get(needle)
		return ok, nil
	case *listValue:
		items, _ := r.iterate(off, c)
		for _, it := range items {
			if pyEqual(it, needle) {
				return true, nil
			}
		}
		return false, nil
	case undefined:
		return false, nil
	}
	return false, r.errf(ErrRender, off, "argument of type '%s' is not iterable", typeName(container))
}

// getAttr is the sandboxed environment's getattr: a Python attribute
// (method) first, then an item; a missing one is Undefined, except that
// any use of Undefined itself is an error.
func (r *renderer) getAttr(off int, x any, name string) (any, error) {
	x = demarkup(x)
	if u, ok := x.(undefined); ok {
		return nil, r.undefErr(off, u)
	}
	if strings.HasPrefix(name, "_") {
		return undefined{hint: fmt.Sprintf("access to attribute '%s' of '%s' object is unsafe", name, typeName(x))}, nil
	}
	if m, ok, err := r.method(off, x, name); err != nil || ok {
		return m, err
	}
	switch v := x.(type) {
	case *dictValue:
		if val, ok := v.get(name); ok {
			return val, nil
		}
	case *namespace:
		if val, ok := v.attrs.get(name); ok {
			return val, nil
		}
	case *loopValue:
		if val, ok := r.loopAttr(v, name); ok {
			return val, nil
		}
	}
	return undefAttr(typeName(x), name), nil
}

// getItem is the sandboxed environment's getitem: x[key] first, then for
// a string key an attribute; a failure is Undefined.
func (r *renderer) getItem(off int, x any, key any) (any, error) {
	x, key = demarkup(x), demarkup(key)
	if u, ok := x.(undefined); ok {
		return nil, r.undefErr(off, u)
	}
	missing := func() (any, error) {
		if name, ok := key.(string); ok {
			return r.getAttr(off, x, name)
		}
		ks, _ := pyRepr(key)
		return undefined{hint: fmt.Sprintf("'%s object' has no attribute %s", typeName(x), ks)}, nil
	}
	switch v := x.(type) {
	case *dictValue:
		if val, ok := v.get(key); ok {
			return val, nil
		}
		if _, ok := key.(string); ok {
			// A missing string key falls back to attributes (methods).
			if m, ok, err := r.method(off, x, key.(string)); err != nil || ok {
				return m, err
			}
			return undefAttr("dict", key.(string)), nil
		}
		return missing()
	case *listValue:
		if v.kind == kindGen || v.kind == kindView {
			return missing()
		}
		if i, isInt := intIndex(key); isInt {
			n := int64(len(v.items))
			if i < 0 {
				i += n
			}
			if i < 0 || i >= n {
				return undefined{hint: fmt.Sprintf("%s object has no element %d", typeName(x), i)}, nil
			}
			return v.items[i], nil
		}
		return missing()
	case string:
		if i, isInt := intIndex(key); isInt {
			if c, ok := strIndex(v, i); ok {
				return c, nil
			}
			return undefined{hint: fmt.Sprintf("str object has no element %d", i)}, nil
		}
		return missing()
	case *namespace, *loopValue:
		if name, ok := key.(string); ok {
			return r.getAttr(off, x, name)
		}
	}
	return missing()
}

// intIndex returns key as an index when it is an int (or bool).
func intIndex(key any) (int64, bool) {
	switch k := key.(type) {
	case int64:
		return k, true
	case bool:
		if k {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

func (r *renderer) evalSlice(x any, sl *sliceExpr, sc *scope) (any, error) {
	v, err := r.evalSliceUncharged(demarkup(x), sl, sc)
	if err != nil {
		return nil, err
	}
	return v, r.charge(sl.p, sizeOf(v))
}

func (r *renderer) evalSliceUncharged(x any, sl *sliceExpr, sc *scope) (any, error) {
	if u, ok := x.(undefined); ok {
		return nil, r.undefErr(sl.p, u)
	}
	var bounds [3]*int64
	for i, part := range []expr{sl.start, sl.stop, sl.step} {
		if part == nil {
			continue
		}
		v, err := r.eval(part, sc)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		n, ok := intIndex(v)
		if !ok {
			return nil, r.errf(ErrRender, part.offset(), "slice indices must be integers or None, not %s", typeName(v))
		}
		bounds[i] = &n
	}
	if bounds[2] != nil && *bounds[2] == 0 {
		return nil, r.errf(ErrRender, sl.p, "slice step cannot be zero")
	}
	switch v := x.(type) {
	case string:
		runes := runesOf(v)
		if runes == nil {
			idx := sliceIndices(len(v), bounds[0], bounds[1], bounds[2])
			if bounds[2] == nil || *bounds[2] == 1 {
				if len(idx) == 0 {
					return "", nil
				}
				return v[idx[0] : idx[len(idx)-1]+1], nil
			}
			b := make([]byte, len(idx))
			for j, i := range idx {
				b[j] = v[i]
			}
			return string(b), nil
		}
		idx := sliceIndices(len(runes), bounds[0], bounds[1], bounds[2])
		out := make([]rune, len(idx))
		for j, i := range idx {
			out[j] = runes[i]
		}
		return string(out), nil
	case *listValue:
		if v.kind == kindGen || v.kind == kindView {
			break
		}
		idx := sliceIndices(len(v.items), bounds[0], bounds[1], bounds[2])
		items := make([]any, len(idx))
		for j, i := range idx {
			items[j] = v.items[i]
		}
		kind := v.kind
		if kind == kindRange {
			kind = kindList
		}
		return &listValue{items: items, kind: kind}, nil
	}
	return undefined{hint: fmt.Sprintf("'%s' object is not subscriptable", typeName(x))}, nil
}

func (r *renderer) loopAttr(l *loopValue, name string) (any, bool) {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.index0 + 1), true
	case "index0":
		return int64(l.index0), true
	case "revindex":
		return int64(n - l.index0), true
	case "revindex0":
		return int64(n - l.index0 - 1), true
	case "first":
		return l.index0 == 0, true
	case "last":
		return l.index0 == n-1, true
	case "length":
		return int64(n), true
	case "depth":
		return int64(1), true
	case "depth0":
		return int64(0), true
	case "previtem":
		if l.index0 == 0 {
			return undefined{hint: "there is no previous item"}, true
		}
		return l.items[l.index0-1], true
	case "nextitem":
		if l.index0 == n-1 {
			return undefined{hint: "there is no next item"}, true
		}
		return l.items[l.index0+1], true
	case "cycle":
		return &builtin{name: "loop.cycle", fn: func(r *renderer, off int, args []any, kwargs []kwval) (any, error) {
			if len(args) == 0 {
				return nil, r.errf(ErrRender, off, "no items for cycling given")
			}
			return args[l.index0%len(args)], nil
		}}, true
	case "changed":
		return &builtin{name: "loop.changed", fn: func(r *renderer, off int, args []any, kwargs []kwval) (any, error) {
			cur := newList(args)
			if l.called && pyEqual(newList(l.changed), cur) {
				return false, nil
			}
			l.called = true
			l.changed = args
			return true, nil
		}}, true
	}
	return nil, false
}
