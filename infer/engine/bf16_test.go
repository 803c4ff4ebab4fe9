package engine_test

import (
	"testing"

	"github.com/muserhq/muser/infer/ggml"
)

// TestExactnessBF16 runs the exactness property test on a tiny random
// model of each architecture with BF16 weights: prefill batches take the
// fused-multiply-add BF16 kernels where every product is exact, decode
// the one-token kernels, and both must give the same bits (splits,
// token-by-token decode, mixed batches, 1 and 3 threads).
func TestExactnessBF16(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			checkExactness(t, tinyModel(t, arch, ggml.TypeBF16), 1, 24)
		})
	}
}
