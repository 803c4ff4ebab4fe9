// simt.h: a CUDA execution model on the host, for emu.cpp. Every CUDA
// thread of a block is an OS thread; __syncthreads is a barrier of the
// block; each warp-wide operation (shuffles, ballots, reductions, the
// integer mma) is an exchange through the warp's slots between two
// barriers of its 32 threads. Blocks run one after another, so __shared__
// variables are static variables. It is slow and exact: it runs the
// kernels' own code, indexing and synchronisation included, on small
// shapes, so that emu_test.go can compare them with the Go definitions
// without a GPU. Every warp-wide call in the kernels is made by all 32
// lanes (none sits in divergent code), which this model relies on.
#pragma once

#include "shim.h"

#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#define MUSER_HOST_EMU 1
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define MUSER_DYNAMIC_SMEM(name) float* name = muser_emu_dynamic_smem

struct dim3 {
	unsigned x = 1, y = 1, z = 1;
};
struct uint4 {
	unsigned x, y, z, w;
};
struct float4 {
	float x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
alignas(16) inline float muser_emu_dynamic_smem[1 << 16];

// Warp is the exchange area of one warp.
struct Warp {
	std::barrier<> bar{32};
	uint64_t slot[32][8];
};

inline std::barrier<>* muser_emu_block_bar;
inline thread_local Warp* t_warp;
inline thread_local int t_lane;

static inline void __syncthreads() { muser_emu_block_bar->arrive_and_wait(); }

template <class T> static inline uint64_t bits64(T v) {
	uint64_t u = 0;
	std::memcpy(&u, &v, sizeof(T));
	return u;
}
template <class T> static inline T from64(uint64_t u) {
	T v;
	std::memcpy(&v, &u, sizeof(T));
	return v;
}

// exchange publishes v, waits for the warp, returns f(slots), and waits
// again before the slots may be reused.
template <class T, class F> static inline auto exchange(T v, F f) {
	Warp* w = t_warp;
	w->slot[t_lane][0] = bits64(v);
	w->bar.arrive_and_wait();
	auto r = f(w->slot);
	w->bar.arrive_and_wait();
	return r;
}

template <class T> static inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
	const int lane = t_lane, base = lane - lane % width;
	return exchange(v, [&](uint64_t(*s)[8]) { return from64<T>(s[base + src % width][0]); });
}
template <class T> static inline T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
	const int lane = t_lane;
	const int src = (lane % width) + (int)delta < width ? lane + (int)delta : lane;
	return exchange(v, [&](uint64_t(*s)[8]) { return from64<T>(s[src][0]); });
}
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
	const int lane = t_lane, src = lane ^ mask;
	const int s2 = (src / width == lane / width) ? src : lane;
	return exchange(v, [&](uint64_t(*s)[8]) { return from64<T>(s[s2][0]); });
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
	return exchange(pred ? 1u : 0u, [&](uint64_t(*s)[8]) {
		unsigned b = 0;
		for (int l = 0; l < 32; l++)
			if ((mask >> l & 1) && s[l][0]) b |= 1u << l;
		return b;
	});
}
static inline unsigned __reduce_max_sync(unsigned mask, unsigned v) {
	return exchange(v, [&](uint64_t(*s)[8]) {
		unsigned m = 0;
		for (int l = 0; l < 32; l++)
			if (mask >> l & 1) m = std::max(m, (unsigned)s[l][0]);
		return m;
	});
}
static inline int __reduce_add_sync(unsigned mask, int v) {
	return exchange(v, [&](uint64_t(*s)[8]) {
		int m = 0;
		for (int l = 0; l < 32; l++)
			if (mask >> l & 1) m += from64<int>(s[l][0]);
		return m;
	});
}
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }

// muser_emu_mma is mma.sync m16n8k<k> s8×s8→s32 with every C element c0, from the
// fragment layout the PTX ISA documents (common.cuh restates it): lane
// 4g+t holds rows g and g+8 of A at k 4t..4t+3 (and +16 for k = 32), and
// column g of B at the same k; it receives C rows g, g+8, columns 2t, 2t+1.
static inline void muser_emu_mma(int c[4], const uint32_t* a, const uint32_t* b, int k, int c0) {
	Warp* w = t_warp;
	const int lane = t_lane;
	const int na = k / 8, nb = k / 16; // registers of A and B
	for (int i = 0; i < na; i++) w->slot[lane][i] = a[i];
	for (int i = 0; i < nb; i++) w->slot[lane][4 + i] = b[i];
	w->bar.arrive_and_wait();
	auto A = [&](int r, int kk) { // row r, column kk of A
		const int reg = (r / 8) + 2 * (kk / 16);
		const int src = (r % 8) * 4 + (kk % 16) / 4;
		return (int)(int8_t)(w->slot[src][reg] >> (8 * (kk % 4)));
	};
	auto B = [&](int kk, int col) {
		const int src = col * 4 + (kk % 16) / 4;
		return (int)(int8_t)(w->slot[src][4 + kk / 16] >> (8 * (kk % 4)));
	};
	const int g = lane / 4, t = lane % 4;
	for (int e = 0; e < 4; e++) {
		const int r = g + 8 * (e >> 1), col = 2 * t + (e & 1);
		int sum = c0;
		for (int kk = 0; kk < k; kk++) sum += A(r, kk) * B(kk, col);
		c[e] = sum;
	}
	w->bar.arrive_and_wait();
}

// muser_emu_launch runs kernel over grid × block: one OS thread per CUDA
// thread of a block, the same threads for every block, blocks one after
// another (a barrier ends each).
template <class F> static void muser_emu_launch(dim3 grid, dim3 block, F kernel) {
	const int nt = block.x * block.y * block.z;
	if (nt % 32 != 0) {
		std::fprintf(stderr, "emu: block of %d threads is not whole warps\n", nt);
		std::exit(3);
	}
	gridDim = grid;
	blockDim = block;
	std::barrier<> bar(nt), done(nt);
	muser_emu_block_bar = &bar;
	std::vector<Warp> warps(nt / 32);
	std::vector<std::thread> th;
	th.reserve(nt);
	for (int i = 0; i < nt; i++) {
		th.emplace_back([&, i] {
			threadIdx = dim3{(unsigned)(i % block.x), (unsigned)(i / block.x % block.y), (unsigned)(i / (block.x * block.y))};
			t_warp = &warps[i / 32];
			t_lane = i % 32;
			for (unsigned bz = 0; bz < grid.z; bz++)
				for (unsigned by = 0; by < grid.y; by++)
					for (unsigned bx = 0; bx < grid.x; bx++) {
						blockIdx = dim3{bx, by, bz};
						kernel();
						done.arrive_and_wait();
					}
		});
	}
	for (auto& x : th) x.join();
}
