// Package ggml describes ggml's tensor types and converts between them and
// float32.
//
// # Types
//
// Type is ggml's numeric type id as stored in GGUF files. Every id that
// ggml defines today is Known: its block size (elements per block) and type
// size (bytes per block) are in the table in types.go, checked against
// ggml's block structs, so files holding any of them can be parsed and
// inspected even where this package cannot decode the type. Retired ids
// (4, 5, 31-33, 36-38) are unknown.
//
// # Dequantization
//
// Dequantize decodes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K and Q8_K (CanDequantize). Each decoder performs the same float32
// operations in the same order as ggml's reference dequantizer
// (dequantize_row_* in ggml-quants.c), rounding every product and sum to
// float32 (explicit conversions stop the Go compiler from fusing a
// multiply and an add), so a block decodes to the same float32 bits as
// ggml's reference C compiled without floating-point contraction.
//
// # Quantization
//
// Quantize encodes F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K and
// Q8_K (CanQuantize) with the algorithms of ggml's reference quantizers
// (quantize_row_*_ref): the same scale selection, the same rounding
// (roundf, ggml's nearest_int, truncating casts) and the same iterative
// search for Q4_K. Q8_0 and Q8_K are what the engine uses for activations.
//
// # Half precision
//
// F16ToF32, F32ToF16, BF16ToF32 and F32ToBF16 convert scalars. Conversions
// to the narrow types round to nearest, ties to even, as IEEE 754 and ggml
// do.
package ggml
