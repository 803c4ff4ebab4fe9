package ggml

import (
	"fmt"
	"strconv"
)

// Type is a ggml tensor type, with the numeric ids ggml uses in GGUF files
// (enum ggml_type in ggml.h). Ids that ggml has retired (4, 5, 31-33,
// 36-38) are not Known.
type Type uint32

// The ggml tensor types. The ids are part of the GGUF file format and never
// change.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
	TypeNVFP4   Type = 40
	TypeQ1_0    Type = 41
	TypeQ2_0    Type = 42
)

// QK_K is the number of elements in one super-block of the K-quant types
// (Q2_K ... Q8_K) and of most IQ types.
const QK_K = 256

// typeInfo is one row of the type table.
type typeInfo struct {
	name      string
	blockSize int // elements per block
	typeSize  int // bytes per block
}

// types is the type table, checked against ggml's ggml-common.h block
// structs (their static_asserts give each size) and ggml.c's type traits.
var types = map[Type]typeInfo{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeQ4_0:    {"Q4_0", 32, 2 + 16},
	TypeQ4_1:    {"Q4_1", 32, 2 + 2 + 16},
	TypeQ5_0:    {"Q5_0", 32, 2 + 4 + 16},
	TypeQ5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	TypeQ8_0:    {"Q8_0", 32, 2 + 32},
	TypeQ8_1:    {"Q8_1", 32, 2 + 2 + 32},
	TypeQ2_K:    {"Q2_K", QK_K, QK_K/16 + QK_K/4 + 2 + 2},
	TypeQ3_K:    {"Q3_K", QK_K, QK_K/8 + QK_K/4 + 12 + 2},
	TypeQ4_K:    {"Q4_K", QK_K, 2 + 2 + 12 + QK_K/2},
	TypeQ5_K:    {"Q5_K", QK_K, 2 + 2 + 12 + QK_K/8 + QK_K/2},
	TypeQ6_K:    {"Q6_K", QK_K, QK_K/2 + QK_K/4 + QK_K/16 + 2},
	TypeQ8_K:    {"Q8_K", QK_K, 4 + QK_K + QK_K/16*2},
	TypeIQ2_XXS: {"IQ2_XXS", QK_K, 2 + QK_K/8*2},
	TypeIQ2_XS:  {"IQ2_XS", QK_K, 2 + QK_K/8*2 + QK_K/32},
	TypeIQ3_XXS: {"IQ3_XXS", QK_K, 2 + 3*QK_K/8},
	TypeIQ1_S:   {"IQ1_S", QK_K, 2 + QK_K/8 + QK_K/16},
	TypeIQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	TypeIQ3_S:   {"IQ3_S", QK_K, 2 + 13*QK_K/32 + QK_K/64},
	TypeIQ2_S:   {"IQ2_S", QK_K, 2 + QK_K/4 + QK_K/16},
	TypeIQ4_XS:  {"IQ4_XS", QK_K, 2 + 2 + QK_K/64 + QK_K/2},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeF64:     {"F64", 1, 8},
	TypeIQ1_M:   {"IQ1_M", QK_K, QK_K/8 + QK_K/16 + QK_K/32},
	TypeBF16:    {"BF16", 1, 2},
	TypeTQ1_0:   {"TQ1_0", QK_K, (QK_K-4*QK_K/64)/5 + QK_K/64 + 2},
	TypeTQ2_0:   {"TQ2_0", QK_K, QK_K/4 + 2},
	TypeMXFP4:   {"MXFP4", 32, 1 + 16},
	TypeNVFP4:   {"NVFP4", 64, 4 + 32},
	TypeQ1_0:    {"Q1_0", 128, 2 + 128/8},
	TypeQ2_0:    {"Q2_0", 64, 2 + 64/4},
}

// Types returns every known type in id order.
func Types() []Type {
	out := make([]Type, 0, len(types))
	for id := Type(0); id < 64; id++ {
		if _, ok := types[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

// Known reports whether t is a ggml type this package knows the block and
// byte size of. Files holding tensors of a known type can be parsed and
// inspected even where the type cannot be decoded.
func (t Type) Known() bool {
	_, ok := types[t]
	return ok
}

// String returns ggml's name for the type ("F32", "Q4_K", "IQ2_XXS"), or
// "TYPE(n)" for an unknown id.
func (t Type) String() string {
	if ti, ok := types[t]; ok {
		return ti.name
	}
	return "TYPE(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// ParseType returns the type whose String is name (case-insensitive).
func ParseType(name string) (Type, error) {
	for id, ti := range types {
		if equalFold(ti.name, name) {
			return id, nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownType, name)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		ca, cb := a[i], b[i]
		if 'a' <= ca && ca <= 'z' {
			ca -= 'a' - 'A'
		}
		if 'a' <= cb && cb <= 'z' {
			cb -= 'a' - 'A'
		}
		if ca != cb {
			return false
		}
	}
	return true
}

// BlockSize returns the number of elements in one block of t, or 0 if t is
// not Known.
func (t Type) BlockSize() int { return types[t].blockSize }

// TypeSize returns the number of bytes in one block of t, or 0 if t is not
// Known.
func (t Type) TypeSize() int { return types[t].typeSize }

// RowSize returns the number of bytes that n elements of type t occupy. It
// fails if t is unknown, n is negative or not a multiple of the block size,
// or the size overflows an int.
func (t Type) RowSize(n int) (int, error) {
	ti, ok := types[t]
	if !ok {
		return 0, &TypeError{Type: t, Err: ErrUnknownType}
	}
	if n < 0 {
		return 0, &TypeError{Type: t, Err: fmt.Errorf("%w: negative element count %d", ErrSize, n)}
	}
	if n%ti.blockSize != 0 {
		return 0, &TypeError{Type: t, Err: fmt.Errorf("%w: %d elements is not a multiple of the block size %d", ErrSize, n, ti.blockSize)}
	}
	blocks := n / ti.blockSize
	if blocks > maxInt/ti.typeSize {
		return 0, &TypeError{Type: t, Err: fmt.Errorf("%w: %d elements overflow the byte size", ErrSize, n)}
	}
	return blocks * ti.typeSize, nil
}

const maxInt = int(^uint(0) >> 1)

// CanDequantize reports whether Dequantize decodes t.
func (t Type) CanDequantize() bool {
	_, ok := dequantizers[t]
	return ok
}

// CanQuantize reports whether Quantize encodes t.
func (t Type) CanQuantize() bool {
	_, ok := quantizers[t]
	return ok
}
