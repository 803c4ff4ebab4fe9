// shim.h: just enough of CUDA for the host compiler (g++ -std=c++17
// -ffp-contract=off) to compile common.cuh and weights.cuh, so that
// hostemu_test.go can run their pure functions on the CPU. Each intrinsic
// is written to the CUDA documentation's definition; on x86-64 every
// float and double operation below rounds to nearest even, like the
// _rn intrinsics.
#pragma once

// Every standard header the emulator programs use comes first: libstdc++
// 12 and later write __attribute__((__noinline__)) in some (shared_ptr,
// basic_string), which the __noinline__ macro below would break if they
// were first included after it.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#define __device__
#define __global__
#define __host__
#define __constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict

using std::max;
using std::min;

static inline float __uint_as_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline uint32_t __float_as_uint(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long v) { double d; std::memcpy(&d, &v, 8); return d; }
// The generic-to-shared conversion of cp.async's destination: the host
// programs compile the device helpers that use it but never call them.
static inline size_t __cvta_generic_to_shared(const void* p) { return (size_t)p; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dsqrt_rn(double a) { return std::sqrt(a); }
static inline float __double2float_rn(double d) { return (float)d; }
static inline float __int2float_rn(int i) { return (float)i; }
static inline float __uint2float_rn(unsigned u) { return (float)u; }
static inline int __float2int_rz(float f) { return (int)f; } // callers keep f in range
static inline int __double2int_rz(double d) { return (int)d; }
// __vsub4: per-byte subtraction, wrapping.
static inline unsigned __vsub4(unsigned a, unsigned b) {
	unsigned r = 0;
	for (int k = 0; k < 4; k++) r |= (((a >> (8 * k)) - (b >> (8 * k))) & 0xffu) << (8 * k);
	return r;
}
// __byte_perm: byte n of the result is byte s[4n+2:4n] of the eight bytes
// y:x (x bytes 0-3).
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
	const uint64_t v = (uint64_t)y << 32 | x;
	unsigned r = 0;
	for (int n = 0; n < 4; n++) r |= (unsigned)((v >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
	return r;
}
// __dp4a: the four signed byte products of a and b, summed, plus c.
static inline int __dp4a(int a, int b, int c) {
	for (int k = 0; k < 4; k++) c += (int)(int8_t)(a >> (8 * k)) * (int)(int8_t)(b >> (8 * k));
	return c;
}
