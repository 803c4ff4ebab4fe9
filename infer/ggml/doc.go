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
// Fallback gives the type a quantizer stores a matrix in when its rows do
// not fit the requested type's block (llama.cpp's rule, and Q8_0 for
// NVFP4).
//
// # Dequantization
//
// Dequantize decodes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, Q8_K and NVFP4 (CanDequantize). Each decoder performs the same float32
// operations in the same order as ggml's reference dequantizer
// (dequantize_row_* in ggml-quants.c), rounding every product and sum to
// float32 (explicit conversions stop the Go compiler from fusing a
// multiply and an add), so a block decodes to the same float32 bits as
// ggml's reference C compiled without floating-point contraction.
//
// # Quantization
//
// Quantize encodes F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,
// Q6_K, Q8_K and NVFP4 (CanQuantize) with the algorithms of ggml's reference
// quantizers (quantize_row_*_ref): the same scale selection, the same
// rounding (roundf, ggml's nearest_int, truncating casts, ggml's UE4M3
// encoder) and the same iterative searches for Q4_K and Q6_K. Q8_0 and Q8_K are what
// the engine uses for activations.
//
// # NVFP4
//
// NVFP4 (type 40) holds 64 values in 36 bytes: four UE4M3 scale bytes,
// one per sub-block of 16 values, then 32 bytes of 4-bit E2M1 codes;
// byte 8s+j of the codes holds value j of sub-block s in its low nibble
// and value j+8 in its high nibble (nvfp4.go has the table). A value is
// E2M1Doubled(code) · UE4M3Half(scale): twice the E2M1 value, an integer
// in [−12, 12], times half the scale, as ggml stores them, so that every
// decoded value is one exact float32 product. The quantizer takes each
// sub-block's largest magnitude over 6 as the scale, encodes it with
// F32ToUE4M3 (ggml's encoder, whose rounding and clamping quirks it keeps)
// and picks for each value the nearest of the 16 codes, the lowest code on
// a tie. Quantizing the decoded values again gives the same bytes where
// each sub-block's amax/6 lies in [2^−6, 248); elsewhere (UE4M3's
// subnormal scales, and its top exponent) it may not.
//
// # Half precision
//
// F16ToF32, F32ToF16, BF16ToF32 and F32ToBF16 convert scalars. Conversions
// to the narrow types round to nearest, ties to even, as IEEE 754 and ggml
// do.
package ggml
