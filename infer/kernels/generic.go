package kernels

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/muserhq/muser/infer/ggml"
)

// The portable kernels: the canonical arithmetic, written out in Go. The
// SIMD kernels compute exactly these operations in exactly this order (see
// doc.go, "Canonical order"); tests compare them bit for bit.
//
// Every float product whose result is added is wrapped in an explicit
// float32 conversion: the Go specification lets a compiler fuse x*y + z
// into one fused multiply-add (arm64 does), and an explicit conversion is
// what forbids it.

// dotI8 returns Σ a[i]·b[i] over len(a) elements, exactly.
func dotI8(a, b []int8) int32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += int32(a[i]) * int32(b[i])
		s1 += int32(a[i+1]) * int32(b[i+1])
		s2 += int32(a[i+2]) * int32(b[i+2])
		s3 += int32(a[i+3]) * int32(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += int32(a[i]) * int32(b[i])
	}
	return s0 + s1 + s2 + s3
}

// dotLegacy is the canonical dot product of one unpacked row of a 32-element
// block type with one token's Q8_0 or Q8_1 activations:
//
//	acc = 0; for each block b in order:
//	    isum = Σ w·a (exact)
//	    p = (dw·da)·float32(isum)            (each product rounded to float32)
//	    p = p + mw·sa                          (Q4_1, Q5_1: mw·sa rounded first)
//	    acc = acc + p
func dotLegacy(w *unpacked, hasMin bool, q []int8, d, s []float32) float32 {
	var acc float32
	for b, dw := range w.bd {
		isum := dotI8(w.u[b*32:b*32+32], q[b*32:b*32+32])
		p := float32(float32(dw*d[b]) * float32(isum))
		if hasMin {
			p = p + float32(w.bm[b]*s[b])
		}
		acc = acc + p
	}
	return acc
}

// dotK is the canonical dot product of one unpacked row of a K-quant type
// with one token's Q8_K activations:
//
//	acc = 0; for each super-block b in order:
//	    isum = Σ_g sc_g · Σ_{j∈g} w_j·a_j      (exact)
//	    msum = Σ_g min_g · Σ_{j∈g} a_j          (exact; types with mins)
//	    p = (dw·da)·float32(isum)
//	    p = p − (dmin·da)·float32(msum)         (types with mins)
//	    acc = acc + p
func dotK(w *unpacked, group int, hasMin bool, q []int8, d []float32, bs []int32) float32 {
	var acc float32
	ng := 256 / group
	per := group / 16
	for b, dw := range w.bd {
		var isum, msum int32
		for g := 0; g < ng; g++ {
			o := b*256 + g*group
			isum += w.gsc[b*ng+g] * dotI8(w.u[o:o+group], q[o:o+group])
			if hasMin {
				as := bs[o/16]
				if per == 2 {
					as += bs[o/16+1]
				}
				msum += w.gmin[b*ng+g] * as
			}
		}
		da := d[b]
		p := float32(float32(dw*da) * float32(isum))
		if hasMin {
			p = p - float32(float32(w.bm[b]*da)*float32(msum))
		}
		acc = acc + p
	}
	return acc
}

// dotNVFP4 is the canonical dot product of one unpacked NVFP4 row with one
// token's Q8_0 activations (two Q8_0 blocks per NVFP4 block):
//
//	acc = 0; for each sub-block of 16 values, in order (block b, then s = 0..3):
//	    isum = Σ_{j<16} v_j·a_j     (v twice the E2M1 value; exact)
//	    t = ws·da                     (ws = UE4M3Half(scale byte), da the
//	                                   Q8_0 scale of block 2b + s/2; exact)
//	    p = t·float32(isum)
//	    acc = acc + p
func dotNVFP4(w *unpacked, q []int8, d []float32) float32 {
	var acc float32
	for sb, ws := range w.bd {
		isum := dotI8(w.u[sb*16:sb*16+16], q[sb*16:sb*16+16])
		t := float32(ws * d[sb/2])
		acc = acc + float32(t*float32(isum))
	}
	return acc
}

// lanes is the number of accumulators of the float dot products.
const lanes = 16

// dotF32 is the canonical float dot product: element i is added to
// accumulator i mod 16 in index order (acc[i%16] = acc[i%16] + a[i]·b[i],
// the product rounded to float32), then the accumulators are summed by a
// fixed tree: acc[l] += acc[l+8] for l < 8, then +4, +2, +1.
func dotF32(a, b []float32) float32 {
	var acc [lanes]float32
	b = b[:len(a)]
	i := 0
	for ; i+lanes <= len(a); i += lanes {
		x, y := a[i:i+lanes:i+lanes], b[i:i+lanes:i+lanes]
		for l := 0; l < lanes; l++ {
			acc[l] = acc[l] + float32(x[l]*y[l])
		}
	}
	for l := 0; i < len(a); i, l = i+1, l+1 {
		acc[l] = acc[l] + float32(a[i]*b[i])
	}
	return reduceLanes(&acc)
}

// dotF16F32 is dotF32 with a given as f16 bit patterns.
func dotF16F32(a []uint16, b []float32) float32 {
	var acc [lanes]float32
	b = b[:len(a)]
	i := 0
	for ; i+lanes <= len(a); i += lanes {
		x, y := a[i:i+lanes:i+lanes], b[i:i+lanes:i+lanes]
		for l := 0; l < lanes; l++ {
			acc[l] = acc[l] + float32(f16Table[x[l]]*y[l])
		}
	}
	for l := 0; i < len(a); i, l = i+1, l+1 {
		acc[l] = acc[l] + float32(f16Table[a[i]]*b[i])
	}
	return reduceLanes(&acc)
}

// dotF32Row is dotF32 with a read from a row of little-endian float32s.
func dotF32Row(row []byte, b []float32) float32 {
	var acc [lanes]float32
	for i := range b {
		w := math.Float32frombits(binary.LittleEndian.Uint32(row[4*i:]))
		acc[i%lanes] = acc[i%lanes] + float32(w*b[i])
	}
	return reduceLanes(&acc)
}

// dotF16Row is dotF32 with a read from a row of f16 values.
func dotF16Row(row []byte, b []float32) float32 {
	var acc [lanes]float32
	for i := range b {
		w := f16Table[binary.LittleEndian.Uint16(row[2*i:])]
		acc[i%lanes] = acc[i%lanes] + float32(w*b[i])
	}
	return reduceLanes(&acc)
}

// dotBF16Row is dotF32 with a read from a row of bf16 values.
func dotBF16Row(row []byte, b []float32) float32 {
	var acc [lanes]float32
	for i := range b {
		w := math.Float32frombits(uint32(binary.LittleEndian.Uint16(row[2*i:])) << 16)
		acc[i%lanes] = acc[i%lanes] + float32(w*b[i])
	}
	return reduceLanes(&acc)
}

// reduceLanes sums the 16 accumulators by the fixed tree.
func reduceLanes(acc *[lanes]float32) float32 {
	for h := lanes / 2; h >= 1; h /= 2 {
		for l := 0; l < h; l++ {
			acc[l] = acc[l] + acc[l+h]
		}
	}
	return acc[0]
}

// unpackPool recycles row scratch for the portable kernels.
var unpackPool = sync.Pool{New: func() any { return new(unpacked) }}

// matmulGeneric computes rows [r0,r1) of y for all tokens with the portable
// kernels.
func matmulGeneric(y []float32, m *Matrix, a *acts, r0, r1 int) {
	matmulGenericTokens(y, m, a, r0, r1, 0)
}

// matmulGenericTokens is matmulGeneric for the tokens from t0 on.
func matmulGenericTokens(y []float32, m *Matrix, a *acts, r0, r1, t0 int) {
	k := kernelFor(m.Type)
	n, rows, cols := a.n, m.Rows, m.Cols
	switch k.act {
	case actF32, actF16, actBF16:
		for r := r0; r < r1; r++ {
			row := m.row(r)
			for t := t0; t < n; t++ {
				xt := a.f[t*cols : (t+1)*cols]
				var v float32
				switch m.Type {
				case ggml.TypeF32:
					v = dotF32Row(row, xt)
				case ggml.TypeF16:
					v = dotF16Row(row, xt)
				default:
					v = dotBF16Row(row, xt)
				}
				y[t*rows+r] = v
			}
		}
		return
	}
	w := unpackPool.Get().(*unpacked)
	defer unpackPool.Put(w)
	k.alloc(w, cols)
	nb := a.nb
	for r := r0; r < r1; r++ {
		k.unpack(m.row(r), w)
		for t := t0; t < n; t++ {
			q := a.q[t*cols : (t+1)*cols]
			d := a.d[t*nb : (t+1)*nb]
			var v float32
			if k.block == 64 {
				v = dotNVFP4(w, q, d)
			} else if k.block == 32 {
				var s []float32
				if k.hasMin {
					s = a.s[t*nb : (t+1)*nb]
				}
				v = dotLegacy(w, k.hasMin, q, d, s)
			} else {
				v = dotK(w, k.group, k.hasMin, q, d, a.bs[t*cols/16:(t+1)*cols/16])
			}
			y[t*rows+r] = v
		}
	}
}

// floatAt returns element c of a row of a float weight type (esize bytes
// per element).
func floatAt(t ggml.Type, row []byte, c, esize int) float32 {
	switch t {
	case ggml.TypeF32:
		return math.Float32frombits(binary.LittleEndian.Uint32(row[4*c:]))
	case ggml.TypeF16:
		return f16Table[binary.LittleEndian.Uint16(row[2*c:])]
	}
	return math.Float32frombits(uint32(binary.LittleEndian.Uint16(row[2*c:])) << 16)
}
