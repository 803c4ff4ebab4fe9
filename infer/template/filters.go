package template

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// markup is markupsafe.Markup: the result of |safe and |escape. It prints
// and compares as a str; `+` with a str escapes the str, as Markup does.
// Everything else treats it as its text.
type markup string

func demarkup(v any) any {
	if m, ok := v.(markup); ok {
		return string(m)
	}
	return v
}

func demarkupAll(vs []any) []any {
	for i, v := range vs {
		vs[i] = demarkup(v)
	}
	return vs
}

// htmlEscape is markupsafe.escape for a str.
func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", ">", "&gt;", "<", "&lt;", "'", "&#39;", "\"", "&#34;").Replace(s)
}

// filterDef is one filter: fn gets the value and the evaluated arguments.
type filterDef struct {
	name string
	fn   func(r *renderer, off int, v any, args []any, kwargs []kwval) (any, error)
}

// testDef is one test (`x is name(args)`).
type testDef struct {
	name string
	fn   func(r *renderer, off int, v any, args []any, kwargs []kwval) (bool, error)
}

// unsupportedFilters are Jinja2 built-in filters this package does not
// implement.
var unsupportedFilters = []string{
	"batch", "filesizeformat", "forceescape", "format", "groupby", "pprint", "random",
	"slice", "striptags", "truncate", "urlencode", "urlize", "wordwrap", "xmlattr",
}

var filters map[string]*filterDef

var tests map[string]*testDef

func lookupFilter(name string) (*filterDef, error) {
	if f, ok := filters[name]; ok {
		return f, nil
	}
	for _, u := range unsupportedFilters {
		if u == name {
			return nil, fmt.Errorf("the Jinja2 filter '%s' is not supported", name)
		}
	}
	return nil, fmt.Errorf("no filter named '%s'", name)
}

func lookupTest(name string) (*testDef, error) {
	if t, ok := tests[name]; ok {
		return t, nil
	}
	if name == "escaped" {
		return nil, fmt.Errorf("the Jinja2 test 'escaped' is not supported")
	}
	return nil, fmt.Errorf("no test named '%s'", name)
}

func (r *renderer) callFilter(f *filterExpr, v any, sc *scope) (any, error) {
	args, kwargs, err := r.evalArgs(f.args, f.kwargs, sc)
	if err != nil {
		return nil, err
	}
	switch f.name {
	case "safe", "escape", "e", "string", "default", "d", "tojson", "length", "count":
	default:
		v = demarkup(v)
	}
	if err := r.charge(f.p, scanCost(v)); err != nil {
		return nil, err
	}
	out, err := f.fn.fn(r, f.p, v, demarkupAll(args), kwargs)
	if err != nil {
		return nil, err
	}
	return out, r.charge(f.p, sizeOf(out))
}

func (r *renderer) runTest(off int, t *testDef, v any, args []any, kwargs []kwval) (bool, error) {
	return t.fn(r, off, demarkup(v), demarkupAll(args), kwargs)
}

// plain wraps a filter that takes a fixed parameter list.
func plain(name string, names []string, defaults []any, fn func(r *renderer, off int, v any, a []any) (any, error)) *filterDef {
	return &filterDef{name: name, fn: func(r *renderer, off int, v any, args []any, kwargs []kwval) (any, error) {
		a, err := r.bind(off, name, args, kwargs, names, defaults)
		if err != nil {
			return nil, err
		}
		return fn(r, off, v, a)
	}}
}

// filterInt is Jinja2's |int: int(v, base) for a str, int(v) for
// another value, and when that raises ValueError, int(float(v)), or def
// when that fails too. A result beyond 64 bits is an error, as everywhere
// in this package, rather than a wrong number.
func (r *renderer) filterInt(off int, v, def, base any) (any, error) {
	var f float64
	switch x := v.(type) {
	case int64:
		return x, nil
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case float64:
		if math.IsInf(x, 0) {
			return nil, r.errf(ErrRender, off, "cannot convert float infinity to integer")
		}
		f = x
	case string:
		b, err := r.wantInt(off, "int", base)
		if err != nil {
			return nil, err
		}
		i, ok, big := pyParseInt(x, b)
		if big {
			return nil, r.errf(ErrUnsupported, off, "integer overflow in |int of %q (values beyond 64 bits are not supported)", x)
		}
		if ok {
			return i, nil
		}
		if f, ok = pyParseFloat(x); !ok || math.IsInf(f, 0) {
			return def, nil
		}
	default:
		return def, nil
	}
	if math.IsNaN(f) {
		return def, nil
	}
	if t := math.Trunc(f); t < -(1<<63) || t >= 1<<63 {
		return nil, r.errf(ErrUnsupported, off, "integer overflow in |int of %v (values beyond 64 bits are not supported)", f)
	}
	return int64(f), nil
}

// softStr is Jinja2's soft_str: str() of the value.
func (r *renderer) softStr(off int, v any) (string, error) { return r.str(off, demarkup(v)) }

// attrGetter resolves Jinja2's attribute arguments ("a.b", or an integer
// index in a dotted path).
func (r *renderer) attrGetter(off int, v any, attr any) (any, error) {
	s, ok := attr.(string)
	if !ok {
		return r.getItem(off, v, attr)
	}
	for _, part := range strings.Split(s, ".") {
		var key any = part
		if n, err := strconv.ParseInt(part, 10, 64); err == nil {
			key = n
		}
		var err error
		if v, err = r.getItem(off, v, key); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// sortKey lower-cases strings unless caseSensitive, as Jinja2's
// ignore_case does.
func sortKey(v any, caseSensitive bool) any {
	if s, ok := v.(string); ok && !caseSensitive {
		return pyLower(s)
	}
	return v
}

func (r *renderer) sortItems(off int, items []any, keys []any) error {
	var err error
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		c, ok := pyCompare(keys[idx[a]], keys[idx[b]])
		if !ok && err == nil {
			err = r.errf(ErrRender, off, "'<' not supported between instances of '%s' and '%s'", typeName(keys[idx[a]]), typeName(keys[idx[b]]))
		}
		return c < 0
	})
	sorted := make([]any, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return err
}

// selectOrReject implements select, reject, selectattr and rejectattr.
func (r *renderer) selectOrReject(off int, name string, v any, args []any, kwargs []kwval, byAttr, keep bool) (any, error) {
	if len(kwargs) > 0 {
		return nil, r.errf(ErrRender, off, "%s() takes no keyword arguments", name)
	}
	items, err := r.iterate(off, v)
	if err != nil {
		return nil, err
	}
	var attr any
	if byAttr {
		if len(args) == 0 {
			return nil, r.errf(ErrRender, off, "%s() missing the attribute argument", name)
		}
		attr, args = args[0], args[1:]
	}
	var test *testDef
	if len(args) > 0 {
		tn, ok := args[0].(string)
		if !ok {
			return nil, r.errf(ErrRender, off, "%s() test name must be a string", name)
		}
		if test, err = lookupTest(tn); err != nil {
			return nil, &Error{Kind: ErrUnsupported, Pos: r.src.pos(off), Construct: fmt.Sprintf("test '%s'", tn), Msg: err.Error()}
		}
		args = args[1:]
	}
	var out []any
	for _, it := range items {
		x := it
		if byAttr {
			if x, err = r.attrGetter(off, it, attr); err != nil {
				return nil, err
			}
		}
		var ok bool
		if test == nil {
			ok = truthy(x)
		} else if ok, err = test.fn(r, off, demarkup(x), args, nil); err != nil {
			return nil, err
		}
		if ok == keep {
			out = append(out, it)
		}
	}
	return newGen(out), nil
}

func init() {
	filters = map[string]*filterDef{}
	add := func(f *filterDef, aliases ...string) {
		filters[f.name] = f
		for _, a := range aliases {
			filters[a] = f
		}
	}
	add(plain("abs", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		i, f, isFloat, ok := asNumber(v)
		if !ok {
			return nil, r.errf(ErrRender, off, "bad operand type for abs(): '%s'", typeName(v))
		}
		if isFloat {
			return math.Abs(f), nil
		}
		if i < 0 {
			if i == math.MinInt64 {
				return nil, r.errf(ErrUnsupported, off, "integer overflow")
			}
			return -i, nil
		}
		return i, nil
	}))
	add(plain("attr", []string{"name"}, []any{required}, func(r *renderer, off int, v any, a []any) (any, error) {
		name, err := r.wantStr(off, "attr", a[0])
		if err != nil {
			return nil, err
		}
		return r.getAttr(off, v, name)
	}))
	add(plain("capitalize", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		s, err := r.softStr(off, v)
		return pyCapitalize(s), err
	}))
	add(plain("center", []string{"width"}, []any{int64(80)}, func(r *renderer, off int, v any, a []any) (any, error) {
		s, err := r.softStr(off, v)
		if err != nil {
			return nil, err
		}
		return r.strMethod(off, s, "center", []any{a[0]}, nil)
	}))
	add(plain("default", []string{"default_value", "boolean"}, []any{"", false}, func(r *renderer, off int, v any, a []any) (any, error) {
		_, isUndef := v.(undefined)
		if isUndef || truthy(a[1]) && !truthy(v) {
			return a[0], nil
		}
		return v, nil
	}), "d")
	add(plain("dictsort", []string{"case_sensitive", "by", "reverse"}, []any{false, "key", false}, func(r *renderer, off int, v any, a []any) (any, error) {
		d, ok := v.(*dictValue)
		if !ok {
			return nil, r.errf(ErrRender, off, "dictsort: you can only sort by either a dict")
		}
		pos := 0
		switch a[1] {
		case "key":
		case "value":
			pos = 1
		default:
			return nil, r.errf(ErrRender, off, "You can only sort by either \"key\" or \"value\"")
		}
		items := make([]any, d.len())
		keys := make([]any, d.len())
		for i, k := range d.keys {
			items[i] = newTuple(k, d.vals[i])
			keys[i] = sortKey([]any{k, d.vals[i]}[pos], truthy(a[0]))
		}
		if err := r.sortItems(off, items, keys); err != nil {
			return nil, err
		}
		if truthy(a[2]) {
			reverseAny(items)
		}
		return newList(items), nil
	}))
	add(plain("escape", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		if m, ok := v.(markup); ok {
			return m, nil
		}
		s, err := r.str(off, v)
		return markup(htmlEscape(s)), err
	}), "e")
	add(plain("first", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		items, err := r.iterate(off, v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return undefined{hint: "No first item, sequence was empty."}, nil
		}
		return items[0], nil
	}))
	add(plain("last", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		if l, ok := v.(*listValue); ok && l.kind == kindGen {
			return nil, r.errf(ErrRender, off, "'generator' object is not reversible")
		}
		items, err := r.iterate(off, v)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return undefined{hint: "No last item, sequence was empty."}, nil
		}
		return items[len(items)-1], nil
	}))
	add(plain("float", []string{"default"}, []any{0.0}, func(r *renderer, off int, v any, a []any) (any, error) {
		switch x := demarkup(v).(type) {
		case float64:
			return x, nil
		case int64:
			return float64(x), nil
		case bool:
			if x {
				return 1.0, nil
			}
			return 0.0, nil
		case string:
			if f, ok := pyParseFloat(x); ok {
				return f, nil
			}
		}
		return a[0], nil
	}))
	add(plain("int", []string{"default", "base"}, []any{int64(0), int64(10)}, func(r *renderer, off int, v any, a []any) (any, error) {
		return r.filterInt(off, demarkup(v), a[0], a[1])
	}))
	add(plain("indent", []string{"width", "first", "blank"}, []any{int64(4), false, false}, func(r *renderer, off int, v any, a []any) (any, error) {
		s, err := r.softStr(off, v)
		if err != nil {
			return nil, err
		}
		var ind string
		switch w := a[0].(type) {
		case string:
			ind = w
		default:
			n, err := r.wantInt(off, "indent", w)
			if err != nil {
				return nil, err
			}
			if n > 1<<16 {
				return nil, r.errf(ErrLimit, off, "indent width %d too large", n)
			}
			ind = strings.Repeat(" ", int(max(n, 0)))
		}
		// Jinja2: lines split with splitlines(); the text keeps its
		// final newline; blank lines are indented only with blank=True.
		s += "\n"
		lines := pySplitlines(s, false)
		var b strings.Builder
		for i, line := range lines {
			if i > 0 {
				b.WriteString("\n")
			}
			if (i > 0 || truthy(a[1])) && (truthy(a[2]) || line != "") {
				b.WriteString(ind)
			}
			b.WriteString(line)
			if err := r.bound(off, b.Len()); err != nil {
				return nil, err
			}
		}
		return b.String(), r.charge(off, b.Len())
	}))
	add(plain("items", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		switch d := v.(type) {
		case undefined:
			return newGen(nil), nil
		case *dictValue:
			items := make([]any, d.len())
			for i, k := range d.keys {
				items[i] = newTuple(k, d.vals[i])
			}
			return newGen(items), nil
		}
		return nil, r.errf(ErrRender, off, "Can only get item pairs from a mapping, not %s", typeName(v))
	}))
	add(plain("join", []string{"d", "attribute"}, []any{"", nil}, func(r *renderer, off int, v any, a []any) (any, error) {
		items, err := r.iterate(off, v)
		if err != nil {
			return nil, err
		}
		sep, err := r.softStr(off, a[0])
		if err != nil {
			return nil, err
		}
		var b strings.Builder
		for i, it := range items {
			if a[1] != nil {
				if it, err = r.attrGetter(off, it, a[1]); err != nil {
					return nil, err
				}
			}
			s, err := r.softStr(off, it)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(s)
			if err := r.bound(off, b.Len()); err != nil {
				return nil, err
			}
		}
		return b.String(), r.charge(off, b.Len())
	}))
	add(plain("length", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		switch x := v.(type) {
		case string:
			return int64(runeLen(x)), nil
		case markup:
			return int64(runeLen(string(x))), nil
		case *listValue:
			if x.kind == kindGen {
				return nil, r.errf(ErrRender, off, "object of type 'generator' has no len()")
			}
			return int64(len(x.items)), nil
		case *dictValue:
			return int64(x.len()), nil
		case *namespace:
			return nil, r.errf(ErrRender, off, "object of type 'Namespace' has no len()")
		case undefined:
			return int64(0), nil
		}
		return nil, r.errf(ErrRender, off, "object of type '%s' has no len()", typeName(v))
	}), "count")
	add(plain("list", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		items, err := r.iterate(off, v)
		if err != nil {
			return nil, err
		}
		return newList(append([]any(nil), items...)), nil
	}))
	add(plain("lower", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		s, err := r.softStr(off, v)
		return pyLower(s), err
	}))
	add(plain("upper", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		s, err := r.softStr(off, v)
		return pyUpper(s), err
	}))
	add(&filterDef{name: "map", fn: func(r *renderer, off int, v any, args []any, kwargs []kwval) (any, error) {
		items, err := r.iterate(off, v)
		if err != nil {
			return nil, err
		}
		var attr any
		var def any
		hasDef := false
		for _, kw := range kwargs {
			switch kw.name {
			case "attribute":
				attr = kw.v
			case "default":
				def, hasDef = kw.v, true
			default:
				return nil, r.errf(ErrRender, off, "map() got an unexpected keyword argument '%s'", kw.name)
			}
		}
		out := make([]any, 0, len(items))
		if attr != nil {
			if len(args) > 0 {
				return nil, r.errf(ErrRender, off, "map() takes either an attribute or a filter name")
			}
			for _, it := range items {
				x, err := r.attrGetter(off, it, attr)
				if err != nil {
					return nil, err
				}
				if _, u := x.(undefined); u && hasDef {
					x = def
				}
				out = append(out, x)
			}
			return newGen(out), nil
		}
		if len(args) == 0 {
			return nil, r.errf(ErrRender, off, "map requires a filter argument")
		}
		fname, ok := args[0].(string)
		if !ok {
			return nil, r.errf(ErrRender, off, "map() filter name must be a string")
		}
		f, err := lookupFilter(fname)
		if err != nil {
			return nil, &Error{Kind: ErrUnsupported, Pos: r.src.pos(off), Construct: fmt.Sprintf("filter '%s'", fname), Msg: err.Error()}
		}
		for _, it := range items {
			x, err := f.fn(r, off, demarkup(it), args[1:], kwargs)
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return newGen(out), nil
	}})
	minmax := func(name string, wantMax bool) *filterDef {
		return plain(name, []string{"case_sensitive", "attribute"}, []any{false, nil}, func(r *renderer, off int, v any, a []any) (any, error) {
			items, err := r.iterate(off, v)
			if err != nil {
				return nil, err
			}
			if len(items) == 0 {
				return undefined{hint: "No aggregated item, sequence was empty."}, nil
			}
			best, bestKey := items[0], any(nil)
			for i, it := range items {
				k := it
				if a[1] != nil {
					if k, err = r.attrGetter(off, it, a[1]); err != nil {
						return nil, err
					}
				}
				k = sortKey(k, truthy(a[0]))
				if i == 0 {
					bestKey = k
					continue
				}
				c, ok := pyCompare(k, bestKey)
				if !ok {
					return nil, r.errf(ErrRender, off, "'<' not supported between instances of '%s' and '%s'", typeName(k), typeName(bestKey))
				}
				if wantMax && c > 0 || !wantMax && c < 0 {
					best, bestKey = it, k
				}
			}
			return best, nil
		})
	}
	add(minmax("max", true))
	add(minmax("min", false))
	add(&filterDef{name: "reject", fn: func(r *renderer, off int, v any, args []any, kw []kwval) (any, error) {
		return r.selectOrReject(off, "reject", v, args, kw, false, false)
	}})
	add(&filterDef{name: "select", fn: func(r *renderer, off int, v any, args []any, kw []kwval) (any, error) {
		return r.selectOrReject(off, "select", v, args, kw, false, true)
	}})
	add(&filterDef{name: "rejectattr", fn: func(r *renderer, off int, v any, args []any, kw []kwval) (any, error) {
		return r.selectOrReject(off, "rejectattr", v, args, kw, true, false)
	}})
	add(&filterDef{name: "selectattr", fn: func(r *renderer, off int, v any, args []any, kw []kwval) (any, error) {
		return r.selectOrReject(off, "selectattr", v, args, kw, true, true)
	}})
	add(plain("replace", []string{"old", "new", "count"}, []any{required, required, nil}, func(r *renderer, off int, v any, a []any) (any, error) {
		s, err := r.softStr(off, v)
		if err != nil {
			return nil, err
		}
		old, err := r.softStr(off, a[0])
		if err != nil {
			return nil, err
		}
		nw, err := r.softStr(off, a[1])
		if err != nil {
			return nil, err
		}
		cnt := int64(-1)
		if a[2] != nil {
			if cnt, err = r.wantInt(off, "replace", a[2]); err != nil {
				return nil, err
			}
		}
		return r.replace(off, s, old, nw, cnt)
	}))
	add(plain("reverse", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		if s, ok := v.(string); ok {
			runes := []rune(s)
			for i, j := 0, len(runes)-1; i < j; i, j = i+1, j-1 {
				runes[i], runes[j] = runes[j], runes[i]
			}
			return string(runes), nil
		}
		items, err := r.iterate(off, v)
		if err != nil {
			return nil, r.errf(ErrRender, off, "argument must be iterable")
		}
		out := append([]any(nil), items...)
		reverseAny(out)
		if l, ok := v.(*listValue); ok && l.kind != kindGen {
			return newGen(out), nil // reversed() is an iterator
		}
		return newList(out), nil
	}))
	add(plain("round", []string{"precision", "method"}, []any{int64(0), "common"}, func(r *renderer, off int, v any, a []any) (any, error) {
		i, f, isFloat, ok := asNumber(v)
		if !ok {
			return nil, r.errf(ErrRender, off, "round() needs a number, not %s", typeName(v))
		}
		prec, err := r.wantInt(off, "round", a[0])
		if err != nil {
			return nil, err
		}
		if prec < -20 || prec > 20 {
			return nil, r.errf(ErrUnsupported, off, "round precision %d is not supported", prec)
		}
		p := math.Pow(10, float64(prec))
		switch a[1] {
		case "common":
			if !isFloat {
				// round(int, n) is an int in Python.
				if prec >= 0 {
					return i, nil
				}
				return int64(pyRoundHalfEven(f, prec)), nil
			}
			return pyRoundHalfEven(f, prec), nil
		case "ceil":
			return math.Ceil(f*p) / p, nil
		case "floor":
			return math.Floor(f*p) / p, nil
		}
		return nil, r.errf(ErrRender, off, "method must be common, ceil or floor")
	}))
	add(plain("safe", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		if m, ok := v.(markup); ok {
			return m, nil
		}
		s, err := r.str(off, v)
		return markup(s), err
	}))
	add(plain("sort", []string{"reverse", "case_sensitive", "attribute"}, []any{false, false, nil}, func(r *renderer, off int, v any, a []any) (any, error) {
		items, err := r.iterate(off, v)
		if err != nil {
			return nil, err
		}
		out := append([]any(nil), items...)
		keys := make([]any, len(out))
		for i, it := range out {
			k := it
			if a[2] != nil {
				if k, err = r.attrGetter(off, it, a[2]); err != nil {
					return nil, err
				}
			}
			keys[i] = sortKey(k, truthy(a[1]))
		}
		if truthy(a[0]) {
			// sorted(reverse=True) keeps equal items in order.
			reverseAny(out)
			reverseAny(keys)
			if err := r.sortItems(off, out, keys); err != nil {
				return nil, err
			}
			reverseAny(out)
			return newList(out), nil
		}
		if err := r.sortItems(off, out, keys); err != nil {
			return nil, err
		}
		return newList(out), nil
	}))
	add(plain("string", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		if m, ok := v.(markup); ok {
			return m, nil
		}
		return r.str(off, v)
	}))
	add(plain("sum", []string{"attribute", "start"}, []any{nil, int64(0)}, func(r *renderer, off int, v any, a []any) (any, error) {
		items, err := r.iterate(off, v)
		if err != nil {
			return nil, err
		}
		acc := a[1]
		for _, it := range items {
			if a[0] != nil {
				if it, err = r.attrGetter(off, it, a[0]); err != nil {
					return nil, err
				}
			}
			if acc, err = r.binary(off, "+", acc, it); err != nil {
				return nil, err
			}
		}
		return acc, nil
	}))
	add(plain("title", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		s, err := r.softStr(off, v)
		return jinjaTitle(s), err
	}))
	add(&filterDef{name: "tojson", fn: func(r *renderer, off int, v any, args []any, kwargs []kwval) (any, error) {
		a, err := r.bind(off, "tojson", args, kwargs, []string{"ensure_ascii", "indent", "separators", "sort_keys"}, []any{false, nil, nil, false})
		if err != nil {
			return nil, err
		}
		if truthy(a[0]) {
			return nil, &Error{Kind: ErrUnsupported, Pos: r.src.pos(off), Construct: "tojson(ensure_ascii=True)", Msg: "ASCII-escaped JSON is not supported"}
		}
		o := jsonOptions{itemSep: ", ", keySep: ": ", sortKeys: truthy(a[3]), maxOutput: r.lim.maxOutput}
		switch ind := a[1].(type) {
		case nil:
		case string:
			o.indent = &ind
		default:
			n, err := r.wantInt(off, "tojson", ind)
			if err != nil {
				return nil, err
			}
			if n > 1<<10 {
				return nil, r.errf(ErrLimit, off, "indent %d too large", n)
			}
			s := strings.Repeat(" ", int(max(n, 0)))
			o.indent = &s
		}
		if o.indent != nil {
			o.itemSep = ","
		}
		if a[2] != nil {
			sep, ok := a[2].(*listValue)
			if !ok || len(sep.items) != 2 {
				return nil, r.errf(ErrRender, off, "tojson separators must be a pair of strings")
			}
			is, ok1 := demarkup(sep.items[0]).(string)
			ks, ok2 := demarkup(sep.items[1]).(string)
			if !ok1 || !ok2 {
				return nil, r.errf(ErrRender, off, "tojson separators must be a pair of strings")
			}
			o.itemSep, o.keySep = is, ks
		}
		s, err := toJSON(v, o)
		if err == errOutputTooLarge {
			return nil, r.errf(ErrLimit, off, "tojson output exceeds %d bytes", r.lim.maxOutput)
		}
		if err != nil {
			return nil, r.errf(ErrRender, off, "tojson: %v", err)
		}
		return s, r.checkStr(off, len(s))
	}})
	add(plain("trim", []string{"chars"}, []any{nil}, func(r *renderer, off int, v any, a []any) (any, error) {
		s, err := r.softStr(off, v)
		if err != nil {
			return nil, err
		}
		out, ok := stripSet(s, a[0], true, true)
		if !ok {
			return nil, r.errf(ErrRender, off, "strip arg must be None or str")
		}
		return out, nil
	}))
	add(plain("unique", []string{"case_sensitive", "attribute"}, []any{false, nil}, func(r *renderer, off int, v any, a []any) (any, error) {
		items, err := r.iterate(off, v)
		if err != nil {
			return nil, err
		}
		seen := newDict()
		var out []any
		for _, it := range items {
			k := it
			if a[1] != nil {
				if k, err = r.attrGetter(off, it, a[1]); err != nil {
					return nil, err
				}
			}
			k = sortKey(k, truthy(a[0]))
			if _, ok := seen.get(k); ok {
				continue
			}
			if !seen.set(k, true) {
				return nil, r.errf(ErrRender, off, "unhashable type: '%s'", typeName(k))
			}
			out = append(out, it)
		}
		return newGen(out), nil
	}))
	add(plain("wordcount", nil, nil, func(r *renderer, off int, v any, _ []any) (any, error) {
		s, err := r.softStr(off, v)
		n := int64(0)
		inWord := false
		for _, c := range s {
			w := unicode.IsLetter(c) || unicode.IsDigit(c) || c == '_'
			if w && !inWord {
				n++
			}
			inWord = w
		}
		return n, err
	}))

	tests = map[string]*testDef{}
	addT := func(fn func(r *renderer, off int, v any, args []any) (bool, error), nargs int, names ...string) {
		t := &testDef{name: names[0]}
		t.fn = func(r *renderer, off int, v any, args []any, kwargs []kwval) (bool, error) {
			if len(kwargs) > 0 || len(args) != nargs {
				return false, r.errf(ErrRender, off, "test '%s' takes %d argument(s)", names[0], nargs)
			}
			return fn(r, off, v, args)
		}
		for _, n := range names {
			tests[n] = t
		}
	}
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		_, u := v.(undefined)
		return !u, nil
	}, 0, "defined")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		_, u := v.(undefined)
		return u, nil
	}, 0, "undefined")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) { return v == nil, nil }, 0, "none")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		_, ok := v.(bool)
		return ok, nil
	}, 0, "boolean")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) { return v == false, nil }, 0, "false")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) { return v == true, nil }, 0, "true")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		_, ok := v.(int64)
		return ok, nil
	}, 0, "integer")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		_, ok := v.(float64)
		return ok, nil
	}, 0, "float")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		_, _, _, ok := asNumber(v)
		return ok, nil
	}, 0, "number")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		_, ok := v.(string)
		return ok, nil
	}, 0, "string")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		_, ok := v.(*dictValue)
		return ok, nil
	}, 0, "mapping")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		switch v.(type) {
		case string, *listValue, *dictValue, undefined:
			return true, nil
		}
		return false, nil
	}, 0, "iterable")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		switch x := v.(type) {
		case string, *dictValue, undefined:
			return true, nil
		case *listValue:
			return x.kind != kindGen && x.kind != kindView, nil
		}
		return false, nil
	}, 0, "sequence")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		switch v.(type) {
		case *builtin, *macroValue:
			return true, nil
		}
		return false, nil
	}, 0, "callable")
	addT(func(r *renderer, off int, v any, args []any) (bool, error) {
		a, b := v, args[0]
		switch x := a.(type) {
		case nil, bool:
			return a == b, nil
		case *listValue, *dictValue, *namespace, *loopValue, *macroValue, *builtin:
			return a == b, nil
		case int64:
			if y, ok := b.(int64); ok && x >= -5 && x <= 256 {
				return x == y, nil
			}
		}
		return false, &Error{Kind: ErrUnsupported, Pos: r.src.pos(off), Construct: "test 'sameas'",
			Msg: fmt.Sprintf("object identity of %s values depends on CPython internals", typeName(a))}
	}, 1, "sameas")
	addT(func(r *renderer, off int, v any, args []any) (bool, error) {
		return r.contains(off, args[0], v)
	}, 1, "in")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		s, ok := v.(string)
		return ok && strPredicate("islower", s), nil
	}, 0, "lower")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		s, ok := v.(string)
		return ok && strPredicate("isupper", s), nil
	}, 0, "upper")
	intTest := func(pred func(int64) bool) func(r *renderer, off int, v any, _ []any) (bool, error) {
		return func(r *renderer, off int, v any, _ []any) (bool, error) {
			i, ok := intIndex(v)
			if !ok {
				return false, r.errf(ErrRender, off, "test needs an integer, not %s", typeName(v))
			}
			return pred(i), nil
		}
	}
	addT(intTest(func(i int64) bool { return i%2 == 0 }), 0, "even")
	addT(intTest(func(i int64) bool { return i%2 != 0 }), 0, "odd")
	addT(func(r *renderer, off int, v any, args []any) (bool, error) {
		m, err := r.binary(off, "%", v, args[0])
		if err != nil {
			return false, err
		}
		return pyEqual(m, int64(0)), nil
	}, 1, "divisibleby")
	cmpTest := func(op string) func(r *renderer, off int, v any, args []any) (bool, error) {
		return func(r *renderer, off int, v any, args []any) (bool, error) {
			return r.compare(off, op, v, args[0])
		}
	}
	addT(cmpTest("=="), 1, "eq", "equalto", "==")
	addT(cmpTest("!="), 1, "ne", "!=")
	addT(cmpTest("<"), 1, "lt", "lessthan", "<")
	addT(cmpTest("<="), 1, "le", "<=")
	addT(cmpTest(">"), 1, "gt", "greaterthan", ">")
	addT(cmpTest(">="), 1, "ge", ">=")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		s, ok := v.(string)
		if !ok {
			return false, nil
		}
		_, err := lookupFilter(s)
		return err == nil, nil
	}, 0, "filter")
	addT(func(r *renderer, off int, v any, _ []any) (bool, error) {
		s, ok := v.(string)
		if !ok {
			return false, nil
		}
		_, err := lookupTest(s)
		return err == nil, nil
	}, 0, "test")
}

func reverseAny(s []any) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// jinjaTitle is Jinja2's title filter (not str.title): words split at
// whitespace and the characters -({[< ; each word becomes its first
// character upper-cased and the rest lower-cased, item[0].upper() +
// item[1:].lower(), so with full case mappings, the rest lowered on its
// own.
func jinjaTitle(s string) string {
	var b strings.Builder
	for s != "" {
		sep := strings.IndexFunc(s, isTitleSeparator)
		if sep == 0 {
			c, size := utf8.DecodeRuneInString(s)
			b.WriteRune(c)
			s = s[size:]
			continue
		}
		word := s
		if sep > 0 {
			word, s = s[:sep], s[sep:]
		} else {
			s = ""
		}
		c, size := utf8.DecodeRuneInString(word)
		writeUpper(&b, c)
		b.WriteString(pyLower(word[size:]))
	}
	return b.String()
}

func isTitleSeparator(c rune) bool { return pyIsSpace(c) || strings.ContainsRune("-({[<", c) }

// pyRoundHalfEven is Python's round(x, n) for floats: correctly rounded
// to n decimal places with ties to even.
func pyRoundHalfEven(f float64, n int64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	s := strconv.FormatFloat(f, 'f', int(max(n, 0)), 64) // correctly rounded, ties to even on the exact binary value
	if n < 0 {
		p := math.Pow(10, float64(-n))
		return math.RoundToEven(f/p) * p
	}
	v, _ := strconv.ParseFloat(s, 64)
	return v
}
