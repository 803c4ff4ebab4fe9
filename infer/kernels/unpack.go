package kernels

import (
	"encoding/binary"

	"github.com/muserhq/muser/infer/ggml"
)

// A row of a quantized matrix, unpacked into integers: the portable
// kernels' working form. u holds every weight as a small signed integer
// (the quantized value minus the format's offset), gsc and gmin the
// integer scale and min of each group of a K-quant super-block, bd and bm
// each block's float scale and second float (Q4_1/Q5_1: m; K-quants: dmin),
// widened from f16 exactly. For NVFP4, u holds twice each E2M1 value (an
// integer in [−12, 12]) and bd each 16-value sub-block's scale,
// ggml.UE4M3Half of its byte (half the UE4M3 value, exact).
type unpacked struct {
	u    []int8
	gsc  []int32
	gmin []int32
	bd   []float32
	bm   []float32
}

// kernel describes how one weight type is multiplied.
type kernel struct {
	act    actKind
	block  int // elements per weight block
	group  int // elements per integer scale group (K-quants); block for legacy types
	hasMin bool
	// unpack decodes one row (len(row) = whole blocks) into w.
	unpack func(row []byte, w *unpacked)
}

// kernelFor returns the kernel for t, or nil.
func kernelFor(t ggml.Type) *kernel {
	if int(t) < len(kernels) {
		return kernels[t]
	}
	return nil
}

var kernels = func() []*kernel {
	k := make([]*kernel, ggml.TypeNVFP4+1)
	k[ggml.TypeF32] = &kernel{act: actF32, block: 1, group: 1}
	k[ggml.TypeF16] = &kernel{act: actF16, block: 1, group: 1}
	k[ggml.TypeBF16] = &kernel{act: actBF16, block: 1, group: 1}
	k[ggml.TypeQ8_0] = &kernel{act: actQ8_0, block: 32, group: 32, unpack: unpackQ8_0}
	k[ggml.TypeQ4_0] = &kernel{act: actQ8_0, block: 32, group: 32, unpack: unpackQ4_0}
	k[ggml.TypeQ5_0] = &kernel{act: actQ8_0, block: 32, group: 32, unpack: unpackQ5_0}
	k[ggml.TypeQ4_1] = &kernel{act: actQ8_1, block: 32, group: 32, hasMin: true, unpack: unpackQ4_1}
	k[ggml.TypeQ5_1] = &kernel{act: actQ8_1, block: 32, group: 32, hasMin: true, unpack: unpackQ5_1}
	k[ggml.TypeQ2_K] = &kernel{act: actQ8_K, block: 256, group: 16, hasMin: true, unpack: unpackQ2_K}
	k[ggml.TypeQ3_K] = &kernel{act: actQ8_K, block: 256, group: 16, unpack: unpackQ3_K}
	k[ggml.TypeQ4_K] = &kernel{act: actQ8_K, block: 256, group: 32, hasMin: true, unpack: unpackQ4_K}
	k[ggml.TypeQ5_K] = &kernel{act: actQ8_K, block: 256, group: 32, hasMin: true, unpack: unpackQ5_K}
	k[ggml.TypeQ6_K] = &kernel{act: actQ8_K, block: 256, group: 16, unpack: unpackQ6_K}
	k[ggml.TypeNVFP4] = &kernel{act: actQ8_0, block: 64, group: 16, unpack: unpackNVFP4}
	return k
}()

// alloc sizes w for a row of cols elements.
func (k *kernel) alloc(w *unpacked, cols int) {
	nb := cols / k.block
	w.u = grow(w.u, cols)
	if k.block == 64 { // NVFP4: one scale per sub-block
		nb = cols / k.group
	}
	w.bd = grow(w.bd, nb)
	w.bm = grow(w.bm, nb)
	if k.block == 256 {
		w.gsc = grow(w.gsc, cols/k.group)
		w.gmin = grow(w.gmin, cols/k.group)
	}
}

func f16at(b []byte, off int) float32 {
	return f16Table[binary.LittleEndian.Uint16(b[off:])]
}

func unpackQ8_0(row []byte, w *unpacked) {
	for b := range w.bd {
		x := row[b*34 : b*34+34]
		w.bd[b] = f16at(x, 0)
		u := w.u[b*32 : b*32+32]
		for j := range u {
			u[j] = int8(x[2+j])
		}
	}
}

func unpackQ4_0(row []byte, w *unpacked) {
	for b := range w.bd {
		x := row[b*18 : b*18+18]
		w.bd[b] = f16at(x, 0)
		u := w.u[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			u[j] = int8(x[2+j]&15) - 8
			u[j+16] = int8(x[2+j]>>4) - 8
		}
	}
}

func unpackQ4_1(row []byte, w *unpacked) {
	for b := range w.bd {
		x := row[b*20 : b*20+20]
		w.bd[b] = f16at(x, 0)
		w.bm[b] = f16at(x, 2)
		u := w.u[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			u[j] = int8(x[4+j] & 15)
			u[j+16] = int8(x[4+j] >> 4)
		}
	}
}

func unpackQ5_0(row []byte, w *unpacked) {
	for b := range w.bd {
		x := row[b*22 : b*22+22]
		w.bd[b] = f16at(x, 0)
		qh := binary.LittleEndian.Uint32(x[2:])
		u := w.u[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			u[j] = int8(x[6+j]&15|byte(qh>>j&1)<<4) - 16
			u[j+16] = int8(x[6+j]>>4|byte(qh>>(j+16)&1)<<4) - 16
		}
	}
}

func unpackQ5_1(row []byte, w *unpacked) {
	for b := range w.bd {
		x := row[b*24 : b*24+24]
		w.bd[b] = f16at(x, 0)
		w.bm[b] = f16at(x, 2)
		qh := binary.LittleEndian.Uint32(x[4:])
		u := w.u[b*32 : b*32+32]
		for j := 0; j < 16; j++ {
			u[j] = int8(x[8+j]&15 | byte(qh>>j&1)<<4)
			u[j+16] = int8(x[8+j]>>4 | byte(qh>>(j+16)&1)<<4)
		}
	}
}

// scaleMinK4 decodes the 6-bit scale and min of group j from the 12 packed
// bytes of a Q4_K or Q5_K super-block (ggml's get_scale_min_k4).
func scaleMinK4(j int, q []byte) (sc, m int32) {
	if j < 4 {
		return int32(q[j] & 63), int32(q[j+4] & 63)
	}
	return int32(q[j+4]&0xF | (q[j-4]>>6)<<4), int32(q[j+4]>>4 | (q[j]>>6)<<4)
}

func unpackQ4_K(row []byte, w *unpacked) {
	for b := range w.bd {
		x := row[b*144 : b*144+144]
		w.bd[b] = f16at(x, 0)
		w.bm[b] = f16at(x, 2)
		for g := 0; g < 8; g++ {
			w.gsc[b*8+g], w.gmin[b*8+g] = scaleMinK4(g, x[4:16])
		}
		u := w.u[b*256 : b*256+256]
		q := x[16:144]
		for c := 0; c < 4; c++ { // 64 values from 32 bytes
			for l := 0; l < 32; l++ {
				u[c*64+l] = int8(q[c*32+l] & 15)
				u[c*64+32+l] = int8(q[c*32+l] >> 4)
			}
		}
	}
}

func unpackQ5_K(row []byte, w *unpacked) {
	for b := range w.bd {
		x := row[b*176 : b*176+176]
		w.bd[b] = f16at(x, 0)
		w.bm[b] = f16at(x, 2)
		for g := 0; g < 8; g++ {
			w.gsc[b*8+g], w.gmin[b*8+g] = scaleMinK4(g, x[4:16])
		}
		qh := x[16:48]
		q := x[48:176]
		u := w.u[b*256 : b*256+256]
		for c := 0; c < 4; c++ {
			for l := 0; l < 32; l++ {
				u[c*64+l] = int8(q[c*32+l]&15 | (qh[l]>>(2*c)&1)<<4)
				u[c*64+32+l] = int8(q[c*32+l]>>4 | (qh[l]>>(2*c+1)&1)<<4)
			}
		}
	}
}

func unpackQ6_K(row []byte, w *unpacked) {
	for b := range w.bd {
		x := row[b*210 : b*210+210]
		w.bd[b] = f16at(x, 208)
		for g := 0; g < 16; g++ {
			w.gsc[b*16+g] = int32(int8(x[192+g]))
		}
		u := w.u[b*256 : b*256+256]
		for h := 0; h < 2; h++ { // two halves of 128 values
			ql := x[h*64 : h*64+64]
			qh := x[128+h*32 : 128+h*32+32]
			o := u[h*128 : h*128+128]
			for l := 0; l < 32; l++ {
				o[l] = int8(ql[l]&15|(qh[l]&3)<<4) - 32
				o[l+32] = int8(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				o[l+64] = int8(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				o[l+96] = int8(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			}
		}
	}
}

func unpackQ2_K(row []byte, w *unpacked) {
	for b := range w.bd {
		x := row[b*84 : b*84+84]
		w.bd[b] = f16at(x, 80)
		w.bm[b] = f16at(x, 82)
		for g := 0; g < 16; g++ {
			w.gsc[b*16+g] = int32(x[g] & 15)
			w.gmin[b*16+g] = int32(x[g] >> 4)
		}
		u := w.u[b*256 : b*256+256]
		for h := 0; h < 2; h++ { // 128 values from 32 bytes
			q := x[16+h*32 : 16+h*32+32]
			for s := 0; s < 4; s++ {
				for l := 0; l < 32; l++ {
					u[h*128+s*32+l] = int8(q[l] >> (2 * s) & 3)
				}
			}
		}
	}
}

func unpackQ3_K(row []byte, w *unpacked) {
	const km1, km2 = 0x03030303, 0x0f0f0f0f
	for b := range w.bd {
		x := row[b*110 : b*110+110]
		w.bd[b] = f16at(x, 108)
		a0 := binary.LittleEndian.Uint32(x[96:])
		a1 := binary.LittleEndian.Uint32(x[100:])
		tmp := binary.LittleEndian.Uint32(x[104:])
		aux := [4]uint32{
			a0&km2 | (tmp>>0&km1)<<4,
			a1&km2 | (tmp>>2&km1)<<4,
			a0>>4&km2 | (tmp>>4&km1)<<4,
			a1>>4&km2 | (tmp>>6&km1)<<4,
		}
		for g := 0; g < 16; g++ {
			w.gsc[b*16+g] = int32(byte(aux[g/4]>>(8*(g%4)))) - 32
		}
		hm := x[0:32]
		u := w.u[b*256 : b*256+256]
		for h := 0; h < 2; h++ {
			q := x[32+h*32 : 32+h*32+32]
			for s := 0; s < 4; s++ {
				bit := byte(1) << (4*h + s)
				for l := 0; l < 32; l++ {
					v := int8(q[l] >> (2 * s) & 3)
					if hm[l]&bit == 0 {
						v -= 4
					}
					u[h*128+s*32+l] = v
				}
			}
		}
	}
}

// e2m1Doubled and ue4m3Half are ggml.E2M1Doubled and ggml.UE4M3Half as
// tables.
var (
	e2m1Doubled [16]int8
	ue4m3Half   [256]float32
)

func init() {
	for c := range e2m1Doubled {
		e2m1Doubled[c] = ggml.E2M1Doubled(byte(c))
	}
	for b := range ue4m3Half {
		ue4m3Half[b] = ggml.UE4M3Half(byte(b))
	}
}

// unpackNVFP4 decodes NVFP4 blocks (ggml's block_nvfp4: four UE4M3 scale
// bytes, then 32 bytes whose byte 8s+j holds value j of sub-block s low
// and value j+8 high) into values in element order and one scale per
// sub-block.
func unpackNVFP4(row []byte, w *unpacked) {
	for b := 0; b < len(w.bd)/4; b++ {
		x := row[b*36 : b*36+36]
		for s := 0; s < 4; s++ {
			w.bd[4*b+s] = ue4m3Half[x[s]]
			u := w.u[64*b+16*s : 64*b+16*s+16]
			qs := x[4+8*s : 12+8*s]
			for j := 0; j < 8; j++ {
				u[j] = e2m1Doubled[qs[j]&15]
				u[j+8] = e2m1Doubled[qs[j]>>4]
			}
		}
	}
}
