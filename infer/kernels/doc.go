// Package kernels holds muser's CPU compute kernels: matrix multiplication
// of quantized GGUF weights by activations, the vector helpers of the
// forward pass, and a worker pool. Every kernel is exact in the sense the
// engine's KV packs need: the same inputs give the same bits whatever the
// batch, the thread count or the instruction-set variant.
//
// # Using it
//
//	pool := kernels.NewPool(2)
//	defer pool.Close()
//	m, err := kernels.NewMatrix(ggml.TypeQ8_0, rows, cols, tensorBytes) // mmap'd, not copied
//	pool.MatMul(y, m, x, nTokens) // y: nTokens×rows, x: nTokens×cols
//
// Weights stay in their ggml block format where they lie (usually a
// memory-mapped GGUF file). MatMul quantizes each token's activations as
// the weight type needs (as llama.cpp does): Q8_0 for Q4_0, Q5_0 and Q8_0;
// Q8_1 for Q4_1 and Q5_1; Q8_K for Q2_K … Q6_K; f16 for F16; bf16 for
// BF16; F32 weights take the activations as they are. The quantized values
// are bit-identical to ggml's reference quantizers.
//
// # Canonical order
//
// Integer arithmetic (quantized weight × quantized activation, summed over a
// block, times a K-quant's integer sub-block scale) is exact in any order.
// Float arithmetic is not, so each kernel has ONE order of float
// operations, independent of instruction set and thread count. The portable
// Go code (generic.go) is the definition; the SIMD variants perform the same
// operations in the same order. No kernel uses a fused multiply-add except
// where the product is exact (f16 × f16), where fused and unfused agree.
// Every "·" and "+" below is one IEEE float32 operation, rounded to nearest
// even.
//
// For one output element (row r, token t), with blocks b in increasing
// order and acc starting at +0:
//
//   - Q8_0, Q4_0, Q5_0 (activations Q8_0): isum = Σ w·a over the block's 32
//     values (w centred: q, q−8, q−16); p = (dw·da)·float32(isum);
//     acc = acc + p.
//   - Q4_1, Q5_1 (activations Q8_1, whose s = f16(d·Σa)): isum = Σ q·a;
//     p = (dw·da)·float32(isum); p = p + (mw·sa); acc = acc + p.
//   - Q3_K, Q6_K (activations Q8_K): isum = Σ_g sc_g·Σ_{j∈g} w_j·a_j over the
//     16 groups of 16 (w centred: q3 − 4·(1−h), q6 − 32; sc_g signed);
//     p = (dw·da)·float32(isum); acc = acc + p.
//   - Q2_K, Q4_K, Q5_K (activations Q8_K): isum as above with unsigned q
//     (groups of 16, 32, 32), msum = Σ_g min_g·Σ_{j∈g} a_j;
//     p = (dw·da)·float32(isum); p = p − (dmin·da)·float32(msum);
//     acc = acc + p.
//   - F32, F16, BF16: 16 accumulators; element c (in order) does
//     acc[c mod 16] = acc[c mod 16] + w_c·x_c (product rounded; for F16 it
//     is exact); then acc[l] = acc[l] + acc[l+8] for l < 8, then +4, +2,
//     +1; the result is acc[0]. Dot and DotF16 use the same order.
//
// dw, mw, dmin are the weight block's f16 fields widened exactly; da is the
// activation block's scale (f16 widened for Q8_0/Q8_1, float32 for Q8_K).
// These orders are part of the engine's numerics version: any change to
// them must bump the engine identity (for example "muser-cpu/1" →
// "muser-cpu/2").
//
// # Batch invariance and threads
//
// Activations are quantized per token row. Work is split into tiles of
// output rows (never the reduction dimension); a tile computes each (row,
// token) pair with the order above, whatever the number of tokens in the
// call or the token's position. The SIMD kernels vectorise across output
// rows and tokens — each vector lane is one (row, token) pair following the
// scalar order — so the lane count cannot change a result either.
//
// # Instruction sets
//
// On amd64 the kernels detect the CPU at start-up (golang.org/x/sys/cpu)
// and use the best of: AVX-512 (F, BW, VL, VNNI), AVX2 with FMA, or the
// portable Go code, which is also what every other architecture runs.
// SetISA forces a variant, for tests and benchmarks. All variants give
// identical bits, so the variant is not part of the engine identity.
//
// # Vector helpers
//
// RMSNorm, SiLUMul, Softmax, Dot, AXPY, DotF16, AXPYF16, Add, Scale and the
// f16 conversions are deterministic and documented with their order of
// operations. Exp32 is a float64-only exponential used by SiLUMul and
// Softmax instead of math.Exp, whose amd64 assembly uses FMA when the CPU
// has it and so can differ between machines.
package kernels
