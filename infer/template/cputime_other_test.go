//go:build !unix

package template

import "time"

// processCPU is not measured on this platform.
func processCPU() time.Duration { return 0 }
