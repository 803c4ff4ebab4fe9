package kernels

//go:noescape
func nvfp4Raw16x1AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func nvfp4Raw16x2AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func nvfp4Raw16x3AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func nvfp4Raw16x4AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func nvfp4Raw16x5AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func nvfp4Raw16x6AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func nvfp4Raw16x7AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

//go:noescape
func nvfp4Raw16x8AVX512(w *byte, idx *[16]int32, nb int, q *int8, da *float32, nc *int32, acc *float32)

// nvfp4Kernels[nt-1] is the NVFP4 raw-block kernel for nt tokens against
// a 16-row group (genNVFP4RawT).
var nvfp4Kernels = [8]rawTKernel{nvfp4Raw16x1AVX512, nvfp4Raw16x2AVX512, nvfp4Raw16x3AVX512, nvfp4Raw16x4AVX512,
	nvfp4Raw16x5AVX512, nvfp4Raw16x6AVX512, nvfp4Raw16x7AVX512, nvfp4Raw16x8AVX512}

// prepNVFP4 lays a's Q8_0 activations out for the NVFP4 kernels: tokens
// in groups of 8 (the last group holding the rest), and within group g of
// nt tokens, NVFP4 block b of token t (index i = 8g·nb + b·nt + t, nb =
// cols/64) at qI[64i:] (its 64 values in order), the scales of Q8_0
// blocks 2b and 2b+1 at dI[2i] and dI[2i+1], and −12·Σa over sub-block s
// at ncI[4i+s].
func prepNVFP4(a *acts) {
	cols, nb, nb32 := a.cols, a.cols/64, a.nb
	a.qI = grow(a.qI, a.n*cols)
	a.dI = grow(a.dI, a.n*cols/32)
	a.ncI = grow(a.ncI, a.n*cols/16)
	for t0 := 0; t0 < a.n; t0 += 8 {
		nt := min(8, a.n-t0)
		for t := 0; t < nt; t++ {
			tok := t0 + t
			for b := 0; b < nb; b++ {
				i := t0*nb + b*nt + t
				src := a.q[tok*cols+64*b : tok*cols+64*b+64]
				copy(a.qI[64*i:64*i+64], src)
				for s := 0; s < 4; s++ {
					sum := int32(0)
					for _, v := range src[16*s : 16*s+16] {
						sum += int32(v)
					}
					a.ncI[4*i+s] = -12 * sum
				}
				a.dI[2*i] = a.d[tok*nb32+2*b]
				a.dI[2*i+1] = a.d[tok*nb32+2*b+1]
			}
		}
	}
}

// matmulNVFP4AVX512 runs the NVFP4 raw-block kernels over whole 16-row
// groups of [r0,r1), tokens in groups of 8; the rows after the last whole
// group take the portable kernel, which computes the same bits. a must
// have been prepared by prepNVFP4.
func matmulNVFP4AVX512(y []float32, m *Matrix, a *acts, r0, r1 int) {
	rb, rows, nb := m.RowBytes, m.Rows, m.Cols/64
	var idx [16]int32
	for i := range idx {
		idx[i] = int32(i * rb)
	}
	var acc [8 * 16]float32
	g0 := r0
	for ; g0+16 <= r1; g0 += 16 {
		w := &m.Data[g0*rb]
		for t0 := 0; t0 < a.n; t0 += 8 {
			nt := min(8, a.n-t0)
			clear(acc[:nt*16])
			i := t0 * nb
			nvfp4Kernels[nt-1](w, &idx, nb, &a.qI[64*i], &a.dI[2*i], &a.ncI[4*i], &acc[0])
			for t := 0; t < nt; t++ {
				copy(y[(t0+t)*rows+g0:(t0+t)*rows+g0+16], acc[t*16:t*16+16])
			}
		}
	}
	if g0 < r1 {
		matmulGeneric(y, m, a, g0, r1)
	}
}
