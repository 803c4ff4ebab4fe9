package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine/cuda/cudatest"
)

// TestBenchProfileGPU: bench --device cuda --profile prints the kernels'
// device times after a plain bench and after a draft-lane bench alike. It
// skips without a GPU (MUSER_REQUIRE_CUDA=1 fails instead).
func TestBenchProfileGPU(t *testing.T) {
	cudatest.Device(t) // the bench opens its own
	dir := t.TempDir()
	model := filepath.Join(dir, "default.gguf")
	text := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(model, defaultmodel.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(text, []byte(strings.Repeat("Once upon a time, there was a little girl who liked to play. ", 20)), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"bench", "--model", model, "--device", "cuda", "--profile", "--prompt-tokens", "64", "--gen-tokens", "24", "--reps", "1"}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"plain", nil},
		{"draft lane", []string{"--draft-lookup", "--text", text, "--temperature", "0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runCLI(t, append(base, c.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if !strings.Contains(errOut, "device time by kernel") || !strings.Contains(errOut, "launches") {
				t.Errorf("stderr lists no kernel times:\n%s", errOut)
			}
		})
	}
}
