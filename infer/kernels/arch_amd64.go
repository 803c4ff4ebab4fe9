package kernels

//go:generate go run ./internal/asmgen -out matmul_amd64.s

import (
	"sync"

	"github.com/muserhq/muser/infer/ggml"
	"golang.org/x/sys/cpu"
)

var bestISA = func() ISA {
	x := cpu.X86
	switch {
	case x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512VNNI && x.HasAVX2 && x.HasFMA:
		return ISAAVX512
	case x.HasAVX2 && x.HasFMA:
		return ISAAVX2
	}
	return ISAGeneric
}()

//go:noescape
func legacyDot8AVX512(w *int8, wsum *int32, dw *float32, mw *float32, nb int, qu *uint8, da *float32, sa *float32, acc *float32)

//go:noescape
func kDot8AVX512(u *uint8, sc *int16, mn *int16, dw *float32, dm *float32, nsb int, q *int8, da *float32, bs *int16, acc *float32)

//go:noescape
func q8_0Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)

//go:noescape
func q4_KDot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32)

//go:noescape
func q6_KDot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32)

//go:noescape
func q4_0Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)

//go:noescape
func q5_0Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int32, acc *float32)

//go:noescape
func q4_1Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *float32, acc *float32)

//go:noescape
func q5_1Dot8AVX512(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *float32, acc *float32)

//go:noescape
func f16Dot4x1AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f16Dot4x4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x1AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func f32Dot4x4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x1AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x2AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x3AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

//go:noescape
func bf16Dot4x4AVX512(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32)

// archImpl returns the SIMD implementation for t under the current
// variant, or nil to use the portable one.
func archImpl(t ggml.Type) matmulImpl {
	if isa < ISAAVX512 {
		return nil
	}
	switch k := kernelFor(t); k.block {
	case 1:
		return matmulFloatAVX512
	case 32:
		return func(y []float32, m *Matrix, a *acts, r0, r1 int) {
			if a.n > directMaxTokens {
				matmulLegacyAVX512(y, m, a, r0, r1)
				return
			}
			matmulRaw(y, m, a, r0, r1, legacyRaw[t])
		}
	case 256:
		switch t {
		case ggml.TypeQ4_K:
			return matmulQ4_KAVX512
		case ggml.TypeQ6_K:
			return matmulQ6_KAVX512
		}
		return matmulKAVX512
	}
	return nil
}

// chunkCols is how many weight columns of an 8-row group are unpacked at a
// time: small enough that the panel stays in L1 while every token of the
// call streams past it.
const chunkCols = 1024

// panel is an 8-row group of weights unpacked for the lane-per-row
// kernels, block-major: legacy types [block][row][32]int8 with per
// (block,row) 128·Σw, dw, mw; K-quants [super-block][row][256]uint8,
// int16 scales per byte pair [super-block][row][128], int16 "mins" per
// group of 16 [super-block][row][16], dw, dm.
type panel struct {
	w      []int8
	wsum   []int32
	u      []uint8
	sc     []int16
	mn     []int16
	dw, mw []float32
	acc    []float32
	row    unpacked
}

var panelPool = sync.Pool{New: func() any { return new(panel) }}

// kBias is the offset that makes a K-quant's unpacked values unsigned.
func kBias(t ggml.Type) int32 {
	switch t {
	case ggml.TypeQ6_K:
		return 32
	case ggml.TypeQ3_K:
		return 4
	}
	return 0
}

func matmulLegacyAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	k := kernelFor(m.Type)
	pn := panelPool.Get().(*panel)
	defer panelPool.Put(pn)
	n, cols, rows := a.n, m.Cols, m.Rows
	nbAll := cols / 32
	ts := m.Type.TypeSize()
	chunk := chunkCols / 32
	pn.acc = grow(pn.acc, n*8)
	pn.w = grow(pn.w, chunk*8*32)
	pn.wsum = grow(pn.wsum, chunk*8)
	pn.dw = grow(pn.dw, chunk*8)
	pn.mw = grow(pn.mw, chunk*8)
	for g0 := r0; g0 < r1; g0 += 8 {
		clear(pn.acc)
		for c0 := 0; c0 < nbAll; c0 += chunk {
			nb := min(chunk, nbAll-c0)
			k.alloc(&pn.row, nb*32)
			for i := 0; i < 8; i++ {
				r := min(g0+i, rows-1)
				k.unpack(m.row(r)[c0*ts:(c0+nb)*ts], &pn.row)
				for b := 0; b < nb; b++ {
					src := pn.row.u[b*32 : b*32+32]
					copy(pn.w[(b*8+i)*32:], src)
					s := int32(0)
					for _, v := range src {
						s += int32(v)
					}
					pn.wsum[b*8+i] = 128 * s
					pn.dw[b*8+i] = pn.row.bd[b]
					pn.mw[b*8+i] = pn.row.bm[b]
				}
			}
			for t := 0; t < n; t++ {
				var mw, sa *float32
				if k.hasMin {
					mw, sa = &pn.mw[0], &a.s[t*nbAll+c0]
				}
				legacyDot8AVX512(&pn.w[0], &pn.wsum[0], &pn.dw[0], mw, nb,
					&a.qu[t*cols+c0*32], &a.d[t*nbAll+c0], sa, &pn.acc[t*8])
			}
		}
		for t := 0; t < n; t++ {
			for i := 0; i < 8 && g0+i < r1; i++ {
				y[t*rows+g0+i] = pn.acc[t*8+i]
			}
		}
	}
}

func matmulKAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	k := kernelFor(m.Type)
	pn := panelPool.Get().(*panel)
	defer panelPool.Put(pn)
	n, cols, rows := a.n, m.Cols, m.Rows
	nsbAll := cols / 256
	ts := m.Type.TypeSize()
	chunk := chunkCols / 256
	bias := kBias(m.Type)
	ng := 256 / k.group
	pn.acc = grow(pn.acc, n*8)
	pn.u = grow(pn.u, chunk*8*256)
	pn.sc = grow(pn.sc, chunk*8*128)
	pn.mn = grow(pn.mn, chunk*8*16)
	pn.dw = grow(pn.dw, chunk*8)
	pn.mw = grow(pn.mw, chunk*8)
	for g0 := r0; g0 < r1; g0 += 8 {
		clear(pn.acc)
		for c0 := 0; c0 < nsbAll; c0 += chunk {
			nsb := min(chunk, nsbAll-c0)
			k.alloc(&pn.row, nsb*256)
			for i := 0; i < 8; i++ {
				r := min(g0+i, rows-1)
				k.unpack(m.row(r)[c0*ts:(c0+nsb)*ts], &pn.row)
				for sb := 0; sb < nsb; sb++ {
					p := sb*8 + i
					u := pn.u[p*256 : p*256+256]
					for j, v := range pn.row.u[sb*256 : sb*256+256] {
						u[j] = uint8(int32(v) + bias)
					}
					sc := pn.sc[p*128 : p*128+128]
					for l := range sc {
						sc[l] = int16(pn.row.gsc[sb*ng+2*l/k.group])
					}
					mn := pn.mn[p*16 : p*16+16]
					for h := range mn {
						if k.hasMin {
							mn[h] = int16(pn.row.gmin[sb*ng+h*16/k.group])
						} else {
							mn[h] = int16(bias * pn.row.gsc[sb*ng+h*16/k.group])
						}
					}
					pn.dw[p] = pn.row.bd[sb]
					pn.mw[p] = pn.row.bm[sb]
				}
			}
			for t := 0; t < n; t++ {
				var dm *float32
				if k.hasMin {
					dm = &pn.mw[0]
				}
				kDot8AVX512(&pn.u[0], &pn.sc[0], &pn.mn[0], &pn.dw[0], dm, nsb,
					&a.q[t*cols+c0*256], &a.d[t*nsbAll+c0], &a.bs16[(t*cols+c0*256)/16], &pn.acc[t*8])
			}
		}
		for t := 0; t < n; t++ {
			for i := 0; i < 8 && g0+i < r1; i++ {
				y[t*rows+g0+i] = pn.acc[t*8+i]
			}
		}
	}
}

// directMaxTokens is the largest batch for which the raw-block kernels are
// used; larger batches unpack panels once and reuse them across tokens.
// Both give the canonical result, so the choice never changes a bit.
const directMaxTokens = 4

// rawKernel is a raw-block lane-per-row kernel: one token against an
// 8-row group, blocks [0,nb).
type rawKernel func(w *byte, idx *[8]int32, nb int, t int, a *acts, acc *float32)

// legacyRaw maps the 32-element block types to their raw-block kernels.
var legacyRaw = map[ggml.Type]rawKernel{
	ggml.TypeQ8_0: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q8_0Dot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs[t*nb], acc)
	},
	ggml.TypeQ4_0: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q4_0Dot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs[t*nb], acc)
	},
	ggml.TypeQ5_0: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q5_0Dot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs[t*nb], acc)
	},
	ggml.TypeQ4_1: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q4_1Dot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.s[t*nb], acc)
	},
	ggml.TypeQ5_1: func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q5_1Dot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.s[t*nb], acc)
	},
}

func matmulQ4_KAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	if a.n > directMaxTokens {
		matmulKAVX512(y, m, a, r0, r1)
		return
	}
	matmulRaw(y, m, a, r0, r1, func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q4_KDot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs16[t*a.cols/16], acc)
	})
}

func matmulQ6_KAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	if a.n > directMaxTokens {
		matmulKAVX512(y, m, a, r0, r1)
		return
	}
	matmulRaw(y, m, a, r0, r1, func(w *byte, idx *[8]int32, nb, t int, a *acts, acc *float32) {
		q6_KDot8AVX512(w, idx, nb, &a.q[t*a.cols], &a.d[t*nb], &a.bs16[t*a.cols/16], acc)
	})
}

// matmulRaw runs a raw-block kernel over whole 8-row groups of [r0,r1);
// a last partial group (which the kernel cannot read past the matrix for)
// takes the portable kernels, which compute the same bits.
func matmulRaw(y []float32, m *Matrix, a *acts, r0, r1 int, kern rawKernel) {
	rb, rows, nb := m.RowBytes, m.Rows, a.nb
	var idx [8]int32
	for i := range idx {
		idx[i] = int32(i * rb)
	}
	var acc [8]float32
	g0 := r0
	for ; g0+8 <= r1; g0 += 8 {
		w := &m.Data[g0*rb]
		for t := 0; t < a.n; t++ {
			acc = [8]float32{}
			kern(w, &idx, nb, t, a, &acc[0])
			copy(y[t*rows+g0:t*rows+g0+8], acc[:])
		}
	}
	if g0 < r1 {
		matmulGeneric(y, m, a, g0, r1)
	}
}

// floatKernels[type][nt-1] is the 4-row × nt-token float kernel.
var floatKernels = map[ggml.Type][4]func(w *byte, rowBytes int, x *float32, xStride int, n16 int, acc *float32){
	ggml.TypeF16:  {f16Dot4x1AVX512, f16Dot4x2AVX512, f16Dot4x3AVX512, f16Dot4x4AVX512},
	ggml.TypeF32:  {f32Dot4x1AVX512, f32Dot4x2AVX512, f32Dot4x3AVX512, f32Dot4x4AVX512},
	ggml.TypeBF16: {bf16Dot4x1AVX512, bf16Dot4x2AVX512, bf16Dot4x3AVX512, bf16Dot4x4AVX512},
}

// matmulFloatAVX512 runs the float kernels over groups of 4 rows and up to
// 4 tokens; the kernel leaves the 16 canonical lane sums, Go adds the
// columns past the last whole 16 (into lane c mod 16) and reduces by the
// fixed tree. Rows past the last whole group of 4 take the portable path.
func matmulFloatAVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	kerns := floatKernels[m.Type]
	rb, rows, cols := m.RowBytes, m.Rows, m.Cols
	n16 := cols / 16
	esize := rb / cols
	var lanesBuf [4 * 4 * lanes]float32
	gEnd := r0 + (r1-r0)/4*4
	// Tokens outer, row quads inner: the tile's weights stay in L1 while
	// four tokens' activations are used by every quad.
	for t0 := 0; t0 < a.n; t0 += 4 {
		nt := min(4, a.n-t0)
		for g0 := r0; g0 < gEnd; g0 += 4 {
			kerns[nt-1](&m.Data[g0*rb], rb, &a.f[t0*cols], cols*4, n16, &lanesBuf[0])
			for r := 0; r < 4; r++ {
				row := m.row(g0 + r)
				for t := 0; t < nt; t++ {
					acc := (*[lanes]float32)(lanesBuf[(r*nt+t)*lanes:])
					x := a.f[(t0+t)*cols : (t0+t+1)*cols]
					for c := n16 * 16; c < cols; c++ {
						acc[c%lanes] = acc[c%lanes] + float32(floatAt(m.Type, row, c, esize)*x[c])
					}
					y[(t0+t)*rows+g0+r] = reduceLanes(acc)
				}
			}
		}
	}
	g0 := gEnd
	if g0 < r1 {
		matmulGeneric(y, m, a, g0, r1)
	}
}
