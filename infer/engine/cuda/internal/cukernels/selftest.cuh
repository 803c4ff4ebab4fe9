// selftest.cuh: kernels that expose the device primitives of common.cuh
// and weights.cuh one value at a time, so that the GPU tests can compare
// them with their Go definitions over every input (gpu_test.go), and the
// decode softmax's last step (attention.cuh) on its own. The forward pass
// never launches them.
#pragma once

#include "weights.cuh"
#include "attention.cuh"

// muser_test_exp32 sets y[i] = exp32(x[i]) (kernels.Exp32).
// Launch: grid (ceil(count/256)), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_test_exp32(const float* __restrict__ x, float* __restrict__ y, int count) {
	grid_wait();
	const int i = blockIdx.x * 256 + threadIdx.x;
	if (i < count) y[i] = exp32(x[i]);
}

// muser_test_f32_bits converts the floats whose bits are base+i, i < count:
// f16[i] = f32_to_f16 (ggml.F32ToF16), bf16[i] = f32_to_bf16
// (ggml.F32ToBF16), ra[i] = round_away (kernels.roundAway), ni[i] =
// nearest_int (kernels.nearestInt, the 1.5·2^23 trick; NaN as on amd64),
// r16[i] = round_f16_again and ru[i] = round_f16_arith (both
// ggml.F16ToF32(ggml.F32ToF16); the latter's NaN payloads are free).
// Launch: grid (ceil(count/256)), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_test_f32_bits(unsigned base, int count, uint16_t* __restrict__ f16, uint16_t* __restrict__ bf16,
                    int8_t* __restrict__ ra, int* __restrict__ ni, float* __restrict__ r16,
                    float* __restrict__ ru) {
	grid_wait();
	const int i = blockIdx.x * 256 + threadIdx.x;
	if (i >= count) return;
	const float v = __uint_as_float(base + (unsigned)i);
	f16[i] = (uint16_t)f32_to_f16(v);
	bf16[i] = (uint16_t)f32_to_bf16(v);
	ra[i] = (int8_t)round_away(v);
	ni[i] = nearest_int(v);
	r16[i] = round_f16_again(v);
	ru[i] = round_f16_arith(v);
}

// muser_test_small_tables sets f16[h] = f16_to_f32(h) (ggml.F16ToF32) and
// f16a[h] = f16_to_f32_arith(h) for every h < 65536, and ue[x] =
// ue4m3_half(x) (NVFP4 scales) for x < 256.
// Launch: grid (256), block 256.
extern "C" __global__ void __launch_bounds__(256)
muser_test_small_tables(float* __restrict__ f16, float* __restrict__ f16a, float* __restrict__ ue) {
	grid_wait();
	const int i = blockIdx.x * 256 + threadIdx.x;
	f16[i] = f16_to_f32((uint32_t)i);
	f16a[i] = f16_to_f32_arith((uint32_t)i);
	if (i < 256) ue[i] = ue4m3_half((uint32_t)i);
}

// muser_test_softmax_weights finishes the decode softmax that
// muser_attn_softmax_part began, as the decode weighted sum does before it
// stages its weights: for each row i < n and head h < heads it takes
// float32(1/sum) from attn_rows_inv and replaces the exponentials
// S[(i·heads + h)·ld + j], j ≤ pos[i], by attn_weight of them (rounded to
// f16 when round ≠ 0), so that the tests can compare the decode softmax
// alone with kernels.Softmax.
// Launch: grid (n, heads), block 32.
extern "C" __global__ void __launch_bounds__(32)
muser_test_softmax_weights(float* S, const double* __restrict__ part, int ld, int pl, const int* __restrict__ pos,
                           int heads, int round) {
	grid_wait();
	const size_t P = (size_t)blockIdx.x * heads + blockIdx.y;
	const int m = pos[blockIdx.x] + 1;
	float* s = S + P * ld;
	const float inv = attn_rows_inv(s, part + P * pl, m);
	for (int j = threadIdx.x; j < m; j += 32) s[j] = round ? attn_weight<true>(s[j], inv) : attn_weight<false>(s[j], inv);
}
