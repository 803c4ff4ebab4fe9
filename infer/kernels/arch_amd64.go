package kernels

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

// archImpl returns the SIMD implementation for t under the current
// variant, or nil to use the portable one.
func archImpl(t ggml.Type) matmulImpl {
	if isa < ISAAVX512 {
		return nil
	}
	switch k := kernelFor(t); k.block {
	case 32:
		if t == ggml.TypeQ8_0 {
			return matmulQ8_0AVX512
		}
		return matmulLegacyAVX512
	case 256:
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

func matmulQ8_0AVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	n := a.n
	if n > directMaxTokens {
		matmulLegacyAVX512(y, m, a, r0, r1)
		return
	}
	rb, cols, rows, nb := m.RowBytes, m.Cols, m.Rows, m.Cols/32
	var idx [8]int32
	for i := range idx {
		idx[i] = int32(i * rb)
	}
	var acc [8]float32
	g0 := r0
	for ; g0+8 <= r1; g0 += 8 {
		w := &m.Data[g0*rb]
		for t := 0; t < n; t++ {
			acc = [8]float32{}
			q8_0Dot8AVX512(w, &idx, nb, &a.q[t*cols], &a.d[t*nb], &a.bs[t*nb], &acc[0])
			copy(y[t*rows+g0:t*rows+g0+8], acc[:])
		}
	}
	if g0 < r1 {
		matmulGeneric(y, m, a, g0, r1)
	}
}
