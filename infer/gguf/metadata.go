package gguf

import (
	"math"
)

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// Metadata is a file's key/value list in file order, with lookup by key.
// The zero Metadata is empty and ready to use. Accessors return a
// *KeyError wrapping ErrMissingKey when the key is absent, and one wrapping
// ErrWrongType (naming the wanted and actual type) or ErrValueRange when the
// value does not fit.
type Metadata struct {
	kvs   []KV
	index map[string]int
}

// Len returns the number of entries.
func (m *Metadata) Len() int { return len(m.kvs) }

// Keys returns the keys in file order.
func (m *Metadata) Keys() []string {
	out := make([]string, len(m.kvs))
	for i, kv := range m.kvs {
		out[i] = kv.Key
	}
	return out
}

// All returns the entries in file order. The slice is shared: do not
// modify it.
func (m *Metadata) All() []KV { return m.kvs }

// Has reports whether key is present.
func (m *Metadata) Has(key string) bool {
	_, ok := m.index[key]
	return ok
}

// Get returns the value of key.
func (m *Metadata) Get(key string) (Value, bool) {
	i, ok := m.index[key]
	if !ok {
		return Value{}, false
	}
	return m.kvs[i].Value, true
}

// set adds or replaces key. It reports whether the key was new.
func (m *Metadata) set(key string, v Value) bool {
	if m.index == nil {
		m.index = make(map[string]int)
	}
	if i, ok := m.index[key]; ok {
		m.kvs[i].Value = v
		return false
	}
	m.index[key] = len(m.kvs)
	m.kvs = append(m.kvs, KV{Key: key, Value: v})
	return true
}

// remove deletes key, keeping the order of the rest.
func (m *Metadata) remove(key string) {
	i, ok := m.index[key]
	if !ok {
		return
	}
	m.kvs = append(m.kvs[:i], m.kvs[i+1:]...)
	delete(m.index, key)
	for j := i; j < len(m.kvs); j++ {
		m.index[m.kvs[j].Key] = j
	}
}

func (m *Metadata) lookup(key, want string) (Value, error) {
	v, ok := m.Get(key)
	if !ok {
		return Value{}, &KeyError{Key: key, Want: want, Err: ErrMissingKey}
	}
	return v, nil
}

func wrongType(key, want string, v Value) error {
	return &KeyError{Key: key, Want: want, Have: v.TypeName(), Err: ErrWrongType}
}

func outOfRange(key, want string, v Value) error {
	return &KeyError{Key: key, Want: want, Have: v.TypeName() + " " + v.Summary(4), Err: ErrValueRange}
}

// String returns the string value of key.
func (m *Metadata) String(key string) (string, error) {
	v, err := m.lookup(key, "string")
	if err != nil {
		return "", err
	}
	s, ok := v.AsString()
	if !ok {
		return "", wrongType(key, "string", v)
	}
	return s, nil
}

// Bool returns the bool value of key.
func (m *Metadata) Bool(key string) (bool, error) {
	v, err := m.lookup(key, "bool")
	if err != nil {
		return false, err
	}
	b, ok := v.AsBool()
	if !ok {
		return false, wrongType(key, "bool", v)
	}
	return b, nil
}

// Uint64 returns the value of key, which may have any integer type and
// must not be negative.
func (m *Metadata) Uint64(key string) (uint64, error) {
	const want = "unsigned integer"
	v, err := m.lookup(key, want)
	if err != nil {
		return 0, err
	}
	return uintOf(key, want, v, math.MaxUint64)
}

// Uint32 returns the value of key, which may have any integer type and
// must lie in [0, 2^32-1].
func (m *Metadata) Uint32(key string) (uint32, error) {
	const want = "uint32"
	v, err := m.lookup(key, want)
	if err != nil {
		return 0, err
	}
	u, err := uintOf(key, want, v, math.MaxUint32)
	return uint32(u), err
}

func uintOf(key, want string, v Value, max uint64) (uint64, error) {
	if v.IsArray() || !v.typ.isInt() {
		return 0, wrongType(key, want, v)
	}
	u, ok := v.AsUint64()
	if !ok || u > max {
		return 0, outOfRange(key, want, v)
	}
	return u, nil
}

// Int32 returns the value of key, which may have any integer type and must
// lie in the int32 range.
func (m *Metadata) Int32(key string) (int32, error) {
	const want = "int32"
	v, err := m.lookup(key, want)
	if err != nil {
		return 0, err
	}
	return int32Of(key, want, v)
}

func int32Of(key, want string, v Value) (int32, error) {
	if v.IsArray() || !v.typ.isInt() {
		return 0, wrongType(key, want, v)
	}
	i, ok := v.AsInt64()
	if !ok || i < math.MinInt32 || i > math.MaxInt32 {
		return 0, outOfRange(key, want, v)
	}
	return int32(i), nil
}

// Float32 returns the value of key, a float32 or a float64 (rounded to
// float32; a finite float64 too large for float32 is out of range).
func (m *Metadata) Float32(key string) (float32, error) {
	const want = "float32"
	v, err := m.lookup(key, want)
	if err != nil {
		return 0, err
	}
	f, ok := v.AsFloat64()
	if !ok {
		return 0, wrongType(key, want, v)
	}
	f32 := float32(f)
	if math.IsInf(float64(f32), 0) && !math.IsInf(f, 0) {
		return 0, outOfRange(key, want, v)
	}
	return f32, nil
}

// Strings returns the value of key, an array of strings. The strings share
// one backing string: only the slice of headers is allocated.
func (m *Metadata) Strings(key string) ([]string, error) {
	const want = "array of string"
	v, err := m.lookup(key, want)
	if err != nil {
		return nil, err
	}
	if !v.IsArray() || v.elem != TypeString {
		return nil, wrongType(key, want, v)
	}
	out := make([]string, v.n)
	for i := range out {
		out[i] = v.StringAt(i)
	}
	return out, nil
}

// Float32s returns the value of key, an array of float32 or float64.
func (m *Metadata) Float32s(key string) ([]float32, error) {
	const want = "array of float32"
	v, err := m.lookup(key, want)
	if err != nil {
		return nil, err
	}
	if !v.IsArray() || !v.elem.isFloat() {
		return nil, wrongType(key, want, v)
	}
	out := make([]float32, v.n)
	if v.elem == TypeFloat32 {
		for i := range out {
			out[i] = math.Float32frombits(le32(v.str[4*i:]))
		}
		return out, nil
	}
	for i := range out {
		f := math.Float64frombits(le64(v.str[8*i:]))
		out[i] = float32(f)
		if math.IsInf(float64(out[i]), 0) && !math.IsInf(f, 0) {
			return nil, outOfRange(key, want, v)
		}
	}
	return out, nil
}

// Int32s returns the value of key, an array of any integer type whose
// elements all lie in the int32 range.
func (m *Metadata) Int32s(key string) ([]int32, error) {
	const want = "array of int32"
	v, err := m.lookup(key, want)
	if err != nil {
		return nil, err
	}
	if !v.IsArray() || !v.elem.isInt() {
		return nil, wrongType(key, want, v)
	}
	out := make([]int32, v.n)
	if v.elem == TypeInt32 {
		for i := range out {
			out[i] = int32(le32(v.str[4*i:]))
		}
		return out, nil
	}
	for i := range out {
		x, err := int32Of(key, want, v.Index(i))
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

// orDefault runs get when key is present and returns def otherwise.
func orDefault[T any](m *Metadata, key string, def T, get func(string) (T, error)) (T, error) {
	if !m.Has(key) {
		return def, nil
	}
	return get(key)
}

// StringOr is String, returning def when key is absent.
func (m *Metadata) StringOr(key, def string) (string, error) {
	return orDefault(m, key, def, m.String)
}

// BoolOr is Bool, returning def when key is absent.
func (m *Metadata) BoolOr(key string, def bool) (bool, error) {
	return orDefault(m, key, def, m.Bool)
}

// Uint64Or is Uint64, returning def when key is absent.
func (m *Metadata) Uint64Or(key string, def uint64) (uint64, error) {
	return orDefault(m, key, def, m.Uint64)
}

// Uint32Or is Uint32, returning def when key is absent.
func (m *Metadata) Uint32Or(key string, def uint32) (uint32, error) {
	return orDefault(m, key, def, m.Uint32)
}

// Int32Or is Int32, returning def when key is absent.
func (m *Metadata) Int32Or(key string, def int32) (int32, error) {
	return orDefault(m, key, def, m.Int32)
}

// Float32Or is Float32, returning def when key is absent.
func (m *Metadata) Float32Or(key string, def float32) (float32, error) {
	return orDefault(m, key, def, m.Float32)
}

// StringsOr is Strings, returning def when key is absent.
func (m *Metadata) StringsOr(key string, def []string) ([]string, error) {
	return orDefault(m, key, def, m.Strings)
}

// Float32sOr is Float32s, returning def when key is absent.
func (m *Metadata) Float32sOr(key string, def []float32) ([]float32, error) {
	return orDefault(m, key, def, m.Float32s)
}

// Int32sOr is Int32s, returning def when key is absent.
func (m *Metadata) Int32sOr(key string, def []int32) ([]int32, error) {
	return orDefault(m, key, def, m.Int32s)
}
