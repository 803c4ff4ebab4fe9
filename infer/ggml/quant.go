package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
)

// quantizer encodes whole blocks: len(src) is a multiple of the block size
// and len(dst) the matching number of bytes.
type quantizer func(src []float32, dst []byte)

// quantizers lists the types Quantize encodes.
var quantizers = map[Type]quantizer{
	TypeF32:  quantF32,
	TypeF16:  quantF16,
	TypeBF16: quantBF16,
}

// Quantize encodes src as type t into dst, which must be exactly
// t.RowSize(len(src)) bytes long. The block quantizers follow ggml's
// reference quantizers (quantize_row_*_ref in ggml-quants.c) step for
// step in float32 arithmetic, so they produce the same bytes for finite
// input. Non-finite input gives unspecified (but deterministic) bytes.
func Quantize(t Type, src []float32, dst []byte) error {
	fn, ok := quantizers[t]
	if !ok {
		if !t.Known() {
			return &TypeError{Type: t, Op: "quantize", Err: ErrUnknownType}
		}
		return &TypeError{Type: t, Op: "quantize", Err: ErrUnsupported}
	}
	size, err := t.RowSize(len(src))
	if err != nil {
		return &TypeError{Type: t, Op: "quantize", Err: errorsUnwrapType(err)}
	}
	if len(dst) != size {
		return &TypeError{Type: t, Op: "quantize", Err: fmt.Errorf("%w: %d elements need %d bytes, got %d", ErrSize, len(src), size, len(dst))}
	}
	fn(src, dst)
	return nil
}

func quantF32(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func quantF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
	}
}

func quantBF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
}
