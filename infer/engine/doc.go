// Package engine is the engine front: it runs decoder-only transformers
// from GGUF files through a Backend that does the arithmetic on one device.
// The front owns what does not depend on the device: the architecture and
// its hyperparameters, tensor lookup and shape checks, sequences and their
// tokens, batch checks, the RoPE angles, the prefix-restore rule, and the
// one constructor of the pack identity. A Device (infer/engine/cpu, the
// CPU engine; a GPU backend beside it) binds the weights, keeps KV where it
// computes, and runs forward passes.
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
// llama.cpp names into Weights; a missing or misshaped one gives a
// *TensorError naming it, a bad hyperparameter an *HParamError naming its
// metadata key, a weight type the device cannot multiply a *TensorError
// wrapping ErrUnsupported. Linear RoPE scaling is supported; YaRN and
// other scalings are refused (ErrUnsupported). Mistral's sliding window is
// not applied (see archs.go).
//
// # Backends
//
// Load binds the file's tensors (weight matrices where the file holds
// them, vectors decoded to float32) and hands them to Options.Device, whose
// Backend:
//
//   - allocates each Sequence's KV where it computes (NewKV), in the
//     lkv1 chunk layout on export and import (docs/kvpack.md);
//   - computes rows: a token, its position and its sequence's KV, with
//     the logits of the rows that want them (Forward);
//   - names its numerics (Numerics), the identity's engine field, and
//     says how many rows a call takes (MaxRows) and how many decode tokens
//     it prefers per call (DecodeBatch).
//
// Forward takes a batch of Steps, each appending tokens to one Sequence
// and asking for no logits, the last token's, or every token's. The front
// checks the batch, reserves each sequence's KV, flattens the steps into
// rows and hands them to the backend Options.BatchSize rows at a time, so
// prefill chunks and decode tokens of several requests share the weight
// traffic (continuous batching).
//
// # Exactness
//
// A token's K, V and logits are bit-identical whether it is prefilled in a
// batch of 512, after a restored prefix, or decoded alone, on any backend
// of the same numerics. Each backend guarantees it for itself: every
// operation on a token depends only on that token's data and position, in
// a fixed order of float operations (infer/engine/cpu, "Exactness";
// docs/engine.md, "Numerics"). EngineName names muser's exact numerics,
// which the CPU engine defines; NumericsVersion is bumped, in every
// backend together, whenever a bit of K, V or logits could change.
//
// # RoPE
//
// The angle of pair i at position p is θ = scale · p · base^(−2i/d) / f_i
// (d the rotated dimensions, f_i from rope_freqs or 1, scale 1/linear
// factor). As in ggml, base^(−2i/d) is built by repeated float32
// multiplication by base^(−2/d); cos θ and sin θ are computed in float64
// and rounded to float32 (Rope.Angles, on the host, for every backend).
// Normal RoPE rotates (x[2i], x[2i+1]); NeoX RoPE rotates (x[i], x[i+d/2]);
// dimensions past d pass through.
//
// # Prefix reuse
//
// RestorePrefix is the one prefix-restore rule: it asks a PrefixStore for
// every whole block of a prompt it holds, verified, imports them, and
// drops the prompt's last token again if they covered it (its logits must
// be computed). A failed restore leaves the sequence empty (fail closed).
// PublishPrefix offers the store every full block of a sequence.
//
// # Embeddings
//
// A Step may ask for final-normed hidden states (Step.Hidden, like
// Step.Output for logits): each wanted token's output-normed state (the
// output norm's RMSNorm and weight), the input of the output projection,
// computed by the same kernel and in the same order as before the logits,
// so asking for them never changes a logit. A backend returns them when it
// implements HiddenBackend (the CPU backend does; the CUDA backend does
// not yet: Model.CheckHiddenStates then returns a *DeviceError naming the
// device, wrapping ErrNoHiddenStates, and Forward refuses such a step with
// a *BatchError). Pool turns a prompt's states into one embedding by
// the GGUF's <arch>.pooling_type (ReadPooling; llama.cpp's values): mean
// (float64 sums in token order), cls (the first token) or last; Normalize
// scales it to unit length as llama.cpp's server and Ollama's /api/embed
// do.
//
// # Identity
//
// Identity is the one constructor of the pack identity, for serve, run,
// model inspect and pack import alike: format, the weights digest
// (gguf.WeightsDigest), Config.ArchString (everything that shapes K and
// V), the tokenizer's and the chat template's digests, gguf.QuantName, the
// kv field ("f16;block=64;layout=lkv1") and the numerics name
// (EngineName, "muser-cpu/N").
package engine
