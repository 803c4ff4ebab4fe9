package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects Decode accepts.
const MaxDepth = 64

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	numberType      = reflect.TypeFor[json.Number]()
)

// Decode checks that body is exactly one JSON value that v's type
// describes (see the package documentation), then decodes it into v, which
// must be a non-nil pointer. Errors are *Error values.
//
// A type with its own UnmarshalJSON is handed the raw bytes of its value
// during the check; if it calls Decode itself, the paths of its errors
// are joined to the path of the value.
func Decode(body []byte, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &Error{Msg: fmt.Sprintf("strictjson: Decode needs a non-nil pointer, got %T", v), Err: ErrType}
	}
	w := &walker{dec: json.NewDecoder(bytes.NewReader(body)), body: body, bad: -1}
	w.dec.UseNumber()
	if !utf8.Valid(body) {
		w.bad = int64(firstInvalidUTF8(body))
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return &Error{Msg: "the body is empty; want a JSON value", Err: ErrSyntax}
	}
	if err := w.value(rv.Type().Elem(), ""); err != nil {
		return err
	}
	if _, err := w.dec.Token(); err != io.EOF {
		end := w.dec.InputOffset()
		off := end + int64(len(body[end:])-len(bytes.TrimLeft(body[end:], " \t\r\n")))
		return &Error{Offset: off, Msg: fmt.Sprintf("unexpected data after the JSON value at byte %d", off), Err: ErrSyntax}
	}
	if w.bad >= 0 {
		// In a value taken as is (any, json.RawMessage), which the walk
		// does not look into.
		return &Error{Offset: w.bad, Msg: fmt.Sprintf("invalid UTF-8 at byte %d; JSON text must be UTF-8", w.bad), Err: ErrSyntax}
	}
	if err := json.Unmarshal(body, v); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return e
		}
		return &Error{Msg: err.Error(), Err: ErrType}
	}
	return nil
}

type walker struct {
	dec   *json.Decoder
	body  []byte
	depth int
	bad   int64 // offset of the body's first invalid UTF-8 byte, or -1
}

// firstInvalidUTF8 returns the offset of b's first byte that is not part
// of a valid UTF-8 sequence.
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// checkUTF8 refuses a string token (a value or a key at path) that holds
// the body's first invalid UTF-8 byte: encoding/json would silently turn
// it into U+FFFD.
func (w *walker) checkUTF8(tok json.Token, path string) error {
	if _, ok := tok.(string); !ok || w.bad < 0 || w.dec.InputOffset() <= w.bad {
		return nil
	}
	return &Error{Path: path, Offset: w.bad, Msg: fmt.Sprintf("the string holds invalid UTF-8 (byte %d); JSON text must be UTF-8", w.bad), Err: ErrType}
}

// nullable reports whether null is a value of t itself rather than the
// absence of one: a pointer, an interface, a json.RawMessage, or a type
// with its own UnmarshalJSON (which decides).
func nullable(t reflect.Type) bool {
	k := t.Kind()
	return k == reflect.Pointer || k == reflect.Interface || t == rawMessageType || isUnmarshaler(t)
}

// syntax turns a token reader's error into an *Error.
func (w *walker) syntax(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return &Error{Offset: se.Offset, Msg: fmt.Sprintf("malformed JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: ")), Err: ErrSyntax}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		off := w.dec.InputOffset()
		return &Error{Offset: off, Msg: fmt.Sprintf("malformed JSON: the body ends early, at byte %d", off), Err: ErrSyntax}
	default:
		return &Error{Offset: w.dec.InputOffset(), Msg: "malformed JSON: " + err.Error(), Err: ErrSyntax}
	}
}

func (w *walker) token() (json.Token, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return nil, w.syntax(err)
	}
	return tok, nil
}

// enter and leave bound the nesting depth.
func (w *walker) enter(path string) error {
	w.depth++
	if w.depth > MaxDepth {
		return &Error{Path: path, Offset: w.dec.InputOffset(), Msg: fmt.Sprintf("arrays and objects nest deeper than %d levels", MaxDepth), Err: ErrDepth}
	}
	return nil
}

func (w *walker) leave() { w.depth-- }

// skipRest consumes the rest of a value whose first token was tok.
func (w *walker) skipRest(tok json.Token, path string) error {
	d, ok := tok.(json.Delim)
	if !ok || d == '}' || d == ']' {
		return nil
	}
	if err := w.enter(path); err != nil {
		return err
	}
	defer w.leave()
	for w.dec.More() {
		t, err := w.token()
		if err != nil {
			return err
		}
		if d == '{' {
			// t is the key; the value follows.
			if t, err = w.token(); err != nil {
				return err
			}
		}
		if err := w.skipRest(t, path); err != nil {
			return err
		}
	}
	_, err := w.token() // the closing delimiter
	return err
}

// kindOf names the JSON kind of a token for error messages.
func kindOf(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// want names the JSON kind a Go type takes.
func want(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a value"
}

func (w *walker) typeError(path string, tok json.Token, t reflect.Type) error {
	return &Error{Path: path, Offset: w.dec.InputOffset(),
		Msg: fmt.Sprintf("got %s, want %s", kindOf(tok), want(t)), Err: ErrType}
}

func isUnmarshaler(t reflect.Type) bool {
	return t != rawMessageType && (t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType))
}

// value checks the next value against t. A null there leaves a field
// unset; see element for array elements and map values.
func (w *walker) value(t reflect.Type, path string) error {
	return w.valueNull(t, path, true)
}

// element checks an array element or a map value: there null is refused
// unless t can hold it (nullable), since encoding/json would turn it into
// t's zero value (a token id of 0, an empty stop string, a bias of 0).
func (w *walker) element(t reflect.Type, path string) error {
	return w.valueNull(t, path, nullable(t))
}

func (w *walker) valueNull(t reflect.Type, path string, nullOK bool) error {
	for t.Kind() == reflect.Pointer && !isUnmarshaler(t) {
		t = t.Elem()
	}
	if isUnmarshaler(t) {
		return w.custom(t, path)
	}
	tok, err := w.token()
	if err != nil {
		return err
	}
	if tok == nil {
		if !nullOK {
			return w.typeError(path, tok, t)
		}
		return nil // null leaves the field unset
	}
	if err := w.checkUTF8(tok, path); err != nil {
		return err
	}
	switch t.Kind() {
	case reflect.Interface:
		return w.skipRest(tok, path)
	case reflect.Struct:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return w.typeError(path, tok, t)
		}
		return w.object(t, path)
	case reflect.Map:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return w.typeError(path, tok, t)
		}
		return w.mapping(t, path)
	case reflect.Slice, reflect.Array:
		if t == rawMessageType {
			return w.skipRest(tok, path)
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return w.typeError(path, tok, t)
		}
		return w.array(t, path)
	case reflect.String:
		if _, ok := tok.(json.Number); ok && t == numberType {
			return nil
		}
		if _, ok := tok.(string); !ok {
			return w.typeError(path, tok, t)
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return w.typeError(path, tok, t)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := tok.(json.Number)
		if !ok {
			return w.typeError(path, tok, t)
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return w.numberError(path, n, t, err)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := tok.(json.Number)
		if !ok {
			return w.typeError(path, tok, t)
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return w.numberError(path, n, t, err)
		}
	case reflect.Float32, reflect.Float64:
		n, ok := tok.(json.Number)
		if !ok {
			return w.typeError(path, tok, t)
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			return &Error{Path: path, Offset: w.dec.InputOffset(), Msg: fmt.Sprintf("the number %s is out of range", n), Err: ErrType}
		}
	default:
		return w.skipRest(tok, path)
	}
	return nil
}

func (w *walker) numberError(path string, n json.Number, t reflect.Type, err error) error {
	msg := fmt.Sprintf("got %s, want an integer", n)
	if errors.Is(err, strconv.ErrRange) {
		msg = fmt.Sprintf("the integer %s is out of range", n)
	}
	if t.Kind() >= reflect.Uint && t.Kind() <= reflect.Uint64 && strings.HasPrefix(string(n), "-") {
		msg = fmt.Sprintf("got %s, want a non-negative integer", n)
	}
	return &Error{Path: path, Offset: w.dec.InputOffset(), Msg: msg, Err: ErrType}
}

// custom hands the raw bytes of the next value to t's UnmarshalJSON.
func (w *walker) custom(t reflect.Type, path string) error {
	start := w.dec.InputOffset()
	tok, err := w.token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil
	}
	if err := w.skipRest(tok, path); err != nil {
		return err
	}
	end := w.dec.InputOffset()
	if w.bad >= start && w.bad < end {
		return &Error{Path: path, Offset: w.bad, Msg: fmt.Sprintf("the value holds invalid UTF-8 (byte %d); JSON text must be UTF-8", w.bad), Err: ErrType}
	}
	raw := bytes.TrimLeft(w.body[start:end], " \t\r\n:,")
	var u json.Unmarshaler
	if t.Kind() == reflect.Pointer {
		u = reflect.New(t.Elem()).Interface().(json.Unmarshaler)
	} else {
		u = reflect.New(t).Interface().(json.Unmarshaler)
	}
	if err := u.UnmarshalJSON(raw); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return &Error{Path: joinPath(path, e.Path), Offset: start + e.Offset, Msg: e.Msg, Err: e.Err}
		}
		return &Error{Path: path, Offset: start, Msg: err.Error(), Err: ErrType}
	}
	return nil
}

// joinPath appends a relative path (".a", "[1]", "a" or "") to path.
func joinPath(path, rel string) string {
	switch {
	case rel == "":
		return path
	case path == "" || rel[0] == '[':
		return path + rel
	default:
		return path + "." + rel
	}
}

func fieldPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (w *walker) object(t reflect.Type, path string) error {
	if err := w.enter(path); err != nil {
		return err
	}
	defer w.leave()
	fields := fieldsOf(t)
	var seen map[string]bool
	for w.dec.More() {
		tok, err := w.token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		p := fieldPath(path, key)
		if err := w.checkUTF8(tok, p); err != nil {
			return err
		}
		ft, ok := fields[key]
		if !ok {
			return &Error{Path: p, Offset: w.dec.InputOffset(), Msg: fmt.Sprintf("unknown field %q", key), Err: ErrUnknownField}
		}
		if seen == nil {
			seen = make(map[string]bool, len(fields))
		}
		if seen[key] {
			return &Error{Path: p, Offset: w.dec.InputOffset(), Msg: fmt.Sprintf("field %q appears twice", key), Err: ErrDuplicateField}
		}
		seen[key] = true
		if err := w.value(ft, p); err != nil {
			return err
		}
	}
	_, err := w.token()
	return err
}

func (w *walker) mapping(t reflect.Type, path string) error {
	if err := w.enter(path); err != nil {
		return err
	}
	defer w.leave()
	var seen map[string]bool
	for w.dec.More() {
		tok, err := w.token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		p := fmt.Sprintf("%s[%q]", path, key)
		if err := w.checkUTF8(tok, p); err != nil {
			return err
		}
		if seen == nil {
			seen = make(map[string]bool)
		}
		if seen[key] {
			return &Error{Path: p, Offset: w.dec.InputOffset(), Msg: fmt.Sprintf("key %q appears twice", key), Err: ErrDuplicateField}
		}
		seen[key] = true
		switch t.Key().Kind() {
		case reflect.String:
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if _, err := strconv.ParseInt(key, 10, t.Key().Bits()); err != nil {
				return &Error{Path: p, Offset: w.dec.InputOffset(), Msg: fmt.Sprintf("key %q is not an integer", key), Err: ErrType}
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			if _, err := strconv.ParseUint(key, 10, t.Key().Bits()); err != nil {
				return &Error{Path: p, Offset: w.dec.InputOffset(), Msg: fmt.Sprintf("key %q is not a non-negative integer", key), Err: ErrType}
			}
		default:
			return &Error{Path: p, Offset: w.dec.InputOffset(), Msg: fmt.Sprintf("maps keyed by %v are not supported", t.Key()), Err: ErrType}
		}
		if err := w.element(t.Elem(), p); err != nil {
			return err
		}
	}
	_, err := w.token()
	return err
}

func (w *walker) array(t reflect.Type, path string) error {
	if err := w.enter(path); err != nil {
		return err
	}
	defer w.leave()
	i := 0
	for w.dec.More() {
		p := fmt.Sprintf("%s[%d]", path, i)
		if t.Kind() == reflect.Array && i >= t.Len() {
			return &Error{Path: p, Offset: w.dec.InputOffset(), Msg: fmt.Sprintf("the array holds more than %d elements", t.Len()), Err: ErrType}
		}
		if err := w.element(t.Elem(), p); err != nil {
			return err
		}
		i++
	}
	_, err := w.token()
	return err
}

var fieldCache sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf maps the json names of t's fields (embedded structs flattened,
// as encoding/json does) to their types.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := make(map[string]reflect.Type)
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					add(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if _, dup := m[name]; !dup {
				m[name] = f.Type
			}
		}
	}
	add(t)
	fieldCache.Store(t, m)
	return m
}
