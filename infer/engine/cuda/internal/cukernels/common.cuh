// common.cuh: the exact arithmetic every muser kernel is built from.
//
// muser's CUDA exact mode computes bit for bit what the CPU engine computes
// (infer/kernels, infer/ggml, infer/engine/cpu). The rules that make that
// possible, and that every file here follows:
//
//   - Every float operation whose rounding matters is written with an
//     explicit round-to-nearest intrinsic (f32mul, f32add, f32sub, f64mul,
//     f64add, f64sub below; __double2float_rn; __int2float_rn). The file is compiled
//     with --fmad=false, so the compiler neither contracts a product and a
//     sum into a fused multiply-add nor reassociates anything.
//   - A fused multiply-add is written explicitly (__fmaf_rn) only where the
//     product is exact, so that fused and unfused agree: f16 × f16 products
//     (the F16 matrix product and the f16-cache attention). Those kernels
//     are listed in launch.go (ExactFMA) and are the only ones whose SASS
//     may hold FFMA.
//   - Division and square root, whose IEEE-exact expansions use FFMA/DFMA
//     internally, go through the muser_*_rn functions below, which are never
//     inlined: their SASS is a function of its own, and the SASS check
//     (manifest_test.go, TestSASS) allows FMA instructions only there and in
//     the ExactFMA kernels.
//
// Go definitions are named next to each function.
#pragma once

#include <stdint.h>

#define MUSER_DEV __device__ __forceinline__

// ---------------------------------------------------------------------------
// Rounded arithmetic.

MUSER_DEV float f32mul(float a, float b) { return __fmul_rn(a, b); }
MUSER_DEV float f32add(float a, float b) { return __fadd_rn(a, b); }
MUSER_DEV float f32sub(float a, float b) { return __fsub_rn(a, b); }
MUSER_DEV double f64mul(double a, double b) { return __dmul_rn(a, b); }
MUSER_DEV double f64add(double a, double b) { return __dadd_rn(a, b); }
MUSER_DEV double f64sub(double a, double b) { return __dsub_rn(a, b); }

// IEEE division and square root, correctly rounded. Not inlined (see the
// header comment): every FFMA/DFMA of their expansion stays in these
// functions' SASS.
extern "C" __device__ __noinline__ float muser_fdiv_rn(float a, float b) { return __fdiv_rn(a, b); }
extern "C" __device__ __noinline__ double muser_ddiv_rn(double a, double b) { return __ddiv_rn(a, b); }
extern "C" __device__ __noinline__ double muser_dsqrt_rn(double a) { return __dsqrt_rn(a); }

// chain_margin bounds how far an ordered float64 sum (the CPU's chains)
// of n non-negative terms can lie from sum, the same terms added in any
// other order: each is within γ(n-1)·E of the exact sum E (u = 2^-53,
// γ(k) = ku/(1-ku)), so they differ by at most 2γ/(1-γ)·sum, which
// 4·n·u·sum covers with the rounding of the bounds themselves. A kernel
// whose result depends on the chain's sum only through a monotone
// function f can take f(sum ± margin) and, when both ends are equal, have
// the chain's result without running it (RMSNorm, the decode softmax).
MUSER_DEV double chain_margin(double sum, int n) { return f64mul(sum, 4.0 * (double)n * 0x1p-53); }

MUSER_DEV float fabs_bits(float v) { return __uint_as_float(__float_as_uint(v) & 0x7fffffffu); }
MUSER_DEV bool is_nan(float v) { return (__float_as_uint(v) & 0x7fffffffu) > 0x7f800000u; }

// ---------------------------------------------------------------------------
// binary16 and bfloat16 (infer/ggml/fp16.go).

// f16_to_f32 is ggml.F16ToF32: exact for every finite value and infinity;
// a NaN keeps its sign and payload and is made quiet.
MUSER_DEV float f16_to_f32(uint32_t h) {
	uint32_t sign = (h & 0x8000u) << 16;
	uint32_t em = h & 0x7fffu;
	if (em >= 0x7c00u) {
		uint32_t mant = h & 0x3ffu;
		return __uint_as_float(sign | 0x7f800000u | (mant << 13) | (mant != 0 ? 0x00400000u : 0u));
	}
	if (em >= 0x0400u) {
		return __uint_as_float(sign | ((em + (112u << 10)) << 13));
	}
	// Zero or subnormal: mant × 2^-24, exact in float32.
	float v = f32mul(__uint2float_rn(em), 5.9604644775390625e-08f);
	return __uint_as_float(__float_as_uint(v) | sign);
}

// f32_to_f16 is ggml.F32ToF16: round to nearest, ties to even; overflow to
// infinity; subnormals kept; every NaN becomes 0x7E00 with the input's sign.
MUSER_DEV uint32_t f32_to_f16(float f) {
	uint32_t w = __float_as_uint(f);
	uint32_t sign = (w >> 16) & 0x8000u;
	uint32_t a = w & 0x7fffffffu;
	if (a > 0x7f800000u) return sign | 0x7e00u;
	if (a >= 0x477ff000u) return sign | 0x7c00u;
	if (a >= 0x38800000u) {
		uint32_t h = (a - 0x38000000u) >> 13;
		uint32_t rest = a & 0x1fffu;
		if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++;
		return sign | h;
	}
	if (a < 0x33000000u) return sign;
	uint32_t e = a >> 23; // 102 ... 112
	uint32_t mant = (a & 0x7fffffu) | 0x800000u;
	uint32_t shift = 126u - e;
	uint32_t h = mant >> shift;
	uint32_t rest = mant & ((1u << shift) - 1u);
	uint32_t half = 1u << (shift - 1u);
	if (rest > half || (rest == half && (h & 1u))) h++;
	return sign | h;
}

// round_f16 is ggml.F16ToF32(ggml.F32ToF16(x)) (kernels.RoundF16s).
MUSER_DEV float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

// round_f16_again is round_f16 with a shortcut for the values it leaves
// unchanged that matter: a float32 whose exponent is an f16 normal's
// (2^-14 .. 2^15) and whose low 13 fraction bits are zero, or a zero, is
// an f16 value, and round_f16 returns it as it is. The attention's queries
// arrive rounded already (muser_rope_kv_store rounds them with an f16
// cache), so their second rounding costs a test instead of two
// conversions.
MUSER_DEV float round_f16_again(float x) {
	const uint32_t u = __float_as_uint(x), e = (u >> 23) & 0xffu;
	if ((u & 0x1fffu) == 0u && ((e >= 113u && e <= 142u) || (u & 0x7fffffffu) == 0u)) return x;
	return round_f16(x);
}

// f16_to_f32_arith and round_f16_arith are f16_to_f32 and round_f16 for
// values that only feed float arithmetic (attention K, V and weights; the
// weights' f16 scales, F16 weights): cvt.f32.f16 and cvt.rn.f16.f32 (no
// .ftz: subnormals kept; ties to even; overflow to infinity) give the
// same bits for every input that is not a NaN (the GPU primitives test
// sweeps every f16 and every float32). A NaN's payload may differ, which
// no result shows: the GPU's float arithmetic returns one canonical NaN
// whatever NaN it is given. A host compiler (the emulator, testdata/
// hostemu) takes the definitions.
#ifndef __CUDA_ARCH__
MUSER_DEV float f16_to_f32_arith(uint32_t h) { return f16_to_f32(h); }
MUSER_DEV float round_f16_arith(float x) { return round_f16(x); }
#else
MUSER_DEV float f16_to_f32_arith(uint32_t h) {
	float f;
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)h));
	return f;
}
MUSER_DEV float round_f16_arith(float x) {
	unsigned short h;
	float f;
	asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
	asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
	return f;
}
#endif

// bf16_to_f32 is ggml.BF16ToF32.
MUSER_DEV float bf16_to_f32(uint32_t h) { return __uint_as_float((h & 0xffffu) << 16); }

// f32_to_bf16 is ggml.F32ToBF16: ties to even; a NaN keeps its sign and top
// payload bits and is made quiet.
MUSER_DEV uint32_t f32_to_bf16(float f) {
	uint32_t u = __float_as_uint(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu;
	return ((u + 0x7fffu + ((u >> 16) & 1u)) >> 16) & 0xffffu;
}

// ---------------------------------------------------------------------------
// Integer rounding of the activation quantizers (infer/kernels/quant.go).

// round_away is kernels.roundAway: C's roundf then the conversion to int8;
// a non-finite v gives 0.
MUSER_DEV int round_away(float v) {
	if (!(fabs_bits(v) <= 128.0f)) return 0;
	int t = __float2int_rz(v);
	float f = f32sub(v, __int2float_rn(t)); // exact
	if (f >= 0.5f) {
		t++;
	} else if (f <= -0.5f) {
		t--;
	}
	return (int)(int8_t)t;
}

// nearest_int is kernels.nearestInt: round to nearest, ties to even, by the
// 1.5×2^23 trick (exact for |v| < 2^22). For a NaN, the CPU's addition
// returns the NaN operand quieted (amd64 and arm64 propagate the payload)
// where the GPU's returns its canonical NaN; nearest_int computes what the
// CPU computes from v's bits: the quieted payload's low 22 bits.
MUSER_DEV int nearest_int(float v) {
	uint32_t b = __float_as_uint(v);
	if ((b & 0x7fffffffu) > 0x7f800000u) {
		return (int)((b | 0x00400000u) & 0x007fffffu) - 0x00400000;
	}
	float val = f32add(v, 12582912.0f);
	return (int)(__float_as_uint(val) & 0x007fffffu) - 0x00400000;
}

// cpu_f32mul is fmul with the CPU's NaN result: when a product is NaN, amd64
// (and arm64) return the NaN operand quieted, or the default NaN when the
// product itself is invalid (0 × ∞); amd64's default NaN is 0xFFC00000.
// Used only where a NaN's payload feeds an integer (the Q8_K quantizer).
MUSER_DEV float cpu_f32mul(float a, float b) {
	float p = f32mul(a, b);
	if (!is_nan(p)) return p;
	if (is_nan(a)) return __uint_as_float(__float_as_uint(a) | 0x00400000u);
	if (is_nan(b)) return __uint_as_float(__float_as_uint(b) | 0x00400000u);
	return __uint_as_float(0xffc00000u);
}

// i2f_small is __int2float_rn for |i| < 2^22, without the conversion unit
// (a quarter of the FP32 rate on sm_90, the bottleneck of the matrix
// products' epilogue): 1.5·2^23 + i is exact in float32's [2^23, 2^24)
// binade and subtracting 1.5·2^23 is exact. The block sums of the 32-value
// types and of NVFP4's sub-blocks are at most 32·128·127 < 2^22 in
// magnitude.
MUSER_DEV float i2f_small(int i) { return f32sub(__int_as_float(0x4b400000 + i), 12582912.0f); }

// I2F_BIAS is the integer whose bits are the float32 1.5·2^23. A tensor-core
// product accumulated onto it (mma_k32 and mma_k16 with c0 = I2F_BIAS) yields
// 0x4b400000 + i exactly, the integer add of i2f_small done by the tensor
// core; i2f_biased finishes the conversion.
constexpr int I2F_BIAS = 0x4b400000;
MUSER_DEV float i2f_biased(int d) { return f32sub(__int_as_float(d), 12582912.0f); }

// ---------------------------------------------------------------------------
// Exp32 (infer/kernels/vec.go): e^x rounded to float32, computed with float64
// multiplications and additions only. The constants are the Go ones, written
// as hexadecimal literals (manifest_test.go checks them against
// kernels.Exp32).

#define MUSER_EXP32_LOG2E 0x1.71547652b82fep+00
#define MUSER_EXP32_LN2HI 0x1.62e42feep-01
#define MUSER_EXP32_LN2LO 0x1.a39ef35793c76p-33
#define MUSER_EXP32_POLY0 0x1.ae64567f544e4p-26
#define MUSER_EXP32_POLY1 0x1.27e4fb7789f5cp-22
#define MUSER_EXP32_POLY2 0x1.71de3a556c734p-19
#define MUSER_EXP32_POLY3 0x1.a01a01a01a01ap-16
#define MUSER_EXP32_POLY4 0x1.a01a01a01a01ap-13
#define MUSER_EXP32_POLY5 0x1.6c16c16c16c17p-10
#define MUSER_EXP32_POLY6 0x1.1111111111111p-07
#define MUSER_EXP32_POLY7 0x1.5555555555555p-05
#define MUSER_EXP32_POLY8 0x1.5555555555555p-03
#define MUSER_EXP32_POLY9 0x1p-01
#define MUSER_EXP32_POLY10 0x1p+00
#define MUSER_EXP32_POLY11 0x1p+00
#define MUSER_EXP32_MAX 0x1.62e43p+06f

// muser_exp32_k holds Exp32's float64 constants whose low 32 bits are not
// zero (the others, 0.5 and 1, are immediate operands) in the constant
// bank, where the float64 multiplies and adds take them as operands.
// Written as literals, each was moved into a uniform register pair again
// before every use: two moves a constant, a quarter of the prefill
// softmax's instructions.
__constant__ double muser_exp32_k[12] = {
	MUSER_EXP32_LOG2E, MUSER_EXP32_LN2HI, MUSER_EXP32_LN2LO,
	MUSER_EXP32_POLY0, MUSER_EXP32_POLY1, MUSER_EXP32_POLY2, MUSER_EXP32_POLY3, MUSER_EXP32_POLY4,
	MUSER_EXP32_POLY5, MUSER_EXP32_POLY6, MUSER_EXP32_POLY7, MUSER_EXP32_POLY8,
};

MUSER_DEV float exp32(float x) {
	if (x != x) return x;
	if (x > MUSER_EXP32_MAX) return __uint_as_float(0x7f800000u);
	if (x < -104.0f) return 0.0f;
	double xd = (double)x;
	const double* c = muser_exp32_k;
	double k = floor(f64add(f64mul(xd, c[0]), 0.5));
	double r = f64sub(f64sub(xd, f64mul(k, c[1])), f64mul(k, c[2]));
	double p = c[3];
	p = f64add(f64mul(p, r), c[4]);
	p = f64add(f64mul(p, r), c[5]);
	p = f64add(f64mul(p, r), c[6]);
	p = f64add(f64mul(p, r), c[7]);
	p = f64add(f64mul(p, r), c[8]);
	p = f64add(f64mul(p, r), c[9]);
	p = f64add(f64mul(p, r), c[10]);
	p = f64add(f64mul(p, r), c[11]);
	p = f64add(f64mul(p, r), MUSER_EXP32_POLY9);
	p = f64add(f64mul(p, r), MUSER_EXP32_POLY10);
	p = f64add(f64mul(p, r), MUSER_EXP32_POLY11);
	int ki = __double2int_rz(k);
	int k1 = ki / 2; // truncates toward zero, as Go's int division
	int k2 = ki - k1;
	p = f64mul(p, __longlong_as_double((long long)(1023 + k1) << 52));
	p = f64mul(p, __longlong_as_double((long long)(1023 + k2) << 52));
	return __double2float_rn(p);
}

// ---------------------------------------------------------------------------
// Loads. Every ggml block type has an even size and device allocations are
// aligned, so any block starts on a 2-byte boundary; 32-bit reads inside a
// block are made of two 16-bit reads.

MUSER_DEV uint32_t ld8(const uint8_t* p) { return p[0]; }
MUSER_DEV uint32_t ld16(const uint8_t* p) { return *(const uint16_t*)p; }
MUSER_DEV uint32_t ld32a2(const uint8_t* p) {
	const uint16_t* h = (const uint16_t*)p;
	return (uint32_t)h[0] | ((uint32_t)h[1] << 16);
}

// ---------------------------------------------------------------------------
// Early launch (programmatic dependent launch, sm_90). In a graph pass the
// engine lets a kernel's CTAs start while the kernels it waits for still
// run (cu.KernelLaunch.Early), so that its launch and its first loads
// overlap their last work. Every kernel therefore calls grid_wait before
// it reads or writes anything another kernel of the pass reads or writes:
// before it a kernel may only read what no kernel writes (the weights,
// biases and norm weights, written when the model is bound) and must load
// those with plain loads (a pointer without __restrict__, or prefetch_l2):
// ptxas moves the read-only cache's loads (LDG.CONSTANT) below the wait.
// grid_wait returns once those kernels have finished and their writes are
// visible (at once when the launch has no early dependency), then lets
// the kernels that wait for this one launch (launch_dependents). Every
// kernel entry of the module holds it (TestArtifacts: checkEarlyWait).

#ifdef MUSER_HOST_EMU
MUSER_DEV void grid_wait() {}
MUSER_DEV void prefetch_l2(const void*) {}
#else
MUSER_DEV void grid_wait() {
	asm volatile("griddepcontrol.wait;" ::: "memory");
	asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
// prefetch_l2 brings the 128-byte line holding p into the L2 cache.
MUSER_DEV void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
#endif

// ---------------------------------------------------------------------------
// Integer tensor-core products (exact: s8 × s8 summed in s32).
//
// m16n8k32 (one 32-value block): lane L, g = L/4, t = L%4;
//   A (16×32, row-major): a0 = row g, k 4t..4t+3; a1 = row g+8, same k;
//                         a2 = row g, k 16+4t..; a3 = row g+8, k 16+4t..
//   B (32×8, column = one token): b0 = token g, k 4t..4t+3; b1 = token g, k 16+4t..
//   C (16×8 s32): c0, c1 = row g, tokens 2t, 2t+1; c2, c3 = row g+8, same tokens.
// m16n8k16 (16 values): a0 = row g, k 4t..; a1 = row g+8, k 4t..; b0 = token g,
// k 4t..; C as above. Bytes of a register hold consecutive k, lowest first.

#ifdef MUSER_HOST_EMU
// The host emulator (testdata/hostemu) provides the warp-wide products.
MUSER_DEV void mma_k32(int c[4], const uint32_t a[4], const uint32_t b[2], int c0) { muser_emu_mma(c, a, b, 32, c0); }
MUSER_DEV void mma_k16(int c[4], const uint32_t a[2], uint32_t b, int c0) { muser_emu_mma(c, a, &b, 16, c0); }
#else
MUSER_DEV void mma_k32(int c[4], const uint32_t a[4], const uint32_t b[2], int c0) {
	asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
	             "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
	             : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
	             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c0));
}

MUSER_DEV void mma_k16(int c[4], const uint32_t a[2], uint32_t b, int c0) {
	asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 "
	             "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
	             : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
	             : "r"(a[0]), "r"(a[1]), "r"(b), "r"(c0));
}
#endif

// ---------------------------------------------------------------------------
// Asynchronous copies from global to shared memory (cp.async): a thread
// issues them, commits them as a group, and later waits for its groups;
// the copies of other threads are visible after that wait and a barrier.
// cp_async16 copies 16 bytes (both addresses 16-byte aligned), cp_async4
// 4 (both 4-byte aligned); with ok false they write zeros and read nothing.

#ifdef MUSER_HOST_EMU
MUSER_DEV void cp_async16(void* dst, const void* src, bool ok) {
	if (ok) memcpy(dst, src, 16);
	else memset(dst, 0, 16);
}
MUSER_DEV void cp_async4(void* dst, const void* src, bool ok) {
	if (ok) memcpy(dst, src, 4);
	else memset(dst, 0, 4);
}
MUSER_DEV void cp_async_commit() {}
MUSER_DEV void cp_async_wait_all() {}
#else
MUSER_DEV void cp_async16(void* dst, const void* src, bool ok) {
	const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
MUSER_DEV void cp_async4(void* dst, const void* src, bool ok) {
	const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
	asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(ok ? 4 : 0) : "memory");
}
MUSER_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
MUSER_DEV void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }
#endif

// MUSER_DYNAMIC_SMEM declares a kernel's dynamic shared memory as a float
// array (the host emulator defines its own).
#ifndef MUSER_DYNAMIC_SMEM
#define MUSER_DYNAMIC_SMEM(name) extern __shared__ __align__(16) float name[]
#endif

// reduce16 is kernels.reduceLanes: acc[l] += acc[l+8] for l < 8, then +4,
// +2, +1; the result is acc[0]. acc is left changed. (The stages are
// written out: a `h /= 2` loop is not unrolled and would put acc in local
// memory.)
template <class A>
MUSER_DEV float reduce16(A& acc) {
#pragma unroll
	for (int l = 0; l < 8; l++) acc[l] = f32add(acc[l], acc[l + 8]);
#pragma unroll
	for (int l = 0; l < 4; l++) acc[l] = f32add(acc[l], acc[l + 4]);
#pragma unroll
	for (int l = 0; l < 2; l++) acc[l] = f32add(acc[l], acc[l + 2]);
	return f32add(acc[0], acc[1]);
}
