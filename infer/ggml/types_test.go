package ggml

import (
	"errors"
	"testing"
)

// TestTypeTable checks every id, name, block size and byte size against
// the values ggml's ggml-common.h static_asserts give (written out here by
// hand from those struct definitions).
func TestTypeTable(t *testing.T) {
	tests := []struct {
		typ        Type
		id         uint32
		name       string
		block, tsz int
	}{
		{TypeF32, 0, "F32", 1, 4},
		{TypeF16, 1, "F16", 1, 2},
		{TypeQ4_0, 2, "Q4_0", 32, 18},
		{TypeQ4_1, 3, "Q4_1", 32, 20},
		{TypeQ5_0, 6, "Q5_0", 32, 22},
		{TypeQ5_1, 7, "Q5_1", 32, 24},
		{TypeQ8_0, 8, "Q8_0", 32, 34},
		{TypeQ8_1, 9, "Q8_1", 32, 36},
		{TypeQ2_K, 10, "Q2_K", 256, 84},
		{TypeQ3_K, 11, "Q3_K", 256, 110},
		{TypeQ4_K, 12, "Q4_K", 256, 144},
		{TypeQ5_K, 13, "Q5_K", 256, 176},
		{TypeQ6_K, 14, "Q6_K", 256, 210},
		{TypeQ8_K, 15, "Q8_K", 256, 292},
		{TypeIQ2_XXS, 16, "IQ2_XXS", 256, 66},
		{TypeIQ2_XS, 17, "IQ2_XS", 256, 74},
		{TypeIQ3_XXS, 18, "IQ3_XXS", 256, 98},
		{TypeIQ1_S, 19, "IQ1_S", 256, 50},
		{TypeIQ4_NL, 20, "IQ4_NL", 32, 18},
		{TypeIQ3_S, 21, "IQ3_S", 256, 110},
		{TypeIQ2_S, 22, "IQ2_S", 256, 82},
		{TypeIQ4_XS, 23, "IQ4_XS", 256, 136},
		{TypeI8, 24, "I8", 1, 1},
		{TypeI16, 25, "I16", 1, 2},
		{TypeI32, 26, "I32", 1, 4},
		{TypeI64, 27, "I64", 1, 8},
		{TypeF64, 28, "F64", 1, 8},
		{TypeIQ1_M, 29, "IQ1_M", 256, 56},
		{TypeBF16, 30, "BF16", 1, 2},
		{TypeTQ1_0, 34, "TQ1_0", 256, 54},
		{TypeTQ2_0, 35, "TQ2_0", 256, 66},
		{TypeMXFP4, 39, "MXFP4", 32, 17},
		{TypeNVFP4, 40, "NVFP4", 64, 36},
		{TypeQ1_0, 41, "Q1_0", 128, 18},
		{TypeQ2_0, 42, "Q2_0", 64, 18},
	}
	if got := len(Types()); got != len(tests) {
		t.Errorf("Types() has %d entries, want %d", got, len(tests))
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if uint32(tc.typ) != tc.id {
				t.Errorf("id = %d, want %d", uint32(tc.typ), tc.id)
			}
			if !tc.typ.Known() {
				t.Error("Known() = false")
			}
			if got := tc.typ.String(); got != tc.name {
				t.Errorf("String() = %q, want %q", got, tc.name)
			}
			if got := tc.typ.BlockSize(); got != tc.block {
				t.Errorf("BlockSize() = %d, want %d", got, tc.block)
			}
			if got := tc.typ.TypeSize(); got != tc.tsz {
				t.Errorf("TypeSize() = %d, want %d", got, tc.tsz)
			}
			if got, err := tc.typ.RowSize(3 * tc.block); err != nil || got != 3*tc.tsz {
				t.Errorf("RowSize(%d) = %d, %v; want %d", 3*tc.block, got, err, 3*tc.tsz)
			}
			if p, err := ParseType(tc.name); err != nil || p != tc.typ {
				t.Errorf("ParseType(%q) = %v, %v", tc.name, p, err)
			}
		})
	}
}

func TestRetiredAndUnknownTypes(t *testing.T) {
	for _, id := range []Type{4, 5, 31, 32, 33, 36, 37, 38, 43, 1000} {
		if id.Known() || id.BlockSize() != 0 || id.TypeSize() != 0 {
			t.Errorf("type %d: Known %v, sizes %d/%d; want unknown", uint32(id), id.Known(), id.BlockSize(), id.TypeSize())
		}
		if _, err := id.RowSize(32); !errors.Is(err, ErrUnknownType) {
			t.Errorf("RowSize of type %d: got %v, want ErrUnknownType", uint32(id), err)
		}
		if got, want := id.String(), "TYPE("; len(got) < len(want) || got[:len(want)] != want {
			t.Errorf("String() = %q", got)
		}
	}
}

func TestRowSizeErrors(t *testing.T) {
	tests := []struct {
		typ Type
		n   int
	}{
		{TypeQ4_0, 31},
		{TypeQ4_K, 255},
		{TypeQ4_K, 257},
		{TypeF32, -1},
		{TypeF64, maxInt},
		{TypeQ8_K, maxInt - maxInt%256},
	}
	for _, tc := range tests {
		if _, err := tc.typ.RowSize(tc.n); !errors.Is(err, ErrSize) {
			t.Errorf("%s.RowSize(%d): got %v, want ErrSize", tc.typ, tc.n, err)
		}
		var te *TypeError
		if _, err := tc.typ.RowSize(tc.n); !errors.As(err, &te) || te.Type != tc.typ {
			t.Errorf("%s.RowSize(%d): error %v does not carry the type", tc.typ, tc.n, err)
		}
	}
}

func TestCapabilities(t *testing.T) {
	decodable := []Type{TypeF32, TypeF16, TypeBF16, TypeQ4_0, TypeQ4_1, TypeQ5_0, TypeQ5_1, TypeQ8_0,
		TypeQ2_K, TypeQ3_K, TypeQ4_K, TypeQ5_K, TypeQ6_K, TypeQ8_K}
	for _, typ := range decodable {
		if !typ.CanDequantize() {
			t.Errorf("%s.CanDequantize() = false", typ)
		}
	}
	for _, typ := range []Type{TypeF32, TypeF16, TypeBF16, TypeQ8_0, TypeQ4_0, TypeQ4_1, TypeQ5_0, TypeQ5_1, TypeQ4_K, TypeQ8_K} {
		if !typ.CanQuantize() {
			t.Errorf("%s.CanQuantize() = false", typ)
		}
	}
	for _, typ := range []Type{TypeIQ2_XXS, TypeTQ1_0, TypeMXFP4, TypeI32} {
		if typ.CanDequantize() || typ.CanQuantize() {
			t.Errorf("%s claims a codec it does not have", typ)
		}
		err := Dequantize(typ, make([]byte, typ.TypeSize()), make([]float32, typ.BlockSize()))
		if !errors.Is(err, ErrUnsupported) {
			t.Errorf("Dequantize(%s): got %v, want ErrUnsupported", typ, err)
		}
	}
}
