// Package enginetest builds random-weight GGUF models for the engine's
// tests, parity checks and benchmarks: the exact tensor shapes of real
// models (Llama-3.2-1B, Qwen2.5-0.5B, Qwen3-0.6B) or tiny ones, in F16,
// Q8_0 or Q4_K, with a byte-fallback SentencePiece vocabulary of the right
// size that llama.cpp loads. Models are generated, never downloaded.
//
// # Weights
//
// Every tensor is drawn from its own PCG stream (seeded by the model seed
// and the tensor's index), so a model is a pure function of (Shape, quant,
// seed). Scales keep activations O(1) and logits spread out, so top-1
// choices are not decided by rounding noise:
//
//   - token_embd ~ N(0, (LogitStd/√hidden)²), so tied logits of a
//     unit-RMS hidden state have standard deviation ≈ LogitStd (4);
//   - attn_q/k/v ~ N(0, 1/hidden) (unit-variance projections), attn_output
//     ~ N(0, 0.5/(heads·head_dim)), ffn_gate/up ~ N(0, 1/hidden),
//     ffn_down ~ N(0, 0.5/ffn);
//   - norm weights 1 + N(0, 0.1²), biases N(0, 0.3²);
//   - rope_freqs (Llama 3 shapes) from the Llama 3.1 scaling rule: factor
//     1 for wavelengths below orig_ctx/high_freq_factor, the scaling factor
//     above orig_ctx/low_freq_factor, and a smooth interpolation between.
//
// # Quantization
//
// Matrices (token_embd included) are stored in the requested type; norms,
// biases and rope_freqs in F32. A matrix whose rows do not fit the type's
// block falls back as llama.cpp's quantizer does: Q4_K → Q5_0 when the row
// length is not a multiple of 256 (Qwen2.5-0.5B's hidden size 896), Q5_0
// or Q8_0 → F16 when it is not a multiple of 32.
package enginetest
