//go:build unix

package engine_test

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// BenchmarkPrefillLong prefills MUSER_BENCH_PROMPT tokens (default 2048)
// of the model at MUSER_BENCH_MODEL (skipped when unset) at 2 threads: the
// long-context attention benchmark (docs/benchmarks.md).
func BenchmarkPrefillLong(b *testing.B) {
	path := os.Getenv("MUSER_BENCH_MODEL")
	if path == "" {
		b.Skip("set MUSER_BENCH_MODEL to a GGUF file (e.g. a Qwen2.5-0.5B-shaped Q8_0 from scripts/bench.sh)")
	}
	n := 2048
	if s := os.Getenv("MUSER_BENCH_PROMPT"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("MUSER_BENCH_PROMPT=%q: want a positive token count", s)
		}
		n = v
	}
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	benchForward(b, path, 2, n, false)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "tok/cpu-s")
}
