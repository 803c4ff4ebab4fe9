package kernels

import (
	"encoding/binary"

	"github.com/muserhq/muser/infer/ggml"
)

// Fast panel fills: the common types are unpacked straight from their
// blocks into the transposed panel, four values at a time in a uint32,
// instead of through the portable unpacked form. The values are the same
// (tests compare the kernels' results with the portable ones bit for bit).

// spread4 maps four bits to four bytes holding 0x10 where the bit is set:
// the fifth bit of Q5_0/Q5_1 values.
var spread4 = func() (t [16]uint32) {
	for i := range t {
		for k := 0; k < 4; k++ {
			if i>>k&1 != 0 {
				t[i] |= 0x10 << (8 * k)
			}
		}
	}
	return
}()

// fillLegacyFast writes row slot j of a legacy panel from nb raw blocks; it
// reports false for types it does not handle.
func fillLegacyFast(t ggml.Type, row []byte, nb, j int, pn *panel) bool {
	le := binary.LittleEndian
	switch t {
	case ggml.TypeQ8_0:
		for b := 0; b < nb; b++ {
			x := row[b*34 : b*34+34]
			pn.dw[b*8+j] = f16at(x, 0)
			dst := pn.u[b*256+j*4:]
			for k := 0; k < 8; k++ {
				le.PutUint32(dst[k*32:], le.Uint32(x[2+4*k:])^0x80808080)
			}
		}
	case ggml.TypeQ4_0, ggml.TypeQ4_1, ggml.TypeQ5_0, ggml.TypeQ5_1:
		ts, qsOff, qhOff, hasMin := 18, 2, -1, false
		switch t {
		case ggml.TypeQ4_1:
			ts, qsOff, hasMin = 20, 4, true
		case ggml.TypeQ5_0:
			ts, qsOff, qhOff = 22, 6, 2
		case ggml.TypeQ5_1:
			ts, qsOff, qhOff, hasMin = 24, 8, 4, true
		}
		for b := 0; b < nb; b++ {
			x := row[b*ts : (b+1)*ts]
			pn.dw[b*8+j] = f16at(x, 0)
			if hasMin {
				pn.mw[b*8+j] = f16at(x, 2)
			}
			var qh uint32
			if qhOff >= 0 {
				qh = le.Uint32(x[qhOff:])
			}
			dst := pn.u[b*256+j*4:]
			for k := 0; k < 4; k++ {
				v := le.Uint32(x[qsOff+4*k:])
				lo := v & 0x0f0f0f0f
				hi := v >> 4 & 0x0f0f0f0f
				if qhOff >= 0 {
					lo |= spread4[qh>>(4*k)&15]
					hi |= spread4[qh>>(16+4*k)&15]
				}
				le.PutUint32(dst[k*32:], lo)
				le.PutUint32(dst[(k+4)*32:], hi)
			}
		}
	default:
		return false
	}
	return true
}

// fillKFast writes row slot j of a K-quant panel from nsb raw super-blocks
// (layout as matmulKAVX512 describes); false for types it does not handle.
func fillKFast(t ggml.Type, row []byte, nsb, j int, pn *panel) bool {
	le := binary.LittleEndian
	switch t {
	case ggml.TypeQ4_K:
		for sb := 0; sb < nsb; sb++ {
			x := row[sb*144 : sb*144+144]
			pn.dw[sb*8+j] = f16at(x, 0)
			pn.mw[sb*8+j] = f16at(x, 2)
			for g := 0; g < 8; g++ {
				sc, mn := scaleMinK4(g, x[4:16])
				pn.sc[(sb*8+g)*8+j] = sc
				pn.mn[sb*128+g*16+j*2] = int16(mn)
				pn.mn[sb*128+g*16+j*2+1] = int16(mn)
			}
			dst := pn.u[sb*2048+j*4:]
			for c := 0; c < 4; c++ {
				for l := 0; l < 32; l += 4 {
					v := le.Uint32(x[16+32*c+l:])
					le.PutUint32(dst[(c*16+l/4)*32:], v&0x0f0f0f0f)
					le.PutUint32(dst[(c*16+8+l/4)*32:], v>>4&0x0f0f0f0f)
				}
			}
		}
	case ggml.TypeQ5_K:
		for sb := 0; sb < nsb; sb++ {
			x := row[sb*176 : sb*176+176]
			pn.dw[sb*8+j] = f16at(x, 0)
			pn.mw[sb*8+j] = f16at(x, 2)
			for g := 0; g < 8; g++ {
				sc, mn := scaleMinK4(g, x[4:16])
				pn.sc[(sb*8+g)*8+j] = sc
				pn.mn[sb*128+g*16+j*2] = int16(mn)
				pn.mn[sb*128+g*16+j*2+1] = int16(mn)
			}
			dst := pn.u[sb*2048+j*4:]
			for c := 0; c < 4; c++ {
				for l := 0; l < 32; l += 4 {
					v := le.Uint32(x[48+32*c+l:])
					h := le.Uint32(x[16+l:])
					lo := v&0x0f0f0f0f | (h>>(2*c)&0x01010101)<<4
					hi := v>>4&0x0f0f0f0f | (h>>(2*c+1)&0x01010101)<<4
					le.PutUint32(dst[(c*16+l/4)*32:], lo)
					le.PutUint32(dst[(c*16+8+l/4)*32:], hi)
				}
			}
		}
	case ggml.TypeQ6_K:
		for sb := 0; sb < nsb; sb++ {
			x := row[sb*210 : sb*210+210]
			pn.dw[sb*8+j] = f16at(x, 208)
			for g := 0; g < 16; g++ {
				sc := int32(int8(x[192+g]))
				pn.sc[(sb*16+g)*8+j] = sc
				pn.mn[sb*128+(g/2)*16+j*2+g%2] = int16(32 * sc)
			}
			dst := pn.u[sb*2048+j*4:]
			for h := 0; h < 2; h++ {
				for l := 0; l < 32; l += 4 {
					a := le.Uint32(x[64*h+l:])
					b := le.Uint32(x[64*h+32+l:])
					q := le.Uint32(x[128+32*h+l:])
					e := 128*h + l
					le.PutUint32(dst[(e/4)*32:], a&0x0f0f0f0f|(q&0x03030303)<<4)
					le.PutUint32(dst[((e+32)/4)*32:], b&0x0f0f0f0f|(q>>2&0x03030303)<<4)
					le.PutUint32(dst[((e+64)/4)*32:], a>>4&0x0f0f0f0f|(q>>4&0x03030303)<<4)
					le.PutUint32(dst[((e+96)/4)*32:], b>>4&0x0f0f0f0f|(q>>6&0x03030303)<<4)
				}
			}
		}
	default:
		return false
	}
	return true
}
