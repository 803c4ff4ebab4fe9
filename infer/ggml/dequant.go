package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// dequantizer decodes whole blocks: len(src) is a multiple of the type size
// and len(dst) the matching number of elements.
type dequantizer func(src []byte, dst []float32)

// dequantizers lists the types Dequantize decodes.
var dequantizers = map[Type]dequantizer{
	TypeF32:  dequantF32,
	TypeF16:  dequantF16,
	TypeBF16: dequantBF16,
}

// Dequantize decodes len(dst) elements of type t from src into dst. src
// must hold exactly t.RowSize(len(dst)) bytes. The arithmetic is that of
// ggml's reference dequantizers (dequantize_row_* in ggml-quants.c,
// evaluated in float32 with every product and sum rounded, no fused
// multiply-add), so each value decodes to the same float32 bits.
func Dequantize(t Type, src []byte, dst []float32) error {
	fn, ok := dequantizers[t]
	if !ok {
		if !t.Known() {
			return &TypeError{Type: t, Op: "dequantize", Err: ErrUnknownType}
		}
		return &TypeError{Type: t, Op: "dequantize", Err: ErrUnsupported}
	}
	size, err := t.RowSize(len(dst))
	if err != nil {
		return &TypeError{Type: t, Op: "dequantize", Err: errorsUnwrapType(err)}
	}
	if len(src) != size {
		return &TypeError{Type: t, Op: "dequantize", Err: fmt.Errorf("%w: %d elements need %d bytes, got %d", ErrSize, len(dst), size, len(src))}
	}
	fn(src, dst)
	return nil
}

// errorsUnwrapType strips a *TypeError so that it is not nested twice.
func errorsUnwrapType(err error) error {
	if te, ok := err.(*TypeError); ok {
		return te.Err
	}
	return err
}

func dequantF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func dequantBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}
