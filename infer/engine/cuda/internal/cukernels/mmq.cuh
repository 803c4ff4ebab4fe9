// mmq.cuh: matrix products of quantized weights by quantized activations,
// y[t][r] = Σ_c W[r][c]·x[t][c], in the canonical order of
// infer/kernels/generic.go (dotLegacy, dotK) and doc.go ("Canonical order").
//
// The integer block sums are exact in any order, so they come from int8
// tensor cores (m16n8k32 for a 32-value block or group, m16n8k16 for a
// 16-value group or NVFP4 sub-block). The float epilogue of each block runs
// on CUDA cores, per output element, in block order:
//
//   acc = +0; for each unit u in order: acc = acc + p_u
//
// where a unit is a 32-value block (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1), a
// 256-value super-block (K-quants) or a 16-value sub-block (NVFP4), and p_u
// is the family's product (weights.cuh). Two kernels per type compute the
// same bits: mmq (tiles of 64 rows × 64 tokens, for prefill) keeps each
// output's accumulator in a register while the units stream past; mmv (up
// to 8 tokens, for decode) computes every unit's p in parallel into shared
// memory and then adds them in order, one thread per output.
//
// Arguments of every integer kernel, in order:
//   W    weights, rows × cols in their ggml block layout (the GGUF bytes),
//        rows contiguous (row r at r·(cols/QK)·BYTES); base 16-byte aligned
//   rows, cols   cols a multiple of the block size
//   aq   int8 [n][cols] quantized activations (quant.cuh)
//   ad   float activation scales: [n][cols/32] (Q8_0, Q8_1) or [n][cols/256] (Q8_K)
//   aext Q4_1/Q5_1: float [n][cols/32] Q8_1 sums s; K-quants: int32
//        [n][cols/16] bsums; other types: unused (pass 0)
//   y    float [n][rows] output, overwritten
//   n    tokens
#pragma once

#include "weights.cuh"

namespace mmq {
constexpr int BM = 64, BN = 64;          // CTA tile: rows × tokens
constexpr int WARPS_M = 2, WARPS_N = 2;  // warp grid
constexpr int THREADS = 32 * WARPS_M * WARPS_N;
constexpr int WM = BM / WARPS_M, WN = BN / WARPS_N;
constexpr int MI = WM / 16, NI = WN / 8; // mma tiles per warp

// Stage geometry: SB weight blocks (KS values) per shared-memory stage.
template <class T> struct Geom {
	static constexpr int SB = T::QK == 32 ? 4 : (T::QK == 64 ? 2 : 1);
	static constexpr int KS = SB * T::QK;
	static constexpr int KSP = KS + 16;              // padded row: conflict-free fragment loads
	static constexpr int NIX = T::NI > 0 ? T::NI : 1; // integer scales per block in smem
	static constexpr int NDA = T::FAM == FAM_K ? 1 : KS / 32; // activation scales per stage
	// A row's raw weight bytes of a stage, as the 16-byte chunks that
	// cover them (the stage's first byte anywhere in its chunk).
	static constexpr int RAW = (SB * T::BYTES + 30) / 16 * 16;
	// Dynamic shared memory: raw weights [2][BM][RAW], activations
	// [2][BN][KSP], decoded weights [BM][KSP] (launch.go's mmqShared).
	static constexpr int DYN = 2 * BM * RAW + 2 * BN * KSP + BM * KSP;
};
} // namespace mmq

// each_item calls f(it) for it = tid, tid + TH, … below N: the tiled
// products' loops over a stage's copies and decoding. With UNROLL the
// compiler unrolls them (N and TH are constants; the block has TH
// threads, so tid < TH) and computes each item's indices without a
// division; the K-quants and NVFP4 keep a loop, whose registers they
// need for their products.
template <int N, int TH, bool UNROLL, class F> MUSER_DEV void each_item(int tid, F&& f) {
	if constexpr (UNROLL) {
#pragma unroll
		for (int k = 0; k < (N + TH - 1) / TH; k++) {
			const int it = tid + k * TH;
			if (N % TH == 0 || it < N) f(it);
		}
	} else {
#pragma unroll 1
		for (int it = tid; it < N; it += TH) f(it);
	}
}

// mmq_tile computes the CTA tile (blockIdx.x: 64 rows, blockIdx.y: 64
// tokens). Launch: grid (ceil(rows/64), ceil(n/64)), block 128, dynamic
// shared memory Geom<T>::DYN bytes.
//
// The columns go in stages of SB blocks. A stage's bytes come in by
// asynchronous copies while the previous stage is computed: each row's
// weight blocks as the raw 16-byte chunks that cover them (a block starts
// on any even byte), the activations and their scales as they are; once
// they have landed the threads decode the raw weights into int8 rows and
// scales (T::word and T::scales read shared memory as they read global
// memory), issue the next stage's copies, and run the tensor-core
// products and the epilogue. Two buffers of raw weights and activations
// alternate; the decoded weights have one.
template <class T>
__device__ __forceinline__ void mmq_tile(const uint8_t* __restrict__ W, int rows, int cols,
                                         const int8_t* __restrict__ aq, const float* __restrict__ ad,
                                         const void* __restrict__ aext, float* __restrict__ y, int n) {
	using namespace mmq;
	using Gm = Geom<T>;
	constexpr int SB = Gm::SB, KS = Gm::KS, KSP = Gm::KSP, NIX = Gm::NIX, NDA = Gm::NDA, RAW = Gm::RAW;
	constexpr int WPB = T::QK / 4; // 32-bit words per block
	constexpr bool UN = T::FAM == FAM_LEGACY || T::FAM == FAM_LEGACY_MIN; // each_item unrolls

	MUSER_DYNAMIC_SMEM(dsm);
	uint8_t* Raw = (uint8_t*)dsm;                // [2][BM][RAW]
	int8_t* Bs2 = (int8_t*)(Raw + 2 * BM * RAW); // [2][BN][KSP]
	int8_t* As = Bs2 + 2 * BN * KSP;             // [BM][KSP]
	__shared__ float Af[BM * SB * T::NF];
	__shared__ int Ai[BM * SB * NIX];
	__shared__ __align__(16) float Bd2[2][BN * NDA];
	__shared__ __align__(16) float Bx2[2][T::FAM == FAM_LEGACY_MIN ? BN * NDA : 1];
	__shared__ __align__(16) int Bb2[2][T::FAM == FAM_K ? BN * 16 : 1];

	const int r0 = blockIdx.x * BM, t0 = blockIdx.y * BN;
	const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
	const int wm = warp % WARPS_M, wn = warp / WARPS_M;
	const int g = lane >> 2, tq = lane & 3;
	const int nb = cols / T::QK;
	const size_t rowBytes = (size_t)nb * T::BYTES;
	const int nb32 = cols / 32;
	const int nst = (nb + SB - 1) / SB;

	// issue starts the copies of stage st into buffer buf.
	auto issue = [&](int st, int buf) {
		const int kb = st * SB, sbn = min(SB, nb - kb);
		each_item<BM * (RAW / 16), THREADS, UN>(tid, [&](int it) {
			const int row = it / (RAW / 16), c = it % (RAW / 16), r = r0 + row;
			const size_t start = (size_t)r * rowBytes + (size_t)kb * T::BYTES;
			const size_t src = (start & ~(size_t)15) + 16 * (size_t)c;
			const bool ok = r < rows && src < start + (size_t)sbn * T::BYTES;
			cp_async16(Raw + (buf * BM + row) * RAW + 16 * c, ok ? W + src : W, ok);
		});
		const int k0 = kb * T::QK;
		int8_t* Bs = Bs2 + buf * BN * KSP;
		each_item<BN * (KS / 16), THREADS, UN>(tid, [&](int it) {
			const int tok = it / (KS / 16), c = it % (KS / 16), t = t0 + tok, k = k0 + 16 * c;
			const bool ok = t < n && k < cols;
			cp_async16(&Bs[tok * KSP + 16 * c], ok ? aq + (size_t)t * cols + k : aq, ok);
		});
		if constexpr (T::FAM == FAM_K) {
			each_item<BN, THREADS, UN>(tid, [&](int it) {
				const int t = t0 + it;
				cp_async4(&Bd2[buf][it], t < n ? ad + (size_t)t * nb + kb : ad, t < n);
			});
			const int* bs = (const int*)aext;
			each_item<BN * 4, THREADS, UN>(tid, [&](int it) {
				const int tok = it / 4, t = t0 + tok;
				cp_async16(&Bb2[buf][4 * it], t < n ? bs + (size_t)t * (cols / 16) + kb * 16 + 4 * (it % 4) : bs, t < n);
			});
		} else {
			const int u0 = k0 / 32;
			each_item<BN * NDA, THREADS, UN>(tid, [&](int it) {
				const int tok = it / NDA, u = it % NDA, t = t0 + tok;
				const bool ok = t < n && u0 + u < nb32;
				const size_t o = ok ? (size_t)t * nb32 + u0 + u : 0;
				cp_async4(&Bd2[buf][it], ad + o, ok);
				if constexpr (T::FAM == FAM_LEGACY_MIN) cp_async4(&Bx2[buf][it], (const float*)aext + o, ok);
			});
		}
		cp_async_commit();
	};
	// decode turns stage st's raw weights in buffer buf into As, Af, Ai.
	// An item is 8 words of one block of one row (the whole block of a
	// 32-value type), its offsets computed once for the 8. A 32-value
	// block's scales go with its item; the K-quants' and NVFP4's, whose
	// blocks are several items, in a loop of their own, a block an item,
	// so that no warp waits on the few of its threads that took a block's
	// first words.
	constexpr bool SPLIT = WPB / 8 > 1; // scales in a loop of their own
	auto block = [&](int st, int buf, int row, int blk, bool& ok) {
		const int kb = st * SB, sbn = min(SB, nb - kb);
		// The row's first byte of the stage sits at start mod 16 of its
		// chunks (only the low bits of start matter, so 32 bits do).
		const uint32_t start = (uint32_t)(r0 + row) * (uint32_t)rowBytes + (uint32_t)kb * T::BYTES;
		ok = r0 + row < rows && blk < sbn;
		return (const uint8_t*)(Raw + (buf * BM + row) * RAW + (int)(start & 15) + blk * T::BYTES);
	};
	auto scales = [&](const uint8_t* b, bool ok, int row, int blk) {
		float* f = &Af[(row * SB + blk) * T::NF];
		int* iv = &Ai[(row * SB + blk) * NIX];
		if (ok) {
			T::scales(b, f, iv);
		} else {
			for (int k = 0; k < T::NF; k++) f[k] = 0.0f;
			for (int k = 0; k < NIX; k++) iv[k] = 0;
		}
	};
	auto decode = [&](int st, int buf) {
		each_item<BM * SB * (WPB / 8), THREADS, UN>(tid, [&](int it) {
			const int row = it / (SB * (WPB / 8)), rem = it % (SB * (WPB / 8));
			const int blk = rem / (WPB / 8), w0 = 8 * (rem % (WPB / 8));
			bool ok;
			const uint8_t* b = block(st, buf, row, blk, ok);
			uint32_t v[8];
#pragma unroll
			for (int j = 0; j < 8; j++) v[j] = ok ? T::word(b, w0 + j) : 0u;
			uint4* dst = (uint4*)&As[row * KSP + blk * T::QK + 4 * w0];
			dst[0] = make_uint4(v[0], v[1], v[2], v[3]);
			dst[1] = make_uint4(v[4], v[5], v[6], v[7]);
			if (!SPLIT) scales(b, ok, row, blk);
		});
		if constexpr (SPLIT) {
			each_item<BM * SB, THREADS, UN>(tid, [&](int it) {
				const int row = it / SB, blk = it % SB;
				bool ok;
				const uint8_t* b = block(st, buf, row, blk, ok);
				scales(b, ok, row, blk);
			});
		}
	};

	float acc[MI][NI][4];
#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int ni = 0; ni < NI; ni++)
#pragma unroll
			for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;

	issue(0, 0);
	for (int st = 0; st < nst; st++) {
		const int cur = st & 1, kb = st * SB, sbn = min(SB, nb - kb);
		cp_async_wait_all();
		__syncthreads(); // stage st has landed; stage st-1's products are done
		decode(st, cur);
		if (st + 1 < nst) issue(st + 1, cur ^ 1);
		__syncthreads();
		const int8_t* Bs = Bs2 + cur * BN * KSP;
		const float* Bd = Bd2[cur];
		const float* Bx = Bx2[cur];
		const int* Bb = Bb2[cur];
		(void)Bx;
		(void)Bb;

		if constexpr (T::FAM == FAM_LEGACY || T::FAM == FAM_LEGACY_MIN) {
			for (int u = 0; u < sbn; u++) {
				uint32_t a[MI][4], b[NI][2];
#pragma unroll
				for (int mi = 0; mi < MI; mi++) {
					const int8_t* p = &As[(wm * WM + mi * 16 + g) * KSP + u * 32 + 4 * tq];
					a[mi][0] = *(const uint32_t*)p;
					a[mi][1] = *(const uint32_t*)(p + 8 * KSP);
					a[mi][2] = *(const uint32_t*)(p + 16);
					a[mi][3] = *(const uint32_t*)(p + 8 * KSP + 16);
				}
#pragma unroll
				for (int ni = 0; ni < NI; ni++) {
					const int8_t* p = &Bs[(wn * WN + ni * 8 + g) * KSP + u * 32 + 4 * tq];
					b[ni][0] = *(const uint32_t*)p;
					b[ni][1] = *(const uint32_t*)(p + 16);
				}
#pragma unroll
				for (int mi = 0; mi < MI; mi++)
#pragma unroll
					for (int ni = 0; ni < NI; ni++) {
						int c[4];
						mma_k32(c, a[mi], b[ni], I2F_BIAS);
#pragma unroll
						for (int e = 0; e < 4; e++) {
							const int row = wm * WM + mi * 16 + g + 8 * (e >> 1);
							const int tok = wn * WN + ni * 8 + 2 * tq + (e & 1);
							const float* f = &Af[(row * SB + u) * T::NF];
							float p = f32mul(f32mul(f[0], Bd[tok * NDA + u]), i2f_biased(c[e]));
							if constexpr (T::FAM == FAM_LEGACY_MIN) p = f32add(p, f32mul(f[1 % T::NF], Bx[tok * NDA + u]));
							acc[mi][ni][e] = f32add(acc[mi][ni][e], p);
						}
					}
			}
		} else if constexpr (T::FAM == FAM_NVFP4) {
			for (int u = 0; u < 4 * sbn; u++) { // sub-blocks of 16
				uint32_t a[MI][2], b[NI];
#pragma unroll
				for (int mi = 0; mi < MI; mi++) {
					const int8_t* p = &As[(wm * WM + mi * 16 + g) * KSP + u * 16 + 4 * tq];
					a[mi][0] = *(const uint32_t*)p;
					a[mi][1] = *(const uint32_t*)(p + 8 * KSP);
				}
#pragma unroll
				for (int ni = 0; ni < NI; ni++) b[ni] = *(const uint32_t*)&Bs[(wn * WN + ni * 8 + g) * KSP + u * 16 + 4 * tq];
#pragma unroll
				for (int mi = 0; mi < MI; mi++)
#pragma unroll
					for (int ni = 0; ni < NI; ni++) {
						int c[4];
						mma_k16(c, a[mi], b[ni], I2F_BIAS);
#pragma unroll
						for (int e = 0; e < 4; e++) {
							const int row = wm * WM + mi * 16 + g + 8 * (e >> 1);
							const int tok = wn * WN + ni * 8 + 2 * tq + (e & 1);
							const float ws = Af[(row * SB + u / 4) * T::NF + u % 4];
							const float p = f32mul(f32mul(ws, Bd[tok * NDA + u / 2]), i2f_biased(c[e]));
							acc[mi][ni][e] = f32add(acc[mi][ni][e], p);
						}
					}
			}
		} else { // FAM_K: one super-block per stage
			int isum[MI][NI][4];
#pragma unroll
			for (int mi = 0; mi < MI; mi++)
#pragma unroll
				for (int ni = 0; ni < NI; ni++)
#pragma unroll
					for (int e = 0; e < 4; e++) isum[mi][ni][e] = 0;
			for (int gr = 0; gr < T::NG; gr++) {
				const int ko = gr * T::G + 4 * tq;
				if constexpr (T::G == 32) {
					uint32_t a[MI][4], b[NI][2];
#pragma unroll
					for (int mi = 0; mi < MI; mi++) {
						const int8_t* p = &As[(wm * WM + mi * 16 + g) * KSP + ko];
						a[mi][0] = *(const uint32_t*)p;
						a[mi][1] = *(const uint32_t*)(p + 8 * KSP);
						a[mi][2] = *(const uint32_t*)(p + 16);
						a[mi][3] = *(const uint32_t*)(p + 8 * KSP + 16);
					}
#pragma unroll
					for (int ni = 0; ni < NI; ni++) {
						const int8_t* p = &Bs[(wn * WN + ni * 8 + g) * KSP + ko];
						b[ni][0] = *(const uint32_t*)p;
						b[ni][1] = *(const uint32_t*)(p + 16);
					}
#pragma unroll
					for (int mi = 0; mi < MI; mi++)
#pragma unroll
						for (int ni = 0; ni < NI; ni++) {
							int c[4];
							mma_k32(c, a[mi], b[ni], 0);
#pragma unroll
							for (int e = 0; e < 4; e++) {
								const int row = wm * WM + mi * 16 + g + 8 * (e >> 1);
								isum[mi][ni][e] += Ai[row * NIX + gr] * c[e];
							}
						}
				} else {
					uint32_t a[MI][2], b[NI];
#pragma unroll
					for (int mi = 0; mi < MI; mi++) {
						const int8_t* p = &As[(wm * WM + mi * 16 + g) * KSP + ko];
						a[mi][0] = *(const uint32_t*)p;
						a[mi][1] = *(const uint32_t*)(p + 8 * KSP);
					}
#pragma unroll
					for (int ni = 0; ni < NI; ni++) b[ni] = *(const uint32_t*)&Bs[(wn * WN + ni * 8 + g) * KSP + ko];
#pragma unroll
					for (int mi = 0; mi < MI; mi++)
#pragma unroll
						for (int ni = 0; ni < NI; ni++) {
							int c[4];
							mma_k16(c, a[mi], b[ni], 0);
#pragma unroll
							for (int e = 0; e < 4; e++) {
								const int row = wm * WM + mi * 16 + g + 8 * (e >> 1);
								isum[mi][ni][e] += Ai[row * NIX + gr] * c[e];
							}
						}
				}
			}
#pragma unroll
			for (int mi = 0; mi < MI; mi++)
#pragma unroll
				for (int ni = 0; ni < NI; ni++)
#pragma unroll
					for (int e = 0; e < 4; e++) {
						const int row = wm * WM + mi * 16 + g + 8 * (e >> 1);
						const int tok = wn * WN + ni * 8 + 2 * tq + (e & 1);
						const float da = Bd[tok];
						float p = f32mul(f32mul(Af[row * T::NF], da), __int2float_rn(isum[mi][ni][e]));
						if constexpr (T::HAS_MIN) {
							int msum = 0;
							for (int gr = 0; gr < T::NG; gr++) {
								const int as = T::G == 32 ? Bb[tok * 16 + 2 * gr] + Bb[tok * 16 + 2 * gr + 1] : Bb[tok * 16 + gr];
								msum += Ai[row * NIX + T::NG + gr] * as;
							}
							p = f32sub(p, f32mul(f32mul(Af[row * T::NF + 1 % T::NF], da), __int2float_rn(msum)));
						}
						acc[mi][ni][e] = f32add(acc[mi][ni][e], p);
					}
		}
	}

#pragma unroll
	for (int mi = 0; mi < MI; mi++)
#pragma unroll
		for (int ni = 0; ni < NI; ni++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				const int r = r0 + wm * WM + mi * 16 + g + 8 * (e >> 1);
				const int t = t0 + wn * WN + ni * 8 + 2 * tq + (e & 1);
				if (r < rows && t < n) y[(size_t)t * rows + r] = acc[mi][ni][e];
			}
}

namespace mmv {
constexpr int THREADS = 128;
constexpr int TOK = 8; // tokens per CTA
// mmv_rows's rows per CTA (R) and blocks per chunk (CB): R·CB = 128 work
// items, one (row, block) each.
template <class T> struct Geom {
	static constexpr int R = 4;
	static constexpr int CB = 32;
	static constexpr int UPB = T::FAM == FAM_NVFP4 ? 4 : 1; // units (p values) per block
};
} // namespace mmv

// MmvOut is the output a decode kernel's thread sums: thread tid < R·TOK
// takes row r0 + crow, token t0 + ctok of the CTA's tile (crow = tid/TOK,
// ctok = tid%TOK; mine when that output exists), with its epilogue's
// operands bias[r] and res[t·rows + r] loaded as soon as the kernel has
// waited for its predecessors (grid_wait), so that their memory latency
// passes while the products are computed rather than after the last
// addition.
struct MmvOut {
	bool mine, hb, hx; // the output exists; bias, res not null
	int crow, ctok, r, t;
	float b, x; // bias[r], res[t·rows + r]
};

MUSER_DEV MmvOut mmv_out(int R, int r0, int t0, int rows, int nt, const float* __restrict__ bias, const float* res) {
	const int tid = threadIdx.x, crow = tid / mmv::TOK, ctok = tid % mmv::TOK;
	MmvOut o{false, bias != nullptr, res != nullptr, crow, ctok, r0 + crow, t0 + ctok, 0.0f, 0.0f};
	o.mine = tid < R * mmv::TOK && o.r < rows && ctok < nt;
	if (!o.mine) return o;
	if (o.hb) o.b = bias[o.r];
	if (o.hx) o.x = res[(size_t)o.t * rows + o.r];
	return o;
}

// mmv_chunk_add returns acc plus the parts p of one chunk of o's output,
// added in part order: P holds [part][row of the CTA][token] for R rows
// and TOK tokens (the decode kernels' shared partial products). The caller
// synchronizes around it.
MUSER_DEV float mmv_chunk_add(float acc, const float* P, int R, int parts, const MmvOut& o) {
	for (int u = 0; u < parts; u++) acc = f32add(acc, P[(u * R + o.crow) * mmv::TOK + o.ctok]);
	return acc;
}

// mmv_store is the decode products' epilogue for output o: y = acc +
// bias[r] with a bias, then y = res + y with a residual (res may be y: o
// holds its value from before the kernel wrote anything).
MUSER_DEV void mmv_store(float acc, float* y, int rows, const MmvOut& o) {
	if (!o.mine) return;
	if (o.hb) acc = f32add(acc, o.b);
	if (o.hx) acc = f32add(o.x, acc);
	y[(size_t)o.t * rows + o.r] = acc;
}

// mmv_legacy_cb is the number of 32-value blocks a CTA of the legacy
// types' decode kernel takes per chunk of a row, for rows of nb blocks:
// the fewest of 32, 64, 128 that hold the row, at most 128. It takes
// 128/mmv_legacy_cb rows (launch.go's mmvRows computes the same).
MUSER_DEV int mmv_legacy_cb(int nb) { return nb <= 32 ? 32 : nb <= 64 ? 64 : 128; }

// mmv_legacy is mmv_rows for the 32-value block types (Q8_0, Q4_0, Q5_0,
// Q4_1, Q5_1): the same products and the same order, with four lanes per
// block (lane q of a block holds its words 2q and 2q+1, so a warp reads 8
// consecutive blocks of one row, 8·BYTES contiguous bytes, per load) and
// every weight load of a chunk issued before the first is used: each
// thread takes 4 (row, block) items of a chunk, loads their words, then
// their scales (converted only then, when their loads have landed),
// then adds its two words' dp4a sums; the block's integer sum is the four
// lanes' (shuffles: exact in any order), from which lane 0 computes p as
// mmv_rows does. A CTA takes R = 128/CB rows and chunks of CB blocks
// (mmv_legacy_cb), so a long row (the FFN's down product) is one CTA's
// row in chunks of 128 blocks rather than four rows in chunks of 32.
// Launch: grid (ceil(rows/R), ceil(n/8)), block 128.
template <class T>
__device__ __forceinline__ void mmv_legacy(const uint8_t* W, int rows, int cols, const int8_t* __restrict__ aq,
                                           const float* __restrict__ ad, const void* __restrict__ aext, float* y,
                                           int n, const float* __restrict__ bias, const float* res) {
	using namespace mmv;
	constexpr int IT = 4; // items per thread and chunk: 128 blocks × 4 lanes / 128 threads
	__shared__ float P[128 * TOK]; // [block of the chunk][row][token]
	const int nb = cols / 32;
	const int CB = mmv_legacy_cb(nb), R = 128 / CB;
	const int LCB = 31 - __clz(CB); // CB is a power of two: items split by shifts
	const int r0 = blockIdx.x * R, t0 = blockIdx.y * TOK;
	const int nt = min(TOK, n - t0);
	const int tid = threadIdx.x, q = tid & 3;
	const size_t rowBytes = (size_t)nb * T::BYTES;
	int blk[IT], row[IT], cbn = 0;
	bool ok[IT];
	uint32_t wv[IT][2], sr[IT][T::NF];
	// load issues the weight loads of the chunk from block kb0: each
	// item's two words, then the scales (f16 at bytes 0 and, for Q4_1 and
	// Q5_1, 2 of a block: weights.cuh's scales), all before the first
	// conversion (which waits for its load).
	auto load = [&](int kb0) {
		cbn = min(CB, nb - kb0);
#pragma unroll
		for (int k = 0; k < IT; k++) {
			const int bi = (tid >> 2) + 32 * k; // block-lane group: 32 per pass of the CTA
			blk[k] = bi & (CB - 1);
			row[k] = bi >> LCB;
			ok[k] = r0 + row[k] < rows && blk[k] < cbn;
			wv[k][0] = wv[k][1] = 0;
			if (ok[k]) {
				const uint8_t* wb = W + (size_t)(r0 + row[k]) * rowBytes + (size_t)(kb0 + blk[k]) * T::BYTES;
				wv[k][0] = T::word(wb, 2 * q);
				wv[k][1] = T::word(wb, 2 * q + 1);
			}
		}
#pragma unroll
		for (int k = 0; k < IT; k++) {
			const uint8_t* wb = W + (size_t)(r0 + row[k]) * rowBytes + (size_t)(kb0 + blk[k]) * T::BYTES;
#pragma unroll
			for (int e = 0; e < T::NF; e++) sr[k][e] = ok[k] ? ld16(wb + 2 * e) : 0u;
		}
	};
	// The first chunk's weights are read before grid_wait (they are
	// immutable; W is not __restrict__ so that they are plain loads).
	load(0);
	grid_wait();
	const MmvOut out = mmv_out(R, r0, t0, rows, nt, bias, res);
	float acc = 0.0f;

	for (int kb0 = 0; kb0 < nb; kb0 += CB) {
		if (kb0 > 0) load(kb0);
		for (int tk = 0; tk < nt; tk++) {
			const size_t t = t0 + tk;
			int a[IT][2];
			float da[IT], dx[IT];
#pragma unroll
			for (int k = 0; k < IT; k++) {
				const int b = kb0 + blk[k];
				a[k][0] = a[k][1] = 0;
				da[k] = dx[k] = 0.0f;
				if (ok[k]) {
					const int* av = (const int*)(aq + t * cols + (size_t)b * 32) + 2 * q;
					a[k][0] = av[0];
					a[k][1] = av[1];
					da[k] = ad[t * nb + b];
					if constexpr (T::FAM == FAM_LEGACY_MIN) dx[k] = ((const float*)aext)[t * nb + b];
				}
			}
#pragma unroll
			for (int k = 0; k < IT; k++) {
				int isum = __dp4a((int)wv[k][1], a[k][1], __dp4a((int)wv[k][0], a[k][0], 0));
				isum += __shfl_xor_sync(0xffffffffu, isum, 1);
				isum += __shfl_xor_sync(0xffffffffu, isum, 2);
				if (ok[k] && q == 0) {
					// Converted here, after the activations' loads are issued.
					float p = f32mul(f32mul(f16_to_f32_arith(sr[k][0]), da[k]), i2f_small(isum));
					if constexpr (T::FAM == FAM_LEGACY_MIN) p = f32add(p, f32mul(f16_to_f32_arith(sr[k][1 % T::NF]), dx[k]));
					P[(blk[k] * R + row[k]) * TOK + tk] = p;
				}
			}
		}
		__syncthreads();
		if (out.mine) {
			acc = mmv_chunk_add(acc, P, R, cbn, out);
		}
		__syncthreads();
	}
	mmv_store(acc, y, rows, out);
}

// mmv_k_cb is the number of 256-value super-blocks a CTA of the K-quants'
// decode kernel takes per chunk of a row, for rows of nb super-blocks: the
// fewest of 1, 2, 4, 8 and 16 that hold the row, at most 16. It takes
// 16/mmv_k_cb rows (launch.go's mmvKRows computes the same).
MUSER_DEV int mmv_k_cb(int nb) { return nb <= 1 ? 1 : nb <= 2 ? 2 : nb <= 4 ? 4 : nb <= 8 ? 8 : 16; }

// mmv_k_words loads the eight weight words of lane s of a K-quant
// super-block (words 8s … 8s+7: values 32s … 32s+31, as T::word). Q4_K's
// are two 16-byte loads (its 144-byte super-blocks keep the quants
// 16-byte aligned): lane s takes the 32 bytes of chunk s/2, their low
// nibbles for even s, high for odd; the other types go word by word.
template <class T> struct mmv_k_vec16 {
	static constexpr bool on = false;
};
template <> struct mmv_k_vec16<WQ4_K> {
	static constexpr bool on = true;
};
template <class T> MUSER_DEV void mmv_k_words(const uint8_t* wb, int s, uint32_t* wv) {
	if constexpr (mmv_k_vec16<T>::on) {
		const uint4* p = (const uint4*)(wb + 16 + (s >> 1) * 32);
		const uint4 a = p[0], b = p[1];
		const uint32_t x[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
		for (int k = 0; k < 8; k++) wv[k] = (s & 1) ? nib_hi(x[k]) : nib_lo(x[k]);
	} else {
#pragma unroll
		for (int k = 0; k < 8; k++) wv[k] = T::word(wb, 8 * s + k);
	}
}

// mmv_k is the decode product of the K-quants (256-value super-blocks):
// the products and the order of mmv_rows, with eight lanes per
// super-block. Lane s of a super-block holds its words 8s … 8s+7 (one
// 32-value group, or two of 16) and that group's integer scales and mins
// (iv, selected with compile-time indices so they stay in registers); its
// share of the super-block's two integer sums (Σ scale·group sum and
// Σ min·activation block sum) is added across the eight lanes with
// shuffles, exact in any order, and lane 0 computes p from them as
// mmv_rows does. A warp reads four super-blocks side by side. A CTA takes
// R = 16/CB rows and chunks of CB super-blocks (mmv_k_cb), so the short
// rows of a small model's products (two or six super-blocks) keep all 128
// threads busy and spread over many CTAs. Weight, activation and block-sum
// loads are issued before the scales are converted (each conversion waits
// for its load). Launch: grid (ceil(rows/R), ceil(n/8)), block 128.
template <class T>
__device__ __forceinline__ void mmv_k(const uint8_t* W, int rows, int cols,
                                      const int8_t* __restrict__ aq, const float* __restrict__ ad,
                                      const void* __restrict__ aext, float* y, int n,
                                      const float* __restrict__ bias, const float* res) {
	using namespace mmv;
	constexpr int GPL = 32 / T::G;                // groups per lane
	constexpr int NIX = T::NI > 0 ? T::NI : 1;
	__shared__ float P[16 * TOK]; // [super-block of the chunk][row][token]
	const int nb = cols / 256;
	const int CB = mmv_k_cb(nb), R = 16 / CB;
	const int r0 = blockIdx.x * R, t0 = blockIdx.y * TOK;
	const int nt = min(TOK, n - t0);
	const int tid = threadIdx.x, s = tid & 7, slot = tid >> 3;
	const int blk = slot & (CB - 1), row = slot >> (31 - __clz(CB)); // CB: a power of two
	const size_t rowBytes = (size_t)nb * T::BYTES;
	const int* bs = (const int*)aext;
	uint32_t wv[8];
	// words loads this lane's weight words of the chunk from super-block
	// kb0 (zeros outside the matrix).
	auto words = [&](int kb0) {
		const int b = kb0 + blk;
		const bool ok = r0 + row < rows && blk < min(CB, nb - kb0);
		if (ok) {
			mmv_k_words<T>(W + (size_t)(r0 + row) * rowBytes + (size_t)b * T::BYTES, s, wv);
		} else {
#pragma unroll
			for (int k = 0; k < 8; k++) wv[k] = 0;
		}
	};
	// The first chunk's words are read before grid_wait (they are
	// immutable; W is not __restrict__ so that they are plain loads).
	words(0);
	grid_wait();
	const MmvOut out = mmv_out(R, r0, t0, rows, nt, bias, res);
	float acc = 0.0f;

	for (int kb0 = 0; kb0 < nb; kb0 += CB) {
		const int cbn = min(CB, nb - kb0);
		const int b = kb0 + blk;
		const bool ok = r0 + row < rows && blk < cbn;
		const uint8_t* wb = W + (size_t)(ok ? r0 + row : 0) * rowBytes + (size_t)(ok ? b : 0) * T::BYTES;
		if (kb0 > 0) words(kb0);
		int a[TOK][8], as[TOK][GPL];
		float da[TOK];
#pragma unroll
		for (int tk = 0; tk < TOK; tk++) {
			const bool tok = ok && tk < nt;
			const size_t t = t0 + tk;
			const int* av = (const int*)(aq + t * cols + (size_t)b * 256 + 32 * s);
#pragma unroll
			for (int k = 0; k < 8; k++) a[tk][k] = tok ? av[k] : 0;
			da[tk] = tok ? ad[t * nb + b] : 0.0f;
#pragma unroll
			for (int g = 0; g < GPL; g++) {
				as[tk][g] = 0;
				if constexpr (T::HAS_MIN) {
					// The activation sum of group s·GPL + g: two 16-value
					// block sums for 32-value groups, one for 16-value ones.
					const int* bt = bs + t * (cols / 16) + (size_t)b * 16 + 2 * s;
					if (tok) as[tk][g] = T::G == 32 ? bt[0] + bt[1] : bt[g];
				}
			}
		}
		float f[T::NF];
		int iv[NIX];
		if (ok) {
			T::scales(wb, f, iv);
		} else {
#pragma unroll
			for (int e = 0; e < T::NF; e++) f[e] = 0.0f;
#pragma unroll
			for (int e = 0; e < NIX; e++) iv[e] = 0;
		}
		// This lane's scales and mins, picked with compile-time indices.
		int sc[GPL], mn[GPL];
#pragma unroll
		for (int g = 0; g < GPL; g++) sc[g] = mn[g] = 0;
#pragma unroll
		for (int gr = 0; gr < T::NG; gr++) {
			if (gr / GPL == s) {
				sc[gr % GPL] = iv[gr];
				mn[gr % GPL] = iv[(T::NG + gr) % NIX];
			}
		}
#pragma unroll
		for (int tk = 0; tk < TOK; tk++) {
			if (tk >= nt) break; // uniform across the CTA
			int isum = 0, msum = 0;
#pragma unroll
			for (int g = 0; g < GPL; g++) {
				constexpr int GW = T::G / 4;
				int gs = 0;
#pragma unroll
				for (int k = 0; k < GW; k++) gs = __dp4a((int)wv[g * GW + k], a[tk][g * GW + k], gs);
				isum += sc[g] * gs;
				if constexpr (T::HAS_MIN) msum += mn[g] * as[tk][g];
			}
#pragma unroll
			for (int m = 1; m < 8; m <<= 1) {
				isum += __shfl_xor_sync(0xffffffffu, isum, m);
				if constexpr (T::HAS_MIN) msum += __shfl_xor_sync(0xffffffffu, msum, m);
			}
			if (ok && s == 0) {
				float p = f32mul(f32mul(f[0], da[tk]), __int2float_rn(isum));
				if constexpr (T::HAS_MIN) p = f32sub(p, f32mul(f32mul(f[1 % T::NF], da[tk]), __int2float_rn(msum)));
				P[(blk * R + row) * TOK + tk] = p;
			}
		}
		__syncthreads();
		if (out.mine) {
			acc = mmv_chunk_add(acc, P, R, cbn, out);
		}
		__syncthreads();
	}
	mmv_store(acc, y, rows, out);
}

// mmv_rows computes up to 8 tokens (blockIdx.y·8 …) of R rows (blockIdx.x·R …)
// of NVFP4, one thread per (row, block) of a chunk, its four sub-blocks'
// p into shared memory (mmv_legacy takes the 32-value types, mmv_k the
// K-quants).
// Epilogue: with bias not null, y = acc + bias[r] (the Q, K, V biases:
// kernels.Add(q, q, bq), one rounding, as muser_add_bias); then, with res
// not null, y = res[t·rows + r] + y (the residual: kernels.Add(x, x, o), as
// muser_add). res may be y.
// Launch: grid (ceil(rows/R), ceil(n/8)), block 128; R is 4.
template <class T>
__device__ __forceinline__ void mmv_rows(const uint8_t* W, int rows, int cols,
                                         const int8_t* __restrict__ aq, const float* __restrict__ ad,
                                         const void* __restrict__ aext, float* y, int n,
                                         const float* __restrict__ bias, const float* res) {
	using namespace mmv;
	using Gm = Geom<T>;
	constexpr int R = Gm::R, CB = Gm::CB, UPB = Gm::UPB;
	__shared__ float P[CB * UPB][R][TOK];

	const int r0 = blockIdx.x * R, t0 = blockIdx.y * TOK;
	const int nt = min(TOK, n - t0);
	const int tid = threadIdx.x;
	const int nb = cols / T::QK;
	const size_t rowBytes = (size_t)nb * T::BYTES;
	const int nb32 = cols / 32;
	grid_wait();
	const MmvOut out = mmv_out(R, r0, t0, rows, nt, bias, res);
	float acc = 0.0f;

	for (int kb0 = 0; kb0 < nb; kb0 += CB) {
		const int cbn = min(CB, nb - kb0);
		for (int it = tid; it < R * CB; it += THREADS) {
			const int row = it / CB, blk = it % CB, r = r0 + row, b = kb0 + blk;
			if (r >= rows || blk >= cbn) continue;
			const uint8_t* wb = W + (size_t)r * rowBytes + (size_t)b * T::BYTES;
			float f[T::NF];
			int iv[T::NI > 0 ? T::NI : 1];
			T::scales(wb, f, iv);
			if constexpr (T::FAM == FAM_NVFP4) {
				for (int s = 0; s < 4; s++) {
					uint32_t wv[4];
#pragma unroll
					for (int k = 0; k < 4; k++) wv[k] = T::word(wb, 4 * s + k);
#pragma unroll
					for (int tk = 0; tk < TOK; tk++) {
						if (tk >= nt) break;
						const size_t t = t0 + tk;
						const int* av = (const int*)(aq + t * cols + (size_t)b * 64 + 16 * s);
						int isum = 0;
#pragma unroll
						for (int k = 0; k < 4; k++) isum = __dp4a((int)wv[k], av[k], isum);
						P[blk * 4 + s][row][tk] = f32mul(f32mul(f[s % T::NF], ad[t * nb32 + 2 * b + s / 2]), i2f_small(isum));
					}
				}
			}
		}
		__syncthreads();
		if (out.mine) {
			acc = mmv_chunk_add(acc, &P[0][0][0], R, cbn * UPB, out);
		}
		__syncthreads();
	}
	mmv_store(acc, y, rows, out);
}

// MUSER_MMV_BOUNDS_<type> is the decode kernel's launch bounds: 128
// threads and, for the 32-value types, the CTAs that must fit on one
// multiprocessor at once, which caps the registers a thread may take
// (65,536 per multiprocessor). That kernel takes 4 rows of the matrix
// per CTA, so the gate and up products of the Qwen2.5-0.5B shape (4,864
// rows) are 1,216 CTAs: with 8 CTAs a multiprocessor (64 registers) they
// run on 132 multiprocessors in two waves, with 10 (48 registers) in
// one; the output matrix's 37,984 CTAs keep more loads in flight. The
// other kernels keep the compiler's choice (a bound would make them
// spill, and a bound of one CTA lets it take more registers).
#define MUSER_MMV_BOUNDS_q8_0 mmv::THREADS, 10
#define MUSER_MMV_BOUNDS_q4_0 mmv::THREADS, 8
#define MUSER_MMV_BOUNDS_q5_0 mmv::THREADS, 8
#define MUSER_MMV_BOUNDS_q4_1 mmv::THREADS, 8
#define MUSER_MMV_BOUNDS_q5_1 mmv::THREADS, 8
#define MUSER_MMV_BOUNDS_q2_k mmv::THREADS
#define MUSER_MMV_BOUNDS_q3_k mmv::THREADS
#define MUSER_MMV_BOUNDS_q4_k mmv::THREADS
#define MUSER_MMV_BOUNDS_q5_k mmv::THREADS
#define MUSER_MMV_BOUNDS_q6_k mmv::THREADS
#define MUSER_MMV_BOUNDS_nvfp4 mmv::THREADS

// The tiled products' launch bounds: four CTAs a multiprocessor for the
// 32- and 64-value types (at most 128 registers; their shared memory,
// about 52 KiB a CTA, lets four fit), two for the K-quants (about 87 KiB
// of shared memory a CTA).
#define MUSER_MMQ_BOUNDS_q8_0 mmq::THREADS, 4
#define MUSER_MMQ_BOUNDS_q4_0 mmq::THREADS, 4
#define MUSER_MMQ_BOUNDS_q5_0 mmq::THREADS, 4
#define MUSER_MMQ_BOUNDS_q4_1 mmq::THREADS, 4
#define MUSER_MMQ_BOUNDS_q5_1 mmq::THREADS, 4
#define MUSER_MMQ_BOUNDS_q2_k mmq::THREADS, 2
#define MUSER_MMQ_BOUNDS_q3_k mmq::THREADS, 2
#define MUSER_MMQ_BOUNDS_q4_k mmq::THREADS, 2
#define MUSER_MMQ_BOUNDS_q5_k mmq::THREADS, 2
#define MUSER_MMQ_BOUNDS_q6_k mmq::THREADS, 2
#define MUSER_MMQ_BOUNDS_nvfp4 mmq::THREADS, 4

#define MUSER_INT_MATMUL(name, T)                                                                          \
	extern "C" __global__ void __launch_bounds__(MUSER_MMQ_BOUNDS_##name)                              \
	muser_mmq_##name(const uint8_t* __restrict__ W, int rows, int cols, const int8_t* __restrict__ aq, \
	                 const float* __restrict__ ad, const void* __restrict__ aext, float* __restrict__ y, \
	                 int n) {                                                                          \
		grid_wait();                                                                               \
		mmq_tile<T>(W, rows, cols, aq, ad, aext, y, n);                                            \
	}                                                                                                  \
	extern "C" __global__ void __launch_bounds__(MUSER_MMV_BOUNDS_##name)                              \
	muser_mmv_##name(const uint8_t* W, int rows, int cols, const int8_t* __restrict__ aq,              \
	                 const float* __restrict__ ad, const void* __restrict__ aext, float* y, int n,     \
	                 const float* __restrict__ bias, const float* res) {                               \
		if constexpr (T::FAM == FAM_LEGACY || T::FAM == FAM_LEGACY_MIN)                            \
			mmv_legacy<T>(W, rows, cols, aq, ad, aext, y, n, bias, res);                       \
		else if constexpr (T::FAM == FAM_K)                                                        \
			mmv_k<T>(W, rows, cols, aq, ad, aext, y, n, bias, res);                            \
		else                                                                                       \
			mmv_rows<T>(W, rows, cols, aq, ad, aext, y, n, bias, res);                         \
	}

MUSER_INT_MATMUL(q8_0, WQ8_0)
MUSER_INT_MATMUL(q4_0, WQ4_0)
MUSER_INT_MATMUL(q5_0, WQ5_0)
MUSER_INT_MATMUL(q4_1, WQ4_1)
MUSER_INT_MATMUL(q5_1, WQ5_1)
MUSER_INT_MATMUL(q2_k, WQ2_K)
MUSER_INT_MATMUL(q3_k, WQ3_K)
MUSER_INT_MATMUL(q4_k, WQ4_K)
MUSER_INT_MATMUL(q5_k, WQ5_K)
MUSER_INT_MATMUL(q6_k, WQ6_K)
MUSER_INT_MATMUL(nvfp4, WNVFP4)
