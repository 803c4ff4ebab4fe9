package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ValueType is the type of a metadata value, with GGUF's numeric ids.
type ValueType uint32

// The GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{
	TypeUint8: "uint8", TypeInt8: "int8", TypeUint16: "uint16", TypeInt16: "int16",
	TypeUint32: "uint32", TypeInt32: "int32", TypeFloat32: "float32", TypeBool: "bool",
	TypeString: "string", TypeArray: "array", TypeUint64: "uint64", TypeInt64: "int64",
	TypeFloat64: "float64",
}

// String returns the type's name ("uint32", "string", "array").
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return "type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// size returns the encoded size of one scalar of type t, or 0 for strings,
// arrays and unknown types.
func (t ValueType) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

func (t ValueType) isInt() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

func (t ValueType) isSigned() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

func (t ValueType) isFloat() bool { return t == TypeFloat32 || t == TypeFloat64 }

// Value is one metadata value: a scalar, a string, or an array of scalars
// or strings. The zero Value is invalid. A Value holds its own copy of the
// bytes it came from: it stays valid after the File is closed.
//
// Arrays are stored compactly: numeric and boolean arrays as their
// little-endian bytes, string arrays as one shared byte string plus one
// end offset per element.
type Value struct {
	typ  ValueType
	elem ValueType // element type of an array
	n    int       // number of elements of an array
	bits uint64    // scalar numbers: sign-extended integers, float bits (float32 bits for TypeFloat32)
	str  string    // string value; or the packed bytes of an array
	ends []uint32  // string arrays: end of element i in str
}

// Type returns the value's type (TypeArray for arrays).
func (v Value) Type() ValueType { return v.typ }

// ElemType returns the element type of an array; for a scalar it returns
// the scalar's type.
func (v Value) ElemType() ValueType {
	if v.typ == TypeArray {
		return v.elem
	}
	return v.typ
}

// IsArray reports whether v is an array.
func (v Value) IsArray() bool { return v.typ == TypeArray }

// Len returns the number of elements of an array, or 1 for a scalar.
func (v Value) Len() int {
	if v.typ == TypeArray {
		return v.n
	}
	return 1
}

// TypeName describes the type: "uint32", or "array of string".
func (v Value) TypeName() string {
	if v.typ == TypeArray {
		return "array of " + v.elem.String()
	}
	return v.typ.String()
}

// Index returns element i of an array as a scalar Value. It panics if v is
// not an array or i is out of range, like indexing a slice.
func (v Value) Index(i int) Value {
	if v.typ != TypeArray {
		panic("gguf: Index of a non-array value")
	}
	if i < 0 || i >= v.n {
		panic("gguf: array index out of range")
	}
	if v.elem == TypeString {
		return Value{typ: TypeString, str: v.StringAt(i)}
	}
	sz := v.elem.size()
	return scalarFrom(v.elem, v.str[i*sz:(i+1)*sz])
}

// StringAt returns element i of a string array without allocating. It
// panics if v is not a string array or i is out of range.
func (v Value) StringAt(i int) string {
	if v.typ != TypeArray || v.elem != TypeString {
		panic("gguf: StringAt of a value that is not a string array")
	}
	start := uint32(0)
	if i > 0 {
		start = v.ends[i-1]
	}
	return v.str[start:v.ends[i]]
}

// scalarFrom decodes one little-endian scalar of type t from b, which
// holds exactly t.size() bytes.
func scalarFrom[B ~string | ~[]byte](t ValueType, b B) Value {
	v := Value{typ: t}
	switch t {
	case TypeUint8, TypeBool:
		v.bits = uint64(b[0])
	case TypeInt8:
		v.bits = uint64(int64(int8(b[0])))
	case TypeUint16:
		v.bits = uint64(le16(b))
	case TypeInt16:
		v.bits = uint64(int64(int16(le16(b))))
	case TypeUint32, TypeFloat32:
		v.bits = uint64(le32(b))
	case TypeInt32:
		v.bits = uint64(int64(int32(le32(b))))
	case TypeUint64, TypeInt64, TypeFloat64:
		v.bits = le64(b)
	}
	return v
}

// AsString returns the value of a string scalar.
func (v Value) AsString() (string, bool) {
	if v.typ != TypeString {
		return "", false
	}
	return v.str, true
}

// AsBool returns the value of a bool scalar.
func (v Value) AsBool() (bool, bool) {
	if v.typ != TypeBool {
		return false, false
	}
	return v.bits != 0, true
}

// AsUint64 returns the value of an integer scalar of any width and
// signedness, if it is non-negative.
func (v Value) AsUint64() (uint64, bool) {
	if !v.typ.isInt() || v.typ.isSigned() && int64(v.bits) < 0 {
		return 0, false
	}
	return v.bits, true
}

// AsInt64 returns the value of an integer scalar of any width and
// signedness, if it fits an int64.
func (v Value) AsInt64() (int64, bool) {
	if !v.typ.isInt() || v.typ == TypeUint64 && v.bits > math.MaxInt64 {
		return 0, false
	}
	return int64(v.bits), true
}

// AsFloat64 returns the value of a float32 or float64 scalar.
func (v Value) AsFloat64() (float64, bool) {
	switch v.typ {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case TypeFloat64:
		return math.Float64frombits(v.bits), true
	}
	return 0, false
}

// Interface returns the value as a Go value: string, bool, uint8 ...
// float64 for scalars, and a slice of those for arrays.
func (v Value) Interface() any {
	switch v.typ {
	case TypeUint8:
		return uint8(v.bits)
	case TypeInt8:
		return int8(v.bits)
	case TypeUint16:
		return uint16(v.bits)
	case TypeInt16:
		return int16(v.bits)
	case TypeUint32:
		return uint32(v.bits)
	case TypeInt32:
		return int32(v.bits)
	case TypeUint64:
		return v.bits
	case TypeInt64:
		return int64(v.bits)
	case TypeFloat32:
		return math.Float32frombits(uint32(v.bits))
	case TypeFloat64:
		return math.Float64frombits(v.bits)
	case TypeBool:
		return v.bits != 0
	case TypeString:
		return v.str
	case TypeArray:
		out := make([]any, v.n)
		for i := range out {
			out[i] = v.Index(i).Interface()
		}
		return out
	}
	return nil
}

// String formats the value for people: strings quoted, arrays in full.
// Use Summary for long arrays.
func (v Value) String() string { return v.Summary(-1) }

// Summary formats the value like String, but shows at most max elements of
// an array (all of them if max < 0), followed by the element count.
func (v Value) Summary(max int) string {
	if v.typ != TypeArray {
		return formatScalar(v)
	}
	var b strings.Builder
	b.WriteString("[")
	n := v.n
	if max >= 0 && n > max {
		n = max
	}
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(formatScalar(v.Index(i)))
	}
	if n < v.n {
		fmt.Fprintf(&b, ", ... (%d %s)", v.n, v.elem)
	}
	b.WriteString("]")
	return b.String()
}

func formatScalar(v Value) string {
	switch v.typ {
	case TypeString:
		return strconv.Quote(v.str)
	case TypeFloat32:
		return strconv.FormatFloat(float64(math.Float32frombits(uint32(v.bits))), 'g', -1, 32)
	case TypeFloat64:
		return strconv.FormatFloat(math.Float64frombits(v.bits), 'g', -1, 64)
	default:
		return fmt.Sprint(v.Interface())
	}
}

// NewValue returns the Value of a Go value: string, bool, uint8, int8,
// uint16, int16, uint32, int32, uint64, int64, float32, float64, or a slice
// of one of those. It fails for any other type, and for arrays or strings
// too large to encode.
func NewValue(x any) (Value, error) {
	switch x := x.(type) {
	case string:
		if len(x) > MaxStringLength {
			return Value{}, fmt.Errorf("%w: string of %d bytes exceeds %d", ErrLimit, len(x), MaxStringLength)
		}
		return Value{typ: TypeString, str: x}, nil
	case bool:
		b := uint64(0)
		if x {
			b = 1
		}
		return Value{typ: TypeBool, bits: b}, nil
	case uint8:
		return Value{typ: TypeUint8, bits: uint64(x)}, nil
	case int8:
		return Value{typ: TypeInt8, bits: uint64(int64(x))}, nil
	case uint16:
		return Value{typ: TypeUint16, bits: uint64(x)}, nil
	case int16:
		return Value{typ: TypeInt16, bits: uint64(int64(x))}, nil
	case uint32:
		return Value{typ: TypeUint32, bits: uint64(x)}, nil
	case int32:
		return Value{typ: TypeInt32, bits: uint64(int64(x))}, nil
	case uint64:
		return Value{typ: TypeUint64, bits: x}, nil
	case int64:
		return Value{typ: TypeInt64, bits: uint64(x)}, nil
	case float32:
		return Value{typ: TypeFloat32, bits: uint64(math.Float32bits(x))}, nil
	case float64:
		return Value{typ: TypeFloat64, bits: math.Float64bits(x)}, nil
	case []string:
		if len(x) > MaxArrayLength {
			return Value{}, fmt.Errorf("%w: array of %d elements exceeds %d", ErrLimit, len(x), MaxArrayLength)
		}
		total := 0
		for _, s := range x {
			if len(s) > MaxStringLength {
				return Value{}, fmt.Errorf("%w: string of %d bytes exceeds %d", ErrLimit, len(s), MaxStringLength)
			}
			total += len(s)
			if total > math.MaxUint32 {
				return Value{}, fmt.Errorf("%w: string array of more than 4 GiB", ErrLimit)
			}
		}
		var b strings.Builder
		b.Grow(total)
		ends := make([]uint32, len(x))
		for i, s := range x {
			b.WriteString(s)
			ends[i] = uint32(b.Len())
		}
		return Value{typ: TypeArray, elem: TypeString, n: len(x), str: b.String(), ends: ends}, nil
	case []bool:
		b := make([]byte, len(x))
		for i, e := range x {
			if e {
				b[i] = 1
			}
		}
		return packedArray(TypeBool, len(x), b)
	case []uint8:
		return packedArray(TypeUint8, len(x), x)
	case []int8:
		return packedArray(TypeInt8, len(x), packInts(x, 1))
	case []uint16:
		return packedArray(TypeUint16, len(x), packInts(x, 2))
	case []int16:
		return packedArray(TypeInt16, len(x), packInts(x, 2))
	case []uint32:
		return packedArray(TypeUint32, len(x), packInts(x, 4))
	case []int32:
		return packedArray(TypeInt32, len(x), packInts(x, 4))
	case []uint64:
		return packedArray(TypeUint64, len(x), packInts(x, 8))
	case []int64:
		return packedArray(TypeInt64, len(x), packInts(x, 8))
	case []float32:
		b := make([]byte, 4*len(x))
		for i, e := range x {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(e))
		}
		return packedArray(TypeFloat32, len(x), b)
	case []float64:
		b := make([]byte, 8*len(x))
		for i, e := range x {
			binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(e))
		}
		return packedArray(TypeFloat64, len(x), b)
	case Value:
		if x.typ > TypeFloat64 {
			return Value{}, fmt.Errorf("%w: invalid Value", ErrWrongType)
		}
		return x, nil
	}
	return Value{}, fmt.Errorf("%w: cannot store a %T in GGUF metadata", ErrWrongType, x)
}

func packedArray(elem ValueType, n int, b []byte) (Value, error) {
	if n > MaxArrayLength {
		return Value{}, fmt.Errorf("%w: array of %d elements exceeds %d", ErrLimit, n, MaxArrayLength)
	}
	return Value{typ: TypeArray, elem: elem, n: n, str: string(b)}, nil
}

type integer interface {
	~int8 | ~uint16 | ~int16 | ~uint32 | ~int32 | ~uint64 | ~int64
}

func packInts[T integer](x []T, size int) []byte {
	b := make([]byte, size*len(x))
	for i, e := range x {
		u := uint64(e)
		for j := 0; j < size; j++ {
			b[size*i+j] = byte(u >> (8 * j))
		}
	}
	return b
}

func le16[B ~string | ~[]byte](b B) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

func le32[B ~string | ~[]byte](b B) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func le64[B ~string | ~[]byte](b B) uint64 {
	return uint64(le32(b)) | uint64(le32(b[4:]))<<32
}
