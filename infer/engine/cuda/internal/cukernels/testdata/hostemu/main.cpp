// main.cpp: the host side of hostemu_test.go. It runs the pure device
// functions of common.cuh and weights.cuh on the CPU (through shim.h) and
// writes their results for the Go test to compare with muser's Go
// definitions. Every file is little-endian binary.
//
//   hostemu prims  <in: u32 float bits ×N> <out: ×N records of 5 u32:
//                  f32_to_f16, f32_to_bf16, round_away, nearest_int, exp32 bits>
//   hostemu tables <out: 65536 f16_to_f32 bits, then 256 ue4m3_half bits>
//   hostemu deq    <type> <blocks> <in: block bytes> <out: float bits>
//   hostemu dot    <type> <rows> <cols> <n> <w> <q: int8 [n][cols]> <d: float> <ext> <out: float [n][rows]>
//
// dot computes y[t][r] with the words and scales of weights.cuh and the
// canonical epilogue of each family (the formulas of mmq.cuh and mmv.cuh:
// integer block sums, then the float products in block order).
#include "shim.h"
#include "../../common.cuh"
#include "../../weights.cuh"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

static std::vector<uint8_t> readFile(const char* path) {
	FILE* f = std::fopen(path, "rb");
	if (!f) { std::perror(path); std::exit(2); }
	std::vector<uint8_t> b;
	uint8_t buf[1 << 16];
	size_t n;
	while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) b.insert(b.end(), buf, buf + n);
	std::fclose(f);
	return b;
}

static void writeFile(const char* path, const void* p, size_t n) {
	FILE* f = std::fopen(path, "wb");
	if (!f || std::fwrite(p, 1, n, f) != n || std::fclose(f) != 0) { std::perror(path); std::exit(2); }
}

template <class T>
static void deqAll(const std::vector<uint8_t>& in, long blocks, std::vector<float>& out) {
	out.resize((size_t)blocks * T::QK);
	for (long b = 0; b < blocks; b++) deq<T>(in.data() + (size_t)b * T::BYTES, out.data() + (size_t)b * T::QK);
}

template <class T>
static void dotAll(int rows, int cols, int n, const std::vector<uint8_t>& w, const std::vector<uint8_t>& q,
                   const std::vector<uint8_t>& dv, const std::vector<uint8_t>& ev, std::vector<float>& y) {
	const float* d = (const float*)dv.data();
	const float* fe = (const float*)ev.data();
	const int* ie = (const int*)ev.data();
	const int nb = cols / T::QK, nb32 = cols / 32;
	y.assign((size_t)n * rows, 0.0f);
	for (int r = 0; r < rows; r++)
		for (int t = 0; t < n; t++) {
			const int8_t* a = (const int8_t*)q.data() + (size_t)t * cols;
			float acc = 0.0f;
			for (int b = 0; b < nb; b++) {
				const uint8_t* blk = w.data() + ((size_t)r * nb + b) * T::BYTES;
				float f[T::NF];
				int iv[T::NI > 0 ? T::NI : 1];
				T::scales(blk, f, iv);
				auto aw = [&](int k) { int v; std::memcpy(&v, a + (size_t)b * T::QK + 4 * k, 4); return v; };
				if constexpr (T::FAM == FAM_LEGACY || T::FAM == FAM_LEGACY_MIN) {
					int isum = 0;
					for (int k = 0; k < 8; k++) isum = __dp4a((int)T::word(blk, k), aw(k), isum);
					float p = f32mul(f32mul(f[0], d[(size_t)t * nb32 + b]), __int2float_rn(isum));
					if constexpr (T::FAM == FAM_LEGACY_MIN) p = f32add(p, f32mul(f[1 % T::NF], fe[(size_t)t * nb32 + b]));
					acc = f32add(acc, p);
				} else if constexpr (T::FAM == FAM_NVFP4) {
					for (int s = 0; s < 4; s++) {
						int isum = 0;
						for (int k = 4 * s; k < 4 * s + 4; k++) isum = __dp4a((int)T::word(blk, k), aw(k), isum);
						acc = f32add(acc, f32mul(f32mul(f[s % T::NF], d[(size_t)t * nb32 + 2 * b + s / 2]), __int2float_rn(isum)));
					}
				} else {
					int isum = 0, msum = 0;
					const int* bs = ie + (size_t)t * (cols / 16) + (size_t)b * 16;
					for (int g = 0; g < T::NG; g++) {
						int gs = 0;
						for (int k = g * T::G / 4; k < (g + 1) * T::G / 4; k++) gs = __dp4a((int)T::word(blk, k), aw(k), gs);
						isum += iv[g] * gs;
						if constexpr (T::HAS_MIN) msum += iv[(T::NG + g) % (T::NI > 0 ? T::NI : 1)] * (T::G == 32 ? bs[2 * g] + bs[2 * g + 1] : bs[g]);
					}
					const float da = d[(size_t)t * nb + b];
					float p = f32mul(f32mul(f[0], da), __int2float_rn(isum));
					if constexpr (T::HAS_MIN) p = f32sub(p, f32mul(f32mul(f[1 % T::NF], da), __int2float_rn(msum)));
					acc = f32add(acc, p);
				}
			}
			y[(size_t)t * rows + r] = acc;
		}
}

#define TYPES(X) X(8, WQ8_0) X(2, WQ4_0) X(6, WQ5_0) X(3, WQ4_1) X(7, WQ5_1) X(10, WQ2_K) X(11, WQ3_K) \
	X(12, WQ4_K) X(13, WQ5_K) X(14, WQ6_K) X(40, WNVFP4)

int main(int argc, char** argv) {
	if (argc < 2) return 2;
	const std::string mode = argv[1];
	if (mode == "prims" && argc == 4) {
		const std::vector<uint8_t> in = readFile(argv[2]);
		const size_t n = in.size() / 4;
		std::vector<uint32_t> out(5 * n);
		for (size_t i = 0; i < n; i++) {
			uint32_t u;
			std::memcpy(&u, in.data() + 4 * i, 4);
			const float v = __uint_as_float(u);
			out[5 * i] = f32_to_f16(v);
			out[5 * i + 1] = f32_to_bf16(v);
			out[5 * i + 2] = (uint32_t)round_away(v);
			out[5 * i + 3] = (uint32_t)nearest_int(v);
			out[5 * i + 4] = __float_as_uint(exp32(v));
		}
		writeFile(argv[3], out.data(), out.size() * 4);
		return 0;
	}
	if (mode == "tables" && argc == 3) {
		std::vector<uint32_t> out(65536 + 256);
		for (uint32_t h = 0; h < 65536; h++) out[h] = __float_as_uint(f16_to_f32(h));
		for (uint32_t x = 0; x < 256; x++) out[65536 + x] = __float_as_uint(ue4m3_half(x));
		writeFile(argv[2], out.data(), out.size() * 4);
		return 0;
	}
	if (mode == "deq" && argc == 6) {
		const int type = std::atoi(argv[2]);
		const long blocks = std::atol(argv[3]);
		const std::vector<uint8_t> in = readFile(argv[4]);
		std::vector<float> out;
#define DEQ(id, T) if (type == id) { if (in.size() != (size_t)blocks * T::BYTES) return 3; deqAll<T>(in, blocks, out); }
		TYPES(DEQ)
		if (out.empty()) return 4;
		writeFile(argv[5], out.data(), out.size() * 4);
		return 0;
	}
	if (mode == "dot" && argc == 11) {
		const int type = std::atoi(argv[2]), rows = std::atoi(argv[3]), cols = std::atoi(argv[4]), n = std::atoi(argv[5]);
		const std::vector<uint8_t> w = readFile(argv[6]), q = readFile(argv[7]), d = readFile(argv[8]), e = readFile(argv[9]);
		std::vector<float> y;
#define DOT(id, T) if (type == id) { if (w.size() != (size_t)rows * (cols / T::QK) * T::BYTES) return 3; dotAll<T>(rows, cols, n, w, q, d, e, y); }
		TYPES(DOT)
		if (y.empty()) return 4;
		writeFile(argv[10], y.data(), y.size() * 4);
		return 0;
	}
	std::fprintf(stderr, "usage: hostemu prims|tables|deq|dot ...\n");
	return 2;
}
