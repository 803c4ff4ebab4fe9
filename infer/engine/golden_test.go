package engine_test

import (
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/enginetest"
)

// TestNumericsGolden pins muser's exact numerics to recorded bits
// (enginetest.Goldens): the digests of the KV and logits of a prefill
// (160 tokens, and 600 on one model, past two of the weighted sum's parts)
// on stories260K and on tiny random models of each architecture at
// several weight types, computed by the CPU engine. A change to any
// kernel's or the forward pass's arithmetic fails here until
// NumericsVersion is bumped and the digests are recorded again; the CUDA
// backend's tests hold it to the same digests.
func TestNumericsGolden(t *testing.T) {
	if engine.NumericsVersion != enginetest.GoldenNumerics {
		t.Fatalf("NumericsVersion %d: record enginetest.Goldens for it", engine.NumericsVersion)
	}
	for _, g := range enginetest.Goldens {
		t.Run(g.Name, func(t *testing.T) {
			m := openModel(t, enginetest.GoldenModel(t, g, filepath.Join("..", "..", "..", "shared")), opts{Threads: 2})
			kv, logits := enginetest.NumericsDigests(t, m, g.Prompt())
			if kv != g.KV || logits != g.Logits {
				t.Errorf("numerics %s changed: KV digest %s (recorded %s), logits digest %s (recorded %s)",
					engine.EngineName, kv, g.KV, logits, g.Logits)
			}
		})
	}
}
