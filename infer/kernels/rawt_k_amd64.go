package kernels

//go:generate go run ./internal/asmgen -k -out rawt_k_amd64.s

import "github.com/muserhq/muser/infer/ggml"

// The multi-token raw-block kernels of Q4_K, Q6_K and Q5_0
// (rawt_k_amd64.s: genQ4_KRawT, genQ6_KRawT, genQ5_0RawT): like the Q8_0
// ones, each reads every block of a 16-row group once for up to 8 tokens.

//go:noescape
func q4_KRaw16x1AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw16x2AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw16x3AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw16x4AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw16x5AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw16x6AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw16x7AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw16x8AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw16x1AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw16x2AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw16x3AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw16x4AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw16x5AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw16x6AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw16x7AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw16x8AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q5_0Raw16x1AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw16x2AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw16x3AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw16x4AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw16x5AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw16x6AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw16x7AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw16x8AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q4_KRaw8x1AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw8x2AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw8x3AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw8x4AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw8x5AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw8x6AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw8x7AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q4_KRaw8x8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q5_0Raw8x1AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw8x2AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw8x3AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw8x4AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw8x5AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw8x6AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw8x7AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q5_0Raw8x8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q6_KRaw8x1AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw8x2AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw8x3AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw8x4AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw8x5AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw8x6AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw8x7AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q6_KRaw8x8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

// rawT8Kernel is an AVX2 multi-token raw-block kernel: up to 8 tokens
// against an 8-row group, reading each weight block once
// (genQ4_KRawTAVX2, genQ6_KRawTAVX2, genQ5_0RawTAVX2, genQ8_0RawTAVX2).
type rawT8Kernel func(w *byte, idx *[8]int32, nb int, q *int8, da *float32, ms *int32, acc *float32)

//go:noescape
func q8_0Raw8x1AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw8x2AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw8x3AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw8x4AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw8x5AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw8x6AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw8x7AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func q8_0Raw8x8AVX2(w *byte, idx *[8]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

// rawTKernelsAVX2[t][nt-1] is type t's AVX2 multi-token raw-block kernel
// for nt tokens.
var rawTKernelsAVX2 = map[ggml.Type]*[8]rawT8Kernel{
	ggml.TypeQ4_K: {q4_KRaw8x1AVX2, q4_KRaw8x2AVX2, q4_KRaw8x3AVX2, q4_KRaw8x4AVX2,
		q4_KRaw8x5AVX2, q4_KRaw8x6AVX2, q4_KRaw8x7AVX2, q4_KRaw8x8AVX2},
	ggml.TypeQ6_K: {q6_KRaw8x1AVX2, q6_KRaw8x2AVX2, q6_KRaw8x3AVX2, q6_KRaw8x4AVX2,
		q6_KRaw8x5AVX2, q6_KRaw8x6AVX2, q6_KRaw8x7AVX2, q6_KRaw8x8AVX2},
	ggml.TypeQ5_0: {q5_0Raw8x1AVX2, q5_0Raw8x2AVX2, q5_0Raw8x3AVX2, q5_0Raw8x4AVX2,
		q5_0Raw8x5AVX2, q5_0Raw8x6AVX2, q5_0Raw8x7AVX2, q5_0Raw8x8AVX2},
	ggml.TypeQ8_0: {q8_0Raw8x1AVX2, q8_0Raw8x2AVX2, q8_0Raw8x3AVX2, q8_0Raw8x4AVX2,
		q8_0Raw8x5AVX2, q8_0Raw8x6AVX2, q8_0Raw8x7AVX2, q8_0Raw8x8AVX2},
}

// useRawTAVX2 reports whether a batch of n tokens of type t takes the AVX2
// multi-token raw-block kernels: every batch of 2 tokens or more (AVX2 has
// no panels, so the alternative is the one-token kernel per token).
func useRawTAVX2(t ggml.Type, n int) bool {
	return multiToken && isa == ISAAVX2 && n >= rawTMinTokens && rawTKernelsAVX2[t] != nil
}

// matmulRawT8 runs an AVX2 multi-token raw-block kernel over whole 8-row
// groups of [r0,r1), tokens in groups of 8; a last partial group takes the
// portable kernels. All compute the same bits. a must have been prepared
// by prepRawTK (Q4_K, Q6_K) or prepRawT (Q5_0, Q8_0).
func matmulRawT8(y []float32, m *Matrix, a *acts, r0, r1 int, kerns *[8]rawT8Kernel) {
	rb, rows, nb := m.RowBytes, m.Rows, a.nb
	var idx [8]int32
	for i := range idx {
		idx[i] = int32(i * rb)
	}
	var acc [8 * 8]float32
	qs, nc := a.cols/nb, 1 // per (block, token) entry, as in matmulRawT
	if a.kind == actQ8_K {
		nc = 8
	}
	g0 := r0
	for ; g0+8 <= r1; g0 += 8 {
		w := &m.Data[g0*rb]
		for t0 := 0; t0 < a.n; t0 += 8 {
			nt := min(8, a.n-t0)
			clear(acc[:nt*8])
			i := t0 * nb
			kerns[nt-1](w, &idx, nb, &a.qI[i*qs], &a.dI[i], &a.ncI[i*nc], &acc[0])
			for t := 0; t < nt; t++ {
				copy(y[(t0+t)*rows+g0:(t0+t)*rows+g0+8], acc[t*8:t*8+8])
			}
		}
	}
	if g0 < r1 {
		matmulGeneric(y, m, a, g0, r1)
	}
}

// pairI16 packs two int16 values into one dword, lo in the low half: the
// operand layout of VPDPWSSD.
func pairI16(lo, hi int16) int32 {
	return int32(uint32(uint16(lo)) | uint32(uint16(hi))<<16)
}

// prepRawTK lays a's Q8_K activations out for the K-quant multi-token
// raw-block kernels of type t: tokens in groups of 8 (the last group
// holding the rest), and within group g of nt tokens, super-block b of
// token t at qI[(8g·nb + b·nt + t)·256], its scale at dI[same] and eight
// dwords of int16 pairs of activation sums at ncI[same·8]: for Q4_K the
// sums of each group of 32 (s_g = bs[2g] + bs[2g+1]), paired (s0, s2),
// (s1, s3), (s4, s6), (s5, s7) as the kernel pairs the mins; for Q6_K the
// sums of 16, paired (bs[4k], bs[4k+2]), (bs[4k+1], bs[4k+3]) for k < 4 as
// it pairs the scales. Every sum fits in int16 (|bs| ≤ 16·127, |s| ≤
// 32·127).
func prepRawTK(a *acts, t ggml.Type) {
	nb := a.nb
	a.qI = grow(a.qI, a.n*a.cols)
	a.dI = grow(a.dI, a.n*nb)
	a.ncI = grow(a.ncI, a.n*nb*8)
	for t0 := 0; t0 < a.n; t0 += 8 {
		nt := min(8, a.n-t0)
		for tt := 0; tt < nt; tt++ {
			tok := t0 + tt
			for b := 0; b < nb; b++ {
				i := t0*nb + b*nt + tt
				copy(a.qI[i*256:i*256+256], a.q[tok*a.cols+b*256:tok*a.cols+b*256+256])
				a.dI[i] = a.d[tok*nb+b]
				bs := a.bs16[(tok*nb+b)*16 : (tok*nb+b)*16+16]
				ms := a.ncI[i*8 : i*8+8]
				if t == ggml.TypeQ4_K {
					var s [8]int16
					for g := range s {
						s[g] = bs[2*g] + bs[2*g+1]
					}
					ms[0], ms[1] = pairI16(s[0], s[2]), pairI16(s[1], s[3])
					ms[2], ms[3] = pairI16(s[4], s[6]), pairI16(s[5], s[7])
					ms[4], ms[5], ms[6], ms[7] = 0, 0, 0, 0
					continue
				}
				for k := 0; k < 4; k++ {
					ms[2*k] = pairI16(bs[4*k], bs[4*k+2])
					ms[2*k+1] = pairI16(bs[4*k+1], bs[4*k+3])
				}
			}
		}
	}
}

// hasRawTAVX2 reports whether t has AVX2 multi-token raw-block kernels.
func hasRawTAVX2(t ggml.Type) bool { return rawTKernelsAVX2[t] != nil }
