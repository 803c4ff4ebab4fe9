// attention.cuh: causal grouped-query attention over per-sequence KV
// caches, exactly as the CPU engine's attendTile (infer/engine/cpu)
// computes it.
//
// # A batch of rows (the ABI shared by the three kernels)
//
// Row i (i < n) of the batch is one token: its query q[i][heads·dim], its
// position pos[i] (it attends to positions 0..pos[i] of its own sequence),
// and its sequence's cache for this layer: kc[i], vc[i] are the device
// addresses of element 0 of the layer's K and V cache (infer/kvcache
// layout: position p at element p·kvrow, kvrow = kvheads·dim, heads one
// after another). The rows' own K and V must already be stored
// (muser_kv_store_*). tiles[0..ntiles] are row boundaries: tile t is rows
// tiles[t] .. tiles[t+1]-1, which must share kc/vc and have consecutive
// positions. A thread block computes one tile's queries for gh =
// min(group, qcap) of the query heads of one KV head (blockIdx.y = kvh ·
// ceil(group/gh) + part), at most qcap = attn_qcap(dim) queries, so a tile
// holds at most qcap/gh rows (launch.go's AttnTiles builds them); how rows
// are cut into tiles never changes a result. S is scratch: row i, head h's
// scores at S[(i·heads + h)·ld + j], ld > every pos[i].
//
// # Order of operations (per row i, head h, its KV head h/group)
//
//   f16 cache:  q' = f16(q) (kernels.RoundF16s);
//               s_j = DotF16(K_j, q')·scale for j ≤ pos (16 accumulators
//               lane j mod 16, then the tree; the products f16 × f16 are
//               exact, so they are fused; these kernels are ExactFMA);
//               Softmax(s) (kernels.Softmax); w_j = f16(s_j);
//               y = +0; y = y + w_j·V_j for j = 0, 1, … pos (fused: exact).
//   f32 cache:  the same with Dot and AXPY: no rounding of q or w, every
//               product rounded before it is added.
//
// scale is float32(1/sqrt(float64(dim))), passed by the host.
#pragma once

#include "common.cuh"

namespace attn {
constexpr int KT = 32;      // keys per shared-memory tile
constexpr int QMAX = 32;    // queries per thread block at most
constexpr int THREADS = 256;
} // namespace attn

// Padded row length of the shared Q and K tiles: a multiple of 4 (float4
// loads) plus 4 (conflict-free 16-byte loads across keys).
MUSER_DEV int attn_pad(int dim) { return ((dim + 3) & ~3) + 4; }

// attn_qcap is the number of queries a thread block takes for head
// dimension dim: 32, or fewer where the scores kernel's Q and K tiles,
// (qcap + 32)·attn_pad(dim) floats, would pass 48 KiB. It is at least 1
// for dim ≤ 368 (launch.go refuses larger dims).
MUSER_DEV int attn_qcap(int dim) { return min(attn::QMAX, 12288 / attn_pad(dim) - attn::KT); }

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

MUSER_DEV AttnCTA attn_cta(const int* tiles, int heads, int kvheads, int dim) {
	AttnCTA c;
	c.group = heads / kvheads;
	const int gh = min(c.group, attn_qcap(dim));
	const int hch = (c.group + gh - 1) / gh;
	c.lo = tiles[blockIdx.x];
	c.hi = tiles[blockIdx.x + 1];
	c.kvh = blockIdx.y / hch;
	c.g0 = (blockIdx.y % hch) * gh;
	c.gn = min(gh, c.group - c.g0);
	c.nq = min(attn_qcap(dim), (c.hi - c.lo) * c.gn);
	return c;
}

// attn_scores: grid (ntiles, kvheads·ceil(group/gh), ceil((max pos + 1)/32)),
// block 256, dynamic shared memory (attn_qcap(dim) + 32)·attn_pad(dim)·4
// bytes.
template <bool F16>
__device__ __forceinline__ void attn_scores(const float* __restrict__ q, int heads, int kvheads, int dim,
                                            const unsigned long long* __restrict__ kc, const int* __restrict__ pos,
                                            const int* __restrict__ tiles, float* __restrict__ S, int ld, float scale) {
	using namespace attn;
	MUSER_DYNAMIC_SMEM(smem);
	const int pd = attn_pad(dim), qcap = attn_qcap(dim);
	float* Qs = smem;             // [qcap][pd]
	float* Ks = smem + qcap * pd; // [KT][pd]
	const AttnCTA cta = attn_cta(tiles, heads, kvheads, dim);
	const int j0 = blockIdx.z * KT;
	const int lastPos = pos[cta.hi - 1];
	if (j0 > lastPos) return;
	const int nq = cta.nq;
	const int kvrow = kvheads * dim;
	const int tid = threadIdx.x;

	for (int it = tid; it < qcap * dim; it += THREADS) {
		const int qi = it / dim, i = it % dim;
		float v = 0.0f;
		if (qi < nq) {
			v = q[(size_t)cta.row(qi) * heads * dim + (size_t)cta.head(qi) * dim + i];
			if (F16) v = round_f16(v);
		}
		Qs[qi * pd + i] = v;
	}
	for (int it = tid; it < KT * dim; it += THREADS) {
		const int jj = it / dim, i = it % dim, j = j0 + jj;
		float v = 0.0f;
		if (j <= lastPos) {
			const size_t e = (size_t)j * kvrow + (size_t)cta.kvh * dim + i;
			v = F16 ? f16_to_f32(((const uint16_t*)kc[cta.lo])[e]) : ((const float*)kc[cta.lo])[e];
		}
		Ks[jj * pd + i] = v;
	}
	__syncthreads();

	// Thread: queries 2qp, 2qp+1 × keys kp, kp+16. Query slots past qcap
	// read rows of the K tile (inside the allocation) and store nothing.
	const int qp = tid / 16, kp = tid % 16;
	const float* qa = Qs + (2 * qp) * pd;
	const float* qb = qa + pd;
	const float* ka = Ks + kp * pd;
	const float* kb = Ks + (kp + 16) * pd;
	float acc[4][16];
#pragma unroll
	for (int p = 0; p < 4; p++)
#pragma unroll
		for (int l = 0; l < 16; l++) acc[p][l] = 0.0f;
	const int d16 = dim & ~15;
	for (int i0 = 0; i0 < d16; i0 += 16) {
#pragma unroll
		for (int m = 0; m < 4; m++) {
			const float4 k0 = *(const float4*)(ka + i0 + 4 * m), k1 = *(const float4*)(kb + i0 + 4 * m);
			const float4 q0 = *(const float4*)(qa + i0 + 4 * m), q1 = *(const float4*)(qb + i0 + 4 * m);
			const float kv0[4] = {k0.x, k0.y, k0.z, k0.w}, kv1[4] = {k1.x, k1.y, k1.z, k1.w};
			const float qv0[4] = {q0.x, q0.y, q0.z, q0.w}, qv1[4] = {q1.x, q1.y, q1.z, q1.w};
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int l = 4 * m + e;
				if (F16) {
					acc[0][l] = __fmaf_rn(kv0[e], qv0[e], acc[0][l]);
					acc[1][l] = __fmaf_rn(kv1[e], qv0[e], acc[1][l]);
					acc[2][l] = __fmaf_rn(kv0[e], qv1[e], acc[2][l]);
					acc[3][l] = __fmaf_rn(kv1[e], qv1[e], acc[3][l]);
				} else {
					acc[0][l] = f32add(acc[0][l], f32mul(kv0[e], qv0[e]));
					acc[1][l] = f32add(acc[1][l], f32mul(kv1[e], qv0[e]));
					acc[2][l] = f32add(acc[2][l], f32mul(kv0[e], qv1[e]));
					acc[3][l] = f32add(acc[3][l], f32mul(kv1[e], qv1[e]));
				}
			}
		}
	}
#pragma unroll
	for (int l = 0; l < 16; l++) { // a tail shorter than 16: lanes 0, 1, …
		const int i = d16 + l;
		if (i < dim) {
			if (F16) {
				acc[0][l] = __fmaf_rn(ka[i], qa[i], acc[0][l]);
				acc[1][l] = __fmaf_rn(kb[i], qa[i], acc[1][l]);
				acc[2][l] = __fmaf_rn(ka[i], qb[i], acc[2][l]);
				acc[3][l] = __fmaf_rn(kb[i], qb[i], acc[3][l]);
			} else {
				acc[0][l] = f32add(acc[0][l], f32mul(ka[i], qa[i]));
				acc[1][l] = f32add(acc[1][l], f32mul(kb[i], qa[i]));
				acc[2][l] = f32add(acc[2][l], f32mul(ka[i], qb[i]));
				acc[3][l] = f32add(acc[3][l], f32mul(kb[i], qb[i]));
			}
		}
	}
#pragma unroll
	for (int p = 0; p < 4; p++) {
		const int qi = 2 * qp + (p >> 1), j = j0 + kp + 16 * (p & 1);
		const float s = f32mul(reduce16(acc[p]), scale);
		if (qi < nq) {
			const int row = cta.row(qi);
			if (j <= pos[row]) S[((size_t)row * heads + cta.head(qi)) * ld + j] = s;
		}
	}
}

extern "C" __global__ void __launch_bounds__(256)
muser_attn_scores_f16(const float* __restrict__ q, int heads, int kvheads, int dim,
                      const unsigned long long* __restrict__ kc, const int* __restrict__ pos,
                      const int* __restrict__ tiles, float* __restrict__ S, int ld, float scale) {
	attn_scores<true>(q, heads, kvheads, dim, kc, pos, tiles, S, ld, scale);
}

extern "C" __global__ void __launch_bounds__(256)
muser_attn_scores_f32(const float* __restrict__ q, int heads, int kvheads, int dim,
                      const unsigned long long* __restrict__ kc, const int* __restrict__ pos,
                      const int* __restrict__ tiles, float* __restrict__ S, int ld, float scale) {
	attn_scores<false>(q, heads, kvheads, dim, kc, pos, tiles, S, ld, scale);
}

// muser_attn_softmax replaces each row i, head h's scores s_0..s_pos[i] in S
// by kernels.Softmax of them: e_j = Exp32(s_j − max); the e_j summed in
// float64 with 8 accumulators (j into accumulator j mod 8, in order, one
// thread each) reduced by the tree +4, +2, +1; then e_j·float32(1/sum),
// rounded to f16 when round ≠ 0 (the f16-cache weights).
//
// Launch: grid (n, heads), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_attn_softmax(float* S, int ld, const int* __restrict__ pos, int n, int heads, int round) {
	__shared__ float wmax[8];
	__shared__ double part[8];
	__shared__ float inv;
	const int i = blockIdx.x, h = blockIdx.y;
	if (i >= n) return;
	const int m = pos[i] + 1;
	float* s = S + ((size_t)i * heads + h) * ld;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

	// The maximum. For rows without NaN it is exact whatever the order
	// (max(+0, −0) may differ from the CPU's, which changes no x − max);
	// a NaN anywhere makes every output NaN on both sides.
	float mx = -__uint_as_float(0x7f800000u);
	for (int j = tid; j < m; j += 256) mx = fmaxf(mx, s[j]);
#pragma unroll
	for (int off = 16; off >= 1; off /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
	if (lane == 0) wmax[warp] = mx;
	__syncthreads();
	mx = wmax[0];
	for (int w = 1; w < 8; w++) mx = fmaxf(mx, wmax[w]);
	bool anyNaN = false;
	for (int j = tid; j < m; j += 256) {
		const float v = s[j];
		anyNaN |= is_nan(v);
		s[j] = exp32(f32sub(v, mx));
	}
	// A NaN score: the CPU's max is then the sequential scan's, which the
	// result does not depend on (every e_j sum is NaN), so nothing to do.
	(void)anyNaN;
	__syncthreads();
	if (tid < 8) {
		double sum = 0.0;
#pragma unroll 4
		for (int j = tid; j < m; j += 8) sum = f64add(sum, (double)s[j]);
		part[tid] = sum;
	}
	__syncthreads();
	if (tid == 0) {
		// The tree +4, +2, +1.
		const double s0 = f64add(part[0], part[4]), s1 = f64add(part[1], part[5]);
		const double s2 = f64add(part[2], part[6]), s3 = f64add(part[3], part[7]);
		const double sum = f64add(f64add(s0, s2), f64add(s1, s3));
		inv = __double2float_rn(muser_ddiv_rn(1.0, sum));
	}
	__syncthreads();
	const float iv = inv;
	for (int j = tid; j < m; j += 256) {
		float v = f32mul(s[j], iv);
		if (round) v = round_f16(v);
		s[j] = v;
	}
}

// attn_wsum: grid (ntiles, kvheads·ceil(group/gh)), block 256, dynamic
// shared memory (32·min(dim, 128) + 32·33)·4 bytes.
//
// The weighted sums of the block's queries are a small matrix product,
// out[q][d] = Σ_j w[q][j]·V[j][d], computed as a SIMT product whose
// reduction runs in position order: thread (qg, dl) = (tid / 32, tid % 32)
// holds the outputs of queries 4qg .. 4qg+3 at dimensions dl, dl+32, …
// (up to 128 dimensions a pass; a larger head takes several passes),
// and for each tile of 32 positions adds w·V for j = j0, j0+1, … in turn
// (each output is the one chain y = y + w_j·V_j of the CPU's AXPYF16Rows,
// j ascending, positions past the query's own skipped). A query's chain
// never depends on which thread, tile or block computes it. The weights of
// the tile are staged in shared memory as [query][33] (a broadcast read per
// query), the V rows as [32][dim] (consecutive dimensions per warp).
template <bool F16>
__device__ __forceinline__ void attn_wsum(const float* __restrict__ S, int ld, const unsigned long long* __restrict__ vc,
                                          const int* __restrict__ pos, const int* __restrict__ tiles,
                                          float* __restrict__ out, int heads, int kvheads, int dim) {
	using namespace attn;
	constexpr int QT = 4;                 // queries per thread
	constexpr int DP = 128;               // dimensions per pass
	constexpr int DT = DP / 32;           // dimension slots per thread
	constexpr int WL = KT + 1;            // padded row of the staged weights
	constexpr int VR = KT * DP / THREADS; // V elements a thread stages per tile
	constexpr int WR = QMAX * KT / THREADS;
	MUSER_DYNAMIC_SMEM(smem);
	float* Vs = smem;                     // [KT][dw], dw ≤ min(dim, DP)
	float* Ws = smem + KT * min(dim, DP); // [QMAX][WL]: the launch's shared memory ends there
	const AttnCTA cta = attn_cta(tiles, heads, kvheads, dim);
	const int nq = cta.nq;
	const int kvrow = kvheads * dim;
	const int tid = threadIdx.x;
	const int qg = tid / 32, dl = tid % 32;
	int m[QT]; // positions each of the thread's queries attends to
#pragma unroll
	for (int k = 0; k < QT; k++) {
		const int qi = QT * qg + k;
		m[k] = qi < nq ? pos[cta.row(qi)] + 1 : 0;
	}
	const int mlast = pos[cta.hi - 1] + 1;
	const unsigned short* v16 = (const unsigned short*)vc[cta.lo];
	const float* v32 = (const float*)vc[cta.lo];
	// Dimensions d0 .. d0+dw-1 per pass (one pass for dim ≤ 128).
	for (int d0 = 0; d0 < dim; d0 += DP) {
		const int dw = min(DP, dim - d0);
		const int nd = max(0, (dw - dl + 31) / 32); // this thread's dimensions: d0 + dl + 32c, c < nd
		const int vn = KT * dw;
		float y[QT][DT];
#pragma unroll
		for (int k = 0; k < QT; k++)
#pragma unroll
			for (int c = 0; c < DT; c++) y[k][c] = 0.0f;
		// The next tile of V rows and weights is loaded into registers
		// while the current one is multiplied (the loads do not wait on
		// the sums).
		float rv[VR], rw[WR];
		auto fetch = [&](int j0) {
#pragma unroll
			for (int k = 0; k < VR; k++) {
				const int it = tid + k * THREADS;
				if (it < vn) {
					const int jj = it / dw, i = it - jj * dw, j = j0 + jj;
					float v = 0.0f;
					if (j < mlast) {
						const size_t e = (size_t)j * kvrow + (size_t)cta.kvh * dim + d0 + i;
						v = F16 ? f16_to_f32(v16[e]) : v32[e];
					}
					rv[k] = v;
				}
			}
#pragma unroll
			for (int k = 0; k < WR; k++) {
				const int it = tid + k * THREADS;
				const int wq = it / KT, jj = it % KT, j = j0 + jj;
				float v = 0.0f;
				if (wq < nq) {
					const int wr = cta.row(wq);
					if (j <= pos[wr]) v = S[((size_t)wr * heads + cta.head(wq)) * ld + j];
				}
				rw[k] = v;
			}
		};
		fetch(0);
		for (int j0 = 0; j0 < mlast; j0 += KT) {
#pragma unroll
			for (int k = 0; k < VR; k++) {
				const int it = tid + k * THREADS;
				if (it < vn) Vs[it] = rv[k];
			}
#pragma unroll
			for (int k = 0; k < WR; k++) {
				const int it = tid + k * THREADS;
				Ws[(it / KT) * WL + it % KT] = rw[k];
			}
			__syncthreads();
			if (j0 + KT < mlast) fetch(j0 + KT);
			int jn[QT];
			bool all = true;
#pragma unroll
			for (int k = 0; k < QT; k++) {
				jn[k] = max(0, min(KT, m[k] - j0));
				all = all && jn[k] == KT;
			}
			const float* w0 = Ws + (QT * qg) * WL;
			if (all) {
#pragma unroll 8
				for (int jj = 0; jj < KT; jj++) {
					float w[QT];
#pragma unroll
					for (int k = 0; k < QT; k++) w[k] = w0[k * WL + jj];
#pragma unroll
					for (int c = 0; c < DT; c++) {
						if (c < nd) {
							const float v = Vs[jj * dw + dl + 32 * c];
#pragma unroll
							for (int k = 0; k < QT; k++)
								y[k][c] = F16 ? __fmaf_rn(w[k], v, y[k][c]) : f32add(y[k][c], f32mul(w[k], v));
						}
					}
				}
			} else {
				for (int jj = 0; jj < KT; jj++) {
					float w[QT];
#pragma unroll
					for (int k = 0; k < QT; k++) w[k] = w0[k * WL + jj];
#pragma unroll
					for (int c = 0; c < DT; c++) {
						if (c < nd) {
							const float v = Vs[jj * dw + dl + 32 * c];
#pragma unroll
							for (int k = 0; k < QT; k++) {
								if (jj < jn[k]) y[k][c] = F16 ? __fmaf_rn(w[k], v, y[k][c]) : f32add(y[k][c], f32mul(w[k], v));
							}
						}
					}
				}
			}
			__syncthreads();
		}
#pragma unroll
		for (int k = 0; k < QT; k++) {
			const int qi = QT * qg + k;
			if (qi >= nq) continue;
			const size_t base = (size_t)cta.row(qi) * heads * dim + (size_t)cta.head(qi) * dim + d0;
#pragma unroll
			for (int c = 0; c < DT; c++)
				if (c < nd) out[base + dl + 32 * c] = y[k][c];
		}
	}
}

extern "C" __global__ void __launch_bounds__(256)
muser_attn_wsum_f16(const float* __restrict__ S, int ld, const unsigned long long* __restrict__ vc,
                    const int* __restrict__ pos, const int* __restrict__ tiles, float* __restrict__ out,
                    int heads, int kvheads, int dim) {
	attn_wsum<true>(S, ld, vc, pos, tiles, out, heads, kvheads, dim);
}

extern "C" __global__ void __launch_bounds__(256)
muser_attn_wsum_f32(const float* __restrict__ S, int ld, const unsigned long long* __restrict__ vc,
                    const int* __restrict__ pos, const int* __restrict__ tiles, float* __restrict__ out,
                    int heads, int kvheads, int dim) {
	attn_wsum<false>(S, ld, vc, pos, tiles, out, heads, kvheads, dim);
}
