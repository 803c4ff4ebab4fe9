package kernels

//go:noescape
func scoresF16AVX512(s *float32, ld int, k *uint16, stride int, q *float32, n16, nq, blocks int, kf *float32, perm *int32, scale float32)

//go:noescape
func weightedSum4F16AVX512(y *[4]*float32, a *[4]*float32, v *uint16, stride int, n64, rows int)

//go:noescape
func scoresF16AVX2(s *float32, ld int, k *uint16, stride int, q *float32, n16, nq, blocks int, kf *float32, scale float32)

//go:noescape
func weightedSum4F16AVX2(y *[4]*float32, a *[4]*float32, v *uint16, stride int, n16, rows int)

// tileShape returns how many keys the tile score kernel takes at a time
// and the multiple of the head dimension the tile weighted-sum kernel
// takes: 16 and 64 with AVX-512, 4 and 16 with AVX2, 0 and 0 where the
// variant has no tile kernels.
func tileShape() (keys, dims int) {
	switch {
	case isa >= ISAAVX512:
		return 16, 64
	case isa == ISAAVX2:
		return 4, 16
	}
	return 0, 0
}

// scorePerm puts the 16 sums of scoresF16AVX512's transposing reduction
// back in key order: key c lies in lane 4·(c mod 4) + c/4.
var scorePerm = [16]int32{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}

// scoresF16Arch computes the whole blocks of tileShape() keys and returns
// how many keys it did.
func scoresF16Arch(s []float32, ld int, k []uint16, stride int, q []float32, dim, nq, nk int, scale float32) int {
	var kf [16 * maxTileDim]float32
	kb, _ := tileShape()
	blocks := nk / kb
	if kb == 16 {
		scoresF16AVX512(&s[0], ld, &k[0], stride, &q[0], dim/lanes, nq, blocks, &kf[0], &scorePerm[0], scale)
	} else {
		scoresF16AVX2(&s[0], ld, &k[0], stride, &q[0], dim/lanes, nq, blocks, &kf[0], scale)
	}
	return blocks * kb
}

func weightedSum4F16Arch(y, a *[4]*float32, v []uint16, stride int, dim, rows int) {
	if isa >= ISAAVX512 {
		weightedSum4F16AVX512(y, a, &v[0], stride, dim/64, rows)
		return
	}
	weightedSum4F16AVX2(y, a, &v[0], stride, dim/16, rows)
}

//go:noescape
func roundF16AVX512(x *float32, n16 int) bool

//go:noescape
func roundF16AVX2(x *float32, n8 int) bool

// roundF16Arch rounds the whole vectors of x and reports how many
// elements it did and whether any was a NaN.
func roundF16Arch(x []float32) (int, bool) {
	if isa >= ISAAVX512 && len(x) >= 16 {
		n := len(x) / 16
		return n * 16, roundF16AVX512(&x[0], n)
	}
	n := len(x) / 8
	return n * 8, roundF16AVX2(&x[0], n)
}
