// Package enginetest builds random-weight GGUF models for the engine's
// tests, parity checks and benchmarks: the exact tensor shapes of real
// models (Llama-3.2-1B, Qwen2.5-0.5B, Qwen3-0.6B) or tiny ones, in F16,
// Q8_0, Q4_K or NVFP4, with a byte-fallback SentencePiece vocabulary of
// the right size that llama.cpp loads. Models are generated, never
// downloaded.
//
// # Weights
//
// Every tensor is drawn from its own PCG stream (seeded by the model seed
// and the tensor's index), so a model is a pure function of (Shape, quant,
// seed). The scales make a model whose next-token choice is confident
// enough to compare implementations, yet depends on context:
//
//   - token_embd ~ N(0, σ²) with σ = LogitStd/√hidden, so tied logits of
//     a unit-RMS hidden state spread with standard deviation LogitStd (4);
//   - the layers add to the residual stream updates whose total norm is
//     LayerGain (0.15) times the embedding's: attn_q/k/v ~ N(0, 1/hidden)
//     (unit-variance projections), ffn_gate/up ~ N(0, 1/hidden), and
//     attn_output and ffn_down scaled so that each of the 2·layers
//     sub-blocks adds σ·LayerGain/√(2·layers) per element;
//   - output_norm.weight has magnitudes 1 + N(0, 0.1²) and random signs:
//     with tied embeddings the current token's own embedding, which
//     dominates the residual stream, then scores every token by a random
//     bilinear form instead of making the current token the top choice;
//   - other norm weights 1 + N(0, 0.1²), biases N(0, 0.3²);
//   - rope_freqs (Llama 3 shapes) from the Llama 3.1 scaling rule: factor
//     1 for wavelengths below orig_ctx/high_freq_factor, the scaling factor
//     above orig_ctx/low_freq_factor, and a smooth interpolation between.
//
// Such a model behaves like a random bigram model perturbed by its
// context: on the Qwen2.5-0.5B shape the context changes the top-1 token at
// about 40% of positions and the top-1 is never the input token
// (paritytool compare reports both). Why the layers are kept small: with
// activations quantized to 8 bits, two implementations whose float
// arithmetic differs only in rounding drift apart through the layers (each
// rounding difference can flip a quantized activation, and flips cascade),
// to about 1.5% relative logit error at full layer gain, which decides
// top-1 at Gaussian-close margins. Keeping the layers' share of the
// residual small keeps that drift, and so the comparison, meaningful.
//
// # Quantization
//
// Matrices (token_embd included) are stored in the requested type; norms,
// biases and rope_freqs in F32. A matrix whose rows do not fit the type's
// block falls back as llama.cpp's quantizer does (ggml.Fallback): Q4_K →
// Q5_0 when the row length is not a multiple of 256 (Qwen2.5-0.5B's hidden
// size 896), NVFP4 → Q8_0 when it is not a multiple of 64, and to F16
// when it is not a multiple of 32.
package enginetest
