package leakcheck

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// grace bounds how long Main waits for goroutines to exit.
const grace = 10 * time.Second

// ignored are substrings of stacks that belong to the runtime or testing.
var ignored = []string{
	"testing.(*M).",
	"testing.runFuzzing",
	"testing.(*F).",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"runtime/trace.",
}

// Main runs the tests and then checks for leaked goroutines. Use it as
//
//	func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if code != 0 {
		return code
	}
	deadline := time.Now().Add(grace)
	for {
		leaks := Leaked()
		if len(leaks) == 0 {
			return 0
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "leakcheck: %d goroutines still running after the tests:\n\n%s\n", len(leaks), strings.Join(leaks, "\n\n"))
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Leaked returns the stacks of the goroutines other than the caller's that
// are not the runtime's or the testing package's.
func Leaked() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for i, g := range strings.Split(string(buf), "\n\n") {
		if i == 0 || strings.TrimSpace(g) == "" {
			continue // the calling goroutine
		}
		if isIgnored(g) {
			continue
		}
		out = append(out, g)
	}
	return out
}

func isIgnored(stack string) bool {
	for _, s := range ignored {
		if strings.Contains(stack, s) {
			return true
		}
	}
	return false
}
