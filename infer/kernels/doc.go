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
// the weight type needs (as llama.cpp does): Q8_0 for Q4_0, Q5_0, Q8_0 and
// NVFP4; Q8_1 for Q4_1 and Q5_1; Q8_K for Q2_K … Q6_K; f16 for F16; bf16
// for BF16; F32 weights take the activations as they are. The quantized values
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
// where the product is exact, where fused and unfused agree: f16 × f16
// always; bf16 × bf16 (BF16 weights, whose activations are rounded to
// bf16) where the operands' exponent ranges keep every product in
// float32's normal range (bf16exact.go).
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
//   - NVFP4 (activations Q8_0, two Q8_0 blocks per 64-value NVFP4 block):
//     for each block b in order and each of its sub-blocks s = 0..3 in
//     order, isum = Σ_{j<16} v_j·a_j over the sub-block's 16 values (v
//     twice the E2M1 value, ggml's kvalues table, an integer in [−12, 12];
//     a the int8 activations of the same columns), t = ws·da, p =
//     t·float32(isum), acc = acc + p. ws is the sub-block's UE4M3 scale
//     byte decoded with the factor ½ that undoes the doubling of v
//     (ggml.UE4M3Half: m·2^−10 or (8+m)·2^(e−11), 0 for 0x7F), and da the
//     scale of Q8_0 block 2b + s/2. t is exact (ws has at most 4
//     significant bits, da 11, and no product leaves float32's normal
//     range), so ws·da and da·ws are the same number; p and the sum round.
//     This is ggml's ggml_vec_dot_nvfp4_q8_0_generic, whose results the
//     tests match bit for bit.
//   - F32, F16, BF16: 16 accumulators; element c (in order) does
//     acc[c mod 16] = acc[c mod 16] + w_c·x_c (product rounded; for F16 it
//     is exact); then acc[l] = acc[l] + acc[l+8] for l < 8, then +4, +2,
//     +1; the result is acc[0]. Dot and DotF16 use the same order.
//
// dw, mw, dmin are the weight block's f16 fields widened exactly; da is the
// activation block's scale (f16 widened for Q8_0/Q8_1, float32 for Q8_K).
// These orders are part of the engine's numerics version: any change to
// them must bump NumericsVersion, which the engine folds into its identity
// (for example "muser-cpu/1" → "muser-cpu/2").
//
// Results are bit-identical across variants for all inputs without NaN;
// where a NaN is involved only "is NaN" is promised, not its payload.
// Activations that are infinite or NaN quantize to 0 (ggml's C leaves that
// case undefined).
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
// # Instruction sets and kernels
//
// On amd64 the package detects the CPU at start-up (golang.org/x/sys/cpu).
// With AVX-512 F/BW/DQ/VL and VNNI (and AVX2, FMA, F16C) it uses the
// AVX-512 assembly (matmul_amd64.s and rawt_k_amd64.s, generated by
// internal/asmgen; quant_amd64.s, exp_amd64.s and vec_amd64.s by hand). With AVX2, FMA and
// F16C only, it uses AVX2 assembly (also generated, plus
// vec_avx2_amd64.s and matmul_avx2_amd64.s) for Dot, DotF16, AXPY,
// AXPYF16, the Rows helpers and the raw-block kernels of Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q4_K, Q5_K and Q6_K — used for every batch size, as AVX2 has
// no panel kernels; Q4_K, Q6_K, Q5_0 and Q8_0 batches of 2 tokens or more
// take multi-token raw-block kernels (8 rows × up to 8 tokens, the quant
// bytes transposed in registers; VPMADDUBSW int16 sums of at most 16
// products of 15·128 (Q4_K, 30720), 4 of 63·128 (Q6_K, 32256), 8 of 31·128
// (Q5_0, 31744) or 2 of 128·127 (Q8_0, 32512: |w| against the activation
// given w's sign, whose magnitude the quantizer keeps at 127) cannot
// saturate, and VPMADDWD widens them, for the K-quants by the row's
// scale) —
// and for F16, F32 and BF16 weights (batches: 2 rows × up to 3 tokens,
// each half-row widened once for the 3 tokens; 4 rows × 1 token with
// SetMultiToken(false); one token of F16 or BF16 weights with columns a
// whole number of 16 reads the 4 rows one after the other,
// f16_avx2_amd64.s, as the AVX-512 decode kernel below does with 8),
// and the portable Go code for the rest (Q2_K, Q3_K, NVFP4, the activation
// quantizers, Exp32). Every other CPU and architecture runs the portable
// code.
// Where the CPU also has AMX int8 tiles and Linux grants the process
// their state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once at start-up),
// the variant is ISAAMX: the AVX-512 code plus AMX kernels for Q8_0
// batches of 16 tokens or more (amx_amd64.s by hand, the weight packing
// generated into matmul_amd64.s; the Go assembler has
// no AMX mnemonics, so the tile instructions are spelled as bytes). Each
// 16-row group of weights is packed once per call into tile layout (block
// by block, tile row j holding bytes 4j..4j+3 of every row: the same
// transposition as the VNNI kernels'), and multiplied one block at a
// time: tdpbssd gives the 16×16 exact int32 block sums Σ w·a (signed ×
// signed, no offset), which are stored and then scaled and added in the
// canonical order by AVX-512 while the tile unit computes the next block.
// Pairs of row groups take pairs of whole 16-token groups at once (four
// result tiles from two activation and two weight tiles, the
// activations copied once per call into tile rows, the 32×32
// accumulators in memory); a last unpaired token group or row group
// takes the 16×16 kernel (accumulators in registers). The tokens after
// the last whole group take the one-token
// raw-block kernel. Q4_K, Q5_0 and Q6_K and the float types have no AMX
// kernels yet.
// SetISA forces a variant, for tests and benchmarks; the environment
// variable MUSER_ISA (generic, avx2, avx512, amx) caps the variant for
// the whole process. All variants give identical bits, so the variant is
// not part of the engine identity.
//
// The AVX-512 matrix kernels come in these kinds, chosen by batch size; all
// compute the canonical order, so the choice never changes a bit:
//
//   - Raw-block kernels (n ≤ 4 tokens: decode) read the weight blocks in
//     place for 8 rows at a time (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K,
//     Q5_K, Q6_K), rebuild the values in registers, take VNNI dot products and
//     reduce them so that vector lane r is output row r. They prefetch the
//     8-row group two groups ahead into L2 (PREFETCHT1: prefetching into
//     L1 measured at half the rate from memory on Zen 4), pack the 8 rows'
//     f16 scales from scalar loads rather than a VPGATHERDD (a quarter of
//     the Q8_0 kernel's time), and where the CPU has GFNI the Q6_K kernel
//     rebuilds its 6-bit values with VGF2P8AFFINEQB bit-matrix transforms
//     (q6_KDot8GFNI). The AVX2 raw-block kernels prefetch and load scales
//     the same way.
//   - Multi-token raw-block kernels (Q8_0, every batch of 2 tokens or
//     more: decode of several streams and prefill; Q5_0, Q4_K and Q6_K,
//     the other types of a Q4_K_M file, batches of 2 to 128 tokens) read
//     each block of a 16-row group once for up to 8 tokens: they
//     transpose the 16 rows' quant bytes in registers into the panel
//     layout below (512-bit vectors, lane r = row r), so that every token
//     takes VNNI dots against broadcast activation bytes with no
//     horizontal reduction. Q5_0 adds each value's fifth bit (copied to
//     its byte by VPSHUFB and tested) after the transpose; Q4_K splits the
//     transposed bytes' nibbles into its two groups of 32 and Q6_K merges
//     ql and qh nibbles into its groups of 16, each group's dot times the
//     row's integer scale (a lane-wise multiply) summed into isum; the
//     mins (Q4_K) and Q6_K's −32 offset are Σ_g m_g·(Σ of the group's
//     activations), from the scale bytes as int16 pairs against pairs of
//     activation sums (VPDPWSSD). Every integer is exact, so the float
//     steps are those of the canonical order. One token keeps the kernel
//     above.
//   - Panel kernels (batches over 4 tokens of the types without
//     multi-token kernels, over 128 of Q5_0, Q4_K and Q6_K: prefill; and
//     every batch of Q2_K and Q3_K) unpack 8 rows × up to 1024
//     columns once into a transposed panel whose vector k holds bytes 4k..4k+3 of each row, so
//     that VNNI dots against broadcast activation bytes accumulate each
//     row's sum in its own lane with no horizontal reduction; the panel is
//     reused by every token, eight tokens per pass.
//   - NVFP4 raw-block kernels (every batch size) read each block of a
//     16-row group once for up to 8 tokens, like the multi-token Q8_0
//     kernels: they gather the 16 rows' four UE4M3 scale bytes and decode
//     them exactly (float32 bits (v<<20) + 119<<23 for a normal byte v,
//     float32(v)·2^−10 for a subnormal one, 0 for 0x7F), transpose the
//     rows' 32 packed quant bytes into the panel layout, and only then
//     split each dword's nibbles (four values 4m.. and four values 8+4m..
//     of one sub-block) and map them through a VPSHUFB table to v+12
//     (unsigned, so that VNNI can multiply them; −12·Σa per sub-block
//     restores the signed sum, exactly). Rows past the last whole group of
//     16 take the portable code.
//   - Float weights (F16, F32, BF16) run a 4-row × 4-token kernel whose 16
//     lanes are the canonical accumulators. A BF16 batch of 4 tokens or
//     more takes fused multiply-adds (as F16 does) for each group of 4
//     tokens whose every product with the tile's weights is exact: a
//     bf16 × bf16 product has at most 16 significant bits, so it rounds
//     only outside float32's normal range, [2^−126, 2^128). The tile's
//     smallest and largest exponent fields (an AVX-512 scan of its 16
//     rows, which the batch's tokens then reuse from cache) and each
//     token's (taken when its activations are rounded) bound every
//     product; a group that may leave the range (tiny or huge values,
//     subnormals, infinities, NaN) takes the multiply-then-add kernel.
//     On AMD CPUs with AVX512_BF16, where the rows are whole 32-column
//     groups, those groups take VDPBF16PS instead (32 products per
//     instruction, twice an FMA's 16; on an Intel Sapphire Rapids Xeon it
//     measured slower than the FMAs, so Intel CPUs keep them; the tests
//     run both kernels wherever the CPU has the instruction): per 32-bit
//     lane it adds the odd
//     word's product, then the even word's, each rounded once, with
//     subnormal inputs taken as zero and subnormal results flushed. The
//     weights are permuted as they load (VPERMW) and the activations are
//     packed once per call so that lane l's pair is columns l and l+16:
//     the canonical order. The stricter range check (bf16DotExact: no
//     subnormal operand, the smallest exponent fields adding up to at
//     least 142, so every product and every sum is a multiple of 2^−126
//     and none is subnormal) decides per group of 4 tokens; a start-up
//     probe (bf16DotProbe) checks that the CPU computes the instruction
//     as the SDM defines it, on a tile where other orders or roundings
//     give other bits. With AVX-512 every float batch takes 32-row work
//     items, not 16: each activation fetched from L2 serves twice the rows.
//     Batches of more than 4 tokens take rows of 4,096 columns or more in
//     chunks of 512 (each lane's sums carried from chunk to chunk in
//     memory, its additions in the same column order), so that a chunk of
//     4 tokens' activations (8 KiB) stays in L1 while the tile's row
//     quads use it.
//   - One token of BF16 weights from NewMatrix on an AMD CPU with
//     AVX512_BF16, columns a whole number of 32, runs the 8-row kernels
//     below on VDPBF16PS (32 columns a step in the pair layout, as above) where bf16DotExact accepts the matrix's exponent
//     range (scanned once, on the first call, and cached in the Matrix)
//     and the token's.
//   - One token of F16 or BF16 weights (decode) whose columns are a whole
//     number of 16 runs an 8-row kernel (f16_amd64.s), each row's 16
//     accumulators in one register, the 8 rows reduced together by the
//     fixed tree. A row's adds form one chain of dependent steps, which
//     bounds a long row, so the kernels (F16; BF16 by multiply, then add;
//     BF16 on VDPBF16PS) keep several chains in flight, each row still in
//     column order. On rows of fewer than 3,072 columns (floatLockCols)
//     the leapfrog kernels run row k-1's second half beside row k's first
//     half; two pointers half a row apart are two streams, which the
//     hardware prefetchers follow at about half the rate of one, so one
//     software prefetch sweeps the 8 rows in address order a fixed
//     distance ahead (3 KiB), one line a step. On longer rows the lockstep
//     kernels run the 8 rows side by side, a step of every row at a time:
//     the activations are loaded once a step for all 8 (the leapfrog
//     kernels read them at two places, which on long rows no longer stay
//     in L1), and each row is prefetched 1 KiB ahead within itself
//     (docs/benchmarks.md, "F16 and BF16 decode from memory"). The AVX2
//     variant's one-token kernels (4 rows, f16_avx2_amd64.s) are leapfrog
//     kernels on every row length.
//
// The activation quantizers (Q8_0, Q8_1, Q8_K, and the rounding to bf16
// with each token's exponent range) and Dot, DotF16, AXPY, AXPYF16 have
// AVX-512 versions with the same bits; the rounding to f16 is RoundF16s
// (F16C where the CPU has it).
//
// # Vector helpers
//
// RMSNorm, SiLUMul, Softmax, Dot, AXPY, DotF16, AXPYF16, Add, Scale and the
// f16 conversions are deterministic and documented with their order of
// operations. DotF16Rows and AXPYF16Rows batch DotF16 and AXPYF16 over the
// rows of a K or V cache (one call per head instead of one per position)
// with exactly the same bits. Exp32 is a float64-only exponential used by SiLUMul and
// Softmax instead of math.Exp, whose amd64 assembly uses FMA when the CPU
// has it and so can differ between machines.
//
// # Attention
//
// ScoresF16 and WeightedSumF16 are DotF16Rows and AXPYF16Rows for a tile
// of queries that share one KV head (the query heads of a GQA group, for
// a few consecutive tokens): each K and V row is loaded, and widened from
// f16, once for the whole tile instead of once per query. Every query's
// arithmetic is unchanged, so a query's bits do not depend on its tile:
//
//   - ScoresF16 (AVX-512, head dim a multiple of 16, up to 256) widens 16
//     K rows into a scratch block, then for each query accumulates the
//     16 keys' canonical lane sums (lane i mod 16, product rounded, then
//     added) in 16 registers and sums all 16 with one transposing
//     reduction that applies to each key exactly the tree +8, +4, +2, +1;
//     a permutation restores key order and the scale multiply follows.
//     Keys past the last whole block of 16 use DotF16Rows.
//   - WeightedSumF16 (AVX-512, head dim a multiple of 64) keeps 64
//     outputs of 4 queries in 16 registers while the V rows all four
//     attend to stream past, each widened once; each query then finishes
//     its own remaining rows, and queries beyond a multiple of 4 run
//     alone, with AXPYF16Rows, in the same position order. It does so
//     per part of AttnPart positions (each part's chains from +0) and
//     adds each part's sums to the outputs in order: AXPYF16Parts per
//     query.
//   - RoundF16s rounds to binary16 precision with the F16C conversion
//     (round to nearest even) and back, which equals ggml's conversion
//     for every non-NaN input; a slice holding a NaN is redone by the
//     portable code, which writes ggml's canonical NaN.
//
// AVX2 has the same two tile kernels in 8-lane registers: ScoresF16 takes
// blocks of 4 keys (a key's 16 canonical lanes in two registers, the
// tree's +8 step adding the two, then the same transposing steps), and
// WeightedSumF16 keeps 16 outputs of 4 queries (head dim a multiple of
// 16). The portable variant runs the row kernels per query, with the same
// bits.
package kernels
