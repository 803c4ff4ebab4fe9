package cudatest

import (
	"os"
	"testing"

	"github.com/muserhq/muser/infer/engine/cuda"
)

// Device opens the first GPU for t and closes it when t and its cleanups
// registered later are done. Without a GPU it skips t, naming the reason;
// with MUSER_REQUIRE_CUDA=1 it fails t instead.
func Device(t testing.TB) *cuda.Device {
	t.Helper()
	dev, err := cuda.New(cuda.Options{})
	if err != nil {
		if os.Getenv("MUSER_REQUIRE_CUDA") == "1" {
			t.Fatalf("MUSER_REQUIRE_CUDA=1 and no GPU: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}
