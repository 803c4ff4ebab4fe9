// mmf.cuh: matrix products of float weights (F32, F16, BF16) by float
// activations, y[t][r] = Σ_c W[r][c]·x[t][c], in the canonical order of
// kernels.dotF32Row, dotF16Row, dotBF16Row: 16 accumulators, element c
// added to accumulator c mod 16 in increasing c (acc = acc + w·x, the
// product rounded), then acc[l] += acc[l+8], +4, +2, +1.
//
// Sixteen threads share one group of outputs: thread l holds accumulator l
// of each; after the last column they reduce by the same tree with warp
// shuffles (width 16). Columns stream through shared memory, KC at a time.
//
// The activations must already be what the CPU multiplies: x as it is for
// F32 weights, rounded by muser_round_f16 for F16 weights, by
// muser_round_bf16 for BF16 weights. For F16 weights every product w·x is
// then exact (f16 × f16 has at most 22 significant bits and stays in
// float32's normal range), so the kernel uses a fused multiply-add, whose
// result equals the rounded product added; these kernels are ExactFMA in
// launch.go. F32 and BF16 products are rounded before the addition (a
// bf16 × bf16 product can underflow).
//
// Arguments: W (rows × cols elements, row-major, 16-byte aligned), rows,
// cols, x float [n][cols], y float [n][rows] (overwritten), n.
#pragma once

#include "common.cuh"

enum { MMF_F32 = 0, MMF_F16 = 1, MMF_BF16 = 2 };

// mmf_weight is element i of W as a float32 (ggml.F16ToF32 and
// ggml.BF16ToF32: the embedding lookup stores it as it is); with ARITH, for
// the products, an f16 widens with f16_to_f32_arith (the same bits but a
// NaN's payload, which their arithmetic never shows).
template <int WT, bool ARITH = false>
MUSER_DEV float mmf_weight(const uint8_t* W, size_t i) {
	if constexpr (WT == MMF_F32) return ((const float*)W)[i];
	else if constexpr (WT == MMF_F16) {
		const uint32_t h = ((const uint16_t*)W)[i];
		return ARITH ? f16_to_f32_arith(h) : f16_to_f32(h);
	} else return bf16_to_f32(((const uint16_t*)W)[i]);
}

// mmf_tile: CTA of 16·GR·GT threads computes BR = GR·TR rows × BT = GT·TT
// tokens (blockIdx.x, blockIdx.y). Launch: grid (ceil(rows/BR), ceil(n/BT)).
template <int WT, int GR, int GT, int TR, int TT>
__device__ __forceinline__ void mmf_tile(const uint8_t* __restrict__ W, int rows, int cols,
                                         const float* __restrict__ x, float* __restrict__ y, int n) {
	constexpr int THREADS = 16 * GR * GT, BR = GR * TR, BT = GT * TT, KC = 64;
	__shared__ float Ws[KC][BR + 4];
	__shared__ float Xs[KC][BT + 4];
	const int tid = threadIdx.x, l = tid & 15, grp = tid >> 4;
	const int gr = grp % GR, gt = grp / GR;
	const int r0 = blockIdx.x * BR, t0 = blockIdx.y * BT;
	float acc[TR][TT];
#pragma unroll
	for (int i = 0; i < TR; i++)
#pragma unroll
		for (int j = 0; j < TT; j++) acc[i][j] = 0.0f;

	for (int c0 = 0; c0 < cols; c0 += KC) {
		const int kc = min(KC, cols - c0);
		for (int it = tid; it < BR * KC; it += THREADS) {
			const int row = it / KC, c = it % KC, r = r0 + row;
			Ws[c][row] = (r < rows && c < kc) ? mmf_weight<WT, true>(W, (size_t)r * cols + c0 + c) : 0.0f;
		}
		for (int it = tid; it < BT * KC; it += THREADS) {
			const int tok = it / KC, c = it % KC, t = t0 + tok;
			Xs[c][tok] = (t < n && c < kc) ? x[(size_t)t * cols + c0 + c] : 0.0f;
		}
		__syncthreads();
#pragma unroll
		for (int kk = 0; kk < KC / 16; kk++) {
			const int c = kk * 16 + l;
			if (c < kc) { // a column past the end adds nothing (not even +0)
				float wv[TR], xv[TT];
#pragma unroll
				for (int i = 0; i < TR; i++) wv[i] = Ws[c][gr * TR + i];
#pragma unroll
				for (int j = 0; j < TT; j++) xv[j] = Xs[c][gt * TT + j];
#pragma unroll
				for (int i = 0; i < TR; i++)
#pragma unroll
					for (int j = 0; j < TT; j++) {
						if constexpr (WT == MMF_F16) acc[i][j] = __fmaf_rn(wv[i], xv[j], acc[i][j]);
						else acc[i][j] = f32add(acc[i][j], f32mul(wv[i], xv[j]));
					}
			}
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < TR; i++)
#pragma unroll
		for (int j = 0; j < TT; j++) {
			float v = acc[i][j];
#pragma unroll
			for (int h = 8; h >= 1; h /= 2) v = f32add(v, __shfl_down_sync(0xffffffffu, v, h, 16));
			const int r = r0 + gr * TR + i, t = t0 + gt * TT + j;
			if (l == 0 && r < rows && t < n) y[(size_t)t * rows + r] = v;
		}
}

// Prefill tiles: 256 threads, 32 rows × 32 tokens. Decode tiles: 128
// threads, 8 rows × 8 tokens.
#define MUSER_FLOAT_MATMUL(name, WT)                                                                    \
	extern "C" __global__ void __launch_bounds__(256)                                               \
	muser_mmf_##name(const uint8_t* __restrict__ W, int rows, int cols, const float* __restrict__ x, \
	                 float* __restrict__ y, int n) {                                                \
		grid_wait();                                                                            \
		mmf_tile<WT, 4, 4, 8, 8>(W, rows, cols, x, y, n);                                       \
	}                                                                                               \
	extern "C" __global__ void __launch_bounds__(128)                                               \
	muser_mmfv_##name(const uint8_t* __restrict__ W, int rows, int cols, const float* __restrict__ x, \
	                  float* __restrict__ y, int n) {                                               \
		grid_wait();                                                                            \
		mmf_tile<WT, 8, 1, 1, 8>(W, rows, cols, x, y, n);                                       \
	}

MUSER_FLOAT_MATMUL(f32, MMF_F32)
MUSER_FLOAT_MATMUL(f16, MMF_F16)
MUSER_FLOAT_MATMUL(bf16, MMF_BF16)
