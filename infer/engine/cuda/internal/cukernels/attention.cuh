// attention.cuh: causal grouped-query attention over per-sequence KV
// caches, exactly as the CPU engine's attendTile (infer/engine/cpu)
// computes it.
//
// # A batch of rows (the ABI shared by the kernels)
//
// Row i (i < n) of the batch is one token: its query q[i][heads·dim], its
// position pos[i] (it attends to positions 0..pos[i] of its own sequence),
// and its sequence's cache for this layer: kc[i], vc[i] are the device
// addresses of element 0 of the layer's K and V cache (infer/kvcache
// layout: position p at element p·kvrow, kvrow = kvheads·dim, heads one
// after another). The rows' own K and V must already be stored
// (muser_kv_store_*). tiles[0..ntiles] are row boundaries: tile t is rows
// tiles[t] .. tiles[t+1]-1, which must share kc/vc and have consecutive
// positions. A thread block of the scores and tiled weighted-sum kernels
// computes one tile's queries for gh = min(group, 64) of the query heads
// of one KV head (blockIdx.y = kvh · ceil(group/gh) + part), at most
// attn::QB = 64 queries, so a tile holds at most 64/gh rows (launch.go's
// AttnTiles builds them); how rows are cut into tiles never changes a
// result. S is scratch: row i, head h's scores at S[(i·heads + h)·ld + j],
// ld > every pos[i]. M is scratch too: float [n][heads][mb] with mb =
// attn_mb(ld) = ⌈ld/64⌉, the scores kernels' maximum of each row and
// head's scores in each block of 64 keys (M[(i·heads + h)·mb + j/64]),
// and for the decode kernels the softmax's float64 sums per block of
// attn::RSP = 1,024 positions after them (part, [n][heads][pl], pl ≥
// ⌈ld/1,024⌉). The tiled kernels have one more, Inv, float [n·heads],
// the softmax's float32(1/sum) of each row and head (Inv[i·heads + h]).
//
// # Order of operations (per row i, head h, its KV head h/group)
//
//   f16 cache:  q' = f16(q) (kernels.RoundF16s);
//               s_j = DotF16(K_j, q')·scale for j ≤ pos (16 accumulators
//               lane j mod 16, then the tree; the products f16 × f16 are
//               exact, so they are fused; these kernels are ExactFMA);
//               Softmax(s) (kernels.Softmax); w_j = f16(s_j);
//               per part k of attn::RCH = 256 positions (kernels.AttnPart),
//               p_k = +0; p_k = p_k + w_j·V_j for j in the part, ascending
//               (fused: exact); y = p_0, then y = y + p_k for k = 1, 2, …
//               over the parts that hold positions ≤ pos.
//   f32 cache:  the same with Dot and AXPY: no rounding of q or w, every
//               product rounded before it is added.
//
// Softmax is mx = max_j s_j, e_j = Exp32(s_j − mx), sum = Σ e_j in float64
// (8 chains, j into chain j mod 8, then the tree +4, +2, +1), s_j =
// e_j·float32(1/sum). Both paths split it over their three kernels: the
// scores kernel takes the maximum over each of its blocks of 64 keys (M);
// the tiled path's muser_attn_softmax8 the maximum of those, the e_j (into
// S) and float32(1/sum) (Inv); the decode path's muser_attn_softmax_part
// the maximum and the e_j of 1,024 positions a block, with their sum,
// and its weighted sum forms float32(1/sum) from those sums
// (attn_rows_inv); each weighted sum multiplies each e_j by
// float32(1/sum) (and rounds it to f16) as it stages the weights.
//
// scale is float32(1/sqrt(float64(dim))), passed by the host.
//
// Two facts the kernels rely on. An accumulator that starts at +0 and only
// ever has values added to it in round-to-nearest is never −0 (x + (−x)
// and +0 + (−0) are +0), so adding a +0 product (0 × 0 of zero padding)
// leaves it unchanged: a lane or dimension padded with zeros in both
// operands computes the same bits as one left out. And each of an
// output's chains is walked in its order by one thread, whatever thread,
// tile or block that is, as are the additions of the parts' sums.
#pragma once

#include "common.cuh"

namespace attn {
constexpr int QB = 64;       // queries per thread block (scores and tiled weighted sum)
constexpr int SKB = 64;      // keys per scores block
constexpr int SLD = 68;      // padded row of the scores kernel's staged Q and K (floats)
constexpr int SMEMF = 12288; // floats of shared memory the scores kernel may stage
constexpr int WKT = 32;      // positions per weighted-sum tile
constexpr int WDB = 64;      // dimensions per weighted-sum block
constexpr int WLD = 68;      // padded row of the staged weights
constexpr int RSP = 1024;    // positions per block of the decode softmax
constexpr int RCH = 256;     // positions per part of the weighted sum (kernels.AttnPart), a decode chunk
constexpr int RWT = 288;     // threads of the decode weighted sum (a chain warp, 256 staging)
constexpr int MAXD = 352;    // the largest head dimension (launch.go's MaxAttnDim)
} // namespace attn

// attn_mb is the row of M (the scores' maxima per 64-key block) for
// scores of row ld: one value per block of attn::SKB keys.
MUSER_DEV int attn_mb(int ld) { return (ld + attn::SKB - 1) / attn::SKB; }

// attn_ninf is −∞, where every maximum starts.
MUSER_DEV float attn_ninf() { return -__uint_as_float(0x7f800000u); }

// attn_lanes16 is a score from its 16 lane sums (DotF16's and Dot's
// lanes, l = i mod 16): the tree +8, +4, +2, +1, times scale. It leaves
// acc changed.
MUSER_DEV float attn_lanes16(float (&acc)[16], float scale) {
#pragma unroll
	for (int l = 0; l < 8; l++) acc[l] = f32add(acc[l], acc[l + 8]);
#pragma unroll
	for (int l = 0; l < 4; l++) acc[l] = f32add(acc[l], acc[l + 4]);
	acc[0] = f32add(acc[0], acc[2]);
	acc[1] = f32add(acc[1], acc[3]);
	return f32mul(f32add(acc[0], acc[1]), scale);
}

// attn_block_max returns, to every thread of a block of NW warps, the
// largest of the threads' x by fmaxf in any order (attn_scores_max says
// why that is the CPU's maximum); wm is NW floats of shared memory.
// Every thread of the block calls it.
template <int NW> MUSER_DEV float attn_block_max(float x, float* wm) {
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
	for (int off = 16; off >= 1; off /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
	if (lane == 0) wm[warp] = x;
	__syncthreads();
	x = wm[0];
#pragma unroll
	for (int w = 1; w < NW; w++) x = fmaxf(x, wm[w]);
	return x;
}

// attn_block_sum returns, to every thread of a block of NW warps, the
// float64 sum of the threads' x in an order of its own (the same for
// every thread); ws is NW doubles of shared memory. Every thread of the
// block calls it.
template <int NW> MUSER_DEV double attn_block_sum(double x, double* ws) {
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
	for (int off = 16; off >= 1; off /= 2) x = f64add(x, __shfl_xor_sync(0xffffffffu, x, off));
	if (lane == 0) ws[warp] = x;
	__syncthreads();
	x = ws[0];
#pragma unroll
	for (int w = 1; w < NW; w++) x = f64add(x, ws[w]);
	return x;
}

// attn_rows4 is the number of values of one lane group: the dimensions i
// ≡ g (mod 4) of a head of dim are i = 4r + g, r < attn_rows4(dim).
MUSER_DEV int attn_rows4(int dim) { return (dim + 3) / 4; }

// attn_groups is how many of the four lane groups the scores kernel
// stages at once: 4, 2 or 1, as many as fit in attn::SMEMF floats.
MUSER_DEV int attn_groups(int dim) {
	const int per = 2 * attn_rows4(dim) * attn::SLD;
	return 4 * per <= attn::SMEMF ? 4 : 2 * per <= attn::SMEMF ? 2 : 1;
}

// AttnCTA is the part of the batch one thread block computes.
struct AttnCTA {
	int lo, hi;  // the tile's rows
	int kvh;     // KV head
	int group;   // query heads per KV head
	int g0, gn;  // query heads g0 .. g0+gn-1 of the group
	int nq;      // queries: (hi-lo)·gn
	// row and head of query qi < nq
	MUSER_DEV int row(int qi) const { return lo + qi / gn; }
	MUSER_DEV int head(int qi) const { return kvh * group + g0 + qi % gn; }
};

MUSER_DEV AttnCTA attn_cta(const int* tiles, int heads, int kvheads) {
	AttnCTA c;
	c.group = heads / kvheads;
	const int gh = min(c.group, attn::QB);
	const int hch = (c.group + gh - 1) / gh;
	c.lo = tiles[blockIdx.x];
	c.hi = tiles[blockIdx.x + 1];
	c.kvh = blockIdx.y / hch;
	c.g0 = (blockIdx.y % hch) * gh;
	c.gn = min(gh, c.group - c.g0);
	c.nq = min(attn::QB, (c.hi - c.lo) * c.gn);
	return c;
}

// attn_scores_max writes the maxima mx[a] of queries 4·tq + a over one
// block of keys, blk, to M (attn_scores): the 16 threads of a query (the
// same tid/16: one half of a warp; tid%16 = tk its keys) combine theirs by
// shuffles xor 8, 4, 2, 1, which stay within the half, and thread tk = 0
// writes them at M[rh·mb + blk], rh the query's row·heads + head (rh[qi],
// −1 past the block's queries). Every thread of the block must call it.
//
// This maximum may be taken in any order: fmaxf returns its other operand
// when one is NaN, and every value starts at −∞, so no value is ever NaN
// and the result is the largest non-NaN score (−∞ if none), whatever the
// order, but for the sign of a zero maximum (+0 or −0), which changes
// s_j − max only for s_j = ±0, to ±0, and Exp32(±0) = 1. That is the
// CPU's maximum (kernels.Softmax) for rows without NaN; a row with a NaN
// score has every e_j sum NaN and every weight NaN, on both sides.
MUSER_DEV void attn_scores_max(float* __restrict__ M, float (&mx)[4], const int* rh, int tq, int tk, int mb, int blk) {
#pragma unroll
	for (int a = 0; a < 4; a++)
#pragma unroll
		for (int off = 8; off >= 1; off /= 2) mx[a] = fmaxf(mx[a], __shfl_xor_sync(0xffffffffu, mx[a], off));
	if (tk != 0) return;
#pragma unroll
	for (int a = 0; a < 4; a++) {
		const int r = rh[4 * tq + a];
		if (r >= 0) M[(size_t)r * mb + blk] = mx[a];
	}
}

// attn_stage_q_vec and attn_stage_k_vec stage every lane group of a
// block's queries and of its keys at once (attn_groups(dim) = 4) with
// 16-byte loads, where dim is a multiple of 8 and the rows are 16-byte
// aligned (attn_scores checks): query x's dimensions 4c..4c+3 (one float4)
// go to r = c of lane groups 0..3, key x's 8 dimensions 8c..8c+7 (one
// uint4 of f16, or two float4) to r = 2c and 2c+1. Each element gets the
// conversion of the scalar path (round_f16_again for a query of an f16
// cache, f16_to_f32_arith for an f16 key: the values of f16_to_f32 for
// every input but a NaN), zeros for a query x with qoff[x] < 0 and a key past
// lastPos. Threads take x = e % 64, so a warp's shared stores are 32
// consecutive floats. Each thread issues its loads before the first
// conversion. The queries are staged once for all the blocks of keys a
// thread block takes, the keys once per block.
template <bool F16>
MUSER_DEV void attn_stage_q_vec(float* __restrict__ Qs, int rstride, const float* __restrict__ q, const int* qoff,
                                int dim) {
	using namespace attn;
	const int tid = threadIdx.x;
	const int nq4 = dim / 4;
	for (int e0 = tid; e0 < QB * nq4; e0 += 4 * 256) {
		float4 v[4];
#pragma unroll
		for (int u = 0; u < 4; u++) {
			const int e = e0 + 256 * u, x = e % QB, c = e / QB;
			v[u] = float4{0.0f, 0.0f, 0.0f, 0.0f};
			if (e < QB * nq4 && qoff[x] >= 0) v[u] = *(const float4*)(q + qoff[x] + 4 * c);
		}
#pragma unroll
		for (int u = 0; u < 4; u++) {
			const int e = e0 + 256 * u, x = e % QB, c = e / QB;
			if (e >= QB * nq4) break;
			const float a[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
#pragma unroll
			for (int g = 0; g < 4; g++) Qs[g * rstride + c * SLD + x] = F16 ? round_f16_again(a[g]) : a[g];
		}
	}
}

template <bool F16>
MUSER_DEV void attn_stage_k_vec(float* __restrict__ Ks, int rstride, const unsigned short* k16, const float* k32,
                                size_t kcol, int kvrow, int j0, int lastPos, int dim) {
	using namespace attn;
	const int tid = threadIdx.x;
	const int nk8 = dim / 8;
	for (int e0 = tid; e0 < SKB * nk8; e0 += 2 * 256) {
		uint4 w[2][F16 ? 1 : 2];
#pragma unroll
		for (int u = 0; u < 2; u++) {
			const int e = e0 + 256 * u, x = e % SKB, c = e / SKB, j = j0 + x;
#pragma unroll
			for (int h = 0; h < (F16 ? 1 : 2); h++) {
				w[u][h] = uint4{0u, 0u, 0u, 0u};
				if (e < SKB * nk8 && j <= lastPos) {
					const size_t o = (size_t)j * kvrow + kcol + 8 * c;
					w[u][h] = F16 ? *(const uint4*)(k16 + o) : *(const uint4*)(k32 + o + 4 * h);
				}
			}
		}
#pragma unroll
		for (int u = 0; u < 2; u++) {
			const int e = e0 + 256 * u, x = e % SKB, c = e / SKB;
			if (e >= SKB * nk8) break;
			float k[8];
			if (F16) {
				const unsigned hw[4] = {w[u][0].x, w[u][0].y, w[u][0].z, w[u][0].w};
#pragma unroll
				for (int t = 0; t < 4; t++) {
					k[2 * t] = f16_to_f32_arith(hw[t] & 0xffffu);
					k[2 * t + 1] = f16_to_f32_arith(hw[t] >> 16);
				}
			} else {
#pragma unroll
				for (int h = 0; h < (F16 ? 1 : 2); h++) {
					k[4 * h] = __uint_as_float(w[u][h].x), k[4 * h + 1] = __uint_as_float(w[u][h].y);
					k[4 * h + 2] = __uint_as_float(w[u][h].z), k[4 * h + 3] = __uint_as_float(w[u][h].w);
				}
			}
#pragma unroll
			for (int t = 0; t < 8; t++) Ks[(t % 4) * rstride + (2 * c + t / 4) * SLD + x] = k[t];
		}
	}
}

// attn_scores: grid (ntiles, kvheads·ceil(group/gh), ceil(⌈(max pos +
// 1)/64⌉/nkb)), block 256, dynamic shared memory
// 2·attn_groups(dim)·attn_rows4(dim)·68·4 bytes.
//
// A block computes the scores of its (up to) 64 queries against up to nkb
// blocks of 64 keys (blocks blockIdx.z·nkb .. of the tile's keys 0 ..
// its last position), one block of keys at a time, a 4 × 4 register tile
// per thread (queries 4·(tid/16).., keys 4·(tid%16)..). DotF16's lanes are
// l = i mod 16 and its tree adds lane l+8 to l, then +4, +2, +1: so lanes
// g, g+4, g+8, g+12 (the dimensions i ≡ g mod 4, "lane group g") reduce
// to one value c_g = (a_g + a_{g+8}) + (a_{g+4} + a_{g+12}), and the dot
// product is (c_0 + c_2) + (c_1 + c_3). The kernel stages Q and K a lane
// group (or two, or four) at a time, transposed ([r][query], [r][key] for
// i = 4r + g, zero past dim), walks each lane's chain a_l (elements r =
// t, t+4, …, for l = g + 4t) in order and applies the tree as the lanes
// complete. Where all four lane groups are staged at once (attn_stage_q_vec),
// the queries stay staged across the blocks of keys; for head dimension 64
// and an f16 cache the chains' length is known to the compiler
// (attn_scores_block's RC), so they are straight-line code (the f32
// cache's chains, a multiplication and an addition a step, would not fit
// the registers that way). A thread's four scores of a query go out
// as one 16-byte store where all four keys are at or below the query's
// position and ld is a multiple of 4.
//
// The block also writes each of its queries' maximum
// (fmaxf) of the scores it wrote, keys j ≤ the query's position, to
// M[(row·heads + head)·attn_mb(ld) + block of keys] (attn_scores_max): −∞
// for a query whose position is below all the block's keys. The softmax
// reads only the blocks of keys 0..pos, each of which holds a key j0 ≤
// pos and so a score; blocks past a tile's last position are never
// computed.
template <bool F16, int RC>
MUSER_DEV void attn_scores_block(const float* __restrict__ q, int dim, const unsigned short* k16, const float* k32,
                                 size_t kcol, int kvrow, int j0, int blk, int lastPos, bool first, bool vec,
                                 const int* qoff, const int* rh, const int* qp, float* __restrict__ S,
                                 float* __restrict__ M, int ld, int mb, float scale, bool vout, float* Qs, float* Ks) {
	using namespace attn;
	const int tid = threadIdx.x;
	const int R = RC ? RC : attn_rows4(dim), G = RC ? 4 : attn_groups(dim);
	const bool V = RC ? true : vec; // every lane group staged at once, with 16-byte loads
	const int tq = tid / 16, tk = tid % 16;
	float cA[16], cB[16]; // (c_0 + c_2) and (c_1 + c_3) of the 16 scores
	const int rstride = R * SLD;
#pragma unroll
	for (int g = 0; g < 4; g++) {
		if (g == 0 && V) {
			if (first) {
				attn_stage_q_vec<F16>(Qs, rstride, q, qoff, dim);
			} else {
				__syncthreads(); // the previous block's keys are read no more
			}
			attn_stage_k_vec<F16>(Ks, rstride, k16, k32, kcol, kvrow, j0, lastPos, dim);
			__syncthreads();
		} else if (!V && g % G == 0) {
			// Stage lane groups g .. g+G-1.
			if (g || !first) __syncthreads();
			// Thread: staged dimensions dd = tid%32 + 32u (lane group
			// gl = dd / R, r = dd % R) of queries and keys x = tid/32 + 8k.
			// Eight loads in flight, then their conversions (round_f16
			// branches, which would otherwise wait on each load in turn).
			for (int dd = tid % 32; dd < G * R; dd += 32) {
				const int gl = dd / R, r = dd - gl * R;
				const int i = 4 * r + g + gl;
				float qraw[8];
				unsigned kraw[8];
#pragma unroll
				for (int k = 0; k < 8; k++) {
					const int x = tid / 32 + 8 * k;
					qraw[k] = 0.0f;
					kraw[k] = 0;
					if (i < dim) {
						const int qo = qoff[x];
						if (qo >= 0) qraw[k] = q[(size_t)qo + i];
						const int j = j0 + x;
						if (j <= lastPos) {
							const size_t e = (size_t)j * kvrow + kcol + i;
							kraw[k] = F16 ? (unsigned)k16[e] : __float_as_uint(k32[e]);
						}
					}
				}
				float* qd = Qs + gl * rstride + r * SLD + tid / 32;
				float* kd = Ks + gl * rstride + r * SLD + tid / 32;
#pragma unroll
				for (int k = 0; k < 8; k++) {
					qd[8 * k] = F16 ? round_f16_again(qraw[k]) : qraw[k];
					kd[8 * k] = F16 ? f16_to_f32_arith(kraw[k]) : __uint_as_float(kraw[k]);
				}
			}
			__syncthreads();
		}
		const float* Qg = Qs + (g % G) * rstride + 4 * tq;
		const float* Kg = Ks + (g % G) * rstride + 4 * tk;
		// The chains of lanes g+4t, t = 0..3: A = a_g + a_{g+8}, then
		// B = a_{g+4} + a_{g+12}, c_g = A + B.
		auto step = [&](int r, float(&acc)[16]) {
			const float4 qv = *(const float4*)(Qg + r * SLD);
			const float4 kv = *(const float4*)(Kg + r * SLD);
			const float qa[4] = {qv.x, qv.y, qv.z, qv.w}, ka[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
			for (int a = 0; a < 4; a++)
#pragma unroll
				for (int b = 0; b < 4; b++) {
					float& x = acc[4 * a + b];
					x = F16 ? __fmaf_rn(ka[b], qa[a], x) : f32add(x, f32mul(ka[b], qa[a]));
				}
		};
		auto chain = [&](int t, float(&acc)[16]) {
#pragma unroll
			for (int s = 0; s < 16; s++) acc[s] = 0.0f;
			if constexpr (RC > 0) {
#pragma unroll
				for (int r = t; r < RC; r += 4) step(r, acc);
			} else {
				for (int r = t; r < R; r += 4) step(r, acc);
			}
		};
		float A[16], B[16], C[16];
		chain(0, A);
		chain(2, B);
#pragma unroll
		for (int s = 0; s < 16; s++) A[s] = f32add(A[s], B[s]);
		chain(1, B);
		chain(3, C);
#pragma unroll
		for (int s = 0; s < 16; s++) B[s] = f32add(B[s], C[s]);
#pragma unroll
		for (int s = 0; s < 16; s++) {
			const float c = f32add(A[s], B[s]);
			if (g == 0) cA[s] = c;
			else if (g == 1) cB[s] = c;
			else if (g == 2) cA[s] = f32add(cA[s], c);
			else cB[s] = f32add(cB[s], c);
		}
	}
	float mx[4]; // the maximum of each of the thread's queries' scores
	const int j = j0 + 4 * tk;
#pragma unroll
	for (int a = 0; a < 4; a++) {
		const int qi = 4 * tq + a;
		mx[a] = attn_ninf();
		const int r = rh[qi];
		if (r < 0) continue;
		float* out = S + (size_t)r * ld + j;
		const int p = qp[qi];
		float s[4];
#pragma unroll
		for (int b = 0; b < 4; b++) s[b] = f32mul(f32add(cA[4 * a + b], cB[4 * a + b]), scale);
		if (vout && j + 3 <= p) {
			*(float4*)out = float4{s[0], s[1], s[2], s[3]};
#pragma unroll
			for (int b = 0; b < 4; b++) mx[a] = fmaxf(mx[a], s[b]);
		} else {
#pragma unroll
			for (int b = 0; b < 4; b++)
				if (j + b <= p) {
					out[b] = s[b];
					mx[a] = fmaxf(mx[a], s[b]);
				}
		}
	}
	attn_scores_max(M, mx, rh, tq, tk, mb, blk);
}

template <bool F16>
__device__ __forceinline__ void attn_scores(const float* __restrict__ q, int heads, int kvheads, int dim,
                                            const unsigned long long* __restrict__ kc, const int* __restrict__ pos,
                                            const int* __restrict__ tiles, float* __restrict__ S, float* __restrict__ M,
                                            int ld, float scale, int nkb) {
	using namespace attn;
	MUSER_DYNAMIC_SMEM(smem);
	const AttnCTA cta = attn_cta(tiles, heads, kvheads);
	const int b0 = blockIdx.z * nkb; // the block's first block of keys
	const int lastPos = pos[cta.hi - 1];
	if (b0 * SKB > lastPos) return;
	const int nb = min(nkb, lastPos / SKB - b0 + 1);
	const int tid = threadIdx.x;
	// Query x's row·heads + head (−1 past the block's queries), where its
	// row of q starts, and its position.
	__shared__ int rh[QB], qoff[QB], qp[QB];
	if (tid < QB) {
		const bool in = tid < cta.nq;
		const int r = in ? cta.row(tid) * heads + cta.head(tid) : -1;
		rh[tid] = r;
		qoff[tid] = in ? r * dim : -1;
		qp[tid] = in ? pos[cta.row(tid)] : -1;
	}
	__syncthreads();
	const int R = attn_rows4(dim), G = attn_groups(dim);
	float* Qs = smem;               // [G][R][SLD]
	float* Ks = smem + G * R * SLD; // [G][R][SLD]
	const unsigned short* k16 = (const unsigned short*)kc[cta.lo];
	const float* k32 = (const float*)kc[cta.lo];
	const bool vec = G == 4 && dim % 8 == 0 && ((unsigned long long)q & 15) == 0 &&
	                 ((F16 ? (unsigned long long)k16 : (unsigned long long)k32) & 15) == 0;
	const bool vout = (ld & 3) == 0 && ((unsigned long long)S & 15) == 0;
	const int mb = attn_mb(ld), kvrow = kvheads * dim;
	const size_t kcol = (size_t)cta.kvh * dim;
	if (F16 && vec && dim == 64) {
		for (int b = 0; b < nb; b++)
			attn_scores_block<F16, 16>(q, dim, k16, k32, kcol, kvrow, (b0 + b) * SKB, b0 + b, lastPos, b == 0, true,
			                           qoff, rh, qp, S, M, ld, mb, scale, vout, Qs, Ks);
	} else {
		for (int b = 0; b < nb; b++)
			attn_scores_block<F16, 0>(q, dim, k16, k32, kcol, kvrow, (b0 + b) * SKB, b0 + b, lastPos, b == 0, vec,
			                          qoff, rh, qp, S, M, ld, mb, scale, vout, Qs, Ks);
	}
}

extern "C" __global__ void __launch_bounds__(256, 2)
muser_attn_scores_f16(const float* __restrict__ q, int heads, int kvheads, int dim,
                      const unsigned long long* __restrict__ kc, const int* __restrict__ pos,
                      const int* __restrict__ tiles, float* __restrict__ S, float* __restrict__ M, int ld,
                      float scale, int nkb) {
	grid_wait();
	attn_scores<true>(q, heads, kvheads, dim, kc, pos, tiles, S, M, ld, scale, nkb);
}

extern "C" __global__ void __launch_bounds__(256, 2)
muser_attn_scores_f32(const float* __restrict__ q, int heads, int kvheads, int dim,
                      const unsigned long long* __restrict__ kc, const int* __restrict__ pos,
                      const int* __restrict__ tiles, float* __restrict__ S, float* __restrict__ M, int ld,
                      float scale, int nkb) {
	grid_wait();
	attn_scores<false>(q, heads, kvheads, dim, kc, pos, tiles, S, M, ld, scale, nkb);
}
// attn_scores_rows: grid (ceil((max pos + 1)/128), n, kvheads·ceil(group/8)),
// block 128: the scores of a batch whose tiles are single rows (decode),
// head dimension at most 128. A thread takes one key j of row blockIdx.y
// and up to 8 query heads of one KV head: it converts its K row once into
// registers (zeros past dim) and computes each head's DotF16 (Dot) in its
// own order, 16 lane accumulators (lane i mod 16, i ascending) then the
// tree +8, +4, +2, +1, against the block's queries staged in shared memory
// (rounded to f16 for an f16 cache, zeros past dim). The tiled scores
// kernel stages 64 queries per block where a decode row has a group's
// few; this one reads each K row once and wastes no lanes. It writes each
// head's maximum per 64 keys to M as the tiled kernel does (warp
// shuffles, then the two warps of a block of keys): threads past the
// row's position compute nothing but stay for those shuffles and the
// barrier.
//
// A decode step's context is often a few hundred keys, so the kernel is a
// handful of warps whose time is latency: its K row is requested before
// the queries are staged (three rounds to global memory one after the
// other, the position, the cache address and the row, instead of four),
// and with an f16 cache and head dimension 64 the row is widened by a
// loop through the thread's row of shared memory, whose code stays in the
// instruction cache, instead of 64 conversions in straight-line code,
// each of which a warp would fetch once and run once.
template <bool F16, int DM>
__device__ __forceinline__ void attn_scores_rows_d(const float* __restrict__ q, int heads, int kvheads, int dim,
                                                   const unsigned long long* __restrict__ kc, int m,
                                                   float* __restrict__ S, float* __restrict__ M, int ld, float scale,
                                                   float (*Qs)[128], float (*Ks)[68], float (*Wm)[4]) {
	constexpr int HB = 8;
	constexpr bool SH = F16 && DM == 64; // the row widened through shared memory
	const int i = blockIdx.y, group = heads / kvheads, hch = (group + HB - 1) / HB;
	const int kvh = blockIdx.z / hch, g0 = (blockIdx.z % hch) * HB, gn = min(HB, group - g0);
	const int j = blockIdx.x * 128 + threadIdx.x;
	const bool live = j < m; // the others stay for the maxima's shuffles and barrier
	const int kvrow = kvheads * dim;
	const size_t e0 = (size_t)j * kvrow + (size_t)kvh * dim;
	const unsigned long long kb = kc[i];
	const unsigned short* k16 = (const unsigned short*)kb + e0;
	const float* k32 = (const float*)kb + e0;
	const bool vec = dim == DM && ((F16 ? (unsigned long long)k16 : (unsigned long long)k32) & 15) == 0;
	// The row as 8 16-byte words, requested before the queries (SH).
	uint4 raw[8];
	if (SH && vec && live) {
#pragma unroll
		for (int u = 0; u < 8; u++) raw[u] = ((const uint4*)k16)[u];
	}
	// The queries: heads g0.. of the group, f16-rounded, zeros past dim.
	for (int e = threadIdx.x; e < HB * DM; e += 128) {
		const int x = e / DM, d = e % DM;
		float v = 0.0f;
		if (x < gn && d < dim) {
			v = q[(size_t)i * heads * dim + (size_t)(kvh * group + g0 + x) * dim + d];
			if (F16) v = round_f16_again(v);
		}
		Qs[x][d] = v;
	}
	__syncthreads();
	float kr[DM];
	if (!live) {
		// No key: the thread takes part in the maxima only.
	} else if (SH && vec) {
		// The 128 raw bytes go to the upper half of the thread's row and
		// are widened in place, word u to floats 8u..8u+7 (bytes 32u..
		// 32u+31, below word u+1 at byte 144+16u for every u < 8).
		float* kt = Ks[threadIdx.x];
		uint4* rw = (uint4*)(kt + 32);
#pragma unroll
		for (int u = 0; u < 8; u++) rw[u] = raw[u];
#pragma unroll 1
		for (int u = 0; u < 8; u++) {
			const uint4 r = rw[u];
			const unsigned w[4] = {r.x, r.y, r.z, r.w};
			float f[8];
#pragma unroll
			for (int c = 0; c < 4; c++) {
				f[2 * c] = f16_to_f32_arith(w[c] & 0xffffu);
				f[2 * c + 1] = f16_to_f32_arith(w[c] >> 16);
			}
			const float4 lo = {f[0], f[1], f[2], f[3]}, hi = {f[4], f[5], f[6], f[7]};
			((float4*)kt)[2 * u] = lo;
			((float4*)kt)[2 * u + 1] = hi;
		}
#pragma unroll
		for (int d4 = 0; d4 < DM / 4; d4++) {
			const float4 v = ((const float4*)kt)[d4];
			kr[4 * d4] = v.x;
			kr[4 * d4 + 1] = v.y;
			kr[4 * d4 + 2] = v.z;
			kr[4 * d4 + 3] = v.w;
		}
	} else if (vec) {
		// Every load first, then the conversions (which would
		// otherwise wait on each load in turn).
		constexpr int NV = F16 ? DM / 8 : DM / 4, NB = 8; // 16-byte loads, in batches of 8
#pragma unroll
		for (int u0 = 0; u0 < NV; u0 += NB) {
			uint4 rb[NB];
#pragma unroll
			for (int u = 0; u < NB; u++) rb[u] = F16 ? ((const uint4*)k16)[u0 + u] : ((const uint4*)k32)[u0 + u];
#pragma unroll
			for (int uu = 0; uu < NB; uu++) {
				const int u = u0 + uu;
				const unsigned w[4] = {rb[uu].x, rb[uu].y, rb[uu].z, rb[uu].w};
#pragma unroll
				for (int c = 0; c < 4; c++) {
					if (F16) {
						kr[8 * u + 2 * c] = f16_to_f32_arith(w[c] & 0xffffu);
						kr[8 * u + 2 * c + 1] = f16_to_f32_arith(w[c] >> 16);
					} else {
						kr[4 * u + c] = __uint_as_float(w[c]);
					}
				}
			}
		}
	} else {
#pragma unroll
		for (int d = 0; d < DM; d++) kr[d] = d < dim ? (F16 ? f16_to_f32_arith(k16[d]) : k32[d]) : 0.0f;
	}
	const size_t rh = (size_t)i * heads + kvh * group + g0; // row·heads + head of x = 0
	float* out = S + rh * ld + j;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	for (int x = 0; x < gn; x++) {
		float sc = attn_ninf();
		if (live) {
			float acc[16];
#pragma unroll
			for (int l = 0; l < 16; l++) acc[l] = 0.0f;
			const float4* qx = (const float4*)Qs[x];
#pragma unroll
			for (int d4 = 0; d4 < DM / 4; d4++) {
				const float4 qv = qx[d4];
				const float qa[4] = {qv.x, qv.y, qv.z, qv.w};
#pragma unroll
				for (int c = 0; c < 4; c++) {
					const int d = 4 * d4 + c;
					float& a = acc[d % 16];
					a = F16 ? __fmaf_rn(kr[d], qa[c], a) : f32add(a, f32mul(kr[d], qa[c]));
				}
			}
			sc = attn_lanes16(acc, scale);
			out[(size_t)x * ld] = sc;
		}
#pragma unroll
		for (int off = 16; off >= 1; off /= 2) sc = fmaxf(sc, __shfl_xor_sync(0xffffffffu, sc, off));
		if (lane == 0) Wm[x][warp] = sc;
	}
	// The maxima per 64 keys (warps 2b and 2b+1 hold block b of the
	// thread block's two); attn_scores_max says why any order is the
	// CPU's maximum. Blocks past the row's position are not written.
	__syncthreads();
	if (threadIdx.x < 2 * gn) {
		const int x = threadIdx.x >> 1, b = threadIdx.x & 1, blk = 2 * blockIdx.x + b;
		if (blk * attn::SKB < m) M[(rh + x) * attn_mb(ld) + blk] = fmaxf(Wm[x][2 * b], Wm[x][2 * b + 1]);
	}
}

template <bool F16>
__device__ __forceinline__ void attn_scores_rows(const float* __restrict__ q, int heads, int kvheads, int dim,
                                                 const unsigned long long* __restrict__ kc, const int* __restrict__ pos,
                                                 float* __restrict__ S, float* __restrict__ M, int ld, float scale) {
	__shared__ __align__(16) float Qs[8][128];
	__shared__ __align__(16) float Ks[F16 ? 128 : 1][68];
	__shared__ float Wm[8][4];
	const int m = pos[blockIdx.y] + 1;
	if ((int)blockIdx.x * 128 >= m) return;
	if (dim <= 64) attn_scores_rows_d<F16, 64>(q, heads, kvheads, dim, kc, m, S, M, ld, scale, Qs, Ks, Wm);
	else attn_scores_rows_d<F16, 128>(q, heads, kvheads, dim, kc, m, S, M, ld, scale, Qs, Ks, Wm);
}

extern "C" __global__ void __launch_bounds__(128)
muser_attn_scores_rows_f16(const float* __restrict__ q, int heads, int kvheads, int dim,
                           const unsigned long long* __restrict__ kc, const int* __restrict__ pos,
                           float* __restrict__ S, float* __restrict__ M, int ld, float scale) {
	grid_wait();
	attn_scores_rows<true>(q, heads, kvheads, dim, kc, pos, S, M, ld, scale);
}

extern "C" __global__ void __launch_bounds__(128)
muser_attn_scores_rows_f32(const float* __restrict__ q, int heads, int kvheads, int dim,
                           const unsigned long long* __restrict__ kc, const int* __restrict__ pos,
                           float* __restrict__ S, float* __restrict__ M, int ld, float scale) {
	grid_wait();
	attn_scores_rows<false>(q, heads, kvheads, dim, kc, pos, S, M, ld, scale);
}

// muser_attn_softmax_part is the decode softmax's first half (a batch of
// few rows, each as long as its context), spread over blocks of
// attn::RSP = 1,024 positions so that a long context keeps many
// multiprocessors busy. Block (p, i, h) takes row i, head h (pair P =
// i·heads + h, m = pos[i] + 1) and positions p·RSP .. min(m, (p+1)·RSP)
// − 1: it takes the maximum of the pair's m scores from the ⌈m/64⌉
// maxima the scores kernel wrote to M (attn_scores_max says why that
// order gives the CPU's result), replaces each of its s_j by e_j =
// Exp32(s_j − max), and writes the float64 sum of its e_j, in an order
// of its own, to part[P·pl + p]. The second half, float32(1/sum) and the
// weights, is the weighted sum's (attn_rows_inv, attn_wsum_rows).
//
// Launch: grid (ceil((max pos + 1)/RSP), n, heads), block 256; pl ≥
// ceil(ld/RSP).
extern "C" __global__ void __launch_bounds__(256)
muser_attn_softmax_part(float* S, const float* __restrict__ M, double* __restrict__ part, int ld, int pl,
                        const int* __restrict__ pos, int heads) {
	using namespace attn;
	constexpr int NW = 256 / 32, U = RSP / 256;
	__shared__ float wmax[NW];
	__shared__ double wsum[NW];
	grid_wait();
	const int p = blockIdx.x, i = blockIdx.y, h = blockIdx.z;
	const int m = pos[i] + 1;
	if (p * RSP >= m) return;
	const size_t P = (size_t)i * heads + h;
	const int tid = threadIdx.x;

	const float* mp = M + P * attn_mb(ld);
	const int nb = (m + SKB - 1) / SKB;
	float mx = attn_ninf();
	for (int b = tid; b < nb; b += 256) mx = fmaxf(mx, mp[b]);
	mx = attn_block_max<NW>(mx, wmax);

	float* s = S + P * ld + (size_t)p * RSP;
	const int cnt = min(RSP, m - p * RSP);
	float v[U];
#pragma unroll
	for (int u = 0; u < U; u++) {
		const int j = tid + 256 * u;
		v[u] = j < cnt ? s[j] : 0.0f;
	}
	double sum = 0.0;
#pragma unroll
	for (int u = 0; u < U; u++) {
		const int j = tid + 256 * u;
		if (j < cnt) {
			const float e = exp32(f32sub(v[u], mx));
			s[j] = e;
			sum = f64add(sum, (double)e);
		}
	}
	sum = attn_block_sum<NW>(sum, wsum);
	if (tid == 0) part[P * pl + p] = sum;
}

// attn_inv_of returns kernels.Softmax's float32(1/sum) for the m
// exponentials e[0..m) whose float64 sum, added in any order, is t. One
// whole warp calls it and every lane gets the value. The CPU's sum is its
// eight float64 chains (j into chain j mod 8, in order, then the tree +4,
// +2, +1); a sum in another order lies within chain_margin of it, and
// float32(1/sum) is monotone in the sum: when both ends of that interval
// give the same float32, it is the chains' too. Otherwise (a float32
// rounding boundary within about 4·m·10^-16 of 1/sum, or a NaN) lanes
// 0..7 add the e_j in their chains and the tree decides, as the CPU does.
MUSER_DEV float attn_inv_of(const float* __restrict__ e, double t, int m) {
	const int lane = threadIdx.x & 31;
	const double r = chain_margin(t, m);
	const float lo = __double2float_rn(muser_ddiv_rn(1.0, f64add(t, r)));
	const float hi = __double2float_rn(muser_ddiv_rn(1.0, f64sub(t, r)));
	if (lo == hi) return lo; // false for a NaN
	double sum = 0.0;
	if (lane < 8) {
		int x = lane;
		for (; x + 8 * 7 < m; x += 8 * 8) {
			float v[8];
#pragma unroll
			for (int u = 0; u < 8; u++) v[u] = e[x + 8 * u];
#pragma unroll
			for (int u = 0; u < 8; u++) sum = f64add(sum, (double)v[u]);
		}
		for (; x < m; x += 8) sum = f64add(sum, (double)e[x]);
	}
	// The tree +4, +2, +1: lanes 0..7 end with ((c0+c4)+(c2+c6)) +
	// ((c1+c5)+(c3+c7)).
	sum = f64add(sum, __shfl_xor_sync(0xffffffffu, sum, 4));
	sum = f64add(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
	sum = f64add(sum, __shfl_xor_sync(0xffffffffu, sum, 1));
	return __shfl_sync(0xffffffffu, __double2float_rn(muser_ddiv_rn(1.0, sum)), 0);
}

// attn_rows_inv returns kernels.Softmax's float32(1/sum) for the m
// exponentials e[0..m) that muser_attn_softmax_part left in a row of S,
// whose blocks' sums it wrote to part[0..ceil(m/RSP)): attn_inv_of of
// their total. One whole warp calls it and every lane gets the value.
MUSER_DEV float attn_rows_inv(const float* __restrict__ e, const double* __restrict__ part, int m) {
	const int lane = threadIdx.x & 31;
	const int np = (m + attn::RSP - 1) / attn::RSP;
	double t = 0.0;
	for (int k = lane; k < np; k += 32) t = f64add(t, part[k]);
	// A butterfly of commutative additions: every lane ends with the
	// same total.
#pragma unroll
	for (int off = 16; off >= 1; off /= 2) t = f64add(t, __shfl_xor_sync(0xffffffffu, t, off));
	return attn_inv_of(e, t, m);
}

// muser_attn_softmax8 is the tiled attention's softmax (many rows), a
// thread per float64 chain: kernels.Softmax but for its last
// multiplication. For each row i < n and head h < heads (pair P = i·heads
// + h, m = pos[i] + 1) it takes the maximum of the m scores from the
// ⌈m/64⌉ maxima the scores kernel wrote to M (attn_scores_max says why that
// order gives the CPU's result), replaces each s_j by e_j = Exp32(s_j −
// max), sums the e_j in float64 with 8 accumulators (j into accumulator
// j mod 8, in order) reduced by the tree +4, +2, +1, and writes
// float32(1/sum) to Inv[P]. The weights e_j·float32(1/sum) (rounded to
// f16 for an f16 cache) are formed by the weighted sum (attn_wsum) as it
// stages them, rather than written back here: each score is read once
// and written once.
//
// Lane l of warp w holds chain c = l mod 8 of pair P = 32·blockIdx.x + 4w
// + l/8: it takes the maximum of the pair's block maxima c, c+8, … (the
// pair's by shuffles among its 8 lanes), then computes e_j for its
// elements s_c, s_{c+8}, … in order, stores them and adds them to its
// chain; the shuffles xor 4, 2, 1 are the tree +4, +2, +1 (float64
// addition is commutative, so every lane gets the same sum).
//
// Launch: grid ceil(n·heads/32), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_attn_softmax8(float* S, const float* __restrict__ M, float* __restrict__ Inv, int ld,
                    const int* __restrict__ pos, int n, int heads) {
	constexpr int U = 8; // loads in flight per lane
	grid_wait();
	const int tid = threadIdx.x, c = tid & 7;
	const long long P = (long long)blockIdx.x * 32 + tid / 8;
	const bool live = P < (long long)n * heads;
	const size_t pr = live ? (size_t)P : 0; // the pair's row of S and M
	const int m = live ? pos[P / heads] + 1 : 0;
	float* s = S + pr * ld;

	const float* mp = M + pr * attn_mb(ld);
	const int nb = (m + attn::SKB - 1) / attn::SKB; // the blocks of keys 0..m-1
	float mx = attn_ninf();
#pragma unroll 4
	for (int b = c; b < nb; b += 8) mx = fmaxf(mx, mp[b]);
	mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
	mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
	mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));

	double sum = 0.0;
	int j = c;
	for (; j + 8 * (U - 1) < m; j += 8 * U) {
		float v[U];
#pragma unroll
		for (int u = 0; u < U; u++) v[u] = s[j + 8 * u];
#pragma unroll
		for (int u = 0; u < U; u++) {
			const float e = exp32(f32sub(v[u], mx));
			s[j + 8 * u] = e;
			sum = f64add(sum, (double)e);
		}
	}
	for (; j < m; j += 8) {
		const float e = exp32(f32sub(s[j], mx));
		s[j] = e;
		sum = f64add(sum, (double)e);
	}
	sum = f64add(sum, __shfl_xor_sync(0xffffffffu, sum, 4));
	sum = f64add(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
	sum = f64add(sum, __shfl_xor_sync(0xffffffffu, sum, 1));
	if (live && c == 0) Inv[P] = __double2float_rn(muser_ddiv_rn(1.0, sum));
}

// attn_weight is the weight of exponential e in a softmax whose
// float32(1/sum) is inv: e·inv (kernels.Softmax's Scale), rounded to f16
// for an f16 cache (kernels.RoundF16s).
template <bool F16> MUSER_DEV float attn_weight(float e, float inv) {
	const float w = f32mul(e, inv);
	return F16 ? round_f16_arith(w) : w;
}

// attn_wsum: grid (ntiles, kvheads·ceil(group/gh), ceil(dim/64)), block
// 128, dynamic shared memory 2·32·(64 + 68)·4 bytes.
//
// The weighted sums of the block's (up to) 64 queries at 64 of the
// dimensions are a small matrix product, out[q][d] = Σ_j w[q][j]·V[j][d],
// computed as a SIMT product whose reduction runs in position order:
// thread (tid/16, tid%16) holds the outputs of queries 8·(tid/16) .. +7 at
// dimensions 4·(tid%16) .. +3 and, for each tile of 32 positions, adds
// w·V for j = j0, j0+1, … in turn (each output's chains are those of the
// CPU's kernels.WeightedSumF16: y = y + w_j·V_j, j ascending, from +0 at
// each part of attn::RCH positions, the parts' sums added to the output
// in order as the walk passes each part's end; positions past the query's
// own skipped). The tile's weights are staged transposed
// ([position][query]) and its V rows as [position][dimension], in two
// buffers: the next tile's loads are in flight in registers while the
// current one is multiplied, and one barrier per tile suffices.
//
// S holds the exponentials e_j and Inv each query's float32(1/sum)
// (muser_attn_softmax8): a weight is staged as attn_weight(e_j, Inv[row·
// heads + head]), the last step of kernels.Softmax and the f16 rounding,
// as the decode weighted sum does too. Positions past the query's own
// are staged as +0, not e_j·inv of whatever S holds there: no chain adds
// them (the loop over whole tiles runs only below every query's m, the
// other skips j ≥ m), and the staged tile holds no stale values.
template <bool F16>
__device__ __forceinline__ void attn_wsum(const float* __restrict__ S, const float* __restrict__ Inv, int ld,
                                          const unsigned long long* __restrict__ vc,
                                          const int* __restrict__ pos, const int* __restrict__ tiles,
                                          float* __restrict__ out, int heads, int kvheads, int dim) {
	using namespace attn;
	constexpr int KT = WKT;
	constexpr int VN = KT * WDB / 128; // V elements a thread stages per tile
	constexpr int WN = QB * KT / 128;  // weights a thread stages per tile
	constexpr int BUF = KT * (WDB + WLD);
	MUSER_DYNAMIC_SMEM(smem); // 2 × {Vs [KT][WDB], Ws [KT][WLD]}
	const AttnCTA cta = attn_cta(tiles, heads, kvheads);
	const int nq = cta.nq;
	const int kvrow = kvheads * dim;
	const int d0 = blockIdx.z * WDB;
	const int tid = threadIdx.x;
	const int qg = tid / 16, dg = tid % 16;
	int m[8]; // positions each of the thread's queries attends to
#pragma unroll
	for (int k = 0; k < 8; k++) {
		const int qi = 8 * qg + k;
		m[k] = qi < nq ? pos[cta.row(qi)] + 1 : 0;
	}
	const int mfirst = pos[cta.lo] + 1; // the fewest of the block's queries
	const int mlast = pos[cta.hi - 1] + 1;
	const unsigned short* v16 = (const unsigned short*)vc[cta.lo];
	const float* v32 = (const float*)vc[cta.lo];
	// This thread's staging: V elements (position 2k + tid/64, dimension
	// tid%64) and weights (query tid%64, positions 16·(tid/64) + k: a
	// warp's 32 queries at one position, so its transposed stores meet no
	// bank twice). With the scores' rows 16-byte aligned a thread loads its
	// 16 weights as four float4 where all 16 exist.
	const int vj = tid / 64, vd = d0 + tid % 64;
	const bool vok = vd < dim;
	const size_t vstep = (size_t)2 * kvrow;
	const size_t vbase = (size_t)vj * kvrow + (size_t)cta.kvh * dim + (vok ? vd : 0);
	const int wx = tid % 64, wj = 16 * (tid / 64);
	const bool wvec = (ld & 3) == 0 && ((unsigned long long)S & 15) == 0;
	int wm = 0; // positions the staged weight row has
	const float* wrow = S;
	float wiv = 0.0f; // its float32(1/sum)
	if (wx < nq) {
		const int r = cta.row(wx);
		const size_t pr = (size_t)r * heads + cta.head(wx);
		wm = pos[r] + 1;
		wrow = S + pr * ld + wj;
		wiv = Inv[pr];
	}
	unsigned rv[VN]; // raw: converted when stored, so that no load waits on another
	float rw[WN];
	auto fetch = [&](int j0) {
		const size_t e0 = vbase + (size_t)j0 * kvrow;
#pragma unroll
		for (int k = 0; k < VN; k++) {
			unsigned v = 0;
			if (vok && j0 + vj + 2 * k < mlast) v = F16 ? (unsigned)v16[e0 + k * vstep] : __float_as_uint(v32[e0 + k * vstep]);
			rv[k] = v;
		}
		const float* w = wrow + j0;
		const int lim = wm - j0 - wj; // weights w[k], k < lim, exist
		if (wvec && lim >= WN) {
#pragma unroll
			for (int k = 0; k < WN / 4; k++) {
				const float4 f = ((const float4*)w)[k];
				rw[4 * k] = f.x;
				rw[4 * k + 1] = f.y;
				rw[4 * k + 2] = f.z;
				rw[4 * k + 3] = f.w;
			}
		} else {
#pragma unroll
			for (int k = 0; k < WN; k++) rw[k] = k < lim ? w[k] : 0.0f;
		}
	};
	float y[8][4];
#pragma unroll
	for (int k = 0; k < 8; k++)
#pragma unroll
		for (int c = 0; c < 4; c++) y[k][c] = 0.0f;
	// The weighted sum's parts (kernels.AttnPart = attn::RCH positions):
	// at each part's end a query with positions after it adds its chains'
	// sums to the sums of the parts before (tot: the first part's are
	// stored) and starts the next chains at +0; a query's last chains are
	// added after the walk. tot takes 32 registers more, so the kernel
	// runs 3 blocks a multiprocessor (launch bounds) instead of 4, which
	// is faster than keeping tot in 16 KiB more shared memory a block (4
	// blocks, less L1 cache left; docs/benchmarks.md) or reading it back
	// from the output (a wait on device memory per part).
	float tot[8][4];
	auto fold = [&](int j0) {
#pragma unroll
		for (int k = 0; k < 8; k++) {
			if (m[k] <= j0) continue;
#pragma unroll
			for (int c = 0; c < 4; c++) {
				tot[k][c] = j0 == RCH ? y[k][c] : f32add(tot[k][c], y[k][c]);
				y[k][c] = 0.0f;
			}
		}
	};
	fetch(0);
	int b = 0;
	for (int j0 = 0; j0 < mlast; j0 += KT, b ^= 1) {
		if (j0 > 0 && j0 % RCH == 0) fold(j0);
		float* Vs = smem + b * BUF;
		float* Ws = Vs + KT * WDB;
#pragma unroll
		for (int k = 0; k < VN; k++) Vs[tid + 128 * k] = F16 ? f16_to_f32_arith(rv[k]) : __uint_as_float(rv[k]);
		const int lim = wm - j0 - wj; // rw[k], k < lim, are exponentials
#pragma unroll
		for (int k = 0; k < WN; k++) Ws[(wj + k) * WLD + wx] = k < lim ? attn_weight<F16>(rw[k], wiv) : 0.0f;
		__syncthreads();
		if (j0 + KT < mlast) fetch(j0 + KT);
		const float* wp = Ws + 8 * qg;
		const float* vp = Vs + 4 * dg;
		if (j0 + KT <= mfirst) {
#pragma unroll 2
			for (int jj = 0; jj < KT; jj++) {
				const float4 wa = *(const float4*)(wp + jj * WLD), wb = *(const float4*)(wp + jj * WLD + 4);
				const float4 vv = *(const float4*)(vp + jj * WDB);
				const float w[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
				const float v[4] = {vv.x, vv.y, vv.z, vv.w};
#pragma unroll
				for (int k = 0; k < 8; k++)
#pragma unroll
					for (int c = 0; c < 4; c++)
						y[k][c] = F16 ? __fmaf_rn(w[k], v[c], y[k][c]) : f32add(y[k][c], f32mul(w[k], v[c]));
			}
		} else {
#pragma unroll 1
			for (int jj = 0; jj < KT; jj++) {
				const float4 wa = *(const float4*)(wp + jj * WLD), wb = *(const float4*)(wp + jj * WLD + 4);
				const float4 vv = *(const float4*)(vp + jj * WDB);
				const float w[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
				const float v[4] = {vv.x, vv.y, vv.z, vv.w};
				const int j = j0 + jj;
#pragma unroll
				for (int k = 0; k < 8; k++) {
					if (j < m[k]) {
#pragma unroll
						for (int c = 0; c < 4; c++)
							y[k][c] = F16 ? __fmaf_rn(w[k], v[c], y[k][c]) : f32add(y[k][c], f32mul(w[k], v[c]));
					}
				}
			}
		}
	}
#pragma unroll
	for (int k = 0; k < 8; k++) {
		const int qi = 8 * qg + k;
		if (qi >= nq) continue;
		float* o = out + (size_t)cta.row(qi) * heads * dim + (size_t)cta.head(qi) * dim;
#pragma unroll
		for (int c = 0; c < 4; c++) {
			const int d = d0 + 4 * dg + c;
			if (d < dim) o[d] = m[k] > RCH ? f32add(tot[k][c], y[k][c]) : y[k][c];
		}
	}
}

extern "C" __global__ void __launch_bounds__(128, 3)
muser_attn_wsum_f16(const float* __restrict__ S, const float* __restrict__ Inv, int ld,
                    const unsigned long long* __restrict__ vc, const int* __restrict__ pos,
                    const int* __restrict__ tiles, float* __restrict__ out, int heads, int kvheads, int dim) {
	grid_wait();
	attn_wsum<true>(S, Inv, ld, vc, pos, tiles, out, heads, kvheads, dim);
}

extern "C" __global__ void __launch_bounds__(128, 3)
muser_attn_wsum_f32(const float* __restrict__ S, const float* __restrict__ Inv, int ld,
                    const unsigned long long* __restrict__ vc, const int* __restrict__ pos,
                    const int* __restrict__ tiles, float* __restrict__ out, int heads, int kvheads, int dim) {
	grid_wait();
	attn_wsum<false>(S, Inv, ld, vc, pos, tiles, out, heads, kvheads, dim);
}

// attn_wsum_rows: grid (n·ng, kvheads·ceil(group/8), ceil(dim/8)), block
// attn::RWT = 288: the weighted sums of a batch whose tiles are single
// rows (decode), over the exponentials muser_attn_softmax_part left in S
// and their sums per 1,024 positions (part, pl a row and head); each
// weight is attn_weight of its exponential and the head's float32(1/sum)
// (attn_rows_inv, formed by staging warp 1+x for head x before the first
// chunk). A block takes row blockIdx.x / ng, up to 8 query heads of one
// KV head, 8 dimensions, and pc of the row's parts (attn::RCH positions
// each, the weighted sum's partial chains): parts c0 .. c0+pc-1, c0 =
// (blockIdx.x % ng)·pc; blocks past the row's last part return at once.
// Its 64 output chains of a part are walked over the part's positions in
// order, two per thread of warp 0 (lane t: head t/4, dimensions 2(t%4)
// and 2(t%4)+1, the two chains' additions interleaved), each from +0.
// A chain cannot be split, so everything else is kept off it: warps 1–8
// (one position each of a chunk, which is one part) load the weights and
// V rows two chunks ahead into registers, convert them and store them
// transposed ([head][position], [dimension][position]) in one of two
// shared buffers while warp 0 adds the other buffer's chunk, four
// positions per shared load (three loads per four positions of two
// chains: the shared-memory bandwidth stays under the chains' own rate).
// Positions past pos are staged as zeros (weight and V): a chain at +0 or
// beyond adds +0 products without change (attention.cuh's header), so
// every chunk is walked whole. Where the block holds all of the row's
// parts (pc ≥ their number) warp 0 adds the parts' sums in order and
// writes the output; otherwise it writes each part's sums to Y (float
// [n][heads][np][dim], part k of row i, head h at ((i·heads + h)·np +
// k)·dim) and muser_attn_wsum_parts adds them.
template <bool F16>
__device__ __forceinline__ void attn_wsum_rows(const float* __restrict__ S, const double* __restrict__ part, int ld,
                                               int pl, const unsigned long long* __restrict__ vc,
                                               const int* __restrict__ pos, float* __restrict__ out,
                                               float* __restrict__ Y, int np, int pc, int ng, int heads,
                                               int kvheads, int dim) {
	using namespace attn;
	constexpr int CH = RCH, HB = 8, DB = 8, LD = RCH + 4;
	constexpr int VW = F16 ? 4 : 8; // 32-bit words of a position's 8 V elements
	__shared__ __align__(16) float Ws[2][HB][LD];
	__shared__ __align__(16) float Vs[2][DB][LD];
	__shared__ float Iv[HB];
	const int i = blockIdx.x / ng, c0 = (blockIdx.x % ng) * pc;
	const int group = heads / kvheads, hch = (group + HB - 1) / HB;
	const int kvh = blockIdx.y / hch, g0 = (blockIdx.y % hch) * HB, gn = min(HB, group - g0);
	const int d0 = blockIdx.z * DB, dn = min(DB, dim - d0);
	const int t = threadIdx.x;
	const int m = pos[i] + 1;
	const int npr = (m + CH - 1) / CH; // the row's parts
	if (c0 >= npr) return;             // the whole block, before any barrier
	const int nc = min(pc, npr - c0);  // the parts (chunks) this block walks
	const bool whole = npr <= pc;      // every part here: add them here
	const int kvrow = kvheads * dim;
	const unsigned short* v16 = (const unsigned short*)vc[i] + (size_t)kvh * dim + d0;
	const float* v32 = (const float*)vc[i] + (size_t)kvh * dim + d0;
	const size_t rh = (size_t)i * heads + kvh * group + g0; // row·heads + head of x = 0
	const float* w = S + rh * ld;
	// Whole 16-byte loads of a position's 8 elements where the layout
	// allows them.
	const bool vec = dn == DB && ((F16 ? (unsigned long long)v16 : (unsigned long long)v32) & 15) == 0 &&
	                 kvrow % (F16 ? 8 : 4) == 0;
	const int st = t - 32; // staging thread: position j0 + st

	struct Raw {
		unsigned v[VW];
		float w[HB];
	};
	auto fetch = [&](Raw& r, int k) {
		const int j = (c0 + k) * CH + st;
		const bool ok = k < nc && j < m;
#pragma unroll
		for (int u = 0; u < VW; u++) r.v[u] = 0;
		if (ok) {
			const size_t e = (size_t)j * kvrow;
			if (vec) {
				const uint4 a = *(const uint4*)(F16 ? (const void*)(v16 + e) : (const void*)(v32 + e));
				r.v[0] = a.x, r.v[1] = a.y, r.v[2] = a.z, r.v[3] = a.w;
				if (!F16) {
					const uint4 b = *(const uint4*)(v32 + e + 4);
					r.v[VW - 4] = b.x, r.v[VW - 3] = b.y, r.v[VW - 2] = b.z, r.v[VW - 1] = b.w;
				}
			} else {
#pragma unroll
				for (int d = 0; d < DB; d++) {
					if (d < dn) {
						if (F16) r.v[d / 2] |= (unsigned)v16[e + d] << (16 * (d % 2));
						else r.v[d % VW] = __float_as_uint(v32[e + d]);
					}
				}
			}
		}
#pragma unroll
		for (int x = 0; x < HB; x++) r.w[x] = ok && x < gn ? w[(size_t)x * ld + j] : 0.0f;
	};
	float iv[HB]; // the heads' float32(1/sum) (staging threads)
	auto stage = [&](const Raw& r, int b) {
#pragma unroll
		for (int d = 0; d < DB; d++)
			Vs[b][d][st] = F16 ? f16_to_f32_arith((r.v[d / 2] >> (16 * (d % 2))) & 0xffffu) : __uint_as_float(r.v[d % VW]);
#pragma unroll
		for (int x = 0; x < HB; x++) Ws[b][x][st] = attn_weight<F16>(r.w[x], iv[x]);
	};
	const int hh = t / 4, dp = 2 * (t % 4);
	float y0 = 0.0f, y1 = 0.0f; // the chains of the part being walked
	float z0 = 0.0f, z1 = 0.0f; // the sum of the parts before it (whole)
	// A part walked: its sums go into z (whole) or out to Y, and the next
	// part's chains start at +0.
	auto part_done = [&](int k) {
		if (whole) {
			z0 = k == 0 ? y0 : f32add(z0, y0);
			z1 = k == 0 ? y1 : f32add(z1, y1);
		} else if (hh < gn) {
			float* yp = Y + (((size_t)i * heads + kvh * group + g0 + hh) * np + c0 + k) * dim + d0;
			if (dp < dn) yp[dp] = y0;
			if (dp + 1 < dn) yp[dp + 1] = y1;
		}
		y0 = 0.0f, y1 = 0.0f;
	};
	// The chains over one staged chunk: 16 positions' weights and V values
	// are loaded (four float4 each) while the previous 16 are added, so
	// that no shared-memory load waits on an addition or an addition on
	// a load.
	auto walk = [&](int b) {
		const float4* wp = (const float4*)Ws[b][hh];
		const float4* p0 = (const float4*)Vs[b][dp];
		const float4* p1 = (const float4*)Vs[b][dp + 1];
		auto madd = [&](float& y, float a, float v) { y = F16 ? __fmaf_rn(a, v, y) : f32add(y, f32mul(a, v)); };
		auto add = [&](const float4 (&a)[4], const float4 (&u0)[4], const float4 (&u1)[4]) {
#pragma unroll
			for (int u = 0; u < 4; u++) {
				madd(y0, a[u].x, u0[u].x), madd(y1, a[u].x, u1[u].x);
				madd(y0, a[u].y, u0[u].y), madd(y1, a[u].y, u1[u].y);
				madd(y0, a[u].z, u0[u].z), madd(y1, a[u].z, u1[u].z);
				madd(y0, a[u].w, u0[u].w), madd(y1, a[u].w, u1[u].w);
			}
		};
		float4 a0[4], b0[4], c0[4], a1[4], b1[4], c1[4];
#pragma unroll
		for (int u = 0; u < 4; u++) a0[u] = wp[u], b0[u] = p0[u], c0[u] = p1[u];
#pragma unroll
		for (int q = 0; q < CH / 4; q += 8) {
#pragma unroll
			for (int u = 0; u < 4; u++) a1[u] = wp[q + 4 + u], b1[u] = p0[q + 4 + u], c1[u] = p1[q + 4 + u];
			add(a0, b0, c0);
			if (q + 8 < CH / 4) {
#pragma unroll
				for (int u = 0; u < 4; u++) a0[u] = wp[q + 8 + u], b0[u] = p0[q + 8 + u], c0[u] = p1[q + 8 + u];
			}
			add(a1, b1, c1);
		}
	};
	// Chunk k is in buffer k%2 when step k begins; step k stages chunk
	// k+1 (fetched two steps before) and fetches chunk k+3 into the same
	// registers. Before the first, staging warp 1+x forms head x's
	// float32(1/sum) while chunk 0's loads are in flight.
	Raw r0, r1;
	if (st >= 0) {
		fetch(r1, 0);
		const int x = st >> 5;
		if (x < gn) {
			const float v = attn_rows_inv(w + (size_t)x * ld, part + (rh + x) * pl, m);
			if ((st & 31) == 0) Iv[x] = v;
		}
	}
	__syncthreads();
	if (st >= 0) {
#pragma unroll
		for (int x = 0; x < HB; x++) iv[x] = x < gn ? Iv[x] : 0.0f;
		stage(r1, 0);
		fetch(r0, 1);
		fetch(r1, 2);
	}
	__syncthreads();
	auto step = [&](int k, Raw& r) {
		if (st >= 0) {
			stage(r, (k + 1) & 1);
			fetch(r, k + 3);
		} else {
			walk(k & 1);
			part_done(k);
		}
		__syncthreads();
	};
	for (int k = 0; k < nc; k += 2) {
		step(k, r0);
		if (k + 1 < nc) step(k + 1, r1);
	}
	if (whole && st < 0 && hh < gn) {
		float* o = out + (size_t)i * heads * dim + (size_t)(kvh * group + g0 + hh) * dim + d0;
		if (dp < dn) o[dp] = z0;
		if (dp + 1 < dn) o[dp + 1] = z1;
	}
}

extern "C" __global__ void __launch_bounds__(288, 2)
muser_attn_wsum_rows_f16(const float* __restrict__ S, const double* __restrict__ part, int ld, int pl,
                         const unsigned long long* __restrict__ vc, const int* __restrict__ pos,
                         float* __restrict__ out, float* __restrict__ Y, int np, int pc, int ng, int heads,
                         int kvheads, int dim) {
	grid_wait();
	attn_wsum_rows<true>(S, part, ld, pl, vc, pos, out, Y, np, pc, ng, heads, kvheads, dim);
}

extern "C" __global__ void __launch_bounds__(288, 2)
muser_attn_wsum_rows_f32(const float* __restrict__ S, const double* __restrict__ part, int ld, int pl,
                         const unsigned long long* __restrict__ vc, const int* __restrict__ pos,
                         float* __restrict__ out, float* __restrict__ Y, int np, int pc, int ng, int heads,
                         int kvheads, int dim) {
	grid_wait();
	attn_wsum_rows<false>(S, part, ld, pl, vc, pos, out, Y, np, pc, ng, heads, kvheads, dim);
}

// muser_attn_wsum_parts: grid (heads, n), block 256: the outputs of row
// blockIdx.y, head blockIdx.x where muser_attn_wsum_rows spread the row's
// parts over several thread blocks (more than pc parts): the parts' sums
// in Y (attn_wsum_rows's layout, np a row and head) added in part order,
// y = Y_0; y = y + Y_k for k = 1, 2, … (kernels.AttnPart). All threads
// stage as many parts as fit in shared memory at once (one round of
// loads), then the thread of dimension d adds them in order, its running
// sum kept in Os between rounds.
//
// When q is not null it also quantizes the head's outputs (dim a multiple
// of 32), those it wrote and those the weighted sum's thread block wrote
// (pc or fewer parts), as muser_quant_q8_0 quantizes the attention's
// output rows of heads·dim values (q int8 [n][heads·dim], d float
// [n][heads·dim/32], s1 as d when not null): the attention output
// product's activations, without a launch of their own.
extern "C" __global__ void __launch_bounds__(256)
muser_attn_wsum_parts(const float* __restrict__ Y, const int* __restrict__ pos, float* __restrict__ out,
                      int heads, int dim, int np, int pc, int8_t* __restrict__ q, float* __restrict__ d,
                      float* __restrict__ s1) {
	grid_wait();
	constexpr int SF = 10240; // floats of staged sums
	__shared__ float Ys[SF];
	__shared__ float Os[attn::MAXD];
	const int i = blockIdx.y, h = blockIdx.x, t = threadIdx.x;
	const int npr = (pos[i] + attn::RCH) / attn::RCH;
	float* o = out + ((size_t)i * heads + h) * dim;
	if (npr <= pc) { // added by the weighted sum's thread block
		if (q == nullptr) return;
		for (int e = t; e < dim; e += 256) Os[e] = o[e];
		__syncthreads();
	} else {
		const int kc = SF / dim; // parts a round
		const float* y = Y + ((size_t)i * heads + h) * np * dim;
		for (int k0 = 0; k0 < npr; k0 += kc) {
			const int kn = min(kc, npr - k0);
			for (int e = t; e < kn * dim; e += 256) Ys[e] = y[(size_t)k0 * dim + e];
			__syncthreads();
			for (int e = t; e < dim; e += 256) {
				float v = k0 == 0 ? Ys[e] : Os[e];
				for (int k = k0 == 0 ? 1 : 0; k < kn; k++) v = f32add(v, Ys[k * dim + e]);
				Os[e] = v;
			}
			__syncthreads();
		}
		for (int e = t; e < dim; e += 256) o[e] = Os[e];
	}
	if (q == nullptr) return;
	const int lane = t & 31, nb = dim / 32;
	const size_t b0 = ((size_t)i * heads + h) * nb; // the head's first block in the row's
	for (int b = t >> 5; b < nb; b += 8)
		quant_q8_0_block(Os[b * 32 + lane], lane, q + (b0 + b) * 32, d + b0 + b, nullptr,
		                 s1 != nullptr ? s1 + b0 + b : nullptr);
}
