package kernels

import "golang.org/x/sys/cpu"

// q6_KDot8GFNI is q6_KDot8AVX512 with the 6-bit values rebuilt by GF(2)
// affine byte transforms (VGF2P8AFFINEQB), fewer instructions per value;
// the same bits.
//
//go:noescape
func q6_KDot8GFNI(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32)

// q6KGFNI selects q6_KDot8GFNI for one-token Q6_K products on the AVX-512
// variant; it needs GFNI with AVX-512 (Ice Lake, Zen 4 and later). Tests
// turn it off to check the other kernel on the same machine.
var q6KGFNI = cpu.X86.HasAVX512GFNI

// q6KDot8 runs the one-token Q6_K raw-block kernel that q6KGFNI selects.
func q6KDot8(w *byte, idx *[8]int32, nb int, q *int8, da *float32, bs *int16, acc *float32) {
	if q6KGFNI {
		q6_KDot8GFNI(w, idx, nb, q, da, bs, acc)
		return
	}
	q6_KDot8AVX512(w, idx, nb, q, da, bs, acc)
}
