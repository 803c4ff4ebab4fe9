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

// This file turns values into text the way CPython does: str() for
// printing, repr() inside containers, and json.dumps for the tojson filter
// (transformers overrides Jinja2's tojson with json.dumps(x,
// ensure_ascii=False, indent=indent, separators=separators,
// sort_keys=sort_keys)).

// errNotPrintable is wrapped by pyStr when a value has no reproducible text
// (CPython would print an object address).
type notPrintableError struct{ typ string }

func (e *notPrintableError) Error() string {
	return fmt.Sprintf("a %s value has no stable text form (CPython prints an object address)", e.typ)
}

// pyStr is Python's str(v), with Jinja2's rule that Undefined prints as "".
func pyStr(v any) (string, error) { return pyStrMax(v, 0) }

// pyStrMax is pyStr that gives up with errOutputTooLarge once a container's
// text passes max bytes (0: no bound).
func pyStrMax(v any, max int) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case markup:
		return string(x), nil
	case undefined:
		return "", nil
	case nil:
		return "None", nil
	case bool:
		if x {
			return "True", nil
		}
		return "False", nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		return formatFloat(x), nil
	}
	var b strings.Builder
	if err := writeRepr(&b, v, 0, max); err != nil {
		return "", err
	}
	return b.String(), nil
}

// pyRepr is Python's repr(v).
func pyRepr(v any) (string, error) {
	var b strings.Builder
	err := writeRepr(&b, v, 0, 0)
	return b.String(), err
}

// maxReprDepth bounds nesting when printing containers.
const maxReprDepth = 200

func writeRepr(b *strings.Builder, v any, depth, max int) error {
	if depth > maxReprDepth {
		return fmt.Errorf("value nested deeper than %d levels", maxReprDepth)
	}
	if max > 0 && b.Len() > max {
		return errOutputTooLarge
	}
	switch x := v.(type) {
	case string:
		writeStrRepr(b, x)
	case markup:
		b.WriteString("Markup(")
		writeStrRepr(b, string(x))
		b.WriteByte(')')
	case undefined:
		b.WriteString("Undefined")
	case nil, bool, int64, float64:
		s, _ := pyStr(x)
		b.WriteString(s)
	case *listValue:
		switch x.kind {
		case kindGen:
			return &notPrintableError{typ: "generator"}
		case kindRange:
			if x.rng[2] == 1 {
				fmt.Fprintf(b, "range(%d, %d)", x.rng[0], x.rng[1])
			} else {
				fmt.Fprintf(b, "range(%d, %d, %d)", x.rng[0], x.rng[1], x.rng[2])
			}
			return nil
		}
		open, close := "[", "]"
		if x.kind == kindView {
			open, close = x.view+"([", "])"
		}
		if x.kind == kindTuple {
			open, close = "(", ")"
		}
		b.WriteString(open)
		for i, it := range x.items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeRepr(b, it, depth+1, max); err != nil {
				return err
			}
		}
		if x.kind == kindTuple && len(x.items) == 1 {
			b.WriteByte(',')
		}
		b.WriteString(close)
	case *dictValue:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writeRepr(b, k, depth+1, max); err != nil {
				return err
			}
			b.WriteString(": ")
			if err := writeRepr(b, x.vals[i], depth+1, max); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case *namespace:
		b.WriteString("<Namespace ")
		if err := writeRepr(b, x.attrs, depth+1, max); err != nil {
			return err
		}
		b.WriteByte('>')
	default:
		return &notPrintableError{typ: typeName(v)}
	}
	return nil
}

// writeStrRepr writes CPython's repr of a str: single quotes unless the
// text holds a single quote and no double quote; backslash escapes for the
// quote, backslash, \t \n \r, other control and non-printable characters.
func writeStrRepr(b *strings.Builder, s string) {
	quote := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		quote = '"'
	}
	b.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == rune(quote) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r < 0x80:
			b.WriteRune(r)
		case !pyPrintable(r):
			switch {
			case r <= 0xff:
				fmt.Fprintf(b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				fmt.Fprintf(b, `\U%08x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(quote)
}

// pyPrintable approximates str.isprintable for one code point: letters,
// marks, numbers, punctuation and symbols, and the ASCII space. (Go's
// Unicode tables may be of a different version than CPython's.)
func pyPrintable(r rune) bool {
	return r == ' ' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S)
}

// formatFloat is CPython's repr(float): the shortest digits that round
// trip, in positional notation when the decimal exponent is in [-4, 16),
// otherwise in scientific notation with at least two exponent digits; an
// integral value keeps ".0".
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	// 'e' with precision -1 gives the shortest round-trip digits:
	// d.ddddde±XX.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	neg := false
	if e[0] == '-' {
		neg = true
		e = e[1:]
	}
	mant, expPart, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expPart)
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	if exp >= -4 && exp < 16 {
		// Positional.
		point := exp + 1 // digits before the decimal point
		switch {
		case point <= 0:
			out = "0." + strings.Repeat("0", -point) + digits
		case point >= len(digits):
			out = digits + strings.Repeat("0", point-len(digits)) + ".0"
		default:
			out = digits[:point] + "." + digits[point:]
		}
	} else {
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign = "-"
			exp = -exp
		}
		es := strconv.Itoa(exp)
		if len(es) < 2 {
			es = "0" + es
		}
		out = m + "e" + sign + es
	}
	if neg {
		return "-" + out
	}
	return out
}

// jsonOptions are the arguments of json.dumps that tojson exposes.
type jsonOptions struct {
	indent    *string // nil: compact; otherwise the text of one indent level
	itemSep   string
	keySep    string
	sortKeys  bool
	maxOutput int
}

// toJSON is json.dumps(v, ensure_ascii=False, ...) as CPython writes it.
func toJSON(v any, o jsonOptions) (string, error) {
	var b strings.Builder
	if err := writeJSON(&b, v, o, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func writeJSON(b *strings.Builder, v any, o jsonOptions, level int) error {
	if level > maxReprDepth {
		return fmt.Errorf("value nested deeper than %d levels", maxReprDepth)
	}
	if o.maxOutput > 0 && b.Len() > o.maxOutput {
		return errOutputTooLarge
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(formatFloat(x))
		}
	case string:
		writeJSONString(b, x)
	case markup:
		writeJSONString(b, string(x))
	case *listValue:
		if x.kind != kindList && x.kind != kindTuple {
			return fmt.Errorf("Object of type %s is not JSON serializable", typeName(x))
		}
		if len(x.items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range x.items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			writeJSONIndent(b, o, level+1)
			if err := writeJSON(b, it, o, level+1); err != nil {
				return err
			}
		}
		writeJSONIndent(b, o, level)
		b.WriteByte(']')
	case *dictValue:
		if x.len() == 0 {
			b.WriteString("{}")
			return nil
		}
		order := make([]int, x.len())
		for i := range order {
			order[i] = i
		}
		keys := make([]string, x.len())
		for i, k := range x.keys {
			ks, err := jsonKey(k)
			if err != nil {
				return err
			}
			keys[i] = ks
		}
		if o.sortKeys {
			for _, k := range x.keys {
				if _, ok := k.(string); !ok {
					return fmt.Errorf("sort_keys needs string keys, got a %s key", typeName(k))
				}
			}
			sort.SliceStable(order, func(a, c int) bool { return keys[order[a]] < keys[order[c]] })
		}
		b.WriteByte('{')
		for n, i := range order {
			if n > 0 {
				b.WriteString(o.itemSep)
			}
			writeJSONIndent(b, o, level+1)
			writeJSONString(b, keys[i])
			b.WriteString(o.keySep)
			if err := writeJSON(b, x.vals[i], o, level+1); err != nil {
				return err
			}
		}
		writeJSONIndent(b, o, level)
		b.WriteByte('}')
	default:
		return fmt.Errorf("Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

func writeJSONIndent(b *strings.Builder, o jsonOptions, level int) {
	if o.indent == nil {
		return
	}
	b.WriteByte('\n')
	for i := 0; i < level; i++ {
		b.WriteString(*o.indent)
	}
}

// jsonKey converts a dict key as json.dumps does.
func jsonKey(k any) (string, error) {
	switch x := k.(type) {
	case string:
		return x, nil
	case bool:
		if x {
			return "true", nil
		}
		return "false", nil
	case nil:
		return "null", nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case float64:
		var b strings.Builder
		if err := writeJSON(&b, x, jsonOptions{}, 0); err != nil {
			return "", err
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("keys must be str, int, float, bool or None, not %s", typeName(k))
}

// writeJSONString quotes s as json.dumps with ensure_ascii=False: only the
// quote, the backslash and control characters below U+0020 are escaped.
func writeJSONString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteString("\ufffd")
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
			continue
		}
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}
