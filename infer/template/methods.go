package template

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python methods reachable from templates: `s.strip()`, `d.items()`, ...
// Every method of str, dict and list is known by name: the ones
// implemented here behave as in CPython; the others are reported as
// unsupported rather than silently treated as undefined. Methods that
// mutate a list or dict are refused, as in transformers'
// ImmutableSandboxedEnvironment.

var strMethods = map[string]bool{
	"capitalize": true, "casefold": false, "center": true, "count": true, "encode": false,
	"endswith": true, "expandtabs": false, "find": true, "format": false, "format_map": false,
	"index": true, "isalnum": true, "isalpha": true, "isascii": true, "isdecimal": true,
	"isdigit": true, "isidentifier": false, "islower": true, "isnumeric": true,
	"isprintable": false, "isspace": true, "istitle": false, "isupper": true, "join": true,
	"ljust": true, "lower": true, "lstrip": true, "maketrans": false, "partition": true,
	"removeprefix": true, "removesuffix": true, "replace": true, "rfind": true, "rindex": true,
	"rjust": true, "rpartition": true, "rsplit": true, "rstrip": true, "split": true,
	"splitlines": true, "startswith": true, "strip": true, "swapcase": true, "title": true,
	"translate": false, "upper": true, "zfill": true,
}

var dictMethods = map[string]bool{
	"clear": false, "copy": true, "fromkeys": false, "get": true, "items": true, "keys": true,
	"pop": false, "popitem": false, "setdefault": false, "update": false, "values": true,
}

var dictMutators = map[string]bool{"clear": true, "pop": true, "popitem": true, "setdefault": true, "update": true}

var listMethods = map[string]bool{
	"append": false, "clear": false, "copy": true, "count": true, "extend": false, "index": true,
	"insert": false, "pop": false, "remove": false, "reverse": false, "sort": false,
}

// method returns x.name as a bound method when x has a Python method of
// that name; found is false when it has none (the caller then looks for an
// item or gives Undefined).
func (r *renderer) method(off int, x any, name string) (v any, found bool, err error) {
	var impl bool
	var typ string
	switch x.(type) {
	case string, markup:
		impl, found = strMethods[name]
		typ = "str"
	case *dictValue:
		impl, found = dictMethods[name]
		typ = "dict"
	case *listValue:
		if x.(*listValue).kind == kindList {
			impl, found = listMethods[name]
			typ = "list"
		}
	}
	if !found {
		return nil, false, nil
	}
	if !impl {
		if (typ == "dict" && dictMutators[name]) || typ == "list" && name != "copy" && name != "count" && name != "index" {
			return &builtin{name: typ + "." + name, fn: func(r *renderer, off int, _ []any, _ []kwval) (any, error) {
				return nil, r.errf(ErrRender, off, "access to attribute '%s' of '%s' object is unsafe (the sandbox forbids modifying it)", name, typ)
			}}, true, nil
		}
		return nil, true, &Error{Kind: ErrUnsupported, Pos: r.src.pos(off), Construct: fmt.Sprintf("method %s.%s", typ, name),
			Msg: "this Python method is not supported"}
	}
	return &builtin{name: typ + "." + name, fn: func(r *renderer, off int, args []any, kwargs []kwval) (any, error) {
		args = demarkupAll(args)
		var out any
		var err error
		if err := r.charge(off, scanCost(x)); err != nil {
			return nil, err
		}
		switch recv := demarkup(x).(type) {
		case string:
			out, err = r.strMethod(off, recv, name, args, kwargs)
		case *dictValue:
			out, err = r.dictMethod(off, recv, name, args, kwargs)
		case *listValue:
			out, err = r.listMethod(off, recv, name, args, kwargs)
		default:
			return nil, r.errf(ErrRender, off, "no method %s", name)
		}
		if err != nil {
			return nil, err
		}
		return out, r.charge(off, sizeOf(out))
	}}, true, nil
}

// argSpec binds positional and keyword arguments to parameter names.
// defaults[i] == required means the parameter must be given.
type requiredArg struct{}

var required = requiredArg{}

func (r *renderer) bind(off int, fname string, args []any, kwargs []kwval, names []string, defaults []any) ([]any, error) {
	if len(args) > len(names) {
		return nil, r.errf(ErrRender, off, "%s() takes at most %d argument(s) (%d given)", fname, len(names), len(args))
	}
	out := make([]any, len(names))
	set := make([]bool, len(names))
	for i, a := range args {
		out[i] = a
		set[i] = true
	}
	for _, kw := range kwargs {
		found := false
		for i, n := range names {
			if n == kw.name {
				if set[i] {
					return nil, r.errf(ErrRender, off, "%s() got multiple values for argument '%s'", fname, n)
				}
				out[i] = kw.v
				set[i] = true
				found = true
			}
		}
		if !found {
			return nil, r.errf(ErrRender, off, "%s() got an unexpected keyword argument '%s'", fname, kw.name)
		}
	}
	for i := range names {
		if set[i] {
			continue
		}
		if defaults[i] == required {
			return nil, r.errf(ErrRender, off, "%s() missing required argument '%s'", fname, names[i])
		}
		out[i] = defaults[i]
	}
	return out, nil
}

func (r *renderer) wantStr(off int, fname string, v any) (string, error) {
	s, ok := demarkup(v).(string)
	if !ok {
		return "", r.errf(ErrRender, off, "%s() argument must be str, not %s", fname, typeName(v))
	}
	return s, nil
}

func (r *renderer) wantInt(off int, fname string, v any) (int64, error) {
	i, ok := intIndex(v)
	if !ok {
		return 0, r.errf(ErrRender, off, "%s() argument must be int, not %s", fname, typeName(v))
	}
	return i, nil
}

// stripSet strips runes in chars (nil: whitespace) from s's ends.
func stripSet(s string, chars any, left, right bool) (string, bool) {
	f := pyIsSpace
	if chars != nil {
		cs, ok := demarkup(chars).(string)
		if !ok {
			return "", false
		}
		f = func(r rune) bool { return strings.ContainsRune(cs, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, f)
	}
	if right {
		s = strings.TrimRightFunc(s, f)
	}
	return s, true
}

// pyTitle is str.title(): the first cased character after an uncased one
// is title-cased, the others lower-cased (full case mappings).
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for i, c := range s {
		if prevCased {
			writeLower(&b, s, i, c)
		} else {
			writeTitle(&b, c)
		}
		prevCased = isCased(c)
	}
	return b.String()
}

// pyCapitalize is str.capitalize(): first character title-cased, the rest
// lower-cased (full case mappings, in the context of the whole string).
func pyCapitalize(s string) string {
	var b strings.Builder
	for i, c := range s {
		if i == 0 {
			writeTitle(&b, c)
		} else {
			writeLower(&b, s, i, c)
		}
	}
	return b.String()
}

// pySwapcase is str.swapcase(): upper-case characters lower-cased and
// lower-case ones upper-cased (full case mappings).
func pySwapcase(s string) string {
	var b strings.Builder
	for i, c := range s {
		switch {
		case isUpperProp(c):
			writeLower(&b, s, i, c)
		case isLowerProp(c):
			writeUpper(&b, c)
		default:
			b.WriteRune(c)
		}
	}
	return b.String()
}

// pySplitWhitespace is str.split() with no separator.
func pySplitWhitespace(s string, maxsplit int64, fromRight bool) []string {
	if !fromRight {
		var out []string
		for {
			s = strings.TrimLeftFunc(s, pyIsSpace)
			if s == "" {
				return out
			}
			if maxsplit >= 0 && int64(len(out)) == maxsplit {
				return append(out, s)
			}
			i := strings.IndexFunc(s, pyIsSpace)
			if i < 0 {
				return append(out, s)
			}
			out = append(out, s[:i])
			s = s[i:]
		}
	}
	var rev []string
	for {
		s = strings.TrimRightFunc(s, pyIsSpace)
		if s == "" {
			break
		}
		if maxsplit >= 0 && int64(len(rev)) == maxsplit {
			rev = append(rev, s)
			break
		}
		i := strings.LastIndexFunc(s, pyIsSpace)
		if i < 0 {
			rev = append(rev, s)
			break
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		rev = append(rev, s[i+size:])
		s = s[:i+size]
	}
	out := make([]string, len(rev))
	for i := range rev {
		out[i] = rev[len(rev)-1-i]
	}
	return out
}

func strList(parts []string) *listValue {
	items := make([]any, len(parts))
	for i, p := range parts {
		items[i] = p
	}
	return newList(items)
}

// pySplitlines is str.splitlines(keepends).
func pySplitlines(s string, keep bool) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		brk := 0
		switch c {
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			brk = size
		case '\r':
			brk = 1
			if i+1 < len(s) && s[i+1] == '\n' {
				brk = 2
			}
		}
		if brk == 0 {
			i += size
			continue
		}
		if keep {
			out = append(out, s[start:i+brk])
		} else {
			out = append(out, s[start:i])
		}
		i += brk
		start = i
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// pyFind is str.find / str.rfind with optional start and end, in code
// points.
func pyFind(s, sub string, start, end *int64, right bool) int64 {
	runes := []rune(s)
	n := int64(len(runes))
	lo, hi := int64(0), n
	adj := func(v int64) int64 {
		if v < 0 {
			v += n
			if v < 0 {
				v = 0
			}
		}
		if v > n {
			v = n
		}
		return v
	}
	if start != nil {
		lo = adj(*start)
	}
	if end != nil {
		hi = adj(*end)
	}
	if lo > hi {
		return -1
	}
	hay := string(runes[lo:hi])
	var i int
	if right {
		i = strings.LastIndex(hay, sub)
	} else {
		i = strings.Index(hay, sub)
	}
	if i < 0 {
		return -1
	}
	return lo + int64(utf8.RuneCountInString(hay[:i]))
}

func optInt(v any) (*int64, bool) {
	if v == nil {
		return nil, true
	}
	i, ok := intIndex(v)
	if !ok {
		return nil, false
	}
	return &i, true
}

func (r *renderer) strMethod(off int, s, name string, args []any, kwargs []kwval) (any, error) {
	fname := "str." + name
	p := func(names []string, defaults []any) ([]any, error) {
		return r.bind(off, fname, args, kwargs, names, defaults)
	}
	switch name {
	case "strip", "lstrip", "rstrip":
		a, err := p([]string{"chars"}, []any{nil})
		if err != nil {
			return nil, err
		}
		out, ok := stripSet(s, a[0], name != "rstrip", name != "lstrip")
		if !ok {
			return nil, r.errf(ErrRender, off, "%s arg must be None or str", name)
		}
		return out, nil
	case "upper":
		return pyUpper(s), nil
	case "lower":
		return pyLower(s), nil
	case "title":
		return pyTitle(s), nil
	case "capitalize":
		return pyCapitalize(s), nil
	case "swapcase":
		return pySwapcase(s), nil
	case "startswith", "endswith":
		a, err := p([]string{"prefix", "start", "end"}, []any{required, nil, nil})
		if err != nil {
			return nil, err
		}
		st, ok1 := optInt(a[1])
		en, ok2 := optInt(a[2])
		if !ok1 || !ok2 {
			return nil, r.errf(ErrRender, off, "slice indices must be integers or None")
		}
		sub := s
		if st != nil || en != nil {
			runes := []rune(s)
			idx := sliceIndices(len(runes), st, en, nil)
			if len(idx) == 0 {
				sub = ""
			} else {
				sub = string(runes[idx[0] : idx[len(idx)-1]+1])
			}
		}
		var cands []any
		switch x := demarkup(a[0]).(type) {
		case string:
			cands = []any{x}
		case *listValue:
			if x.kind != kindTuple {
				return nil, r.errf(ErrRender, off, "%s first arg must be str or a tuple of str, not %s", name, typeName(x))
			}
			cands = x.items
		default:
			return nil, r.errf(ErrRender, off, "%s first arg must be str or a tuple of str, not %s", name, typeName(x))
		}
		for _, c := range cands {
			cs, ok := demarkup(c).(string)
			if !ok {
				return nil, r.errf(ErrRender, off, "tuple for %s must only contain str, not %s", name, typeName(c))
			}
			if name == "startswith" && strings.HasPrefix(sub, cs) || name == "endswith" && strings.HasSuffix(sub, cs) {
				return true, nil
			}
		}
		return false, nil
	case "split", "rsplit":
		a, err := p([]string{"sep", "maxsplit"}, []any{nil, int64(-1)})
		if err != nil {
			return nil, err
		}
		maxsplit, err := r.wantInt(off, fname, a[1])
		if err != nil {
			return nil, err
		}
		if a[0] == nil {
			return strList(pySplitWhitespace(s, maxsplit, name == "rsplit")), nil
		}
		sep, err := r.wantStr(off, fname, a[0])
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, r.errf(ErrRender, off, "empty separator")
		}
		n := -1
		if maxsplit >= 0 {
			n = int(min(maxsplit, int64(len(s)))) + 1
		}
		if name == "split" {
			return strList(strings.SplitN(s, sep, n)), nil
		}
		// rsplit: split from the right.
		var rev []string
		rest := s
		for n < 0 || len(rev) < n-1 {
			i := strings.LastIndex(rest, sep)
			if i < 0 {
				break
			}
			rev = append(rev, rest[i+len(sep):])
			rest = rest[:i]
		}
		rev = append(rev, rest)
		out := make([]string, len(rev))
		for i := range rev {
			out[i] = rev[len(rev)-1-i]
		}
		return strList(out), nil
	case "splitlines":
		a, err := p([]string{"keepends"}, []any{false})
		if err != nil {
			return nil, err
		}
		return strList(pySplitlines(s, truthy(a[0]))), nil
	case "replace":
		a, err := p([]string{"old", "new", "count"}, []any{required, required, int64(-1)})
		if err != nil {
			return nil, err
		}
		old, err := r.wantStr(off, fname, a[0])
		if err != nil {
			return nil, err
		}
		nw, err := r.wantStr(off, fname, a[1])
		if err != nil {
			return nil, err
		}
		cnt, err := r.wantInt(off, fname, a[2])
		if err != nil {
			return nil, err
		}
		return r.replace(off, s, old, nw, cnt)
	case "find", "rfind", "index", "rindex", "count":
		a, err := p([]string{"sub", "start", "end"}, []any{required, nil, nil})
		if err != nil {
			return nil, err
		}
		sub, err := r.wantStr(off, fname, a[0])
		if err != nil {
			return nil, err
		}
		st, ok1 := optInt(a[1])
		en, ok2 := optInt(a[2])
		if !ok1 || !ok2 {
			return nil, r.errf(ErrRender, off, "slice indices must be integers or None")
		}
		if name == "count" {
			runes := []rune(s)
			idx := sliceIndices(len(runes), st, en, nil)
			hay := ""
			if len(idx) > 0 {
				hay = string(runes[idx[0] : idx[len(idx)-1]+1])
			}
			if sub == "" {
				return int64(utf8.RuneCountInString(hay) + 1), nil
			}
			return int64(strings.Count(hay, sub)), nil
		}
		i := pyFind(s, sub, st, en, name == "rfind" || name == "rindex")
		if i < 0 && (name == "index" || name == "rindex") {
			return nil, r.errf(ErrRender, off, "substring not found")
		}
		return i, nil
	case "join":
		a, err := p([]string{"iterable"}, []any{required})
		if err != nil {
			return nil, err
		}
		items, err := r.iterate(off, a[0])
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(items))
		total := len(s) * max(len(items)-1, 0)
		for i, it := range items {
			ps, ok := demarkup(it).(string)
			if !ok {
				return nil, r.errf(ErrRender, off, "sequence item %d: expected str instance, %s found", i, typeName(it))
			}
			parts[i] = ps
			total += len(ps)
		}
		if err := r.checkStr(off, total); err != nil {
			return nil, err
		}
		return strings.Join(parts, s), nil
	case "isalnum", "isalpha", "isdigit", "isdecimal", "isnumeric", "isspace", "isascii", "islower", "isupper":
		return strPredicate(name, s), nil
	case "removeprefix", "removesuffix":
		a, err := p([]string{"affix"}, []any{required})
		if err != nil {
			return nil, err
		}
		x, err := r.wantStr(off, fname, a[0])
		if err != nil {
			return nil, err
		}
		if name == "removeprefix" {
			return strings.TrimPrefix(s, x), nil
		}
		return strings.TrimSuffix(s, x), nil
	case "partition", "rpartition":
		a, err := p([]string{"sep"}, []any{required})
		if err != nil {
			return nil, err
		}
		sep, err := r.wantStr(off, fname, a[0])
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, r.errf(ErrRender, off, "empty separator")
		}
		var i int
		if name == "partition" {
			i = strings.Index(s, sep)
			if i < 0 {
				return newTuple(s, "", ""), nil
			}
		} else {
			i = strings.LastIndex(s, sep)
			if i < 0 {
				return newTuple("", "", s), nil
			}
		}
		return newTuple(s[:i], sep, s[i+len(sep):]), nil
	case "center", "ljust", "rjust", "zfill":
		names, defs := []string{"width", "fillchar"}, []any{required, " "}
		if name == "zfill" {
			names, defs = names[:1], defs[:1]
		}
		a, err := p(names, defs)
		if err != nil {
			return nil, err
		}
		w, err := r.wantInt(off, fname, a[0])
		if err != nil {
			return nil, err
		}
		if w > int64(r.lim.maxOutput) {
			return nil, r.errf(ErrLimit, off, "string value exceeds %d bytes", r.lim.maxOutput)
		}
		n := int64(utf8.RuneCountInString(s))
		if w <= n {
			return s, nil
		}
		if name == "zfill" {
			sign := ""
			if s != "" && (s[0] == '+' || s[0] == '-') {
				sign, s = s[:1], s[1:]
			}
			return sign + strings.Repeat("0", int(w-n)) + s, nil
		}
		fill, err := r.wantStr(off, fname, a[1])
		if err != nil || utf8.RuneCountInString(fill) != 1 {
			return nil, r.errf(ErrRender, off, "The fill character must be exactly one character long")
		}
		pad := int(w - n)
		switch name {
		case "ljust":
			return s + strings.Repeat(fill, pad), nil
		case "rjust":
			return strings.Repeat(fill, pad) + s, nil
		}
		// CPython's centre puts the extra character on the left when
		// the width is odd and the padding odd.
		left := pad/2 + (pad & int(w) & 1)
		return strings.Repeat(fill, left) + s + strings.Repeat(fill, pad-left), nil
	}
	return nil, r.errf(ErrUnsupported, off, "str.%s is not supported", name)
}

func strPredicate(name, s string) bool {
	if s == "" {
		return name == "isascii"
	}
	all := func(f func(rune) bool) bool {
		for _, c := range s {
			if !f(c) {
				return false
			}
		}
		return true
	}
	switch name {
	case "isalnum":
		return all(func(c rune) bool { return unicode.IsLetter(c) || unicode.IsNumber(c) })
	case "isalpha":
		return all(unicode.IsLetter)
	case "isdigit", "isdecimal":
		return all(unicode.IsDigit)
	case "isnumeric":
		return all(unicode.IsNumber)
	case "isspace":
		return all(pyIsSpace)
	case "isascii":
		return all(func(c rune) bool { return c < 0x80 })
	case "islower", "isupper":
		cased := false
		for _, c := range s {
			// A title-case character makes both false.
			upper, lower := isUpperProp(c), isLowerProp(c)
			if unicode.IsTitle(c) || name == "islower" && upper || name == "isupper" && lower {
				return false
			}
			cased = cased || upper || lower
		}
		return cased
	}
	return false
}

// replace is str.replace(old, new, count) including CPython's rule for an
// empty old (insert new between every character).
func (r *renderer) replace(off int, s, old, nw string, count int64) (any, error) {
	if old == "" {
		n := int64(utf8.RuneCountInString(s)) + 1
		if count >= 0 && count < n {
			n = count
		}
		if int64(len(s))+n*int64(len(nw)) > int64(r.lim.maxOutput) {
			return nil, r.errf(ErrLimit, off, "string value exceeds %d bytes", r.lim.maxOutput)
		}
		if err := r.charge(off, len(s)+int(n)*len(nw)); err != nil {
			return nil, err
		}
		var b strings.Builder
		done := int64(0)
		for _, c := range s {
			if done < n {
				b.WriteString(nw)
				done++
			}
			b.WriteRune(c)
		}
		if done < n {
			b.WriteString(nw)
		}
		return b.String(), nil
	}
	occ := int64(strings.Count(s, old))
	if count >= 0 && count < occ {
		occ = count
	}
	if int64(len(s))+occ*(int64(len(nw))-int64(len(old))) > int64(r.lim.maxOutput) {
		return nil, r.errf(ErrLimit, off, "string value exceeds %d bytes", r.lim.maxOutput)
	}
	if err := r.charge(off, len(s)); err != nil {
		return nil, err
	}
	return strings.Replace(s, old, nw, int(occ)), nil
}

func (r *renderer) dictMethod(off int, d *dictValue, name string, args []any, kwargs []kwval) (any, error) {
	fname := "dict." + name
	switch name {
	case "get":
		a, err := r.bind(off, fname, args, kwargs, []string{"key", "default"}, []any{required, nil})
		if err != nil {
			return nil, err
		}
		if _, ok := keyOf(a[0]); !ok {
			return nil, r.errf(ErrRender, off, "unhashable type: '%s'", typeName(a[0]))
		}
		if v, ok := d.get(a[0]); ok {
			return v, nil
		}
		return a[1], nil
	case "items", "keys", "values", "copy":
		if _, err := r.bind(off, fname, args, kwargs, nil, nil); err != nil {
			return nil, err
		}
		switch name {
		case "keys":
			return &listValue{items: append([]any(nil), d.keys...), kind: kindView, view: "dict_keys"}, nil
		case "values":
			return &listValue{items: append([]any(nil), d.vals...), kind: kindView, view: "dict_values"}, nil
		case "copy":
			c := newDict()
			for i, k := range d.keys {
				c.set(k, d.vals[i])
			}
			return c, nil
		}
		items := make([]any, len(d.keys))
		for i, k := range d.keys {
			items[i] = newTuple(k, d.vals[i])
		}
		return &listValue{items: items, kind: kindView, view: "dict_items"}, nil
	}
	return nil, r.errf(ErrUnsupported, off, "dict.%s is not supported", name)
}

func (r *renderer) listMethod(off int, l *listValue, name string, args []any, kwargs []kwval) (any, error) {
	fname := "list." + name
	switch name {
	case "copy":
		if _, err := r.bind(off, fname, args, kwargs, nil, nil); err != nil {
			return nil, err
		}
		return newList(append([]any(nil), l.items...)), nil
	case "count":
		a, err := r.bind(off, fname, args, kwargs, []string{"value"}, []any{required})
		if err != nil {
			return nil, err
		}
		n := int64(0)
		for _, it := range l.items {
			if pyEqual(it, a[0]) {
				n++
			}
		}
		return n, nil
	case "index":
		a, err := r.bind(off, fname, args, kwargs, []string{"value"}, []any{required})
		if err != nil {
			return nil, err
		}
		for i, it := range l.items {
			if pyEqual(it, a[0]) {
				return int64(i), nil
			}
		}
		return nil, r.errf(ErrRender, off, "value is not in list")
	}
	return nil, r.errf(ErrUnsupported, off, "list.%s is not supported", name)
}
