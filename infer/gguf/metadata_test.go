package gguf

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func testMeta(t *testing.T) *File {
	t.Helper()
	b := NewBuilder()
	b.SetString("s", "text")
	b.SetUint32("u32", 7)
	b.Set("u64big", uint64(1<<40))
	b.Set("i8neg", int8(-3))
	b.Set("i64", int64(1<<35))
	b.Set("u16", uint16(65535))
	b.Set("f64", 0.25)
	b.Set("f64huge", 1e300)
	b.SetBool("b", true)
	b.SetArray("strs", []string{"a", "b"})
	b.SetArray("f64s", []float64{0.5, -2})
	b.SetArray("u8s", []uint8{1, 255})
	b.SetArray("i64s", []int64{1, 1 << 40})
	data, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestMetadataAccessors(t *testing.T) {
	f := testMeta(t)
	m := &f.Meta
	type result struct {
		got any
		err error
	}
	r := func(v any, err error) result { return result{v, err} }
	tests := []struct {
		name string
		res  result
		want any   // when no error
		err  error // sentinel expected
	}{
		{"String", r(m.String("s")), "text", nil},
		{"Uint32 from uint32", r(m.Uint32("u32")), uint32(7), nil},
		{"Uint32 from uint16", r(m.Uint32("u16")), uint32(65535), nil},
		{"Uint32 from int64 too big", r(m.Uint32("i64")), nil, ErrValueRange},
		{"Uint32 from uint64 too big", r(m.Uint32("u64big")), nil, ErrValueRange},
		{"Uint32 from negative", r(m.Uint32("i8neg")), nil, ErrValueRange},
		{"Uint64 from uint64", r(m.Uint64("u64big")), uint64(1 << 40), nil},
		{"Uint64 from int64", r(m.Uint64("i64")), uint64(1 << 35), nil},
		{"Uint64 from negative", r(m.Uint64("i8neg")), nil, ErrValueRange},
		{"Int32 from int8", r(m.Int32("i8neg")), int32(-3), nil},
		{"Int32 from int64 too big", r(m.Int32("i64")), nil, ErrValueRange},
		{"Float32 from float64", r(m.Float32("f64")), float32(0.25), nil},
		{"Float32 from huge float64", r(m.Float32("f64huge")), nil, ErrValueRange},
		{"Bool", r(m.Bool("b")), true, nil},
		{"Strings", r(m.Strings("strs")), []string{"a", "b"}, nil},
		{"Float32s from float64s", r(m.Float32s("f64s")), []float32{0.5, -2}, nil},
		{"Int32s from uint8s", r(m.Int32s("u8s")), []int32{1, 255}, nil},
		{"Int32s out of range", r(m.Int32s("i64s")), nil, ErrValueRange},
		{"String of uint32", r(m.String("u32")), nil, ErrWrongType},
		{"Uint32 of string", r(m.Uint32("s")), nil, ErrWrongType},
		{"Uint32 of float", r(m.Uint32("f64")), nil, ErrWrongType},
		{"Uint32 of bool", r(m.Uint32("b")), nil, ErrWrongType},
		{"Int32 of array", r(m.Int32("u8s")), nil, ErrWrongType},
		{"Float32 of int", r(m.Float32("u32")), nil, ErrWrongType},
		{"Bool of int", r(m.Bool("u32")), nil, ErrWrongType},
		{"Strings of string", r(m.Strings("s")), nil, ErrWrongType},
		{"Float32s of strings", r(m.Float32s("strs")), nil, ErrWrongType},
		{"Int32s of floats", r(m.Int32s("f64s")), nil, ErrWrongType},
		{"String missing", r(m.String("nope")), nil, ErrMissingKey},
		{"Uint32 missing", r(m.Uint32("nope")), nil, ErrMissingKey},
		{"Strings missing", r(m.Strings("nope")), nil, ErrMissingKey},
		{"StringOr missing", r(m.StringOr("nope", "dflt")), "dflt", nil},
		{"StringOr present", r(m.StringOr("s", "dflt")), "text", nil},
		{"StringOr wrong type", r(m.StringOr("u32", "dflt")), nil, ErrWrongType},
		{"Uint32Or missing", r(m.Uint32Or("nope", 9)), uint32(9), nil},
		{"Uint64Or missing", r(m.Uint64Or("nope", 9)), uint64(9), nil},
		{"Int32Or missing", r(m.Int32Or("nope", -9)), int32(-9), nil},
		{"Float32Or missing", r(m.Float32Or("nope", 1.5)), float32(1.5), nil},
		{"BoolOr missing", r(m.BoolOr("nope", true)), true, nil},
		{"StringsOr missing", r(m.StringsOr("nope", []string{"x"})), []string{"x"}, nil},
		{"Float32sOr missing", r(m.Float32sOr("nope", []float32{1})), []float32{1}, nil},
		{"Int32sOr missing", r(m.Int32sOr("nope", []int32{1})), []int32{1}, nil},
		{"Int32sOr wrong type", r(m.Int32sOr("strs", nil)), nil, ErrWrongType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				if tc.res.err != nil || !equalAny(tc.res.got, tc.want) {
					t.Errorf("got %v, %v; want %v", tc.res.got, tc.res.err, tc.want)
				}
				return
			}
			if !errors.Is(tc.res.err, tc.err) {
				t.Fatalf("got %v, %v; want error %v", tc.res.got, tc.res.err, tc.err)
			}
			var ke *KeyError
			if !errors.As(tc.res.err, &ke) || ke.Key == "" || !strings.Contains(tc.res.err.Error(), ke.Key) {
				t.Errorf("error %v does not name the key", tc.res.err)
			}
			if errors.Is(tc.err, ErrWrongType) && (ke.Want == "" || ke.Have == "" ||
				!strings.Contains(tc.res.err.Error(), ke.Want) || !strings.Contains(tc.res.err.Error(), ke.Have)) {
				t.Errorf("wrong-type error %q does not name wanted and actual type", tc.res.err)
			}
		})
	}
}

func TestValueFormatting(t *testing.T) {
	f := testMeta(t)
	tests := []struct {
		key, want string
		max       int
	}{
		{"s", `"text"`, -1},
		{"u32", "7", -1},
		{"i8neg", "-3", -1},
		{"f64", "0.25", -1},
		{"b", "true", -1},
		{"strs", `["a", "b"]`, -1},
		{"strs", `["a", ... (2 string)]`, 1},
		{"f64s", "[0.5, -2]", -1},
	}
	for _, tc := range tests {
		v, ok := f.Meta.Get(tc.key)
		if !ok {
			t.Fatalf("%s missing", tc.key)
		}
		if got := v.Summary(tc.max); got != tc.want {
			t.Errorf("%s.Summary(%d) = %s, want %s", tc.key, tc.max, got, tc.want)
		}
	}
	v, _ := f.Meta.Get("u8s")
	if v.TypeName() != "array of uint8" || v.Len() != 2 || v.ElemType() != TypeUint8 || !v.IsArray() {
		t.Errorf("u8s: %s len %d", v.TypeName(), v.Len())
	}
	if got := v.Interface().([]any); len(got) != 2 || got[1] != uint8(255) {
		t.Errorf("Interface() = %v", got)
	}
	if _, ok := v.AsString(); ok {
		t.Error("AsString of an array succeeded")
	}
	if x, ok := (Value{typ: TypeFloat64, bits: math.Float64bits(3)}).AsFloat64(); !ok || x != 3 {
		t.Errorf("AsFloat64 = %v, %v", x, ok)
	}
}
