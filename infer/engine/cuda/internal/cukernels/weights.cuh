// weights.cuh: how each ggml weight block decodes into small signed
// integers and scales, as infer/kernels/unpack.go unpacks it for the
// canonical dot products. Each type is a traits struct:
//
//   QK, BYTES   values and bytes per block;
//   word(b, w)  values 4w..4w+3 of the block at b, as four int8 in one
//               32-bit word (lowest value in the lowest byte), centred as
//               the CPU's unpacked.u: Q8_0 q; Q4_0 q-8; Q5_0 q-16; Q4_1,
//               Q5_1, Q2_K, Q4_K, Q5_K q; Q3_K q-4·(1-h); Q6_K q-32; NVFP4
//               the doubled E2M1 value;
//   scales(b, f, i)  the block's float fields (f16 widened, or NVFP4's
//               UE4M3 scales) into f[0..NF) and integer scales and mins
//               into i[0..NI).
//
// deq<T>(b, y) decodes a block to floats as ggml.Dequantize does (the
// embedding lookup).
//
// A block's f16 fields only ever feed float arithmetic (the products'
// epilogues, the dequantization's multiplications), so they widen with
// f16_to_f32_arith: one instruction, the bits of ggml.F16ToF32 for every
// field that is not a NaN.
//
// Blocks start on 2-byte boundaries (every block size is even), so 32-bit
// reads are made with ld32a2.
#pragma once

#include "common.cuh"

// Weight families: how the integer block sums turn into the float product
// added to a dot product's accumulator (infer/kernels/doc.go, "Canonical
// order").
enum {
	FAM_LEGACY = 0,     // Q8_0, Q4_0, Q5_0: p = (dw·da)·isum
	FAM_LEGACY_MIN = 1, // Q4_1, Q5_1: p = (dw·da)·isum + mw·sa
	FAM_K = 2,          // K-quants: p = (dw·da)·isum [− (dmin·da)·msum]
	FAM_NVFP4 = 3,      // per 16: p = (ws·da)·isum
};

// byte_spread4 moves bit k of the low nibble of h to bit 4 of byte k.
MUSER_DEV uint32_t bit4_of_bytes(uint32_t h) {
	return ((h & 1u) << 4) | ((h & 2u) << 11) | ((h & 4u) << 18) | ((h & 8u) << 25);
}

// nib_lo, nib_hi: the low or high nibbles of four bytes, one per byte.
MUSER_DEV uint32_t nib_lo(uint32_t x) { return x & 0x0f0f0f0fu; }
MUSER_DEV uint32_t nib_hi(uint32_t x) { return (x >> 4) & 0x0f0f0f0fu; }

// get_scale_min_k4 is kernels.scaleMinK4 (ggml's get_scale_min_k4) on the
// 12 packed scale bytes q of a Q4_K or Q5_K block.
MUSER_DEV void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
	if (j < 4) {
		*sc = q[j] & 63;
		*m = q[j + 4] & 63;
	} else {
		*sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		*m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// ue4m3_half decodes an NVFP4 sub-block scale as ggml's ggml_ue4m3_to_fp32:
// 0x00 and 0x7F give 0; otherwise exponent bits 3..6 (bias 7) and mantissa
// bits 0..2, bit 7 ignored, the value halved (the E2M1 table is doubled).
// Every result is exact in float32.
MUSER_DEV float ue4m3_half(uint32_t x) {
	x &= 0xffu;
	if (x == 0u || x == 0x7fu) return 0.0f;
	const uint32_t e = (x >> 3) & 0xfu, m = x & 7u;
	if (e == 0u) return f32mul(__uint2float_rn(m), 0.0009765625f); // m·2^-9·0.5
	return __uint_as_float(((e + 119u) << 23) | (m << 20));        // (1+m/8)·2^(e-7)·0.5
}

// ---------------------------------------------------------------------------

struct WQ8_0 {
	static constexpr int QK = 32, BYTES = 34, FAM = FAM_LEGACY, NF = 1, NI = 0;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) { return ld32a2(b + 2 + 4 * w); }
	static MUSER_DEV void scales(const uint8_t* b, float* f, int*) { f[0] = f16_to_f32_arith(ld16(b)); }
};

struct WQ4_0 {
	static constexpr int QK = 32, BYTES = 18, FAM = FAM_LEGACY, NF = 1, NI = 0;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) {
		const uint32_t x = ld32a2(b + 2 + 4 * (w & 3));
		return __vsub4(w < 4 ? nib_lo(x) : nib_hi(x), 0x08080808u);
	}
	static MUSER_DEV void scales(const uint8_t* b, float* f, int*) { f[0] = f16_to_f32_arith(ld16(b)); }
};

struct WQ5_0 {
	static constexpr int QK = 32, BYTES = 22, FAM = FAM_LEGACY, NF = 1, NI = 0;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) {
		const uint32_t qh = ld32a2(b + 2);
		const uint32_t x = ld32a2(b + 6 + 4 * (w & 3));
		const uint32_t lo = w < 4 ? nib_lo(x) : nib_hi(x);
		return __vsub4(lo | bit4_of_bytes((qh >> (4 * w)) & 0xfu), 0x10101010u);
	}
	static MUSER_DEV void scales(const uint8_t* b, float* f, int*) { f[0] = f16_to_f32_arith(ld16(b)); }
};

struct WQ4_1 {
	static constexpr int QK = 32, BYTES = 20, FAM = FAM_LEGACY_MIN, NF = 2, NI = 0;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) {
		const uint32_t x = ld32a2(b + 4 + 4 * (w & 3));
		return w < 4 ? nib_lo(x) : nib_hi(x);
	}
	static MUSER_DEV void scales(const uint8_t* b, float* f, int*) {
		f[0] = f16_to_f32_arith(ld16(b));
		f[1] = f16_to_f32_arith(ld16(b + 2));
	}
};

struct WQ5_1 {
	static constexpr int QK = 32, BYTES = 24, FAM = FAM_LEGACY_MIN, NF = 2, NI = 0;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) {
		const uint32_t qh = ld32a2(b + 4);
		const uint32_t x = ld32a2(b + 8 + 4 * (w & 3));
		const uint32_t lo = w < 4 ? nib_lo(x) : nib_hi(x);
		return lo | bit4_of_bytes((qh >> (4 * w)) & 0xfu);
	}
	static MUSER_DEV void scales(const uint8_t* b, float* f, int*) {
		f[0] = f16_to_f32_arith(ld16(b));
		f[1] = f16_to_f32_arith(ld16(b + 2));
	}
};

// K-quants: super-blocks of 256 values in groups of G (16 or 32) with an
// integer scale each (and an integer min with HAS_MIN). i[0..NG) holds the
// scales, i[NG..2NG) the mins; f[0] = d, f[1] = dmin.

struct WQ4_K {
	static constexpr int QK = 256, BYTES = 144, FAM = FAM_K, G = 32, NG = 8, HAS_MIN = 1, NF = 2, NI = 16;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) {
		const int j = 4 * w, c = j / 64, in = j % 64;
		const uint32_t x = ld32a2(b + 16 + c * 32 + (in & 31));
		return in < 32 ? nib_lo(x) : nib_hi(x);
	}
	static MUSER_DEV void scales(const uint8_t* b, float* f, int* i) {
		f[0] = f16_to_f32_arith(ld16(b));
		f[1] = f16_to_f32_arith(ld16(b + 2));
		for (int g = 0; g < 8; g++) scale_min_k4(g, b + 4, &i[g], &i[8 + g]);
	}
};

struct WQ5_K {
	static constexpr int QK = 256, BYTES = 176, FAM = FAM_K, G = 32, NG = 8, HAS_MIN = 1, NF = 2, NI = 16;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) {
		const int j = 4 * w, c = j / 64, in = j % 64, l = in & 31;
		const uint32_t x = ld32a2(b + 48 + c * 32 + l);
		const uint32_t h = (ld32a2(b + 16 + l) >> (2 * c + (in >= 32 ? 1 : 0))) & 0x01010101u;
		return (in < 32 ? nib_lo(x) : nib_hi(x)) | (h << 4);
	}
	static MUSER_DEV void scales(const uint8_t* b, float* f, int* i) {
		f[0] = f16_to_f32_arith(ld16(b));
		f[1] = f16_to_f32_arith(ld16(b + 2));
		for (int g = 0; g < 8; g++) scale_min_k4(g, b + 4, &i[g], &i[8 + g]);
	}
};

struct WQ6_K {
	static constexpr int QK = 256, BYTES = 210, FAM = FAM_K, G = 16, NG = 16, HAS_MIN = 0, NF = 1, NI = 16;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) {
		const int j = 4 * w, h = j / 128, idx = j % 128, qd = idx / 32, l = idx % 32;
		const uint32_t x = ld32a2(b + h * 64 + l + 32 * (qd & 1));
		const uint32_t lo = qd < 2 ? nib_lo(x) : nib_hi(x);
		const uint32_t hi = (ld32a2(b + 128 + h * 32 + l) >> (2 * qd)) & 0x03030303u;
		return __vsub4(lo | (hi << 4), 0x20202020u);
	}
	static MUSER_DEV void scales(const uint8_t* b, float* f, int* i) {
		f[0] = f16_to_f32_arith(ld16(b + 208));
		for (int g = 0; g < 16; g++) i[g] = (int)(int8_t)b[192 + g];
	}
};

struct WQ2_K {
	static constexpr int QK = 256, BYTES = 84, FAM = FAM_K, G = 16, NG = 16, HAS_MIN = 1, NF = 2, NI = 32;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) {
		const int j = 4 * w, h = j / 128, s = (j % 128) / 32, l = j % 32;
		return (ld32a2(b + 16 + h * 32 + l) >> (2 * s)) & 0x03030303u;
	}
	static MUSER_DEV void scales(const uint8_t* b, float* f, int* i) {
		f[0] = f16_to_f32_arith(ld16(b + 80));
		f[1] = f16_to_f32_arith(ld16(b + 82));
		for (int g = 0; g < 16; g++) {
			i[g] = b[g] & 15;
			i[16 + g] = b[g] >> 4;
		}
	}
};

struct WQ3_K {
	static constexpr int QK = 256, BYTES = 110, FAM = FAM_K, G = 16, NG = 16, HAS_MIN = 0, NF = 1, NI = 16;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) {
		const int j = 4 * w, h = j / 128, s = (j % 128) / 32, l = j % 32;
		const uint32_t q = (ld32a2(b + 32 + h * 32 + l) >> (2 * s)) & 0x03030303u;
		const uint32_t hm = (ld32a2(b + l) >> (4 * h + s)) & 0x01010101u;
		return __vsub4(q | (hm << 2), 0x04040404u);
	}
	static MUSER_DEV void scales(const uint8_t* b, float* f, int* i) {
		const uint32_t km1 = 0x03030303u, km2 = 0x0f0f0f0fu;
		f[0] = f16_to_f32_arith(ld16(b + 108));
		const uint32_t a0 = ld32a2(b + 96), a1 = ld32a2(b + 100), tmp = ld32a2(b + 104);
		const uint32_t aux[4] = {
			(a0 & km2) | (((tmp >> 0) & km1) << 4),
			(a1 & km2) | (((tmp >> 2) & km1) << 4),
			((a0 >> 4) & km2) | (((tmp >> 4) & km1) << 4),
			((a1 >> 4) & km2) | (((tmp >> 6) & km1) << 4),
		};
		for (int g = 0; g < 16; g++) i[g] = (int)((aux[g / 4] >> (8 * (g % 4))) & 0xffu) - 32;
	}
};

// NVFP4: blocks of 64 = four sub-blocks of 16, each with a UE4M3 scale
// d[s]; qs[8s+j] holds element j of sub-block s in its low nibble and
// element j+8 in its high nibble; a nibble indexes the doubled E2M1 table
// {0,1,2,3,4,6,8,12,0,-1,-2,-3,-4,-6,-8,-12}. f[s] = ue4m3_half(d[s]).
struct WNVFP4 {
	static constexpr int QK = 64, BYTES = 36, FAM = FAM_NVFP4, NF = 4, NI = 0;
	static MUSER_DEV uint32_t word(const uint8_t* b, int w) {
		const int j = 4 * w, s = j / 16, k = j % 16;
		const uint32_t x = ld32a2(b + 4 + 8 * s + (k & 7));
		const uint32_t n = k < 8 ? nib_lo(x) : nib_hi(x);
		// Table lookup of four nibbles: byte_perm picks bytes 0..7 of
		// (lo, hi) by the low three bits of each selector nibble; bit 3
		// chooses the negative half.
		const uint32_t sel = (n & 0x7u) | ((n >> 4) & 0x70u) | ((n >> 8) & 0x700u) | ((n >> 12) & 0x7000u);
		const uint32_t pos = __byte_perm(0x03020100u, 0x0c080604u, sel);
		const uint32_t neg = __byte_perm(0xfdfeff00u, 0xf4f8fafcu, sel);
		const uint32_t m = ((n >> 3) & 0x01010101u) * 0xffu;
		return (pos & ~m) | (neg & m);
	}
	static MUSER_DEV void scales(const uint8_t* b, float* f, int*) {
		for (int s = 0; s < 4; s++) f[s] = ue4m3_half(b[s]);
	}
};

// ---------------------------------------------------------------------------
// Dequantization of one block as ggml.Dequantize computes it (dequant.go:
// every product and sum rounded to float32, no fused multiply-add).

template <class T> MUSER_DEV void deq(const uint8_t* b, float* y);

template <> MUSER_DEV void deq<WQ8_0>(const uint8_t* b, float* y) {
	const float d = f16_to_f32_arith(ld16(b));
	for (int j = 0; j < 32; j++) y[j] = f32mul(__int2float_rn((int)(int8_t)b[2 + j]), d);
}

template <> MUSER_DEV void deq<WQ4_0>(const uint8_t* b, float* y) {
	const float d = f16_to_f32_arith(ld16(b));
	for (int j = 0; j < 16; j++) {
		y[j] = f32mul(__int2float_rn((int)(b[2 + j] & 15) - 8), d);
		y[j + 16] = f32mul(__int2float_rn((int)(b[2 + j] >> 4) - 8), d);
	}
}

template <> MUSER_DEV void deq<WQ4_1>(const uint8_t* b, float* y) {
	const float d = f16_to_f32_arith(ld16(b)), m = f16_to_f32_arith(ld16(b + 2));
	for (int j = 0; j < 16; j++) {
		y[j] = f32add(f32mul(__int2float_rn(b[4 + j] & 15), d), m);
		y[j + 16] = f32add(f32mul(__int2float_rn(b[4 + j] >> 4), d), m);
	}
}

template <> MUSER_DEV void deq<WQ5_0>(const uint8_t* b, float* y) {
	const float d = f16_to_f32_arith(ld16(b));
	const uint32_t qh = ld32a2(b + 2);
	for (int j = 0; j < 16; j++) {
		const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
		y[j] = f32mul(__int2float_rn((int)((b[6 + j] & 15) | h0) - 16), d);
		y[j + 16] = f32mul(__int2float_rn((int)((b[6 + j] >> 4) | h1) - 16), d);
	}
}

template <> MUSER_DEV void deq<WQ5_1>(const uint8_t* b, float* y) {
	const float d = f16_to_f32_arith(ld16(b)), m = f16_to_f32_arith(ld16(b + 2));
	const uint32_t qh = ld32a2(b + 4);
	for (int j = 0; j < 16; j++) {
		const int h0 = ((qh >> j) << 4) & 0x10, h1 = (qh >> (j + 12)) & 0x10;
		y[j] = f32add(f32mul(__int2float_rn((b[8 + j] & 15) | h0), d), m);
		y[j + 16] = f32add(f32mul(__int2float_rn((b[8 + j] >> 4) | h1), d), m);
	}
}

template <> MUSER_DEV void deq<WQ2_K>(const uint8_t* b, float* y) {
	const float d = f16_to_f32_arith(ld16(b + 80)), dmin = f16_to_f32_arith(ld16(b + 82));
	for (int n = 0; n < 2; n++)
		for (int j = 0; j < 4; j++)
			for (int half = 0; half < 2; half++) {
				const int sc = b[n * 8 + 2 * j + half];
				const float dl = f32mul(d, __int2float_rn(sc & 15)), ml = f32mul(dmin, __int2float_rn(sc >> 4));
				const uint8_t* q = b + 16 + n * 32 + 16 * half;
				float* o = y + n * 128 + 32 * j + 16 * half;
				for (int l = 0; l < 16; l++) o[l] = f32sub(f32mul(dl, __int2float_rn((q[l] >> (2 * j)) & 3)), ml);
			}
}

template <> MUSER_DEV void deq<WQ3_K>(const uint8_t* b, float* y) {
	const float dAll = f16_to_f32_arith(ld16(b + 108));
	float dummy[1];
	int sc[16];
	WQ3_K::scales(b, dummy, sc); // sc[i] = scale - 32
	for (int n = 0; n < 2; n++)
		for (int j = 0; j < 4; j++)
			for (int half = 0; half < 2; half++) {
				const float dl = f32mul(dAll, __int2float_rn(sc[n * 8 + 2 * j + half]));
				const int m = 1 << (n * 4 + j);
				float* o = y + n * 128 + 32 * j + 16 * half;
				for (int l = 16 * half; l < 16 * half + 16; l++) {
					int v = (b[32 + n * 32 + l] >> (2 * j)) & 3;
					if ((b[l] & m) == 0) v -= 4;
					o[l - 16 * half] = f32mul(dl, __int2float_rn(v));
				}
			}
}

template <> MUSER_DEV void deq<WQ4_K>(const uint8_t* b, float* y) {
	const float d = f16_to_f32_arith(ld16(b)), dmin = f16_to_f32_arith(ld16(b + 2));
	for (int c = 0; c < 4; c++) {
		int sc, m;
		scale_min_k4(2 * c, b + 4, &sc, &m);
		const float d1 = f32mul(d, __int2float_rn(sc)), m1 = f32mul(dmin, __int2float_rn(m));
		scale_min_k4(2 * c + 1, b + 4, &sc, &m);
		const float d2 = f32mul(d, __int2float_rn(sc)), m2 = f32mul(dmin, __int2float_rn(m));
		const uint8_t* q = b + 16 + 32 * c;
		for (int l = 0; l < 32; l++) {
			y[64 * c + l] = f32sub(f32mul(d1, __int2float_rn(q[l] & 15)), m1);
			y[64 * c + 32 + l] = f32sub(f32mul(d2, __int2float_rn(q[l] >> 4)), m2);
		}
	}
}

template <> MUSER_DEV void deq<WQ5_K>(const uint8_t* b, float* y) {
	const float d = f16_to_f32_arith(ld16(b)), dmin = f16_to_f32_arith(ld16(b + 2));
	const uint8_t* qh = b + 16;
	for (int c = 0; c < 4; c++) {
		int sc, m;
		scale_min_k4(2 * c, b + 4, &sc, &m);
		const float d1 = f32mul(d, __int2float_rn(sc)), m1 = f32mul(dmin, __int2float_rn(m));
		scale_min_k4(2 * c + 1, b + 4, &sc, &m);
		const float d2 = f32mul(d, __int2float_rn(sc)), m2 = f32mul(dmin, __int2float_rn(m));
		const uint8_t* ql = b + 48 + 32 * c;
		const int u1 = 1 << (2 * c), u2 = 2 << (2 * c);
		for (int l = 0; l < 32; l++) {
			const int v1 = (ql[l] & 15) + ((qh[l] & u1) ? 16 : 0);
			const int v2 = (ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0);
			y[64 * c + l] = f32sub(f32mul(d1, __int2float_rn(v1)), m1);
			y[64 * c + 32 + l] = f32sub(f32mul(d2, __int2float_rn(v2)), m2);
		}
	}
}

template <> MUSER_DEV void deq<WQ6_K>(const uint8_t* b, float* y) {
	const float d = f16_to_f32_arith(ld16(b + 208));
	for (int n = 0; n < 2; n++) {
		const uint8_t* ql = b + 64 * n;
		const uint8_t* qh = b + 128 + 32 * n;
		const uint8_t* sc = b + 192 + 8 * n;
		float* o = y + 128 * n;
		for (int l = 0; l < 32; l++) {
			const int is = l / 16;
			const int q1 = (int)(int8_t)((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4)) - 32;
			const int q2 = (int)(int8_t)((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32;
			const int q3 = (int)(int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
			const int q4 = (int)(int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
			o[l] = f32mul(f32mul(d, __int2float_rn((int8_t)sc[is])), __int2float_rn(q1));
			o[l + 32] = f32mul(f32mul(d, __int2float_rn((int8_t)sc[is + 2])), __int2float_rn(q2));
			o[l + 64] = f32mul(f32mul(d, __int2float_rn((int8_t)sc[is + 4])), __int2float_rn(q3));
			o[l + 96] = f32mul(f32mul(d, __int2float_rn((int8_t)sc[is + 6])), __int2float_rn(q4));
		}
	}
}

template <> MUSER_DEV void deq<WNVFP4>(const uint8_t* b, float* y) {
	for (int w = 0; w < 16; w++) {
		const uint32_t v = WNVFP4::word(b, w);
		const float d = ue4m3_half(b[w / 4]);
		for (int k = 0; k < 4; k++) y[4 * w + k] = f32mul(__int2float_rn((int)(int8_t)(v >> (8 * k))), d);
	}
}
