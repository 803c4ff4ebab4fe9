package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kvcache"
)

// sharedModel returns the path of a model in ../shared, or skips.
func sharedModel(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared test model absent (%v); CI has ../shared beside the clone", err)
	}
	return p
}

// opts configures openModel: the CPU device's threads and the front's
// options.
type opts struct {
	Threads   int
	BatchSize int
	KV        kvcache.DType
	Mapped    bool
}

// cpuOptions returns Options for the CPU device at threads threads.
func cpuOptions(threads int) engine.Options {
	return engine.Options{Device: cpu.New(cpu.Options{Threads: threads})}
}

// openModel opens path on the CPU device.
func openModel(t testing.TB, path string, o opts) *engine.Model {
	t.Helper()
	m, err := engine.Open(path, engine.Options{Device: cpu.New(cpu.Options{Threads: o.Threads}), BatchSize: o.BatchSize, KV: o.KV, Mapped: o.Mapped})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// checkExactness runs enginetest.CheckExactness on the model at path at 3
// threads, against itself at 1 thread with batches of 5 tokens.
func checkExactness(t *testing.T, path string, prompts, length int) {
	m := openModel(t, path, opts{Threads: 3})
	m1 := openModel(t, path, opts{Threads: 1, BatchSize: 5})
	enginetest.CheckExactness(t, m, m1, uint64(len(path)), prompts, length)
}

// TestOpenMemories checks where Open holds a model for the CPU device
// (resident memory, or the mapping with Options.Mapped) and that the two
// compute the same bits.
func TestOpenMemories(t *testing.T) {
	path := sharedModel(t, "stories260K.gguf")
	res := openModel(t, path, opts{Threads: 2})
	mapped := openModel(t, path, opts{Threads: 1, BatchSize: 7, Mapped: true})
	for _, c := range []struct {
		m    *engine.Model
		want gguf.Memory
	}{{res, gguf.Resident}, {mapped, gguf.Mapped}} {
		if got := c.m.File().Memory(); got != c.want {
			t.Errorf("File().Memory() = %v, want %v", got, c.want)
		}
	}
	enginetest.CheckExactness(t, res, mapped, 7, 2, 40)
}

func TestExactnessStories(t *testing.T) {
	checkExactness(t, sharedModel(t, "stories260K.gguf"), 3, 70)
}

func TestExactnessF32Cache(t *testing.T) {
	path := sharedModel(t, "stories260K.gguf")
	m := openModel(t, path, opts{Threads: 2, KV: kvcache.DTypeF32})
	m1 := openModel(t, path, opts{Threads: 1, KV: kvcache.DTypeF32})
	r := rand.New(rand.NewPCG(3, 3))
	p := enginetest.RandomTokens(r, 40, m.Config().Vocab)
	_, full := enginetest.Prefill(t, m, p)
	d, _ := m1.NewSequence(64)
	st := []engine.Step{{Seq: d, Output: engine.OutputLast}}
	for i := range p {
		st[0].Tokens = p[i : i+1]
		if err := m1.Forward(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		enginetest.RequireSame(t, fmt.Sprintf("f32 cache, decoded token %d", i), st[0].Logits, full[i*m.Config().Vocab:(i+1)*m.Config().Vocab])
	}
	if got := m.KVString(64); got != "f32;block=64;layout=lkv1" {
		t.Errorf("KVString = %q, want f32;block=64;layout=lkv1", got)
	}
}
