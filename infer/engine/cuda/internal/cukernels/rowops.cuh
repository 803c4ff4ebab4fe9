// rowops.cuh: the per-token operations of the forward pass
// (infer/engine/cpu/forward.go), each in the CPU's order of operations, and the
// embedding lookup (infer/ggml/dequant.go).
#pragma once

#include "weights.cuh"
#include "quant.cuh"
#include "mmf.cuh"

// chain_sum returns sum + sq[0] + sq[1] + … + sq[m-1], added one after the
// other in index order (one sequential chain of float64 additions). The
// loads of the next 16 values are issued before the 16 additions of the
// current ones, so the chain runs at the latency of the additions, not of
// the shared-memory loads.
MUSER_DEV double chain_sum(double sum, const double* sq, int m) {
	constexpr int U = 16;
	int i = 0;
	if (m >= U) {
		double cur[U];
#pragma unroll
		for (int k = 0; k < U; k++) cur[k] = sq[k];
		for (i = U; i + U <= m; i += U) {
			double nx[U];
#pragma unroll
			for (int k = 0; k < U; k++) nx[k] = sq[i + k];
#pragma unroll
			for (int k = 0; k < U; k++) sum = f64add(sum, cur[k]);
#pragma unroll
			for (int k = 0; k < U; k++) cur[k] = nx[k];
		}
#pragma unroll
		for (int k = 0; k < U; k++) sum = f64add(sum, cur[k]);
	}
	for (; i < m; i++) sum = f64add(sum, sq[i]);
	return sum;
}

// sum_squares returns, to every thread of the block, the squares of xr's
// cols floats (rounded to float32, widened) summed in float64 in an order
// of its own: each thread's columns in turn, a shuffle tree within each
// warp, the warps' partial sums in warp order. blockDim.x is a multiple of
// 32; part is shared scratch of blockDim.x/32 doubles.
MUSER_DEV double sum_squares(const float* xr, int cols, double* part) {
	double acc = 0.0;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) {
		const float v = xr[c];
		acc = f64add(acc, (double)f32mul(v, v));
	}
	for (int off = 16; off >= 1; off /= 2) acc = f64add(acc, __shfl_xor_sync(0xffffffffu, acc, off));
	if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = acc;
	__syncthreads();
	double sum = 0.0;
	for (int k = 0; k < (int)(blockDim.x >> 5); k++) sum = f64add(sum, part[k]);
	return sum;
}

// rms_mean_eps is float32(sum/cols + eps) as kernels.RMSNorm rounds it. It
// is non-decreasing in sum: every step is one correctly rounded operation.
MUSER_DEV float rms_mean_eps(double sum, int cols, float eps) {
	return __double2float_rn(f64add(muser_ddiv_rn(sum, (double)cols), (double)eps));
}

// rms_inv is kernels.RMSNorm's scale from t = rms_mean_eps(…):
// 1/float32(sqrt(float64(t))).
MUSER_DEV float rms_inv(float t) { return muser_fdiv_rn(1.0f, __double2float_rn(muser_dsqrt_rn((double)t))); }

// rms_scale_from returns, to every thread of the block, the RMSNorm scale
// of the row xr of cols floats as kernels.RMSNorm computes it: squares
// rounded to float32, summed in float64 in index order (one sequential
// chain), mean = sum/cols, s = 1/float32(sqrt(float64(float32(mean +
// eps)))). tree is the same squares summed in any other order.
//
// The chain runs at the latency of its additions (about 9 µs for 896
// columns), so the block first sums the squares in parallel (sum_squares);
// the chain lies within chain_margin of that sum, and rms_mean_eps is
// monotone, so when both ends give the same float32 the chain gives it
// too (lanes 0 and 1 of warp 0 take the two ends at once). Only when
// they differ (a float32 rounding boundary
// within about 1e-13 of the mean, or a NaN or infinity) does thread 0 run
// the chain (chain_sum over shared chunks of CH squares). sq is shared
// scratch of CH doubles, part of blockDim.x/32, res one shared float and
// decided one shared int.
template <int CH>
__device__ __forceinline__ float rms_scale_from(double tree, const float* xr, int cols, float eps, double* sq,
                                                float* res, int* decided) {
	const int tid = threadIdx.x, nt = blockDim.x;
	if (tid < 32) {
		const double m = chain_margin(tree, cols);
		const float lo = rms_mean_eps(tid == 0 ? f64sub(tree, m) : f64add(tree, m), cols, eps);
		const float hi = __shfl_sync(0xffffffffu, lo, 1);
		if (tid == 0) {
			*decided = lo == hi; // false for a NaN
			if (lo == hi) *res = rms_inv(lo);
		}
	}
	__syncthreads();
	if (*decided) return *res;
	double sum = 0.0;
	for (int c0 = 0; c0 < cols; c0 += CH) {
		const int m = min(CH, cols - c0);
		for (int i = tid; i < m; i += nt) {
			const float v = xr[c0 + i];
			sq[i] = (double)f32mul(v, v);
		}
		__syncthreads();
		if (tid == 0) sum = chain_sum(sum, sq, m);
		__syncthreads();
	}
	if (tid == 0) *res = rms_inv(rms_mean_eps(sum, cols, eps));
	__syncthreads();
	return *res;
}

// rms_scale is rms_scale_from of the parallel sum of xr's squares.
template <int CH>
__device__ __forceinline__ float rms_scale(const float* xr, int cols, float eps, double* sq, double* part,
                                           float* res, int* decided) {
	const double tree = sum_squares(xr, cols, part);
	return rms_scale_from<CH>(tree, xr, cols, eps, sq, res, decided);
}

// fused_quant names where a row operation quantizes the row it writes: q
// int8 [cols]; for Q8_0 and Q8_1 (bsums null) d float [cols/32] and s1
// float [cols/32] when not null (Q8_1), as muser_quant_q8_0; for Q8_K
// (bsums not null) d float [cols/256] and bsums int32 [cols/16], as
// muser_quant_q8_k. q null: no quantization.
struct fused_quant {
	int8_t* q;
	float* d;
	float* s1;
	int* bsums;
};

// fused_quant_row returns f's outputs for row i of cols values.
MUSER_DEV fused_quant fused_quant_row(int8_t* q, float* d, float* s1, int* bsums, size_t i, int cols) {
	if (q == nullptr) return fused_quant{nullptr, nullptr, nullptr, nullptr};
	const size_t c = (size_t)cols;
	if (bsums != nullptr) return fused_quant{q + i * c, d + i * (c / 256), nullptr, bsums + i * (c / 16)};
	return fused_quant{q + i * c, d + i * (c / 32), s1 != nullptr ? s1 + i * (c / 32) : nullptr, nullptr};
}

// fused_quant_at quantizes v, element c of a row, into f (a row of
// fused_quant_row): for Q8_0 and Q8_1 every lane of the warp holding the
// 32 consecutive elements of c's block must call it; for Q8_K every
// thread of a block of 256 holding the super-block's 256 consecutive
// elements, with the block's scratch sc.
MUSER_DEV void fused_quant_at(const fused_quant& f, float v, int c, q8k_scratch* sc) {
	if (f.q == nullptr) return;
	if (f.bsums != nullptr) {
		const int tid = threadIdx.x, c0 = c - tid;
		quant_q8_k_block(v, tid, f.q + c0, f.d + (c0 >> 8), f.bsums + (c0 >> 4), sc);
		return;
	}
	const int lane = threadIdx.x & 31, b = c >> 5;
	quant_q8_0_block(v, lane, f.q + (c - lane), f.d + b, nullptr, f.s1 != nullptr ? f.s1 + b : nullptr);
}

// norm_out writes dr[c] = (xr[c]·s)·w[c] for c < cols (kernels.RMSNorm's
// last loop) and quantizes the row it writes into f (fused_quant_at: cols
// a multiple of 32, or of 256 for Q8_K with blockDim.x 256, so that every
// thread takes part in every block).
MUSER_DEV void norm_out(const float* xr, float s, const float* __restrict__ w, float* dr, int cols,
                        const fused_quant& f, q8k_scratch* sc) {
	for (int c = threadIdx.x; c < cols; c += blockDim.x) {
		const float v = f32mul(f32mul(xr[c], s), w[c]);
		dr[c] = v;
		fused_quant_at(f, v, c, sc);
	}
}

// prefetch_lines brings the count floats at p (weights: read before
// grid_wait) into the L2 cache, one 128-byte line per thread.
MUSER_DEV void prefetch_lines(const float* p, int count) {
	if (count <= 0) return;
	for (int c = threadIdx.x * 32; c < count + 31; c += blockDim.x * 32) prefetch_l2(p + min(c, count - 1));
}

// NormRegs is the most columns a thread of a 256-thread norm block holds
// in registers (norm_row): rows of up to 256·NormRegs columns are loaded
// once, in one round of loads, and normalized and quantized from there;
// wider rows take the loops of rms_scale and norm_out. A norm of one
// decode row is a single block whose time is the latency of its rounds
// to memory. More registers a thread would cost a prefill's norms (a
// block per row) their occupancy: 16 measured 0.4–2% slower there, 8
// within 0.7% of the loops.
constexpr int NormRegs = 8;

// norm_row is muser_rmsnorm's and muser_add_rmsnorm's row i with its
// columns c = threadIdx.x + 256k (k < PER) in registers: w's (and bias's,
// when not null) are loaded before grid_wait (weights, plain loads), then
// x's row rowidx[i] (i when rowidx is null), with o's added first when o
// is not null (o = o + bias, x = x + o, x written back), then the scale
// and dst = (x·s)·w, quantized into f. blockDim.x is 256.
template <int PER>
__device__ __forceinline__ void norm_row(float* x, const int* __restrict__ rowidx, const float* o,
                                         const float* bias, const float* w, float* dr, int i, int n, int cols, float eps, const fused_quant& f,
                                         double* sq, double* part, float* res, int* decided, q8k_scratch* sc) {
	const int tid = threadIdx.x;
	float wv[PER], bv[PER], xv[PER];
#pragma unroll
	for (int k = 0; k < PER; k++) {
		const int c = tid + 256 * k;
		wv[k] = c < cols ? w[c] : 0.0f;
		bv[k] = c < cols && bias != nullptr ? bias[c] : 0.0f;
	}
	grid_wait();
	if (i >= n) return;
	float* xr = x + (size_t)(rowidx != nullptr ? rowidx[i] : i) * cols;
	const float* orow = o != nullptr ? o + (size_t)i * cols : nullptr;
	float ov[PER];
#pragma unroll
	for (int k = 0; k < PER; k++) {
		const int c = tid + 256 * k;
		xv[k] = c < cols ? xr[c] : 0.0f;
		ov[k] = c < cols && orow != nullptr ? orow[c] : 0.0f;
	}
	if (orow != nullptr) {
#pragma unroll
		for (int k = 0; k < PER; k++) {
			const int c = tid + 256 * k;
			if (c >= cols) break;
			float a = ov[k];
			if (bias != nullptr) a = f32add(a, bv[k]);
			xv[k] = f32add(xv[k], a);
			xr[c] = xv[k];
		}
	}
	// sum_squares's order, from the registers.
	double acc = 0.0;
#pragma unroll
	for (int k = 0; k < PER; k++) {
		if (tid + 256 * k >= cols) break;
		acc = f64add(acc, (double)f32mul(xv[k], xv[k]));
	}
	for (int off = 16; off >= 1; off /= 2) acc = f64add(acc, __shfl_xor_sync(0xffffffffu, acc, off));
	if ((tid & 31) == 0) part[tid >> 5] = acc;
	__syncthreads();
	double tree = 0.0;
	for (int k = 0; k < 8; k++) tree = f64add(tree, part[k]);
	const float s = rms_scale_from<1024>(tree, xr, cols, eps, sq, res, decided);
	// A loop, not unrolled: its body (the quantizer) is fetched once,
	// and the registers shift down a place a turn.
#pragma unroll 1
	for (int k = 0; k < PER; k++) {
		const int c = tid + 256 * k;
		if (c >= cols) break;
		const float v = f32mul(f32mul(xv[0], s), wv[0]);
		dr[c] = v;
		fused_quant_at(f, v, c, sc);
#pragma unroll
		for (int j = 0; j + 1 < PER; j++) {
			xv[j] = xv[j + 1];
			wv[j] = wv[j + 1];
		}
	}
}

// muser_rmsnorm sets dst[i][c] = (x[src][c]·s)·w[c] (kernels.RMSNorm) for
// rows i < n of cols floats, where src = rowidx[i], or i when rowidx is
// null (the final norm of the rows that want logits gathers them this way).
// dst may be x when rowidx is null. When q is not null it also quantizes
// each row i of dst: with bsums null as muser_quant_q8_0 (q int8
// [n][cols], qd float [n][cols/32], s1 float [n][cols/32] when not null;
// cols a multiple of 32), with bsums not null as muser_quant_q8_k (q, qd
// float [n][cols/256], bsums int32 [n][cols/16]; cols a multiple of 256).
// w is read before grid_wait (no __restrict__: see grid_wait).
//
// Launch: grid (n), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_rmsnorm(const float* x, const int* __restrict__ rowidx, float* dst, int n, int cols, const float* w, float eps,
              int8_t* __restrict__ q, float* __restrict__ qd, float* __restrict__ s1, int* __restrict__ bsums) {
	__shared__ double sq[1024], part[8];
	__shared__ float res;
	__shared__ int decided;
	__shared__ q8k_scratch sc;
	const int i = blockIdx.x;
	const fused_quant f = fused_quant_row(q, qd, s1, bsums, i, cols);
	float* dr = dst + (size_t)i * cols;
	float* xm = const_cast<float*>(x); // norm_row writes x only when o is not null
	if (cols <= 256 * 4) return norm_row<4>(xm, rowidx, nullptr, nullptr, w, dr, i, n, cols, eps, f, sq, part, &res, &decided, &sc);
	if (cols <= 256 * NormRegs)
		return norm_row<NormRegs>(xm, rowidx, nullptr, nullptr, w, dr, i, n, cols, eps, f, sq, part, &res, &decided, &sc);
	prefetch_lines(w, cols);
	grid_wait();
	if (i >= n) return;
	const int src = rowidx != nullptr ? rowidx[i] : i;
	const float* xr = x + (size_t)src * cols;
	const float s = rms_scale<1024>(xr, cols, eps, sq, part, &res, &decided);
	norm_out(xr, s, w, dr, cols, f, &sc);
}

// muser_add_rmsnorm is the step after the attention output product
// (infer/engine/cpu): o = o + bias (when bias is not null), x = x + o, then
// dst = RMSNorm(x)·w, for rows i < n of cols floats. dst may be o. q, qd,
// s1 and bsums quantize dst as in muser_rmsnorm. bias and w are read
// before grid_wait (no __restrict__: see grid_wait).
//
// Launch: grid (n), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_add_rmsnorm(float* x, const float* o, const float* bias, const float* w, float* dst, int n, int cols,
                  float eps, int8_t* __restrict__ q, float* __restrict__ qd, float* __restrict__ s1,
                  int* __restrict__ bsums) {
	__shared__ double sq[1024], part[8];
	__shared__ float res;
	__shared__ int decided;
	__shared__ q8k_scratch sc;
	const int i = blockIdx.x;
	const fused_quant f = fused_quant_row(q, qd, s1, bsums, i, cols);
	float* dr = dst + (size_t)i * cols;
	if (cols <= 256 * 4) return norm_row<4>(x, nullptr, o, bias, w, dr, i, n, cols, eps, f, sq, part, &res, &decided, &sc);
	if (cols <= 256 * NormRegs)
		return norm_row<NormRegs>(x, nullptr, o, bias, w, dr, i, n, cols, eps, f, sq, part, &res, &decided, &sc);
	if (bias != nullptr) prefetch_lines(bias, cols);
	prefetch_lines(w, cols);
	grid_wait();
	if (i >= n) return;
	float* xr = x + (size_t)i * cols;
	const float* orow = o + (size_t)i * cols;
	for (int c = threadIdx.x; c < cols; c += blockDim.x) {
		float ov = orow[c];
		if (bias != nullptr) ov = f32add(ov, bias[c]);
		xr[c] = f32add(xr[c], ov);
	}
	__syncthreads();
	const float s = rms_scale<1024>(xr, cols, eps, sq, part, &res, &decided);
	norm_out(xr, s, w, dr, cols, f, &sc);
}

// muser_rmsnorm_heads normalizes each head of each row in place, with one
// weight vector w of dim floats for every head (qwen3's attn_q_norm and
// attn_k_norm): head h of row i is x[i·stride + h·dim …].
//
// Launch: grid (n, heads), block 32.
extern "C" __global__ void __launch_bounds__(32)
muser_rmsnorm_heads(float* x, int n, int heads, int dim, int stride, const float* __restrict__ w, float eps) {
	__shared__ double sq[256], part[1];
	__shared__ float res;
	__shared__ int decided;
	const int i = blockIdx.x, h = blockIdx.y;
	grid_wait();
	if (i >= n || h >= heads) return;
	float* xr = x + (size_t)i * stride + (size_t)h * dim;
	const float s = rms_scale<256>(xr, dim, eps, sq, part, &res, &decided);
	for (int c = threadIdx.x; c < dim; c += blockDim.x) xr[c] = f32mul(f32mul(xr[c], s), w[c]);
}

// muser_add sets dst[i] = a[i] + b[i] (kernels.Add) for i < count. dst may
// be a or b.
//
// Launch: grid (ceil(count/256)), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_add(const float* a, const float* b, float* dst, int count) {
	grid_wait();
	const int i = blockIdx.x * 256 + threadIdx.x;
	if (i < count) dst[i] = f32add(a[i], b[i]);
}

// muser_add_bias sets x[t][c] = x[t][c] + bias[c] for t < n, c < cols (the
// Q, K, V biases: kernels.Add(q, q, bq)).
//
// Launch: grid (ceil(n·cols/256)), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_add_bias(float* x, const float* __restrict__ bias, int n, int cols) {
	grid_wait();
	const int i = blockIdx.x * 256 + threadIdx.x;
	if (i < n * cols) x[i] = f32add(x[i], bias[i % cols]);
}

// muser_silu_mul sets dst[i] = (g/(1 + Exp32(-g)))·up[i], g = gate[i]
// (kernels.SiLUMul). dst may be gate or up.
//
// Launch: grid (ceil(count/256)), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_silu_mul(const float* gate, const float* up, float* dst, int count) {
	grid_wait();
	const int i = blockIdx.x * 256 + threadIdx.x;
	if (i >= count) return;
	const float g = gate[i];
	dst[i] = f32mul(muser_fdiv_rn(g, f32add(1.0f, exp32(-g))), up[i]);
}

// muser_silu_mul_quant is muser_silu_mul on n rows of cols floats
// followed by the quantization of each row of dst in the same launch: with
// bsums null as muser_quant_q8_0 (cols a multiple of 32; q int8 [n][cols],
// qd float [n][cols/32], s1 float [n][cols/32] when not null), with bsums
// not null as muser_quant_q8_k (cols a multiple of 256; qd float
// [n][cols/256], bsums int32 [n][cols/16]). dst may be gate or up.
//
// Launch: grid (n, ceil(cols/256)), block 256 (warp w of block y takes the
// 32-value blocks 8y + w, 8y + w + 8·gridDim.y, …; lane j is element j: so
// block y takes the 256 values of super-block y, y + gridDim.y, …).
extern "C" __global__ void __launch_bounds__(256)
muser_silu_mul_quant(const float* gate, const float* up, float* dst, int n, int cols, int8_t* __restrict__ q,
                     float* __restrict__ qd, float* __restrict__ s1, int* __restrict__ bsums) {
	__shared__ q8k_scratch sc;
	const int t = blockIdx.x;
	grid_wait();
	if (t >= n) return;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int nb = cols / 32;
	const fused_quant f = fused_quant_row(q, qd, s1, bsums, t, cols);
	for (int b = blockIdx.y * 8 + warp; b < nb; b += 8 * gridDim.y) {
		const int c = b * 32 + lane;
		const size_t o = (size_t)t * cols + c;
		const float g = gate[o];
		const float v = f32mul(muser_fdiv_rn(g, f32add(1.0f, exp32(-g))), up[o]);
		dst[o] = v;
		fused_quant_at(f, v, c, &sc);
	}
}

// muser_rope rotates the first ropeDim dimensions of every head of every
// row in place (the CPU engine's rotate): pair k of row t has cos = cs[t·ropeDim +
// 2k], sin = cs[t·ropeDim + 2k + 1] (the host computes the table with
// engine.Rope.Angles); normal RoPE pairs (2k, 2k+1), NeoX (neox ≠ 0) pairs
// (k, k + ropeDim/2); x0' = x0·cos − x1·sin, x1' = x0·sin + x1·cos, each
// product rounded. Head h of row t is x[t·stride + h·dim …].
//
// Launch: grid (n), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_rope(float* x, int n, int heads, int dim, int stride, int ropeDim, int neox, const float* __restrict__ cs) {
	const int t = blockIdx.x;
	grid_wait();
	if (t >= n) return;
	const int half = ropeDim / 2;
	const float* c = cs + (size_t)t * ropeDim;
	for (int it = threadIdx.x; it < heads * half; it += blockDim.x) {
		const int h = it / half, k = it % half;
		const float co = c[2 * k], s = c[2 * k + 1];
		const int a = neox ? k : 2 * k, b = neox ? k + half : 2 * k + 1;
		float* xh = x + (size_t)t * stride + (size_t)h * dim;
		const float x0 = xh[a], x1 = xh[b];
		xh[a] = f32sub(f32mul(x0, co), f32mul(x1, s));
		xh[b] = f32add(f32mul(x0, s), f32mul(x1, co));
	}
}

// rope_pairs rotates the first ropeDim dimensions of each of the heads
// (dim apart) at xr in place, as muser_rope does for one row; cs is the
// row's cos/sin table; the block's threads share the pairs.
MUSER_DEV void rope_pairs(float* xr, int heads, int dim, int ropeDim, int neox, const float* __restrict__ cs) {
	const int half = ropeDim / 2;
	for (int it = threadIdx.x; it < heads * half; it += blockDim.x) {
		const int h = it / half, k = it % half;
		const float co = cs[2 * k], s = cs[2 * k + 1];
		const int a = neox ? k : 2 * k, b = neox ? k + half : 2 * k + 1;
		float* xh = xr + (size_t)h * dim;
		const float x0 = xh[a], x1 = xh[b];
		xh[a] = f32sub(f32mul(x0, co), f32mul(x1, s));
		xh[b] = f32add(f32mul(x0, s), f32mul(x1, co));
	}
}

// muser_rope_kv_store is, for each row t < n, muser_rope on the row's
// heads of q (row stride heads·dim) and on its kvheads of k (row stride
// kvrow = kvheads·dim), then muser_kv_store_f16 (f16 ≠ 0) or _f32 of the
// rotated k and of v, in one launch: the same values, written to the same
// places (q and k in place, then the caches). With f16 it also rounds the
// rotated q to f16 values in place (kernels.RoundF16s): the first thing
// the attention does with an f16 cache, and a rounding that a second one
// leaves as it is, so the attention's own costs a test per value
// (round_f16_again).
//
// Launch: grid (n), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_rope_kv_store(float* q, float* k, const float* __restrict__ v, int n, int heads, int kvheads, int dim,
                    int ropeDim, int neox, const float* __restrict__ cs, const unsigned long long* __restrict__ kc,
                    const unsigned long long* __restrict__ vc, const int* __restrict__ pos, int f16) {
	const int t = blockIdx.x;
	grid_wait();
	if (t >= n) return;
	const int kvrow = kvheads * dim;
	const float* c = cs + (size_t)t * ropeDim;
	rope_pairs(q + (size_t)t * heads * dim, heads, dim, ropeDim, neox, c);
	float* kr = k + (size_t)t * kvrow;
	rope_pairs(kr, kvheads, dim, ropeDim, neox, c);
	__syncthreads(); // the rotated k row, written by other threads of the block
	const float* vr = v + (size_t)t * kvrow;
	if (f16) {
		float* qr = q + (size_t)t * heads * dim;
		for (int i = threadIdx.x; i < heads * dim; i += blockDim.x) qr[i] = round_f16(qr[i]);
		uint16_t* kd = (uint16_t*)kc[t] + (size_t)pos[t] * kvrow;
		uint16_t* vd = (uint16_t*)vc[t] + (size_t)pos[t] * kvrow;
		for (int i = threadIdx.x; i < kvrow; i += blockDim.x) {
			kd[i] = (uint16_t)f32_to_f16(kr[i]);
			vd[i] = (uint16_t)f32_to_f16(vr[i]);
		}
	} else {
		float* kd = (float*)kc[t] + (size_t)pos[t] * kvrow;
		float* vd = (float*)vc[t] + (size_t)pos[t] * kvrow;
		for (int i = threadIdx.x; i < kvrow; i += blockDim.x) {
			kd[i] = kr[i];
			vd[i] = vr[i];
		}
	}
}

// muser_kv_store_f16 writes the K and V rows of n tokens to their
// sequences' f16 caches (infer/kvcache layout: position p of a layer at
// element p·kvrow): row i goes to kc[i] + pos[i]·kvrow and vc[i] +
// pos[i]·kvrow (kc, vc: per-row device addresses of the layer's K and V
// cache), converted with ggml.F32ToF16 (ties to even, NaN → 0x7E00 | sign).
//
// Launch: grid (n), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_kv_store_f16(const float* __restrict__ k, const float* __restrict__ v, int n, int kvrow,
                   const unsigned long long* __restrict__ kc, const unsigned long long* __restrict__ vc,
                   const int* __restrict__ pos) {
	const int i = blockIdx.x;
	grid_wait();
	if (i >= n) return;
	uint16_t* kd = (uint16_t*)kc[i] + (size_t)pos[i] * kvrow;
	uint16_t* vd = (uint16_t*)vc[i] + (size_t)pos[i] * kvrow;
	for (int c = threadIdx.x; c < kvrow; c += blockDim.x) {
		kd[c] = (uint16_t)f32_to_f16(k[(size_t)i * kvrow + c]);
		vd[c] = (uint16_t)f32_to_f16(v[(size_t)i * kvrow + c]);
	}
}

// muser_kv_store_f32 is muser_kv_store_f16 for an f32 cache (a copy).
//
// Launch: grid (n), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_kv_store_f32(const float* __restrict__ k, const float* __restrict__ v, int n, int kvrow,
                   const unsigned long long* __restrict__ kc, const unsigned long long* __restrict__ vc,
                   const int* __restrict__ pos) {
	const int i = blockIdx.x;
	grid_wait();
	if (i >= n) return;
	float* kd = (float*)kc[i] + (size_t)pos[i] * kvrow;
	float* vd = (float*)vc[i] + (size_t)pos[i] * kvrow;
	for (int c = threadIdx.x; c < kvrow; c += blockDim.x) {
		kd[c] = k[(size_t)i * kvrow + c];
		vd[c] = v[(size_t)i * kvrow + c];
	}
}

// muser_embed_<type> writes the embedding rows of n tokens: x[i][c] =
// token_embd[tokens[i]][c] for c < cols, decoded as ggml.Dequantize decodes
// the row (bit for bit). A token outside [0, rows) leaves its row of x
// unwritten (the engine checks tokens before it runs a batch).
//
// Launch: grid (n), block 256.
#define MUSER_EMBED_Q(name, T)                                                                         \
	extern "C" __global__ void __launch_bounds__(256)                                              \
	muser_embed_##name(const uint8_t* __restrict__ W, int rows, int cols, const int* __restrict__ tokens, \
	                   int n, float* __restrict__ x) {                                             \
		const int i = blockIdx.x;                                                              \
		grid_wait();                                                                           \
		if (i >= n) return;                                                                    \
		const int tok = tokens[i];                                                             \
		if (tok < 0 || tok >= rows) return;                                                    \
		const int nb = cols / T::QK;                                                           \
		const uint8_t* wr = W + (size_t)tok * nb * T::BYTES;                                   \
		for (int b = threadIdx.x; b < nb; b += blockDim.x)                                     \
			deq<T>(wr + (size_t)b * T::BYTES, x + (size_t)i * cols + (size_t)b * T::QK);   \
	}

MUSER_EMBED_Q(q8_0, WQ8_0)
MUSER_EMBED_Q(q4_0, WQ4_0)
MUSER_EMBED_Q(q5_0, WQ5_0)
MUSER_EMBED_Q(q4_1, WQ4_1)
MUSER_EMBED_Q(q5_1, WQ5_1)
MUSER_EMBED_Q(q2_k, WQ2_K)
MUSER_EMBED_Q(q3_k, WQ3_K)
MUSER_EMBED_Q(q4_k, WQ4_K)
MUSER_EMBED_Q(q5_k, WQ5_K)
MUSER_EMBED_Q(q6_k, WQ6_K)
MUSER_EMBED_Q(nvfp4, WNVFP4)

#define MUSER_EMBED_F(name, WT)                                                                        \
	extern "C" __global__ void __launch_bounds__(256)                                              \
	muser_embed_##name(const uint8_t* __restrict__ W, int rows, int cols, const int* __restrict__ tokens, \
	                   int n, float* __restrict__ x) {                                             \
		const int i = blockIdx.x;                                                              \
		grid_wait();                                                                           \
		if (i >= n) return;                                                                    \
		const int tok = tokens[i];                                                             \
		if (tok < 0 || tok >= rows) return;                                                    \
		for (int c = threadIdx.x; c < cols; c += blockDim.x)                                   \
			x[(size_t)i * cols + c] = mmf_weight<WT>(W, (size_t)tok * cols + c);           \
	}

MUSER_EMBED_F(f32, MMF_F32)
MUSER_EMBED_F(f16, MMF_F16)
MUSER_EMBED_F(bf16, MMF_BF16)
