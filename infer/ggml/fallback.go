package ggml

// Fallback returns the type a quantizer stores a matrix in when t is
// requested and its rows hold n elements. If n is a whole number of t's
// blocks that is t itself. Otherwise, as llama.cpp's quantizer does
// (tensor_type_fallback in src/llama-quant.cpp), the K-quants and the
// 256-element IQ types step down to a 32-element type (Q2_K, Q3_K, TQ1_0,
// TQ2_0 and Q2_0 to Q4_0; Q4_K to Q5_0; Q5_K to Q5_1; Q6_K to Q8_0; the
// IQ types to IQ4_NL), and NVFP4, for which llama.cpp defines no
// fallback, steps down to Q8_0, the type llama.cpp's NVFP4 recipes use
// for the tensors they leave out. Where that type does not fit either, or
// t has no step down (the 32-element types, which llama.cpp refuses), the
// result is F16.
func Fallback(t Type, n int) Type {
	if bs := t.BlockSize(); bs <= 1 || n%bs == 0 {
		return t
	}
	next := TypeF16
	switch t {
	case TypeQ2_0, TypeQ2_K, TypeQ3_K, TypeTQ1_0, TypeTQ2_0:
		next = TypeQ4_0
	case TypeQ4_K:
		next = TypeQ5_0
	case TypeQ5_K:
		next = TypeQ5_1
	case TypeQ6_K, TypeNVFP4:
		next = TypeQ8_0
	case TypeIQ1_S, TypeIQ1_M, TypeIQ2_XXS, TypeIQ2_XS, TypeIQ2_S, TypeIQ3_XXS, TypeIQ3_S, TypeIQ4_XS:
		next = TypeIQ4_NL
	}
	if n%next.BlockSize() != 0 {
		return TypeF16
	}
	return next
}
