// Package cpu is the CPU engine as an engine backend: it multiplies the
// GGUF weights where they lie (infer/kernels), keeps KV in host memory
// (infer/kvcache), and defines muser's exact numerics (engine.EngineName)
// that every other backend of those numerics reproduces bit for bit.
//
//	m, err := engine.Open(path, engine.Options{Device: cpu.New(cpu.Options{Threads: 2})})
//
// # Rows
//
// A Forward call takes up to DefaultMaxRows rows, from any number of
// sequences. All of them pass through each weight matrix in one
// kernels.MatMul (n = the number of rows), so prefill chunks and decode
// tokens of several requests share the weight traffic. Attention is
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
//     position order, one chain per 256 positions from +0, the parts'
//     sums added in order (kernels.AXPYF16Parts); the f16 roundings of query and
//     weights are llama.cpp's (its CPU attention multiplies f16 operands)
//     and keep muser close to it (docs/engine.md, "Parity"). An f32 cache
//     uses kernels.Dot and kernels.AXPY (kernels.AXPYParts) with no
//     rounding. For speed the
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
// must bump engine.NumericsVersion.
//
// RoPE applies the front's angles (engine.Rope.Angles): x[a] =
// x0·cos − x1·sin and x[b] = x0·sin + x1·cos with each product rounded
// before the sum.
//
// # Threads
//
// A backend runs matrix products, per-token work and attention on a
// kernels.Pool of Options.Threads goroutines (default: the number of
// CPUs). Threads split independent work items only, never a reduction,
// so the thread count never changes a result.
package cpu
