//go:build !unix

package kernels

import "time"

// processCPU is not measured on this platform.
func processCPU() time.Duration { return 0 }
