// ropeattn.cuh: the RoPE, KV store and attention of a batch of few rows in
// one kernel, for contexts of at most attn::DSM positions.
//
// A decode step's layer otherwise runs muser_rope_kv_store, then the four
// decode attention kernels (attention.cuh: scores, softmax, weighted sum,
// the parts' addition with the output's quantization), five dependent
// launches of a few microseconds each whose work, at a few hundred
// positions, is far smaller than a launch. muser_rope_attn computes the
// same values in one: a thread block per row and query head does
// everything for its head, the scores in shared memory between the steps.
//
// Every value is computed by the operations, in the order, of the kernels
// it replaces (attention.cuh's header gives the order; its functions are
// called where they can be):
//   - RoPE of the head's query and of its KV head's keys as rope_pairs,
//     the query rounded to f16 with an f16 cache (kernels.RoundF16s);
//   - the K and V of the batch's rows as the cache holds them: with an
//     f16 cache f16_to_f32_arith(f32_to_f16(x)), the values the scores
//     and the weighted sum would read back;
//   - each score as attn_scores_rows_d: 16 lane accumulators, lane d mod
//     16 with d ascending, the tree +8, +4, +2, +1, times scale;
//   - the maximum by fmaxf in any order (attn_scores_max says why that is
//     the CPU's maximum), e_j = Exp32(s_j − max), float32(1/sum) by
//     attn_inv_of (the float64 sum in any order, the CPU's eight chains
//     where that order could matter), each weight by attn_weight;
//   - each output dimension's weighted sum in parts of attn::RCH
//     positions, each part a chain from +0 with the positions ascending,
//     the parts' sums added in order;
//   - the output's Q8_0 or Q8_1 blocks by quant_q8_0_block, as
//     muser_attn_wsum_parts quantizes them.
//
// The rows of one sequence in a batch must be a run: consecutive rows at
// consecutive positions (a speculative verification step's, a short
// prompt's), first[i] the run's first row, at most attn::DRN rows; the
// sequence's positions below the run's first are in its cache before the
// launch. Only the block of row i and the first query head of a KV head
// writes row i's K and V of that KV head to the cache; every block takes
// the K and V of its run's rows from what it computed itself (it rotates
// and converts the keys of the rows before its own too), never from the
// cache, so no block reads what another writes.

namespace attn {
constexpr int DSM = 4096; // the most positions of a row (launch.go's AttnFusedMax)
constexpr int DMX = 128;  // the largest head dimension (launch.go's AttnFusedDim)
constexpr int DTH = 512;  // threads a block
constexpr int DRN = 16;   // the most rows of one sequence in a batch (launch.go's AttnFusedRun)
} // namespace attn

// attn_fused_dot is the score of query Qs against the K row at k (dim
// values, f16 where KH, float otherwise), as attn_scores_rows_d computes
// it for an f16 cache (F16: fused products, exact) or an f32 one.
template <bool F16, bool KH>
MUSER_DEV float attn_fused_dot(const float* __restrict__ Qs, const void* k, int dim, bool vec, float scale) {
	float acc[16];
#pragma unroll
	for (int l = 0; l < 16; l++) acc[l] = 0.0f;
	auto madd = [&](float& a, float kv, float qv) { a = F16 ? __fmaf_rn(kv, qv, a) : f32add(a, f32mul(kv, qv)); };
	if (vec) {
		// 16 dimensions a step: two 16-byte loads of f16, four of float.
#pragma unroll 4
		for (int d0 = 0; d0 < dim; d0 += 16) {
			float kr[16];
			if (KH) {
				const uint4* p = (const uint4*)((const unsigned short*)k + d0);
				const uint4 a = p[0], b = p[1];
				const unsigned w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
				for (int c = 0; c < 8; c++) {
					kr[2 * c] = f16_to_f32_arith(w[c] & 0xffffu);
					kr[2 * c + 1] = f16_to_f32_arith(w[c] >> 16);
				}
			} else {
				const float4* p = (const float4*)((const float*)k + d0);
#pragma unroll
				for (int c = 0; c < 4; c++) {
					const float4 v = p[c];
					kr[4 * c] = v.x, kr[4 * c + 1] = v.y, kr[4 * c + 2] = v.z, kr[4 * c + 3] = v.w;
				}
			}
#pragma unroll
			for (int l = 0; l < 16; l++) madd(acc[l], kr[l], Qs[d0 + l]);
		}
	} else {
		for (int d0 = 0; d0 < dim; d0 += 16) {
#pragma unroll
			for (int l = 0; l < 16; l++) {
				const int d = d0 + l;
				if (d < dim) {
					const float kv = KH ? f16_to_f32_arith(((const unsigned short*)k)[d]) : ((const float*)k)[d];
					madd(acc[l], kv, Qs[d]);
				}
			}
		}
	}
	return attn_lanes16(acc, scale);
}

// muser_rope_attn: grid (heads, n), block attn::DTH. Block (h, i) takes
// row i (position pos[i], m = pos[i] + 1 ≤ attn::DSM; its run's rows
// first[i] .. i) and query head h of KV head kvh = h / (heads / kvheads):
// q, k and v are the rows as the products left them (rows heads·dim and
// kvheads·dim apart), cs the rows' RoPE tables (ropeDim values a row),
// kc[i] and vc[i] the row's caches (attention.cuh's layout). It writes
// the head's output to out (as the decode attention does) and, where oq
// is not null, its Q8_0 blocks to oq and od (and their sums to os1 where
// not null: Q8_1). Dimensions at most attn::DMX.
template <bool F16>
__device__ __forceinline__ void rope_attn(const float* __restrict__ q, const float* __restrict__ k,
                                          const float* __restrict__ v, int heads, int kvheads, int dim, int ropeDim,
                                          int neox, const float* __restrict__ cs,
                                          const unsigned long long* __restrict__ kc,
                                          const unsigned long long* __restrict__ vc, const int* __restrict__ pos,
                                          const int* __restrict__ first, float* __restrict__ out, float scale,
                                          int8_t* __restrict__ oq, float* __restrict__ od, float* __restrict__ os1) {
	using namespace attn;
	constexpr int NW = DTH / 32;
	__shared__ __align__(16) float Qs[DMX], Os[DMX];
	__shared__ __align__(16) float Kb[DRN][DMX], Vb[DRN][DMX];
	__shared__ __align__(16) float Ss[DSM];
	__shared__ float Ps[DSM / RCH][DMX];
	__shared__ float wmax[NW];
	__shared__ double wsum[NW];
	__shared__ float Iv;
	const int h = blockIdx.x, i = blockIdx.y, t = threadIdx.x, lane = t & 31, warp = t >> 5;
	const int group = heads / kvheads, kvh = h / group, kvrow = kvheads * dim;
	const int m = pos[i] + 1;
	// The rows of the run: f .. i, at positions p0 .. m − 1.
	const int f = first[i], nr = i - f + 1, p0 = pos[f];

	// The head's query, and its KV head's keys and values of the run,
	// rotated.
	const float* qh = q + ((size_t)i * heads + h) * dim;
	for (int d = t; d < dim; d += DTH) Qs[d] = qh[d];
	for (int e = t; e < nr * dim; e += DTH) {
		const int r = e / dim, d = e % dim;
		const size_t at = (size_t)(f + r) * kvrow + (size_t)kvh * dim + d;
		Kb[r][d] = k[at], Vb[r][d] = v[at];
	}
	__syncthreads();
	const int half = ropeDim / 2;
	for (int it = t; it < (nr + 1) * half; it += DTH) {
		const int r = it / half, kk = it % half; // r = nr: the query
		float* x = r == nr ? Qs : Kb[r];
		const float* c = cs + (size_t)(r == nr ? i : f + r) * ropeDim;
		const float co = c[2 * kk], s = c[2 * kk + 1];
		const int a = neox ? kk : 2 * kk, b = neox ? kk + half : 2 * kk + 1;
		const float x0 = x[a], x1 = x[b];
		x[a] = f32sub(f32mul(x0, co), f32mul(x1, s));
		x[b] = f32add(f32mul(x0, s), f32mul(x1, co));
	}
	__syncthreads();
	// The cache's copy of row i (the first head of the group writes it)
	// and the values the attention reads of every row of the run.
	const bool writer = h % group == 0;
	const size_t e0 = (size_t)pos[i] * kvrow + (size_t)kvh * dim;
	for (int e = t; e < nr * dim; e += DTH) {
		const int r = e / dim, d = e % dim;
		if (F16) {
			const uint32_t kh = f32_to_f16(Kb[r][d]), vh = f32_to_f16(Vb[r][d]);
			if (writer && r == nr - 1) {
				((uint16_t*)kc[i])[e0 + d] = (uint16_t)kh;
				((uint16_t*)vc[i])[e0 + d] = (uint16_t)vh;
			}
			Kb[r][d] = f16_to_f32_arith(kh);
			Vb[r][d] = f16_to_f32_arith(vh);
		} else if (writer && r == nr - 1) {
			((float*)kc[i])[e0 + d] = Kb[r][d];
			((float*)vc[i])[e0 + d] = Vb[r][d];
		}
	}
	if (F16)
		for (int d = t; d < dim; d += DTH) Qs[d] = round_f16(Qs[d]);
	__syncthreads();

	// Scores and their maximum: positions below p0 from the cache.
	const size_t c0 = (size_t)kvh * dim;
	const unsigned long long kb = kc[i], vb = vc[i];
	const size_t es = F16 ? 2 : 4;
	const bool kvec = dim % 16 == 0 && ((kb + c0 * es) & 15) == 0 && (kvrow * es) % 16 == 0;
	float mx = attn_ninf();
	for (int j = t; j < m; j += DTH) {
		const float s = j >= p0 ? attn_fused_dot<F16, false>(Qs, Kb[j - p0], dim, false, scale)
		                        : attn_fused_dot<F16, F16>(Qs, (const void*)(kb + (j * (size_t)kvrow + c0) * es), dim,
		                                                   kvec, scale);
		Ss[j] = s;
		mx = fmaxf(mx, s);
	}
	mx = attn_block_max<NW>(mx, wmax);

	// The exponentials, their float64 sum, float32(1/sum).
	double sum = 0.0;
	for (int j = t; j < m; j += DTH) {
		const float e = exp32(f32sub(Ss[j], mx));
		Ss[j] = e;
		sum = f64add(sum, (double)e);
	}
	sum = attn_block_sum<NW>(sum, wsum);
	if (warp == 0) {
		const float inv = attn_inv_of(Ss, sum, m);
		if (lane == 0) Iv = inv;
	}
	__syncthreads();
	const float inv = Iv;
	for (int j = t; j < m; j += DTH) Ss[j] = attn_weight<F16>(Ss[j], inv);
	__syncthreads();

	// The weighted sums: chain (part p, dimension d) over the part's
	// positions, those below p0 from the cache, the run's from Vb. A
	// thread's loads run a batch of U positions ahead of its additions.
	constexpr int U = 16;
	const int np = (m + RCH - 1) / RCH;
	auto madd = [&](float& y, float w, float x) { y = F16 ? __fmaf_rn(w, x, y) : f32add(y, f32mul(w, x)); };
	for (int ch = t; ch < np * dim; ch += DTH) {
		const int p = ch / dim, d = ch % dim;
		const int j0 = p * RCH, jn = min(m, j0 + RCH), j1 = min(p0, jn); // j0 .. j1-1 from the cache
		const size_t e = c0 + d;
		auto load = [&](unsigned (&r)[U], int j) {
#pragma unroll
			for (int u = 0; u < U; u++) {
				const size_t at = (size_t)(j + u) * kvrow + e;
				r[u] = j + u >= j1 ? 0u
				       : F16       ? (unsigned)((const unsigned short*)vb)[at]
				                   : __float_as_uint(((const float*)vb)[at]);
			}
		};
		unsigned cur[U], nxt[U] = {};
		load(cur, j0);
		float y = 0.0f;
		for (int j = j0; j < j1; j += U) {
			if (j + U < j1) load(nxt, j + U);
#pragma unroll
			for (int u = 0; u < U; u++)
				if (j + u < j1) madd(y, Ss[j + u], F16 ? f16_to_f32_arith(cur[u]) : __uint_as_float(cur[u]));
#pragma unroll
			for (int u = 0; u < U; u++) cur[u] = nxt[u];
		}
		for (int j = max(j0, p0); j < jn; j++) madd(y, Ss[j], Vb[j - p0][d]);
		Ps[p][d] = y;
	}
	__syncthreads();
	float* o = out + ((size_t)i * heads + h) * dim;
	for (int d = t; d < dim; d += DTH) {
		float y = Ps[0][d];
		for (int p = 1; p < np; p++) y = f32add(y, Ps[p][d]);
		o[d] = y;
		Os[d] = y;
	}
	if (oq == nullptr) return;
	__syncthreads();
	const int nb = dim / 32;
	const size_t b0 = ((size_t)i * heads + h) * nb; // the head's first block in the row's
	for (int b = warp; b < nb; b += NW)
		quant_q8_0_block(Os[b * 32 + lane], lane, oq + (b0 + b) * 32, od + b0 + b, nullptr,
		                 os1 != nullptr ? os1 + b0 + b : nullptr);
}

extern "C" __global__ void __launch_bounds__(attn::DTH)
muser_rope_attn_f16(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v, int heads,
                    int kvheads, int dim, int ropeDim, int neox, const float* __restrict__ cs,
                    const unsigned long long* __restrict__ kc, const unsigned long long* __restrict__ vc,
                    const int* __restrict__ pos, const int* __restrict__ first, float* __restrict__ out, float scale,
                    int8_t* __restrict__ oq, float* __restrict__ od, float* __restrict__ os1) {
	grid_wait();
	rope_attn<true>(q, k, v, heads, kvheads, dim, ropeDim, neox, cs, kc, vc, pos, first, out, scale, oq, od, os1);
}

extern "C" __global__ void __launch_bounds__(attn::DTH)
muser_rope_attn_f32(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v, int heads,
                    int kvheads, int dim, int ropeDim, int neox, const float* __restrict__ cs,
                    const unsigned long long* __restrict__ kc, const unsigned long long* __restrict__ vc,
                    const int* __restrict__ pos, const int* __restrict__ first, float* __restrict__ out, float scale,
                    int8_t* __restrict__ oq, float* __restrict__ od, float* __restrict__ os1) {
	grid_wait();
	rope_attn<false>(q, k, v, heads, kvheads, dim, ropeDim, neox, cs, kc, vc, pos, first, out, scale, oq, od, os1);
}
