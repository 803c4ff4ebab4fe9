//go:build !amd64

package kernels

func dotArch(a, b []float32) (float32, bool)             { return 0, false }
func dotF16Arch(a []uint16, b []float32) (float32, bool) { return 0, false }
func axpyArch(y []float32, a float32, x []float32) int   { return 0 }
func axpyF16Arch(y []float32, a float32, x []uint16) int { return 0 }

func quantQ8_0Arch(x []float32, q []int8, qu []uint8, d []float32, sums []int32, s []float32) bool {
	return false
}

func quantQ8_KArch(x []float32, q []int8, d []float32, bs []int32, bs16 []int16) bool { return false }

func dotF16RowsArch(dst []float32, k []uint16, stride int, q []float32) bool { return false }

func axpyF16RowsArch(y []float32, a []float32, v []uint16, stride int) bool { return false }

func softmaxExpArch(x []float32, mx float32, sums *[8]float64) int { return 0 }

func siluMulArch(dst, gate, up []float32) int { return 0 }

func maxNaNArch(x []float32) (mx float32, nan, ok bool) { return 0, false, false }

func scaleArch(x []float32, s float32) int { return 0 }
