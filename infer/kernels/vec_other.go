//go:build !amd64

package kernels

func dotArch(a, b []float32) (float32, bool)             { return 0, false }
func dotF16Arch(a []uint16, b []float32) (float32, bool) { return 0, false }
func axpyArch(y []float32, a float32, x []float32) int   { return 0 }
func axpyF16Arch(y []float32, a float32, x []uint16) int { return 0 }
