package cpu

import (
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/kvcache"
)

var tinyModel = enginetest.TinyModel

// openModel opens path on the CPU device at threads threads.
func openModel(t testing.TB, path string, threads int) *engine.Model {
	t.Helper()
	return openModelBatch(t, path, threads, 0)
}

func openModelBatch(t testing.TB, path string, threads, batch int) *engine.Model {
	t.Helper()
	m, err := engine.Open(path, engine.Options{Device: New(Options{Threads: threads}), BatchSize: batch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// backendOf returns m's CPU backend.
func backendOf(m *engine.Model) *backend { return m.Backend().(*backend) }

// cacheOf returns s's host-memory cache.
func cacheOf(s *engine.Sequence) *kvcache.Cache { return s.KV().(*kvcache.Cache) }

// checkExactness runs enginetest.CheckExactness on the model at path at 3
// threads, against itself at 1 thread with batches of 5 tokens.
func checkExactness(t *testing.T, path string, prompts, length int) {
	m := openModel(t, path, 3)
	m1 := openModelBatch(t, path, 1, 5)
	enginetest.CheckExactness(t, m, m1, uint64(len(path)), prompts, length)
}
