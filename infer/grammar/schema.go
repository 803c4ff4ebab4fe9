package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// SchemaOptions configures FromSchema.
type SchemaOptions struct {
	// Strict refuses every keyword the compiler does not enforce (pattern,
	// minimum, uniqueItems, ...) with a *SchemaError, instead of ignoring
	// it. That includes a keyword beside $ref, anyOf, oneOf, allOf, const
	// or enum, whose expression stands for the whole schema; beside const
	// and enum only type is allowed, and every value must have that type.
	// OpenAI's strict structured outputs and tool calls set it.
	Strict bool
}

// FromSchema compiles a JSON schema into a grammar of the JSON texts that
// validate against it. Supported: type (object, array, string, number,
// integer, boolean, null, or a list of them), properties, required,
// additionalProperties, enum, const, anyOf, oneOf, allOf of one schema,
// $ref to "#" or a JSON pointer inside the document ($defs,
// definitions), items, minItems, maxItems, minLength, maxLength, format
// (any format is generated as a string of that length, not checked
// against the format), minimum, maximum, exclusiveMinimum and
// exclusiveMaximum on integers (integers are generated with at most 15
// digits, inside JavaScript's safe integers), and the annotations title, description, default,
// examples, $schema, $id, $comment, deprecated, readOnly, writeOnly.
//
// Objects are generated with their declared properties in declaration
// order, required ones always and optional ones possibly omitted; no
// undeclared property is generated (additionalProperties false or not,
// which only narrows the output to texts that still validate), except
// that an object with no declared properties and an additionalProperties
// schema (or true) is a map of any keys to that schema, and that without
// Strict a property that required names but properties does not declare
// is generated with the additionalProperties schema (any value when that
// is absent or true). oneOf is
// generated as anyOf: exclusivity is not enforced. Any other keyword is
// an error under SchemaOptions.Strict and ignored otherwise.
func FromSchema(schema []byte, opt SchemaOptions) (*Grammar, error) {
	doc, err := decodeOrdered(schema)
	if err != nil {
		return nil, &SchemaError{Pointer: "", Reason: "is not valid JSON: " + err.Error(), Err: err}
	}
	c := newSchemaCompiler(opt)
	expr, err := c.schema(doc, doc, "", 0)
	if err != nil {
		return nil, err
	}
	return c.grammar("root ::= " + expr)
}

// jnode is a JSON value that keeps object keys in document order.
type jnode struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	obj  []jkv
	arr  []*jnode
	str  string // string, or the number's text
	b    bool
}

type jkv struct {
	key string
	val *jnode
}

func (n *jnode) get(key string) *jnode {
	for i := range n.obj {
		if n.obj[i].key == key {
			return n.obj[i].val
		}
	}
	return nil
}

func decodeOrdered(data []byte) (*jnode, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	n, err := decodeValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the schema")
	}
	return n, nil
}

const maxSchemaDepth = 256

func decodeValue(d *json.Decoder, depth int) (*jnode, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxSchemaDepth)
	}
	t, err := d.Token()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch v := t.(type) {
	case json.Delim:
		switch v {
		case '{':
			n := &jnode{kind: 'o'}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				if n.get(k) != nil {
					return nil, fmt.Errorf("key %q appears twice in an object", k)
				}
				val, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				n.obj = append(n.obj, jkv{k, val})
			}
			_, err := d.Token()
			return n, err
		case '[':
			n := &jnode{kind: 'a'}
			for d.More() {
				val, err := decodeValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				n.arr = append(n.arr, val)
			}
			_, err := d.Token()
			return n, err
		}
	case string:
		return &jnode{kind: 's', str: v}, nil
	case json.Number:
		return &jnode{kind: 'n', str: string(v)}, nil
	case bool:
		return &jnode{kind: 'b', b: v}, nil
	case nil:
		return &jnode{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", t)
}

// encode writes n as compact JSON.
func (n *jnode) encode(b *strings.Builder) {
	switch n.kind {
	case 'o':
		b.WriteByte('{')
		for i, kv := range n.obj {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(kv.key))
			b.WriteByte(':')
			kv.val.encode(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, v := range n.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			v.encode(b)
		}
		b.WriteByte(']')
	case 's':
		b.WriteString(jsonString(n.str))
	case 'n':
		b.WriteString(n.str)
	case 'b':
		b.WriteString(strconv.FormatBool(n.b))
	case 'z':
		b.WriteString("null")
	}
}

// jsonString returns s as a JSON string literal, without HTML escaping.
func jsonString(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// literal returns s as a GBNF string literal.
func literal(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// schemaCompiler writes GBNF rules for schemas.
type schemaCompiler struct {
	opt   SchemaOptions
	rules []string
	names map[string]bool
	refs  map[refKey]string // a $ref target's rule
}

type refKey struct {
	doc *jnode
	ptr string
}

func newSchemaCompiler(opt SchemaOptions) *schemaCompiler {
	return &schemaCompiler{opt: opt, names: map[string]bool{}, refs: map[refKey]string{}}
}

// grammar parses the compiled rules under the given root rule.
func (c *schemaCompiler) grammar(root string) (*Grammar, error) {
	src := root + "\n" + strings.Join(c.rules, "\n") + "\n" + jsonRules
	g, err := Parse(src)
	if err != nil {
		return nil, &SchemaError{Pointer: "", Reason: "compiles to an unusable grammar: " + err.Error(), Err: err}
	}
	return g, nil
}

// rule adds a rule with a fresh name derived from hint and returns the
// name.
func (c *schemaCompiler) rule(hint, body string) string {
	name := c.fresh(hint)
	c.rules = append(c.rules, name+" ::= "+body)
	return name
}

func (c *schemaCompiler) fresh(hint string) string {
	var b strings.Builder
	b.WriteString("s-")
	for _, r := range hint {
		if r < 128 && isNameChar(byte(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
		if b.Len() > 40 {
			break
		}
	}
	base := b.String()
	name := base
	for i := 1; c.names[name]; i++ {
		name = base + "-" + strconv.Itoa(i)
	}
	c.names[name] = true
	return name
}

// Keywords the compiler enforces or may ignore safely.
var (
	annotations = []string{"title", "description", "default", "examples", "$schema", "$id", "$comment",
		"deprecated", "readOnly", "writeOnly", "$defs", "definitions"}
	handled = []string{"type", "properties", "required", "additionalProperties", "enum", "const", "anyOf",
		"oneOf", "allOf", "$ref", "items", "minItems", "maxItems", "minLength", "maxLength", "format",
		"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}
)

func (c *schemaCompiler) errorf(ptr, format string, a ...any) error {
	return &SchemaError{Pointer: ptr, Reason: fmt.Sprintf(format, a...)}
}

// schema returns a GBNF expression for the schema n at pointer ptr of doc.
func (c *schemaCompiler) schema(doc, n *jnode, ptr string, depth int) (string, error) {
	if depth > maxSchemaDepth {
		return "", c.errorf(ptr, "nests schemas deeper than %d", maxSchemaDepth)
	}
	switch n.kind {
	case 'b':
		if n.b {
			return "json-value", nil
		}
		return "", c.errorf(ptr, "is false, which no value validates against")
	case 'o':
	default:
		return "", c.errorf(ptr, "is not a schema (an object or a boolean)")
	}
	if c.opt.Strict {
		for _, kv := range n.obj {
			if !slices.Contains(annotations, kv.key) && !slices.Contains(handled, kv.key) {
				return "", c.errorf(ptr+"/"+escapePtr(kv.key), "keyword %q is not supported in strict mode", kv.key)
			}
		}
	}
	if r := n.get("$ref"); r != nil {
		if err := c.strictAlone(n, ptr, "$ref"); err != nil {
			return "", err
		}
		return c.ref(doc, r, ptr+"/$ref", depth)
	}
	if v := n.get("const"); v != nil {
		if err := c.strictValues(n, ptr, "const", v); err != nil {
			return "", err
		}
		var b strings.Builder
		v.encode(&b)
		return "( " + literal(b.String()) + " ws )", nil
	}
	if v := n.get("enum"); v != nil {
		if v.kind != 'a' || len(v.arr) == 0 {
			return "", c.errorf(ptr+"/enum", "must be a non-empty array")
		}
		if err := c.strictValues(n, ptr, "enum", v.arr...); err != nil {
			return "", err
		}
		alts := make([]string, len(v.arr))
		for i, x := range v.arr {
			var b strings.Builder
			x.encode(&b)
			alts[i] = literal(b.String())
		}
		return "( ( " + strings.Join(alts, " | ") + " ) ws )", nil
	}
	for _, kw := range []string{"anyOf", "oneOf", "allOf"} {
		v := n.get(kw)
		if v == nil {
			continue
		}
		if v.kind != 'a' || len(v.arr) == 0 {
			return "", c.errorf(ptr+"/"+kw, "must be a non-empty array of schemas")
		}
		if kw == "allOf" && len(v.arr) != 1 {
			return "", c.errorf(ptr+"/allOf", "has %d schemas; only allOf of one schema is supported", len(v.arr))
		}
		if err := c.strictAlone(n, ptr, kw); err != nil {
			return "", err
		}
		alts := make([]string, len(v.arr))
		for i, x := range v.arr {
			e, err := c.schema(doc, x, fmt.Sprintf("%s/%s/%d", ptr, kw, i), depth+1)
			if err != nil {
				return "", err
			}
			alts[i] = e
		}
		return "( " + strings.Join(alts, " | ") + " )", nil
	}
	var types []string
	switch t := n.get("type"); {
	case t == nil:
		switch {
		case n.get("properties") != nil || n.get("additionalProperties") != nil || n.get("required") != nil:
			types = []string{"object"}
		case n.get("items") != nil:
			types = []string{"array"}
		case n.get("minLength") != nil || n.get("maxLength") != nil || n.get("format") != nil:
			types = []string{"string"}
		default:
			return "json-value", nil
		}
	case t.kind == 's':
		types = []string{t.str}
	case t.kind == 'a' && len(t.arr) > 0:
		for i, x := range t.arr {
			if x.kind != 's' {
				return "", c.errorf(fmt.Sprintf("%s/type/%d", ptr, i), "must be a type name")
			}
			types = append(types, x.str)
		}
	default:
		return "", c.errorf(ptr+"/type", "must be a type name or a non-empty array of them")
	}
	alts := make([]string, 0, len(types))
	for _, t := range types {
		var (
			e   string
			err error
		)
		switch t {
		case "object":
			e, err = c.object(doc, n, ptr, depth)
		case "array":
			e, err = c.array(doc, n, ptr, depth)
		case "string":
			e, err = c.str(n, ptr)
		case "number":
			e, err = "json-number", c.strictOnly(n, ptr, "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
		case "integer":
			e, err = c.integer(n, ptr)
		case "boolean":
			e = "json-boolean"
		case "null":
			e = "json-null"
		default:
			err = c.errorf(ptr+"/type", "names unknown type %q", t)
		}
		if err != nil {
			return "", err
		}
		alts = append(alts, e)
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return "( " + strings.Join(alts, " | ") + " )", nil
}

// strictAlone refuses, in strict mode, every keyword of n beside kw
// other than annotations and the keywords in also: the expression for
// kw ($ref, const, enum, anyOf, oneOf, allOf) does not enforce them.
func (c *schemaCompiler) strictAlone(n *jnode, ptr, kw string, also ...string) error {
	if !c.opt.Strict {
		return nil
	}
	for _, kv := range n.obj {
		if kv.key == kw || slices.Contains(annotations, kv.key) || slices.Contains(also, kv.key) {
			continue
		}
		return c.errorf(ptr+"/"+escapePtr(kv.key), "keyword %q beside %q is not supported in strict mode", kv.key, kw)
	}
	return nil
}

// strictValues refuses, in strict mode, keywords beside const or enum
// (kw) other than type, and a value of vals that type does not allow.
func (c *schemaCompiler) strictValues(n *jnode, ptr, kw string, vals ...*jnode) error {
	if err := c.strictAlone(n, ptr, kw, "type"); err != nil || !c.opt.Strict {
		return err
	}
	t := n.get("type")
	if t == nil {
		return nil
	}
	var types []string
	switch t.kind {
	case 's':
		types = []string{t.str}
	case 'a':
		for _, x := range t.arr {
			types = append(types, x.str)
		}
	}
	for i, v := range vals {
		if !slices.ContainsFunc(types, func(name string) bool { return hasType(v, name) }) {
			p := ptr + "/" + kw
			if kw == "enum" {
				p += "/" + strconv.Itoa(i)
			}
			var b strings.Builder
			v.encode(&b)
			return c.errorf(p, "%s is not of type %s", b.String(), strings.Join(types, " or "))
		}
	}
	return nil
}

// hasType reports whether the JSON value v has the JSON Schema type name.
func hasType(v *jnode, name string) bool {
	switch name {
	case "string":
		return v.kind == 's'
	case "number":
		return v.kind == 'n'
	case "integer":
		f, err := strconv.ParseFloat(v.str, 64)
		return v.kind == 'n' && err == nil && f == math.Trunc(f)
	case "boolean":
		return v.kind == 'b'
	case "null":
		return v.kind == 'z'
	case "object":
		return v.kind == 'o'
	case "array":
		return v.kind == 'a'
	}
	return false
}

func escapePtr(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// ref returns the rule for a $ref, resolving a JSON pointer in doc.
func (c *schemaCompiler) ref(doc, r *jnode, ptr string, depth int) (string, error) {
	if r.kind != 's' {
		return "", c.errorf(ptr, "must be a string")
	}
	target := r.str
	if target != "#" && !strings.HasPrefix(target, "#/") {
		return "", c.errorf(ptr, "%q is not a reference inside this schema (want \"#\" or \"#/...\")", target)
	}
	key := refKey{doc, target}
	if name, ok := c.refs[key]; ok {
		return name, nil
	}
	n := doc
	if target != "#" {
		for _, part := range strings.Split(target[2:], "/") {
			part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
			switch n.kind {
			case 'o':
				n = n.get(part)
			case 'a':
				i, err := strconv.Atoi(part)
				if err != nil || i < 0 || i >= len(n.arr) {
					n = nil
				} else {
					n = n.arr[i]
				}
			default:
				n = nil
			}
			if n == nil {
				return "", c.errorf(ptr, "%q does not resolve", target)
			}
		}
	}
	name := c.fresh("ref-" + target[1:])
	c.refs[key] = name // before compiling the target, which may refer to itself
	e, err := c.schema(doc, n, strings.TrimPrefix(target, "#"), depth+1)
	if err != nil {
		return "", err
	}
	c.rules = append(c.rules, name+" ::= "+e)
	return name, nil
}

func (c *schemaCompiler) count(n *jnode, key, ptr string) (int, bool, error) {
	v := n.get(key)
	if v == nil {
		return 0, false, nil
	}
	i, err := strconv.Atoi(v.str)
	if v.kind != 'n' || err != nil || i < 0 {
		if f, ferr := strconv.ParseFloat(v.str, 64); v.kind == 'n' && ferr == nil && f == float64(int64(f)) && f >= 0 {
			i = int(f) // 2.0 is an integer in JSON Schema
		} else {
			return 0, false, c.errorf(ptr+"/"+key, "must be a non-negative integer")
		}
	}
	if i > MaxRepeat {
		return 0, false, c.errorf(ptr+"/"+key, "is %d; at most %d is supported", i, MaxRepeat)
	}
	return i, true, nil
}

func (c *schemaCompiler) strictOnly(n *jnode, ptr string, keys ...string) error {
	if !c.opt.Strict {
		return nil
	}
	for _, k := range keys {
		if n.get(k) != nil {
			return c.errorf(ptr+"/"+k, "keyword %q is not supported in strict mode", k)
		}
	}
	return nil
}

func (c *schemaCompiler) str(n *jnode, ptr string) (string, error) {
	lo, _, err := c.count(n, "minLength", ptr)
	if err != nil {
		return "", err
	}
	hi, hasHi, err := c.count(n, "maxLength", ptr)
	if err != nil {
		return "", err
	}
	if f := n.get("format"); f != nil && f.kind != 's' {
		return "", c.errorf(ptr+"/format", "must be a string")
	}
	if !hasHi && lo == 0 {
		return "json-string", nil
	}
	if hasHi && hi < lo {
		return "", c.errorf(ptr+"/maxLength", "is %d, below minLength %d", hi, lo)
	}
	rep := fmt.Sprintf("{%d,}", lo)
	if hasHi {
		rep = fmt.Sprintf("{%d,%d}", lo, hi)
	}
	return c.rule("string"+ptr, `"\"" json-char`+rep+` "\"" ws`), nil
}

func (c *schemaCompiler) array(doc, n *jnode, ptr string, depth int) (string, error) {
	item := "json-value"
	if it := n.get("items"); it != nil {
		var err error
		if item, err = c.schema(doc, it, ptr+"/items", depth+1); err != nil {
			return "", err
		}
	}
	lo, _, err := c.count(n, "minItems", ptr)
	if err != nil {
		return "", err
	}
	hi, hasHi, err := c.count(n, "maxItems", ptr)
	if err != nil {
		return "", err
	}
	if hasHi && hi < lo {
		return "", c.errorf(ptr+"/maxItems", "is %d, below minItems %d", hi, lo)
	}
	if hasHi && hi == 0 {
		return `( "[" ws "]" ws )`, nil
	}
	name := c.fresh("array" + ptr)
	itemRule := c.rule("item"+ptr, item)
	var body string
	rest := fmt.Sprintf(`( "," ws %s ){%d,}`, itemRule, max(lo-1, 0))
	if hasHi {
		rest = fmt.Sprintf(`( "," ws %s ){%d,%d}`, itemRule, max(lo-1, 0), hi-1)
	}
	if lo == 0 {
		body = fmt.Sprintf(`"[" ws ( %s %s )? "]" ws`, itemRule, rest)
	} else {
		body = fmt.Sprintf(`"[" ws %s %s "]" ws`, itemRule, rest)
	}
	c.rules = append(c.rules, name+" ::= "+body)
	return name, nil
}

func (c *schemaCompiler) object(doc, n *jnode, ptr string, depth int) (string, error) {
	props := n.get("properties")
	if props != nil && props.kind != 'o' {
		return "", c.errorf(ptr+"/properties", "must be an object")
	}
	ap := n.get("additionalProperties")
	if ap != nil && ap.kind != 'b' && ap.kind != 'o' {
		return "", c.errorf(ptr+"/additionalProperties", "must be a boolean or a schema")
	}
	var required []string
	if r := n.get("required"); r != nil {
		if r.kind != 'a' {
			return "", c.errorf(ptr+"/required", "must be an array of property names")
		}
		for i, x := range r.arr {
			if x.kind != 's' {
				return "", c.errorf(fmt.Sprintf("%s/required/%d", ptr, i), "must be a string")
			}
			if props == nil || props.get(x.str) == nil {
				if c.opt.Strict || ap != nil && ap.kind == 'b' && !ap.b {
					return "", c.errorf(fmt.Sprintf("%s/required/%d", ptr, i), "names %q, which properties does not declare", x.str)
				}
				props = withUndeclared(props, x.str, ap)
			}
			required = append(required, x.str)
		}
	}
	if err := c.strictOnly(n, ptr, "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired", "dependentSchemas"); err != nil {
		return "", err
	}
	if props == nil || len(props.obj) == 0 {
		if ap == nil || ap.kind == 'b' && ap.b {
			if props != nil && ap == nil && c.opt.Strict {
				return `( "{" ws "}" ws )`, nil
			}
			return "json-object", nil
		}
		if ap.kind == 'b' { // false: only {}
			return `( "{" ws "}" ws )`, nil
		}
		v, err := c.schema(doc, ap, ptr+"/additionalProperties", depth+1)
		if err != nil {
			return "", err
		}
		kv := c.rule("kv"+ptr, `json-string ":" ws `+v)
		return c.rule("map"+ptr, `"{" ws ( `+kv+` ( "," ws `+kv+` )* )? "}" ws`), nil
	}
	if ap != nil && ap.kind == 'o' {
		if _, err := c.schema(doc, ap, ptr+"/additionalProperties", depth+1); err != nil {
			return "", err // checked, though no undeclared property is generated
		}
	}
	kvs := make([]string, len(props.obj))
	req := make([]bool, len(props.obj))
	for i, kv := range props.obj {
		p := ptr + "/properties/" + escapePtr(kv.key)
		v, err := c.schema(doc, kv.val, p, depth+1)
		if err != nil {
			return "", err
		}
		kvs[i] = c.rule("prop"+p, literal(jsonString(kv.key))+` ws ":" ws `+v)
		req[i] = slices.Contains(required, kv.key)
	}
	// first_i: properties i.. when none is written yet; after_i: when one is.
	k := len(kvs)
	first, after := make([]string, k+1), make([]string, k+1)
	first[k], after[k] = `""`, `""`
	base := c.fresh("obj" + ptr)
	for i := k - 1; i >= 0; i-- {
		a := fmt.Sprintf(`"," ws %s %s`, kvs[i], after[i+1])
		f := fmt.Sprintf(`%s %s`, kvs[i], after[i+1])
		if !req[i] {
			a += " | " + after[i+1]
			f += " | " + first[i+1]
		}
		after[i] = c.fresh(fmt.Sprintf("%s-a%d", base, i))
		first[i] = c.fresh(fmt.Sprintf("%s-f%d", base, i))
		c.rules = append(c.rules, after[i]+" ::= "+a, first[i]+" ::= "+f)
	}
	c.rules = append(c.rules, base+` ::= "{" ws `+first[0]+` "}" ws`)
	return base, nil
}

// withUndeclared returns a copy of props (the document is shared by $refs)
// with the required but undeclared property name added. Its value must
// validate against additionalProperties, the schema that governs every
// property properties does not declare: ap when it is a schema, any value
// when ap is absent or true.
func withUndeclared(props *jnode, name string, ap *jnode) *jnode {
	val := &jnode{kind: 'b', b: true}
	if ap != nil && ap.kind == 'o' {
		val = ap
	}
	p := &jnode{kind: 'o'}
	if props != nil {
		p.obj = slices.Clone(props.obj)
	}
	p.obj = append(p.obj, jkv{name, val})
	return p
}

// maxInt is the largest integer the grammars generate: 15 digits, inside
// JavaScript's safe integers.
const maxInt = 999_999_999_999_999

// integer returns the expression for an integer with the schema's
// minimum, maximum, exclusiveMinimum and exclusiveMaximum.
func (c *schemaCompiler) integer(n *jnode, ptr string) (string, error) {
	if err := c.strictOnly(n, ptr, "multipleOf"); err != nil {
		return "", err
	}
	lo, hi := int64(-maxInt), int64(maxInt)
	for _, b := range []struct {
		key   string
		round func(float64) float64
		delta float64
		upper bool
	}{
		{"minimum", math.Ceil, 0, false}, {"exclusiveMinimum", math.Floor, 1, false},
		{"maximum", math.Floor, 0, true}, {"exclusiveMaximum", math.Ceil, -1, true},
	} {
		v := n.get(b.key)
		if v == nil {
			continue
		}
		f, err := strconv.ParseFloat(v.str, 64)
		if v.kind != 'n' || err != nil {
			return "", c.errorf(ptr+"/"+b.key, "must be a number")
		}
		x := max(min(b.round(f)+b.delta, maxInt+1), -maxInt-1)
		if b.upper {
			hi = min(hi, int64(x))
		} else {
			lo = max(lo, int64(x))
		}
	}
	if lo > hi {
		return "", c.errorf(ptr, "no integer in [%d, %d] (within ±%d) satisfies minimum and maximum", lo, hi, int64(maxInt))
	}
	if lo == -maxInt && hi == maxInt {
		return "json-integer", nil
	}
	var alts []string
	if lo < 0 {
		alts = append(alts, `"-" `+natRange(max(1, -hi), -lo))
	}
	if hi >= 0 {
		alts = append(alts, natRange(max(0, lo), hi))
	}
	return c.rule("int"+ptr, "( "+strings.Join(alts, " | ")+" ) ws"), nil
}

// natRange returns a GBNF expression for the decimal numerals, without
// leading zeros, of the integers a..b (0 ≤ a ≤ b).
func natRange(a, b int64) string {
	var alts []string
	for d := len(strconv.FormatInt(a, 10)); d <= len(strconv.FormatInt(b, 10)); d++ {
		lo, hi := int64(1), int64(9)
		for range d - 1 {
			lo, hi = lo*10, hi*10+9
		}
		if d == 1 {
			lo = 0
		}
		lo, hi = max(lo, a), min(hi, b)
		if lo > hi {
			continue
		}
		alts = append(alts, sameLength(strconv.FormatInt(lo, 10), strconv.FormatInt(hi, 10)))
	}
	return "( " + strings.Join(alts, " | ") + " )"
}

// sameLength returns an expression for the numerals x..y, both of the
// same length.
func sameLength(x, y string) string {
	switch {
	case x == "":
		return `""`
	case x == y:
		return literal(x)
	case strings.Trim(x[1:], "0") == "" && strings.Trim(y[1:], "9") == "":
		return digitClass(x[0], y[0]) + digits(len(x)-1)
	case x[0] == y[0]:
		return literal(x[:1]) + " " + sameLength(x[1:], y[1:])
	}
	alts := []string{literal(x[:1]) + " " + sameLength(x[1:], strings.Repeat("9", len(x)-1))}
	if y[0]-x[0] > 1 {
		alts = append(alts, digitClass(x[0]+1, y[0]-1)+digits(len(x)-1))
	}
	alts = append(alts, literal(y[:1])+" "+sameLength(strings.Repeat("0", len(y)-1), y[1:]))
	return "( " + strings.Join(alts, " | ") + " )"
}

func digitClass(a, b byte) string {
	if a == b {
		return literal(string(a))
	}
	return "[" + string(a) + "-" + string(b) + "]"
}

func digits(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" [0-9]{%d}", n)
}
