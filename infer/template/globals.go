package template

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// globals is the outermost scope: Jinja2's default globals (range, dict,
// namespace, and the unsupported cycler, joiner, lipsum) and the two
// functions transformers adds (raise_exception, strftime_now).
var globals = func() *scope {
	g := newScope(nil)
	def := func(name string, fn func(r *renderer, off int, args []any, kwargs []kwval) (any, error)) {
		g.vars[name] = &builtin{name: name, fn: fn}
	}
	def("range", func(r *renderer, off int, args []any, kwargs []kwval) (any, error) {
		if len(kwargs) > 0 || len(args) < 1 || len(args) > 3 {
			return nil, r.errf(ErrRender, off, "range expects 1 to 3 positional arguments")
		}
		var n [3]int64
		for i, a := range args {
			v, ok := intIndex(a)
			if !ok {
				return nil, r.errf(ErrRender, off, "'%s' object cannot be interpreted as an integer", typeName(a))
			}
			n[i] = v
		}
		start, stop, step := int64(0), n[0], int64(1)
		if len(args) >= 2 {
			start, stop = n[0], n[1]
		}
		if len(args) == 3 {
			step = n[2]
		}
		if step == 0 {
			return nil, r.errf(ErrRender, off, "range() arg 3 must not be zero")
		}
		var count int64
		switch {
		case step > 0 && stop > start:
			count = (stop - start + step - 1) / step
		case step < 0 && stop < start:
			count = (start - stop - step - 1) / -step
		}
		if count < 0 || count > maxRange {
			return nil, r.errf(ErrLimit, off, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", maxRange)
		}
		items := make([]any, count)
		for i := range items {
			items[i] = start + int64(i)*step
		}
		return &listValue{items: items, kind: kindRange, rng: [3]int64{start, stop, step}}, nil
	})
	def("namespace", func(r *renderer, off int, args []any, kwargs []kwval) (any, error) {
		d, err := r.dictFromArgs(off, "namespace", args, kwargs)
		if err != nil {
			return nil, err
		}
		return &namespace{attrs: d}, nil
	})
	def("dict", func(r *renderer, off int, args []any, kwargs []kwval) (any, error) {
		return r.dictFromArgs(off, "dict", args, kwargs)
	})
	def("raise_exception", func(r *renderer, off int, args []any, kwargs []kwval) (any, error) {
		a, err := r.bind(off, "raise_exception", args, kwargs, []string{"message"}, []any{required})
		if err != nil {
			return nil, err
		}
		msg, err := r.str(off, demarkup(a[0]))
		if err != nil {
			return nil, err
		}
		return nil, &Error{Kind: ErrRaised, Pos: r.src.pos(off), Msg: msg}
	})
	def("strftime_now", func(r *renderer, off int, args []any, kwargs []kwval) (any, error) {
		a, err := r.bind(off, "strftime_now", args, kwargs, []string{"format"}, []any{required})
		if err != nil {
			return nil, err
		}
		f, err := r.wantStr(off, "strftime_now", a[0])
		if err != nil {
			return nil, err
		}
		s, err := strftime(r.now(), f)
		if err != nil {
			return nil, &Error{Kind: ErrUnsupported, Pos: r.src.pos(off), Construct: "strftime_now format", Msg: err.Error()}
		}
		return s, nil
	})
	for _, name := range []string{"cycler", "joiner", "lipsum"} {
		def(name, func(r *renderer, off int, args []any, kwargs []kwval) (any, error) {
			return nil, &Error{Kind: ErrUnsupported, Pos: r.src.pos(off), Construct: fmt.Sprintf("global function '%s'", name),
				Msg: "this Jinja2 global is not supported"}
		})
	}
	return g
}()

// dictFromArgs is dict(*args, **kwargs) for at most one positional
// mapping or iterable of pairs.
func (r *renderer) dictFromArgs(off int, fname string, args []any, kwargs []kwval) (*dictValue, error) {
	d := newDict()
	if len(args) > 1 {
		return nil, r.errf(ErrRender, off, "%s expected at most 1 positional argument, got %d", fname, len(args))
	}
	if len(args) == 1 {
		switch src := args[0].(type) {
		case *dictValue:
			for i, k := range src.keys {
				d.set(k, src.vals[i])
			}
		default:
			items, err := r.iterate(off, src)
			if err != nil {
				return nil, err
			}
			for _, it := range items {
				pair, ok := it.(*listValue)
				if !ok || len(pair.items) != 2 {
					return nil, r.errf(ErrRender, off, "%s: each element must be a pair", fname)
				}
				if !d.set(pair.items[0], pair.items[1]) {
					return nil, r.errf(ErrRender, off, "unhashable type: '%s'", typeName(pair.items[0]))
				}
			}
		}
	}
	for _, kw := range kwargs {
		d.set(kw.name, kw.v)
	}
	return d, nil
}

// maxInputDepth bounds the nesting of caller-supplied values.
const maxInputDepth = 100

// fromGo converts a caller's JSON-like Go value to a template value.
func fromGo(v any, depth int) (any, error) {
	if depth > maxInputDepth {
		return nil, fmt.Errorf("value nested deeper than %d levels", maxInputDepth)
	}
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool:
		return x, nil
	case string:
		if !utf8.ValidString(x) {
			return nil, fmt.Errorf("string %q is not valid UTF-8", x)
		}
		return x, nil
	case int:
		return int64(x), nil
	case int8:
		return int64(x), nil
	case int16:
		return int64(x), nil
	case int32:
		return int64(x), nil
	case int64:
		return x, nil
	case uint:
		return uintValue(uint64(x))
	case uint8:
		return int64(x), nil
	case uint16:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case uint64:
		return uintValue(x)
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	case json.Number:
		return numberValue(string(x))
	case json.RawMessage:
		return decodeJSON(x)
	case []any:
		items := make([]any, len(x))
		for i, it := range x {
			c, err := fromGo(it, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			items[i] = c
		}
		return newList(items), nil
	case []string:
		for _, e := range x {
			if !utf8.ValidString(e) {
				return nil, fmt.Errorf("string %q is not valid UTF-8", e)
			}
		}
		return strList(x), nil
	case []map[string]any:
		items := make([]any, len(x))
		for i, it := range x {
			c, err := fromGo(it, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			items[i] = c
		}
		return newList(items), nil
	case map[string]any:
		d := newDict()
		for _, k := range sortedStringKeys(x) {
			if !utf8.ValidString(k) {
				return nil, fmt.Errorf("key %q is not valid UTF-8", k)
			}
			c, err := fromGo(x[k], depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%q]: %w", k, err)
			}
			d.set(k, c)
		}
		return d, nil
	case map[string]string:
		d := newDict()
		for _, k := range sortedStringKeys(x) {
			if !utf8.ValidString(k) || !utf8.ValidString(x[k]) {
				return nil, fmt.Errorf("entry %q is not valid UTF-8", k)
			}
			d.set(k, x[k])
		}
		return d, nil
	}
	return nil, fmt.Errorf("a Go %s has no template counterpart (use JSON-like values: nil, bool, numbers, string, []any, map[string]any, json.RawMessage)", reflect.TypeOf(v))
}

func uintValue(u uint64) (any, error) {
	if u > math.MaxInt64 {
		return nil, fmt.Errorf("integer %d does not fit in 64 signed bits", u)
	}
	return int64(u), nil
}

// numberValue converts a JSON number as Python's json module does: an
// integer literal to int, anything else to float.
func numberValue(s string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("integer %s does not fit in 64 bits", s)
		}
		return i, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !math.IsInf(f, 0) {
		return nil, fmt.Errorf("bad number %q", s)
	}
	return f, nil
}

// decodeJSON decodes one JSON value keeping object key order, as Python's
// json.loads does (a repeated key keeps its first position and its last
// value).
func decodeJSON(data []byte) (any, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("json.RawMessage is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("json.RawMessage: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("json.RawMessage: data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxInputDepth {
		return nil, fmt.Errorf("JSON nested deeper than %d levels", maxInputDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			var items []any
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			if items == nil {
				items = []any{}
			}
			return newList(items), nil
		case '{':
			d := newDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is %T", kt)
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return d, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case json.Number:
		return numberValue(string(t))
	case string, bool, nil:
		return t, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

var (
	weekdays = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
	months   = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
)

// strftime formats t as CPython's datetime.strftime does for a naive
// datetime on Linux (glibc, C locale): %a %A %b %B %d %e %F %H %I %j %m %M
// %p %S %T %y %Y %z %Z %%, with glibc's "-" flag (no padding) on numeric
// fields. %z and %Z are empty, as for a naive datetime.
func strftime(t time.Time, format string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			return "", errors.New("format ends with a lone %")
		}
		noPad := false
		if format[i] == '-' {
			noPad = true
			i++
			if i >= len(format) {
				return "", errors.New("format ends with %-")
			}
		}
		num := func(v, width int) {
			s := strconv.Itoa(v)
			if !noPad {
				for len(s) < width {
					s = "0" + s
				}
			}
			b.WriteString(s)
		}
		switch format[i] {
		case 'a':
			b.WriteString(weekdays[t.Weekday()][:3])
		case 'A':
			b.WriteString(weekdays[t.Weekday()])
		case 'b', 'h':
			b.WriteString(months[t.Month()-1][:3])
		case 'B':
			b.WriteString(months[t.Month()-1])
		case 'd':
			num(t.Day(), 2)
		case 'e':
			if noPad {
				num(t.Day(), 1)
			} else {
				fmt.Fprintf(&b, "%2d", t.Day())
			}
		case 'F':
			fmt.Fprintf(&b, "%04d-%02d-%02d", t.Year(), t.Month(), t.Day())
		case 'H':
			num(t.Hour(), 2)
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			num(h, 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'm':
			num(int(t.Month()), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'S':
			num(t.Second(), 2)
		case 'T':
			fmt.Fprintf(&b, "%02d:%02d:%02d", t.Hour(), t.Minute(), t.Second())
		case 'y':
			num(t.Year()%100, 2)
		case 'Y':
			num(t.Year(), 4)
		case 'z', 'Z':
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf("directive %%%c is not supported", format[i])
		}
	}
	return b.String(), nil
}
