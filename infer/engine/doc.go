// Package engine runs decoder-only transformers from GGUF files on the
// CPU: it binds an architecture's weights (left quantized in the file's
// memory mapping), runs batched forward passes over per-sequence KV
// caches, and moves KV blocks to and from a PrefixStore.
//
// # Architectures
//
// One decoder serves every architecture; an Arch registered by name
// (general.architecture) sets its switches: RoPE variant, Q/K/V and output
// biases, per-head Q/K RMSNorm, rope_freqs. Registered: llama (Llama 2,
// Llama 3.x with rope_freqs, Mistral), qwen2 (Q/K/V biases, NeoX RoPE),
// qwen3 (Q/K norms, NeoX RoPE, head_dim independent of hidden/heads). The
// layer is
//
//	h   = x + Wo·Attn(RoPE(norm_q(Wq·n + bq)), RoPE(norm_k(Wk·n + bk)), Wv·n + bv),  n = RMSNorm(x)·w_attn
//	out = h + Wdown·(silu(Wgate·m) ⊙ Wup·m),                                          m = RMSNorm(h)·w_ffn
//
// with grouped-query attention (Heads/KVHeads query heads share a K/V
// head) and scale 1/√head_dim. The output matrix is output.weight, or
// token_embd.weight when the model ties them. Tensors are bound by their
// llama.cpp names; a missing or misshaped one gives a *TensorError naming
// it, a bad hyperparameter an *HParamError naming its metadata key. Linear
// RoPE scaling is supported; YaRN and other scalings are refused
// (ErrUnsupported). Mistral's sliding window is not applied (see
// archs.go).
//
// # Batches
//
// Forward takes a batch of Steps, each appending tokens to one Sequence
// and asking for no logits, the last token's, or every token's. All the
// batch's tokens, from any number of sequences, pass through each weight
// matrix in one kernels.MatMul (n = total tokens, split into windows of
// Options.BatchSize), so prefill chunks and decode tokens of several
// requests share the weight traffic (continuous batching). Attention is
// computed per token and head over the positions of the token's own
// sequence.
//
// # Exactness
//
// A token's K, V and logits are bit-identical whether it is prefilled in a
// batch of 512, after a restored prefix, or decoded alone, at any thread
// count. This holds because every operation on a token depends only on
// that token's data and position:
//
//   - kernels.MatMul is batch- and thread-invariant (infer/kernels);
//   - norms, biases, RoPE and SiLU are applied per token row; which
//     goroutine runs a row does not change its arithmetic;
//   - attention for a token at position p reads K and V of positions
//     0..p back from the cache, in that order, after they were rounded to
//     the cache's dtype, the token's own K and V included, so a row
//     restored from a chunk and a row just computed are used identically;
//     with an f16 cache the query is rounded to f16, scores are
//     kernels.DotF16 of it with each K row (kernels.DotF16Rows, same bits)
//     times 1/√d, then kernels.Softmax, the weights are rounded to f16, and
//     the weighted sum of V rows accumulates with kernels.AXPYF16 in
//     position order (kernels.AXPYF16Rows); the f16 roundings of query and
//     weights are llama.cpp's (its CPU attention multiplies f16 operands)
//     and keep muser close to it (docs/engine.md, "Parity"). An f32 cache
//     uses kernels.Dot and kernels.AXPY with no rounding. For speed the
//     f16 path computes a tile of queries at a time — the query heads of
//     one KV head for up to 4–16 consecutive tokens of a sequence — with
//     kernels.ScoresF16 and kernels.WeightedSumF16, which give every query
//     exactly the bits of the per-query calls above, so neither the tiles
//     nor the split of (tile, KV head, head group) tasks over threads can
//     change a result.
//
// Float arithmetic written in this package rounds every product
// explicitly (float32(a*b)), which the Go specification guarantees is not
// fused into an FMA, so results do not depend on the CPU architecture the
// compiler targets. Any change to these orders, or to the kernels' orders,
// must bump NumericsVersion.
//
// # RoPE
//
// The angle of pair i at position p is θ = scale · p · base^(−2i/d) / f_i
// (d the rotated dimensions, f_i from rope_freqs or 1, scale 1/linear
// factor). As in ggml, base^(−2i/d) is built by repeated float32
// multiplication by base^(−2/d); cos θ and sin θ are computed in float64
// and rounded to float32. Normal RoPE rotates (x[2i], x[2i+1]); NeoX RoPE
// rotates (x[i], x[i+d/2]); dimensions past d pass through.
//
// # KV cache and chunks
//
// Each Sequence owns a kvcache.Cache (f16 by default, f32 as an option)
// whose rows export to and import from chunk payloads in layout lkv1
// (infer/kvcache). RestorePrefix asks a PrefixStore for the longest
// cached, verified prefix of a prompt (never its last token) and imports
// it; PublishPrefix offers the store every full block of a sequence. A
// failed restore leaves the sequence empty (fail closed).
//
// # Identity
//
// Model.Identity fills the eight fields of pack.Identity: format, the
// weights digest (gguf.WeightsDigest), Config.ArchString (everything that
// shapes K and V), the tokenizer and template digests the caller passes,
// gguf.QuantName, the kv field ("f16;block=64;layout=lkv1") and
// EngineName ("muser-cpu/N", N = NumericsVersion).
//
// # Threads
//
// A Model runs matrix products, per-token work and attention on a
// kernels.Pool of Options.Threads goroutines (default: the number of
// CPUs). Threads split independent work items only, never a reduction,
// so the thread count never changes a result.
package engine
