//go:build !amd64

package kernels

func scoresF16Arch(s []float32, ld int, k []uint16, stride int, q []float32, dim, nq, nk int, scale float32) int {
	return 0
}

func weightedSum4F16Arch(y, a *[4]*float32, v []uint16, stride int, dim, rows int) {
	panic("kernels: no SIMD attention on this architecture")
}

func roundF16Arch(x []float32) (int, bool) { return 0, false }

func tileShape() (keys, dims int) { return 0, 0 }
