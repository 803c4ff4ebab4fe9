package template

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The evaluator works on Python-like values, held in Go's any:
//
//	nil            Python None
//	bool           Python bool (a subclass of int, as in Python)
//	int64          Python int (bounded to 64 bits; overflow is an error)
//	float64        Python float
//	string         Python str (UTF-8; lengths and indices count code points)
//	*listValue     list, tuple, range, generator or dict view
//	*dictValue     dict, insertion ordered
//	*namespace     the object namespace() returns
//	*loopValue     the loop variable inside a for loop
//	*macroValue    a macro defined by the template
//	*builtin       a global function or a bound method
//	undefined      Jinja2's default Undefined
//
// Nothing else ever reaches the evaluator: input from the caller is
// converted by fromGo.

// undefined is Jinja2's default Undefined: printing it gives "", iterating
// it gives nothing, testing it gives false; most other uses are an error
// whose message names what was undefined.
type undefined struct {
	// hint is the message an error reports when the value is used, in
	// Jinja2's words; when empty it is built from name and owner: "'x' is
	// undefined" or "'dict object' has no attribute 'y'". (Built lazily:
	// most undefined values are only tested, never reported.)
	hint  string
	name  string
	owner string // type name of the object lacking the attribute, if any
}

// undefName is the Undefined for a missing variable.
func undefName(name string) undefined { return undefined{name: name} }

// undefAttr is the Undefined for a missing attribute or key of a value of
// type owner.
func undefAttr(owner, name string) undefined { return undefined{name: name, owner: owner} }

// message is the text of the error raised when u is used.
func (u undefined) message() string {
	switch {
	case u.hint != "":
		return u.hint
	case u.owner != "":
		return "'" + u.owner + " object' has no attribute '" + u.name + "'"
	}
	return "'" + u.name + "' is undefined"
}

// listKind says which Python type a listValue stands for. They differ in
// printing, equality and a few operations.
type listKind uint8

const (
	kindList  listKind = iota // list
	kindTuple                 // tuple
	kindRange                 // range object (prints as range(a, b))
	kindGen                   // generator: truthy, no len, no index, iterates once
	kindView                  // dict_items, dict_keys or dict_values (view holds which)
)

// listValue is a Python sequence. Templates run in an immutable sandbox, so
// a list is never modified after it is built.
type listValue struct {
	items []any
	kind  listKind
	// consumed marks a generator already iterated (a second pass is empty).
	consumed bool
	// rng holds start, stop, step of a range, for printing.
	rng [3]int64
	// view is the type name of a dict view ("dict_items").
	view string
}

func newList(items []any) *listValue   { return &listValue{items: items} }
func newTuple(items ...any) *listValue { return &listValue{items: items, kind: kindTuple} }
func newGen(items []any) *listValue    { return &listValue{items: items, kind: kindGen} }

// dictValue is a Python dict: insertion ordered, keyed by hashable values.
type dictValue struct {
	keys []any
	vals []any
	idx  map[hashKey]int
}

// hashKey is the identity of a hashable Python value: equal values (1, 1.0
// and True) have equal keys.
type hashKey struct {
	kind byte // 's' string, 'n' integral number, 'f' other float, '0' None, 't' tuple
	s    string
	n    int64
}

func newDict() *dictValue { return &dictValue{idx: map[hashKey]int{}} }

// keyOf returns the hash key of v, or false when v is not hashable.
func keyOf(v any) (hashKey, bool) {
	switch x := demarkup(v).(type) {
	case string:
		return hashKey{kind: 's', s: x}, true
	case bool:
		if x {
			return hashKey{kind: 'n', n: 1}, true
		}
		return hashKey{kind: 'n'}, true
	case int64:
		return hashKey{kind: 'n', n: x}, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<63 {
			return hashKey{kind: 'n', n: int64(x)}, true
		}
		return hashKey{kind: 'f', s: strconv.FormatFloat(x, 'g', -1, 64)}, true
	case nil:
		return hashKey{kind: '0'}, true
	case *listValue:
		if x.kind != kindTuple {
			return hashKey{}, false
		}
		var b strings.Builder
		for _, it := range x.items {
			k, ok := keyOf(it)
			if !ok {
				return hashKey{}, false
			}
			b.WriteByte(k.kind)
			b.WriteString(strconv.FormatInt(k.n, 10))
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(len(k.s)))
			b.WriteByte(':')
			b.WriteString(k.s)
		}
		return hashKey{kind: 't', s: b.String()}, true
	}
	return hashKey{}, false
}

// set stores v under k, keeping the position of an existing key. It
// reports false when k is not hashable.
func (d *dictValue) set(k, v any) bool {
	hk, ok := keyOf(k)
	if !ok {
		return false
	}
	if i, ok := d.idx[hk]; ok {
		d.vals[i] = v
		return true
	}
	d.idx[hk] = len(d.keys)
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	return true
}

// get returns the value stored under k.
func (d *dictValue) get(k any) (any, bool) {
	hk, ok := keyOf(k)
	if !ok {
		return nil, false
	}
	i, ok := d.idx[hk]
	if !ok {
		return nil, false
	}
	return d.vals[i], true
}

func (d *dictValue) len() int { return len(d.keys) }

// namespace is the mutable object namespace() returns; `{% set ns.x = v %}`
// is the only assignment that crosses a loop's scope.
type namespace struct {
	attrs *dictValue
}

// typeName returns the Python type name of v, for error messages.
func typeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case markup:
		return "Markup"
	case *listValue:
		switch x.kind {
		case kindTuple:
			return "tuple"
		case kindRange:
			return "range"
		case kindGen:
			return "generator"
		case kindView:
			return x.view
		}
		return "list"
	case *dictValue:
		return "dict"
	case *namespace:
		return "Namespace"
	case *loopValue:
		return "LoopContext"
	case *macroValue:
		return "Macro"
	case *builtin:
		return "builtin_function_or_method"
	case undefined:
		return "Undefined"
	}
	return "object"
}

// truthy is Python's bool(v).
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case markup:
		return x != ""
	case *listValue:
		if x.kind == kindGen {
			return true
		}
		return len(x.items) > 0
	case *dictValue:
		return x.len() > 0
	case undefined:
		return false
	}
	return true
}

// asNumber returns v as int64 or float64 when it is a Python number (bool
// included), and which of the two it is.
func asNumber(v any) (i int64, f float64, isFloat, ok bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, 1, false, true
		}
		return 0, 0, false, true
	case int64:
		return x, float64(x), false, true
	case float64:
		return 0, x, true, true
	}
	return 0, 0, false, false
}

// pyEqual is Python's ==.
func pyEqual(a, b any) bool {
	a, b = demarkup(a), demarkup(b)
	if _, _, _, ok := asNumber(a); ok {
		ai, af, afl, _ := asNumber(a)
		bi, bf, bfl, ok := asNumber(b)
		if !ok {
			return false
		}
		if !afl && !bfl {
			return ai == bi
		}
		return af == bf
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case undefined:
		_, ok := b.(undefined)
		return ok
	case *listValue:
		y, ok := b.(*listValue)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		// A list never equals a tuple; generators and dict views
		// compare by identity here.
		if x.kind != y.kind || x.kind == kindGen || x.kind == kindView {
			return false
		}
		if len(x.items) != len(y.items) {
			return false
		}
		for i := range x.items {
			if !pyEqual(x.items[i], y.items[i]) {
				return false
			}
		}
		return true
	case *dictValue:
		y, ok := b.(*dictValue)
		if !ok {
			return false
		}
		if x.len() != y.len() {
			return false
		}
		for i, k := range x.keys {
			v, ok := y.get(k)
			if !ok || !pyEqual(x.vals[i], v) {
				return false
			}
		}
		return true
	}
	return a == b
}

// pyCompare orders a and b as Python's < does: numbers with numbers,
// strings with strings (by code point), sequences of the same type
// lexicographically. ok is false when Python raises TypeError.
func pyCompare(a, b any) (c int, ok bool) {
	a, b = demarkup(a), demarkup(b)
	if ai, af, afl, aok := asNumber(a); aok {
		bi, bf, bfl, bok := asNumber(b)
		if !bok {
			return 0, false
		}
		if !afl && !bfl {
			switch {
			case ai < bi:
				return -1, true
			case ai > bi:
				return 1, true
			}
			return 0, true
		}
		switch {
		case af < bf:
			return -1, true
		case af > bf:
			return 1, true
		case af == bf:
			return 0, true
		}
		return 0, true // NaN: every comparison is false; callers see "equal"
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		if !ok {
			return 0, false
		}
		// Byte order of valid UTF-8 is code point order.
		return strings.Compare(x, y), true
	case *listValue:
		y, ok := b.(*listValue)
		if !ok || x.kind != y.kind || (x.kind != kindList && x.kind != kindTuple) {
			return 0, false
		}
		for i := 0; i < len(x.items) && i < len(y.items); i++ {
			if pyEqual(x.items[i], y.items[i]) {
				continue
			}
			return pyCompare(x.items[i], y.items[i])
		}
		switch {
		case len(x.items) < len(y.items):
			return -1, true
		case len(x.items) > len(y.items):
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// runeLen is len() of a Python str.
func runeLen(s string) int { return utf8.RuneCountInString(s) }

// runesOf returns the code points of s, or nil when s is ASCII (callers
// then index bytes directly).
func runesOf(s string) []rune {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return []rune(s)
		}
	}
	return nil
}

// strIndex returns s[i] with Python's negative indexing.
func strIndex(s string, i int64) (string, bool) {
	if r := runesOf(s); r != nil {
		n := int64(len(r))
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return "", false
		}
		return string(r[i]), true
	}
	n := int64(len(s))
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return "", false
	}
	return s[i : i+1], true
}

// sliceIndices resolves a Python slice against a sequence of length n,
// returning the selected indices in order. step must not be zero.
func sliceIndices(n int, start, stop, step *int64) []int {
	st := int64(1)
	if step != nil {
		st = *step
	}
	ln := int64(n)
	var lo, hi int64
	if st > 0 {
		lo, hi = 0, ln
	} else {
		lo, hi = ln-1, -1
	}
	clamp := func(v int64) int64 {
		if v < 0 {
			v += ln
			if v < 0 {
				if st > 0 {
					return 0
				}
				return -1
			}
		} else if v >= ln {
			if st > 0 {
				return ln
			}
			return ln - 1
		}
		return v
	}
	if start != nil {
		lo = clamp(*start)
	}
	if stop != nil {
		hi = clamp(*stop)
	}
	var out []int
	if st > 0 {
		for i := lo; i < hi; i += st {
			out = append(out, int(i))
		}
	} else {
		for i := lo; i > hi; i += st {
			out = append(out, int(i))
		}
	}
	return out
}

// sortedStringKeys returns m's keys in byte order.
func sortedStringKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
