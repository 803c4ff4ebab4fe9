//go:build !amd64

package kernels

// roundBF16Arch reports false: other architectures round in Go.
func roundBF16Arch(src, dst []float32) (bf16Range, bool) { return 0, false }

// bf16PackWanted reports false: only amd64 has the VDPBF16PS kernels.
func bf16PackWanted(n, cols int) bool { return false }
