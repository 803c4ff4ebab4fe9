//go:build unix

package template

import (
	"syscall"
	"time"
)

// processCPU returns the user+system CPU time the process has used. On a
// shared machine it measures the work done, not the time spent waiting for
// a CPU.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
