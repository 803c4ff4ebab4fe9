package kernels

//go:noescape
func scoresF16AVX512(s *float32, ld int, k *uint16, stride int, q *float32, n16, nq, blocks int, kf *float32, perm *int32, scale float32)

//go:noescape
func weightedSum4F16AVX512(y *[4]*float32, a *[4]*float32, v *uint16, stride int, n64, rows int)

// scorePerm puts the 16 sums of scoresF16AVX512's transposing reduction
// back in key order: key c lies in lane 4·(c mod 4) + c/4.
var scorePerm = [16]int32{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}

// scoresF16Arch computes the whole blocks of 16 keys and returns how many
// keys it did.
func scoresF16Arch(s []float32, ld int, k []uint16, stride int, q []float32, dim, nq, nk int, scale float32) int {
	var kf [16 * maxTileDim]float32
	blocks := nk / 16
	scoresF16AVX512(&s[0], ld, &k[0], stride, &q[0], dim/lanes, nq, blocks, &kf[0], &scorePerm[0], scale)
	return blocks * 16
}

func weightedSum4F16Arch(y, a *[4]*float32, v []uint16, stride int, dim, rows int) {
	weightedSum4F16AVX512(y, a, &v[0], stride, dim/64, rows)
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
