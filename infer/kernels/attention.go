package kernels

import "github.com/muserhq/muser/infer/ggml"

// The attention kernels of the forward pass work on a tile: nq queries
// that share one KV head (the query heads of a GQA group, for one or
// more tokens of one sequence) against the rows of an f16 K or V cache.
// Loading each K and V row once for the whole tile instead of once per
// query is what makes long contexts fast; the arithmetic of every single
// query is exactly that of DotF16Rows and AXPYF16Rows, so a query's bits
// never depend on which tile it was computed in (doc.go, "Attention").

// maxTileDim is the largest head dimension the SIMD tile kernels take
// (their K scratch is 16 rows of it); larger ones use the row kernels.
const maxTileDim = 256

// ScoresF16 sets s[i*ld+j] = DotF16(k[j*stride:j*stride+dim],
// q[i*dim:(i+1)*dim]) · scale for i < nq and j < nk: the scaled
// attention scores of nq queries against nk rows of an f16 K cache. Each
// score has exactly the bits of DotF16 followed by a float32 multiply,
// on every variant. ld must be at least nk.
func ScoresF16(s []float32, ld int, k []uint16, stride int, q []float32, dim, nq, nk int, scale float32) {
	if nq <= 0 || nk <= 0 || dim <= 0 {
		return
	}
	_ = s[(nq-1)*ld+nk-1]
	_ = k[(nk-1)*stride+dim-1]
	_ = q[nq*dim-1]
	done := 0
	if kb, _ := tileShape(); kb > 0 && dim%lanes == 0 && dim <= maxTileDim && nk >= kb {
		done = scoresF16Arch(s, ld, k, stride, q, dim, nq, nk, scale)
	}
	if done == nk {
		return
	}
	for i := range nq {
		row := s[i*ld+done : i*ld+nk]
		DotF16Rows(row, k[done*stride:], stride, q[i*dim:(i+1)*dim])
		for j := range row {
			row[j] *= scale
		}
	}
}

// AttnPart is the length of the partial chains of the attention's
// weighted sum (docs/engine.md, "Attention"): a query's output over
// positions 0..n-1 is one chain y = y + a_j·v_j per part of AttnPart
// positions (positions k·AttnPart .. k·AttnPart+AttnPart-1), each from +0
// in position order, and the parts' sums added in part order, p_0 + p_1,
// then + p_2, and so on. A query of at most AttnPart positions has one
// chain. The CUDA backend's decode spreads the parts of one query over
// thread blocks; the value is its staging chunk (attention.cuh,
// attn::RCH).
const AttnPart = 256

// AXPYF16Parts sets y to the weighted sum of the rows of an f16 V cache
// (row j at v[j*stride:]) with weights a, by the weighted sum's definition
// (AttnPart): AXPYF16Rows over each part from +0, the parts' sums added
// in order. tmp is scratch of at least len(y) floats. It is the per-query
// definition that WeightedSumF16 computes for a tile.
func AXPYF16Parts(y, tmp, a []float32, v []uint16, stride int) {
	sumParts(y, tmp, len(a), func(dst []float32, lo, hi int) {
		AXPYF16Rows(dst, a[lo:hi], v[lo*stride:], stride)
	})
}

// AXPYParts is AXPYF16Parts for an f32 V cache: AXPY per position.
func AXPYParts(y, tmp, a []float32, v []float32, stride int) {
	sumParts(y, tmp, len(a), func(dst []float32, lo, hi int) {
		for j := lo; j < hi; j++ {
			AXPY(dst, a[j], v[j*stride:j*stride+len(dst)])
		}
	})
}

// sumParts sets y to the weighted sum of n positions by parts: chain(dst,
// lo, hi) adds positions lo..hi-1 of one part to dst in order; the first
// part's chain runs in y, each later one in tmp (from +0), added to y.
func sumParts(y, tmp []float32, n int, chain func(dst []float32, lo, hi int)) {
	tmp = tmp[:len(y)]
	clear(y)
	for lo := 0; lo < n; lo += AttnPart {
		hi := min(n, lo+AttnPart)
		if lo == 0 {
			chain(y, lo, hi)
			continue
		}
		clear(tmp)
		chain(tmp, lo, hi)
		addParts(y, tmp)
	}
}

// addParts adds a part's sums to the sums before it: y[d] = y[d] + p[d].
func addParts(y, p []float32) {
	p = p[:len(y)]
	for d := range y {
		y[d] += p[d]
	}
}

// WeightedSumF16 sets each query's output to the weighted sum of the rows
// of an f16 V cache by the weighted sum's definition (AttnPart): for i <
// len(n), y[i*ldy:i*ldy+dim] gets the bits of AXPYF16Parts(y_i, tmp,
// a_i[:n[i]], v, stride), on every variant. Within a part, in order j =
// lo, lo+1, …, y[i*ldy+d] = y[i*ldy+d] + a[i*lda+j]·v[j*stride+d] (the
// product rounded to float32) for d < dim. ldy ≥ dim, lda ≥ every n[i],
// and tmp is scratch of at least len(n)·ldy floats.
func WeightedSumF16(y []float32, ldy int, a []float32, lda int, v []uint16, stride int, dim int, n []int, tmp []float32) {
	nq := len(n)
	if nq == 0 || dim <= 0 {
		return
	}
	parts := 0
	for i, ni := range n {
		clear(y[i*ldy : i*ldy+dim])
		parts = max(parts, (ni+AttnPart-1)/AttnPart)
	}
	var buf [32]int // each query's positions in part k
	np := buf[:min(nq, len(buf))]
	if nq > len(buf) {
		np = make([]int, nq)
	}
	for k := range parts {
		lo := k * AttnPart
		for i, ni := range n {
			np[i] = min(max(ni-lo, 0), AttnPart)
		}
		if k == 0 {
			weightedSumChainsF16(y, ldy, a, lda, v, stride, dim, np)
			continue
		}
		for i := range nq {
			clear(tmp[i*ldy : i*ldy+dim])
		}
		weightedSumChainsF16(tmp, ldy, a[lo:], lda, v[lo*stride:], stride, dim, np)
		for i, ni := range np {
			if ni > 0 {
				addParts(y[i*ldy:i*ldy+dim], tmp[i*ldy:i*ldy+dim])
			}
		}
	}
}

// weightedSumChainsF16 adds to each query's output its chain over the
// rows of an f16 V cache: for i < len(n), in order j = 0, 1, … n[i]-1,
// y[i*ldy+d] = y[i*ldy+d] + a[i*lda+j]·v[j*stride+d] (the product rounded
// to float32) for d < dim — for each query exactly the bits of
// AXPYF16Rows(y_i, a_i[:n[i]], v, stride), on every variant.
func weightedSumChainsF16(y []float32, ldy int, a []float32, lda int, v []uint16, stride int, dim int, n []int) {
	nq := len(n)
	if nq == 0 || dim <= 0 {
		return
	}
	_ = y[(nq-1)*ldy+dim-1]
	for i, ni := range n {
		if ni > 0 {
			_ = a[i*lda+ni-1]
			_ = v[(ni-1)*stride+dim-1]
		}
	}
	// Groups of 4 queries share each V row over the keys all of them
	// attend to; each query then finishes its own remaining keys. A last
	// group of fewer than 4 fills the empty places with a copy of its
	// first query's weights writing into a discarded buffer.
	if _, td := tileShape(); td > 0 && dim%td == 0 && dim <= maxTileDim {
		var spare [maxTileDim]float32
		var ys, as [4]*float32
		for i := 0; i < nq; i += 4 {
			g1 := min(i+4, nq)
			m := n[i]
			for g := i; g < g1; g++ {
				m = min(m, n[g])
			}
			if m > 0 {
				for k := range 4 {
					g := i + k
					if g < g1 {
						ys[k], as[k] = &y[g*ldy], &a[g*lda]
					} else {
						ys[k], as[k] = &spare[0], &a[i*lda]
					}
				}
				weightedSum4F16Arch(&ys, &as, v, stride, dim, m)
			}
			for g := i; g < g1; g++ {
				if n[g] > m {
					AXPYF16Rows(y[g*ldy:g*ldy+dim], a[g*lda+m:g*lda+n[g]], v[m*stride:], stride)
				}
			}
		}
		return
	}
	for i := range nq {
		if n[i] > 0 {
			AXPYF16Rows(y[i*ldy:i*ldy+dim], a[i*lda:i*lda+n[i]], v, stride)
		}
	}
}

// RoundF16s rounds every element of x to the nearest binary16 value (ties
// to even), in place, as float32: bit for bit
// ggml.F16ToF32(ggml.F32ToF16(v)) — a NaN becomes the canonical quiet NaN
// of its sign, ±Inf and overflow ±Inf, subnormals are kept. The attention
// rounds queries and weights with it.
func RoundF16s(x []float32) {
	done := 0
	if isa >= ISAAVX2 && len(x) >= 8 {
		var nan bool
		done, nan = roundF16Arch(x)
		if nan {
			// The conversion instruction keeps NaN payloads; ggml writes
			// the canonical NaN. Every other element is already rounded,
			// and rounding is idempotent, so redo the whole slice.
			done = 0
		}
	}
	for i := done; i < len(x); i++ {
		x[i] = ggml.F16ToF32(ggml.F32ToF16(x[i]))
	}
}
