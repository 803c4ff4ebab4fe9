// quant.cuh: activation quantizers (infer/kernels/quant.go), one token row
// per thread block. Each token's quantized values depend on that token's
// row only, as on the CPU.
#pragma once

#include "common.cuh"

// quant_q8_0_block quantizes one block of 32 floats, one per lane of a
// warp (lane j holds v, element j of the block), as kernels.quantQ8_0
// (ggml's quantize_row_q8_0_ref): amax by the sequential scan `if !(amax >
// |x|) amax = |x|`, d = amax/127, id = 1/d (0 when d is 0), q =
// roundAway(x·id), d stored as f16 and widened. It writes q[lane] and, from
// lane 0, *d, *sum (Σq, when sum is not null) and *s1 (Q8_1's f16(Σq·d)
// widened, when s1 is not null). Every lane of the warp must call it.
MUSER_DEV void quant_q8_0_block(float v, int lane, int8_t* q, float* d, int* sum, float* s1) {
	const float av = fabs_bits(v);
	// The scan keeps the maximum of the values after the last NaN, or
	// the NaN itself when it is the block's last value.
	const unsigned nanm = __ballot_sync(0xffffffffu, is_nan(av));
	float amax;
	if (nanm == 0) {
		amax = __uint_as_float(__reduce_max_sync(0xffffffffu, __float_as_uint(av)));
	} else {
		const int last = 31 - __clz(nanm);
		const unsigned m = __reduce_max_sync(0xffffffffu, lane > last ? __float_as_uint(av) : 0u);
		const float atLast = __shfl_sync(0xffffffffu, av, 31);
		amax = last == 31 ? atLast : __uint_as_float(m);
	}
	const float dd = muser_fdiv_rn(amax, 127.0f);
	const float id = dd != 0.0f ? muser_fdiv_rn(1.0f, dd) : 0.0f;
	const int qq = round_away(f32mul(v, id));
	const int s = __reduce_add_sync(0xffffffffu, qq);
	q[lane] = (int8_t)qq;
	if (lane == 0) {
		*d = round_f16(dd);
		if (sum != nullptr) *sum = s;
		if (s1 != nullptr) *s1 = round_f16(cpu_f32mul(__int2float_rn(s), dd));
	}
}

// muser_quant_q8_0 quantizes n rows of cols floats (cols a multiple of 32)
// in blocks of 32 (quant_q8_0_block).
//
// Outputs, nb = cols/32: q int8 [n][cols]; d float [n][nb]; sum int32
// [n][nb] (Σq of each block) when sum is not null; s1 float [n][nb]
// (Q8_1's f16(Σq·d) widened) when s1 is not null.
//
// Launch: grid (n, ceil(nb/8)), block 256 (eight warps; warp w of block y
// takes blocks 8y + w, 8y + w + 8·gridDim.y, …; lane j is element j of the
// block). Spreading a row over many thread blocks keeps a single token's
// quantization from running on one multiprocessor.
extern "C" __global__ void __launch_bounds__(256)
muser_quant_q8_0(const float* __restrict__ x, int n, int cols, int8_t* __restrict__ q,
                 float* __restrict__ d, int* __restrict__ sum, float* __restrict__ s1) {
	const int t = blockIdx.x;
	grid_wait();
	if (t >= n) return;
	const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
	const int nb = cols / 32;
	const float* xr = x + (size_t)t * cols;
	for (int b = blockIdx.y * 8 + warp; b < nb; b += 8 * gridDim.y) {
		const size_t o = (size_t)t * nb + b;
		quant_q8_0_block(xr[b * 32 + lane], lane, q + (size_t)t * cols + b * 32, d + o,
		                 sum != nullptr ? sum + o : nullptr, s1 != nullptr ? s1 + o : nullptr);
	}
}

// q8k_scratch is the shared memory quant_q8_k_block needs: each warp's
// candidate (magnitude, index, value) and the block's choice.
struct q8k_scratch {
	float wav[8];
	int widx[8];
	float wv[8];
	int best;
	float mx;
};

// quant_q8_k_block quantizes one super-block of 256 floats, one per thread
// of a block of 256 (thread tid holds v, element tid), as
// kernels.quantQ8_K (ggml's quantize_row_q8_K_ref): the first element of
// largest magnitude, mx, maps to -127: iscale = -127/mx, q =
// int8(min(127, nearestInt(iscale·x))), d = 1/iscale; a block whose
// largest magnitude is 0 (or NaN throughout) gets d = 0 and q = 0. It
// writes q[tid], bsums[tid/16] (the sum of each 16 consecutive q) and, from
// thread 0, *d. Every thread of the block must call it; it reuses sc
// only after a barrier, so successive calls may share it.
MUSER_DEV void quant_q8_k_block(float v, int tid, int8_t* q, float* d, int* bsums, q8k_scratch* sc) {
	const int lane = tid & 31, warp = tid >> 5;
	const float av = fabs_bits(v);
	// The scan `if |x| > amax { amax, mx = |x|, x }` from amax = 0: the
	// first index of the largest magnitude, NaN and 0 never chosen.
	float kav = av > 0.0f ? av : -1.0f;
	int kidx = tid;
	float kv = v;
#pragma unroll
	for (int off = 16; off >= 1; off /= 2) {
		const float oav = __shfl_down_sync(0xffffffffu, kav, off);
		const int oidx = __shfl_down_sync(0xffffffffu, kidx, off);
		const float ov = __shfl_down_sync(0xffffffffu, kv, off);
		if (oav > kav || (oav == kav && oidx < kidx)) {
			kav = oav;
			kidx = oidx;
			kv = ov;
		}
	}
	if (lane == 0) {
		sc->wav[warp] = kav;
		sc->widx[warp] = kidx;
		sc->wv[warp] = kv;
	}
	__syncthreads();
	if (tid == 0) {
		float bav = sc->wav[0];
		float bv = sc->wv[0];
		for (int w = 1; w < 8; w++) {
			if (sc->wav[w] > bav) {
				bav = sc->wav[w];
				bv = sc->wv[w];
			}
		}
		sc->best = bav > 0.0f;
		sc->mx = bv;
	}
	__syncthreads();
	const unsigned half = lane < 16 ? 0x0000ffffu : 0xffff0000u;
	if (!sc->best) {
		q[tid] = 0;
		if ((tid & 15) == 0) bsums[tid >> 4] = 0;
		if (tid == 0) *d = 0.0f;
	} else {
		const float iscale = muser_fdiv_rn(-127.0f, sc->mx);
		const int qv = min(127, nearest_int(cpu_f32mul(iscale, v)));
		q[tid] = (int8_t)qv;
		const int gs = __reduce_add_sync(half, (int)(int8_t)qv);
		if ((tid & 15) == 0) bsums[tid >> 4] = gs;
		if (tid == 0) *d = muser_fdiv_rn(1.0f, iscale);
	}
	__syncthreads(); // sc is reused by the next call
}

// muser_quant_q8_k quantizes n rows of cols floats (cols a multiple of 256)
// in blocks of 256 (quant_q8_k_block).
//
// Outputs, nb = cols/256: q int8 [n][cols]; d float [n][nb]; bsums int32
// [n][cols/16] (the sums of each 16 consecutive q).
//
// Launch: grid (n, nb), block 256 (block y takes super-blocks y, y +
// gridDim.y, …; thread j is element j of the super-block).
extern "C" __global__ void __launch_bounds__(256)
muser_quant_q8_k(const float* __restrict__ x, int n, int cols, int8_t* __restrict__ q,
                 float* __restrict__ d, int* __restrict__ bsums) {
	__shared__ q8k_scratch sc;
	const int t = blockIdx.x;
	grid_wait();
	if (t >= n) return;
	const int tid = threadIdx.x;
	const int nb = cols / 256;
	const float* xr = x + (size_t)t * cols;
	for (int b = blockIdx.y; b < nb; b += gridDim.y) {
		const size_t o = (size_t)t * cols + b * 256;
		quant_q8_k_block(xr[b * 256 + tid], tid, q + o, d + (size_t)t * nb + b, bsums + o / 16, &sc);
	}
}

// muser_round_f16 sets y[i] = f16(x[i]) widened (the activations of F16
// weights: kernels.acts.quantRow, actF16). y may be x.
//
// Launch: grid (ceil(count/256)), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_round_f16(const float* __restrict__ x, float* __restrict__ y, int count) {
	grid_wait();
	const int i = blockIdx.x * 256 + threadIdx.x;
	if (i < count) y[i] = round_f16(x[i]);
}

// muser_round_bf16 sets y[i] = bf16(x[i]) widened (the activations of BF16
// weights: ggml.BF16ToF32(ggml.F32ToBF16(x))). y may be x.
//
// Launch: grid (ceil(count/256)), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_round_bf16(const float* __restrict__ x, float* __restrict__ y, int count) {
	grid_wait();
	const int i = blockIdx.x * 256 + threadIdx.x;
	if (i < count) y[i] = bf16_to_f32(f32_to_bf16(x[i]));
}
