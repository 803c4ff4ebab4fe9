//go:build !unix

package blockdraft_test

import "time"

// processCPU returns 0: getrusage is a Unix call.
func processCPU() time.Duration { return 0 }
