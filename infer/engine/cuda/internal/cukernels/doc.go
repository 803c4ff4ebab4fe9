// Package cukernels holds the CUDA kernels of muser's exact GPU mode, the
// artifacts built from them (embedded in the binary), and a Go description
// of every kernel's launch. Exact means bit for bit what the CPU engine
// computes (infer/kernels, infer/ggml, infer/engine/cpu), so KV caches made on
// a GPU and on a CPU are interchangeable and carry the same identity.
//
// # What is here
//
// The *.cu and *.cuh files are the kernels, all extern "C", compiled as one
// translation unit (muser.cu) by scripts/cuda/build-kernels.sh into
// muser_sm90.cubin (sm_90: H100, H200) and muser_compute90.ptx (JIT-compiled
// by the driver on other GPUs), with manifest.txt recording the digest of
// the sources, the nvcc version and flags, the digests of both artifacts
// and the kernel names. Cubin, PTX, EmbeddedManifest, SourceDigest and
// Kernels return them. launch.go describes each kernel (KernelTable) and
// builds its launches (grid, block, shared memory, arguments) for the
// backend; the package does not call the driver itself.
//
// # Using it
//
// A backend loads Cubin (or PTX) with cuModuleLoadData, looks up the
// functions KernelTable names, and launches what the builders return
// (grid, block, dynamic shared memory, arguments). One forward pass over n
// rows, in the CPU engine's order (infer/engine/cpu, forward.go):
//
//	Embed(token_embd)                                   x = embeddings
//	per layer:
//	  RMSNorm(x → xn, attn_norm)
//	  QuantizeActs(xn), MatMul wq, wk, wv               q, k, v
//	  AddBias(q, k, v)                                  qwen2 (MatMul.Bias in decode)
//	  RMSNormHeads(q, k)                                qwen3
//	  RoPE(q), RoPE(k)                                  cos/sin from engine.Rope.Angles, uploaded
//	  KVStore(k, v)                                     into each row's sequence cache
//	                                                    (RoPE and KVStore in one: RoPEKVStore)
//	  Attention{…}.Launches()                           scores, softmax, weighted sum → att
//	                                                    (RoPE, KVStore and a decode batch's
//	                                                    attention in one: RoPEAttention)
//	  QuantizeActs(att), MatMul wo                      o
//	  AddRMSNorm(x += o + bo, xn = norm(x), ffn_norm)
//	  QuantizeActs(xn), MatMul gate, up
//	  SiLUMul(gate, up)
//	  QuantizeActs(gate), MatMul down                   o
//	  Add(x += o)                                       (MatMul.Res in decode)
//	RMSNorm(x → xn, output_norm, the rows that want logits), QuantizeActs, MatMul output
//
// Quantized activations are shared by the products that take the same
// form (ActOf): wq, wk and wv of one type read one quantization of xn.
// Fusions that compute the same bits in fewer launches: where the
// products take Q8_0 or Q8_1 activations (FusedQuant), RMSNormQuant,
// AddRMSNormQuant and SiLUMulQuant quantize the rows they write
// (replacing RMSNorm, AddRMSNorm or SiLUMul and the QuantizeActs after
// it); where a product's launch has an epilogue (MatMul.Epilogue: the
// decode kernels of the integer types) it adds the Q, K and V biases
// (MatMul.Bias) and the residual of the down product (MatMul.Res) as it
// writes y, each the one rounding AddBias or Add would do.
// Weights stay in their GGUF layout (16-byte aligned); activation buffers
// must be 16-byte aligned (cuMemAlloc's are).
//
// # Exactness
//
// Every float operation is written with an explicit round-to-nearest
// intrinsic, in the CPU's order, and nvcc compiles with --fmad=false: no
// product and sum are contracted, nothing is reassociated (common.cuh). A
// fused multiply-add appears only where its product is exact, f16 × f16
// (the F16 matrix products and the f16-cache attention: Kernel.ExactFMA).
// Division and square root go through non-inlined helpers so that the
// FFMA/DFMA of their IEEE expansions stay out of the kernels' SASS.
// Integer block sums come from int8 tensor cores (mma.sync m16n8k32 for a
// 32-value block or group, m16n8k16 for 16 values), exact in any order; the
// float epilogue of each block runs per output, in block order.
//
// The checks (TestArtifacts, run by the build script on new artifacts and
// by CI on the embedded ones): in the PTX, every float add, sub and mul
// carries an explicit rounding mode (so the driver's JIT cannot contract
// it either), no fma or mad outside the ExactFMA kernels, no approximate
// or flush-to-zero instruction; in the SASS (nvdisasm), no FFMA outside
// the ExactFMA kernels and the division helpers, no DFMA or HFMA outside
// the helpers (HFMA2 constant moves aside), IMMA in every mmq kernel; the
// kernels of the PTX, the manifest and KernelTable are the same, and every
// kernel's PTX parameters are what launch.go passes. TestSourceDigest
// fails when the sources no longer match the manifest: run
// scripts/cuda/build-kernels.sh and commit its output. The cubin is not
// byte-reproducible (ptxas 11.8 schedules a few kernels differently from
// run to run); the manifest ties sources and artifacts together.
//
// # Kernels
//
// Each file documents its kernels' arguments, grid, block and shared
// memory; launch.go builds them. The numerics of each, with its Go
// definition:
//
//   - quant.cuh: muser_quant_q8_0 (kernels.quantQ8_0, with the Q8_1 sums),
//     muser_quant_q8_k (quantQ8_K), muser_round_f16 and muser_round_bf16
//     (the activations of F16 and BF16 weights). A token row spreads over
//     ⌈cols/256⌉ thread blocks (Q8_0: eight 32-value blocks each) or
//     cols/256 (Q8_K: one super-block each).
//   - mmq.cuh: muser_mmq_<type> (tiles of 64 rows × 64 tokens, 4 warps of
//     32 × 32, tensor cores; each stage's raw weights, activations and
//     scales copied in by cp.async while the stage before computes) and
//     muser_mmv_<type> (up to 8 tokens: every
//     block's product in parallel into shared memory, four lanes a block
//     for the 32-value types and eight a super-block for the K-quants,
//     then one thread per output adds them in
//     order, then the optional bias and residual epilogue) for Q8_0,
//     Q4_0, Q5_0, Q4_1, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and NVFP4: kernels.dotLegacy and dotK (doc.go,
//     "Canonical order"). Weights are read in their ggml block layout
//     (the GGUF bytes) and decoded as weights.cuh describes.
//   - mmf.cuh: muser_mmf_<type> and muser_mmfv_<type> for F32, F16, BF16:
//     kernels.dotF32Row, dotF16Row, dotBF16Row: 16 accumulators (lane c mod
//     16, one thread each), the tree +8, +4, +2, +1 by warp shuffles.
//   - rowops.cuh: muser_rmsnorm, muser_add_rmsnorm, muser_rmsnorm_heads
//     (kernels.RMSNorm: the float64 sum of squares is one sequential chain;
//     every thread widens its squares into shared memory, one thread adds
//     them with the loads of the next 16 issued ahead of the additions;
//     the first two optionally quantize their output as muser_quant_q8_0
//     or, with bsums, as muser_quant_q8_k: the block's 256 threads hold
//     one super-block's 256 values and call the quantizer's own block
//     code, quant_q8_k_block), muser_silu_mul_quant (SiLUMul, then the
//     Q8_0, Q8_1 or Q8_K quantization),
//     muser_add, muser_add_bias (kernels.Add), muser_silu_mul
//     (kernels.SiLUMul, Exp32 in float64), muser_rope (the CPU engine's rotate,
//     the cos/sin table computed on the host by engine.Rope.Angles),
//     muser_kv_store_f16/_f32 (the infer/kvcache layout, ggml.F32ToF16),
//     muser_rope_kv_store (muser_rope of q and k, then the KV store),
//     muser_embed_<type> (ggml.Dequantize of one row per token).
//   - attention.cuh: muser_attn_scores_f16/_f32 and
//     muser_attn_scores_rows_f16/_f32, muser_attn_softmax_part and
//     muser_attn_softmax8, muser_attn_wsum_f16/_f32 and
//     muser_attn_wsum_rows_f16/_f32 with muser_attn_wsum_parts: the CPU
//     engine's attendTile (kernels.RoundF16s, DotF16Rows, Softmax,
//     AXPYF16Parts, or Dot and AXPYParts for an f32 cache),
//     over a batch of rows each with its own sequence's cache (Attention).
//     Both paths split Softmax over their three kernels: the scores
//     kernels write each query's maximum per 64 keys (M);
//     muser_attn_softmax8 (tiled) takes the maximum from those and writes
//     the exponentials (S) and float32(1/sum) (Inv);
//     muser_attn_softmax_part (decode) writes the exponentials of 1,024
//     positions a block and their float64 sum, from which the decode
//     weighted sums form float32(1/sum); the weighted sums multiply (and
//     round) each weight as they stage it.
//   - ropeattn.cuh: muser_rope_attn_f16/_f32, a decode batch's
//     muser_rope_kv_store and attention in one kernel for rows at most
//     attn::DSM = 4,096 positions long, each sequence's rows a run of at
//     most 16, heads of at most 128 dimensions (RoPEAttention): a thread
//     block per row and query head rotates its query and its KV head's
//     keys of the run, stores its row's K and V (the group's first head),
//     keeps the scores in shared memory, and
//     calls the decode path's functions where it can (attn_inv_of,
//     attn_weight, quant_q8_0_block), its chains in their orders.
//   - selftest.cuh: muser_test_* expose the device primitives to the GPU
//     tests; the forward pass never launches them.
//
// # Kernel ABI
//
// Every kernel's parameters in order (p a device address, i an int32, u a
// uint32, f a float32; "|0" where 0 may be passed), grid (x×y×z), block,
// and dynamic shared memory where it takes some. KernelTable holds the
// parameter lists, TestArtifacts checks them against the PTX, and the
// builders of launch.go compute the grids.
//
//	muser_quant_q8_0         p x, i n, i cols, p q, p d, p sum|0, p s1|0    n×⌈cols/256⌉, 256
//	muser_quant_q8_k         p x, i n, i cols, p q, p d, p bsums            n×(cols/256), 256
//	muser_round_f16, _bf16   p x, p y, i count                              ⌈count/256⌉, 256
//	muser_mmq_<type>         p W, i rows, i cols, p q, p d, p ext|0, p y, i n
//	                                                     ⌈rows/64⌉×⌈n/64⌉, 128,
//	                         shared Geom<T>::DYN bytes (mmqShared: 47 KiB for Q8_0 … 81 KiB for Q6_K)
//	muser_mmv_<type>         as mmq, p bias|0, p res|0   ⌈rows/R⌉×⌈n/8⌉, 128 (R 4 for NVFP4; 32-value
//	                         types: 4, 2, 1 for rows of ≤ 32, ≤ 64, more blocks; K-quants: 16, 8, 4,
//	                         2, 1 for rows of 1, 2, ≤ 4, ≤ 8, more super-blocks)
//	muser_mmf_<type>         p W, i rows, i cols, p x, p y, i n             ⌈rows/32⌉×⌈n/32⌉, 256
//	muser_mmfv_<type>        as mmf                                         ⌈rows/8⌉×⌈n/8⌉, 128
//	muser_embed_<type>       p W, i rows, i cols, p tokens, i n, p x        n, 256
//	muser_rmsnorm            p x, p rowidx|0, p dst, i n, i cols, p w, f eps, p q|0, p qd|0, p s1|0, p bsums|0
//	                                                                                  n, 256
//	muser_add_rmsnorm        p x, p o, p bias|0, p w, p dst, i n, i cols, f eps, p q|0, p qd|0, p s1|0, p bsums|0
//	                                                                                  n, 256
//	muser_rmsnorm_heads      p x, i n, i heads, i dim, i stride, p w, f eps           n×heads, 32
//	muser_add                p a, p b, p dst, i count                       ⌈count/256⌉, 256
//	muser_add_bias           p x, p bias, i n, i cols                       ⌈n·cols/256⌉, 256
//	muser_silu_mul           p gate, p up, p dst, i count                   ⌈count/256⌉, 256
//	muser_silu_mul_quant     p gate, p up, p dst, i n, i cols, p q, p qd, p s1|0, p bsums|0   n×⌈cols/256⌉, 256
//	muser_rope               p x, i n, i heads, i dim, i stride, i ropeDim, i neox, p cs   n, 256
//	muser_kv_store_f16, _f32 p k, p v, i n, i kvrow, p kc, p vc, p pos      n, 256
//	muser_rope_kv_store      p q, p k, p v, i n, i heads, i kvheads, i dim, i ropeDim, i neox,
//	                         p cs, p kc, p vc, p pos, i f16                 n, 256
//	muser_attn_scores_f16, _f32
//	                         p q, i heads, i kvheads, i dim, p kc, p pos, p tiles, p S, p M, i ld, f scale, i nkb
//	                         ntiles × kvheads·⌈group/gh⌉ × ⌈⌈(max pos+1)/64⌉/nkb⌉, 256 (nkb blocks of 64 keys a block),
//	                         shared 2·G·⌈dim/4⌉·68·4 bytes (G = 4, 2 or 1 lane groups, as fit in 48 KiB)
//	muser_attn_scores_rows_f16, _f32
//	                         p q, i heads, i kvheads, i dim, p kc, p pos, p S, p M, i ld, f scale
//	                         ⌈(max pos+1)/128⌉ × n × kvheads·⌈group/8⌉, 128 (dim ≤ 128)
//	muser_attn_softmax_part  p S, p M, p part, i ld, i pl, p pos, i heads
//	                         ⌈(max pos+1)/1024⌉ × n × heads, 256
//	muser_attn_softmax8      p S, p M, p Inv, i ld, p pos, i n, i heads     ⌈n·heads/32⌉, 256
//	muser_attn_wsum_f16, _f32
//	                         p S, p Inv, i ld, p vc, p pos, p tiles, p out, i heads, i kvheads, i dim
//	                         ntiles × kvheads·⌈group/gh⌉ × ⌈dim/64⌉, 128,
//	                         shared 2·32·(64 + 68)·4 bytes
//	muser_attn_wsum_rows_f16, _f32
//	                         p S, p part, i ld, i pl, p vc, p pos, p out, p Y, i np, i pc, i ng,
//	                         i heads, i kvheads, i dim
//	                         n·ng × kvheads·⌈group/8⌉ × ⌈dim/8⌉, 288
//	muser_attn_wsum_parts    p Y, p pos, p out, i heads, i dim, i np, i pc, p q|0, p d|0, p s1|0
//	                                                                        heads × n, 256
//	muser_rope_attn_f16, _f32
//	                         p q, p k, p v, i heads, i kvheads, i dim, i ropeDim, i neox, p cs, p kc, p vc,
//	                         p pos, p first, p out, f scale, p q|0, p d|0, p s1|0
//	                                                                        heads × n, 512 (dim ≤ 128, pos < 4,096)
//	muser_test_exp32         p x, p y, i count                              ⌈count/256⌉, 256
//	muser_test_f32_bits      u base, i count, p f16, p bf16, p ra, p ni, p r16, p ru
//	                                                                        ⌈count/256⌉, 256
//	muser_test_small_tables  p f16, p f16a, p ue                            256, 256
//	muser_test_softmax_weights
//	                         p S, p part, i ld, i pl, p pos, i heads, i round
//	                                                                        n × heads, 32
//
// For the attention, group = heads/kvheads, gh = min(group,
// AttnQueries(dim)) (64); the batch-of-rows ABI (kc, vc, pos, tiles, S,
// M, float [n][heads][⌈ld/64⌉] followed, 8-byte aligned, by the decode
// softmax's part, float64 [n][heads][pl = ⌈ld/1024⌉], and the decode
// weighted sum's part sums Y, float [n][heads][np = ⌈ld/256⌉][dim]
// (Attention.MBytes), and the tiled kernels' Inv, float [n·heads]) is
// attention.cuh's and Attention's, which launches the _rows scores (head
// dimension ≤ 128; a tiled scores kernel for a larger one),
// muser_attn_softmax_part and the _rows weighted sum (pc of a row's parts
// a thread block, ng = ⌈⌈(max pos+1)/256⌉/pc⌉ blocks a row, then
// muser_attn_wsum_parts where ng > 1 or where it quantizes the output
// for the output product, Attention.OutAct: q, d and s1 as
// muser_quant_q8_0's of the output rows) when every tile is one row
// (decode), the tiled ones otherwise.
//
// The activations of a product are quantized per token row as ActOf says
// (QuantizeActs); every kernel's result for a token depends on that token's
// row only, so batches and tiles never change a bit.
//
// # NVFP4
//
// NVFP4 (ggml type 40) is decoded as infer/ggml's and infer/kernels' NVFP4
// work defines it (ggml.E2M1Doubled, ggml.UE4M3Half and the canonical
// order in kernels' doc.go, which are ggml's): a block of 64 values is 36
// bytes, four UE4M3 scales d[4], one per 16-value sub-block, then qs[32];
// in sub-block s, byte qs[8s+j] holds element j in its low nibble and
// element j+8 in its high nibble. A nibble indexes the doubled E2M1 table
// {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}; a scale byte
// decodes to half its UE4M3 value (0x00, 0x80 and 0x7F give 0, bit 7 is
// ignored). Activations are Q8_0. The dot product: for each block in
// order, for each sub-block s = 0..3: isum = Σ v·a (exact), t = ws·da (da
// the scale of Q8_0 block 2b + s/2), p = t·float32(isum), acc = acc + p.
// The tests compare with ggml.Dequantize and kernels.MatMul.
//
// # Performance notes
//
// The prefill products stream 64 × 64 tiles through shared memory with
// int8 tensor-core sums and a float epilogue of three operations per
// output and block (the canonical order's, unavoidable); the decode
// products split the reduction over threads and keep the ordered sum to
// one add per block. Exactness fixes some chains: an RMSNorm sums its
// squares in one float64 chain per row; a softmax in 8 float64 chains per
// row and head; an attention output adds its V rows one position after
// the other, so decoding one sequence at a long context is bound by that
// chain's latency (thousands of dependent adds per layer), and many
// sequences decoded together share it. The tiled softmax reads each
// score once and writes it once: the maximum comes from the scores
// kernels' per-64-key maxima, the scaling happens in the weighted sums'
// staging. Launch geometry is a first choice, untuned on the GPU.
//
// # GPU tests
//
// The kernel suite (suite_test.go) runs every kernel against its Go
// definition, bit for bit, on random data with edge values: the
// quantizers against ports of kernels' quantQ8_0 and quantQ8_K (NaN and
// infinity included), both matrix-product kernels of every weight type
// against kernels.MatMul, the embeddings against ggml.Dequantize, the row
// operations against kernels.RMSNorm, Add, SiLUMul and engine's rotate,
// the KV stores against ggml.F32ToF16, the attention against
// the CPU engine's attendTile, its sequence of kernels calls over a batch that mixes a
// prefill, a chunk after a prefix, a long decode and a first token. A
// mismatch reports the first index that differs, both values in hex and
// the shape. gpu_test.go runs it on a GPU at the models' shapes and at
// ragged ones, sweeps Exp32, the f16/bf16 conversions and the integer
// roundings over all 2^32 float32 inputs, runs a part of the suite through
// the PTX image, and times the kernels (BenchmarkGPU*). It skips where no
// CUDA driver or GPU is present (MUSER_REQUIRE_CUDA=1 makes that a
// failure). On a GPU machine:
//
//	go test -c -o cukernels.test ./infer/engine/cuda/internal/cukernels
//	./cukernels.test -test.run GPU -test.v
//
// # Tests without a GPU
//
// emu_test.go runs the same suite on the host: testdata/hostemu/emu.cpp
// compiles muser.cu with g++ over simt.h, an execution model in which
// every CUDA thread is an OS thread, __syncthreads a barrier, and each
// warp-wide operation (shuffles, ballots, reductions, the integer mma with
// the PTX fragment layout) an exchange among the warp's 32 threads; the
// kernels' own code runs, indexing and synchronisation included, at small
// ragged shapes. What it cannot show is a difference between a GPU
// instruction and its C++ stand-in; the GPU tests do.
//
// hostemu_test.go compiles common.cuh and weights.cuh for the CPU with g++
// (testdata/hostemu, through a small shim of the CUDA intrinsics) and
// checks their pure functions bit for bit against the Go definitions: the
// f16 and bf16 conversions, roundAway and nearestInt, Exp32, NVFP4's scale
// decoding, every weight type's dequantization (ggml.Dequantize) and, with
// the words and scales the matrix products decode, every family's
// canonical dot product (kernels.MatMul). Both skip where g++ is missing
// (MUSER_REQUIRE_GXX=1 makes that a failure).
package cukernels
