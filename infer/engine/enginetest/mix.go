package enginetest

import (
	"fmt"
	"strings"

	"github.com/muserhq/muser/infer/ggml"
)

// Mix chooses the weight type of each matrix of a model, as a quantizer's
// file type does: Type gets the tensor's name without its "blk.N."
// prefix, the block's index (−1 outside the blocks) and the number of
// blocks, and returns the type wanted before llama.cpp's fallback for rows
// the type's blocks do not divide (TypeFor) is applied.
type Mix struct {
	Name string // used in file names ("Q4_K_M", or the type's name)
	Type func(name string, layer, layers int) ggml.Type
}

// Uniform is the mix of one type for every matrix.
func Uniform(t ggml.Type) Mix {
	return Mix{Name: t.String(), Type: func(string, int, int) ggml.Type { return t }}
}

// Q4KM is llama.cpp's Q4_K_M file type for a dense model without experts
// (llama_tensor_get_type in its src/llama-quant.cpp): Q4_K everywhere but
// the output matrix (the token embedding when the output is tied to it),
// which is Q6_K, and attn_v and ffn_down, which are Q6_K in the blocks
// moreBits picks. TypeFor then turns Q4_K into Q5_0 and Q6_K into Q8_0
// where a row is not a multiple of 256 (Qwen2.5-0.5B's 896).
var Q4KM = Mix{Name: "Q4_K_M", Type: q4km}

func q4km(name string, layer, layers int) ggml.Type {
	switch {
	case name == "output.weight":
		return ggml.TypeQ6_K
	case (name == "attn_v.weight" || name == "ffn_down.weight") && moreBits(layer, layers):
		return ggml.TypeQ6_K
	}
	return ggml.TypeQ4_K
}

// moreBits reports whether block i of n gets the larger type in llama.cpp's
// K-quant mixes: the first and last eighth, and every third block between.
func moreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// ParseMix returns the mix called name: "Q4_K_M", or a ggml type's name
// for a uniform model.
func ParseMix(name string) (Mix, error) {
	if strings.EqualFold(name, Q4KM.Name) {
		return Q4KM, nil
	}
	t, err := ggml.ParseType(name)
	if err != nil {
		return Mix{}, fmt.Errorf("weight mix %q: neither Q4_K_M nor a ggml type: %w", name, err)
	}
	return Uniform(t), nil
}
