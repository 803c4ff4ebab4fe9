package cuda

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cpu"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cu"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kvcache"
)

var (
	gpuOnce sync.Once
	gpuDev  *Device
	gpuWhy  string
)

// gpu returns the test GPU, or skips saying why there is none
// (MUSER_REQUIRE_CUDA=1 fails instead).
func gpu(t testing.TB) *Device {
	t.Helper()
	gpuOnce.Do(func() {
		d, err := New(Options{PTX: os.Getenv("MUSER_CUDA_IMAGE") == "ptx"})
		if err != nil {
			gpuWhy = err.Error()
			return
		}
		gpuDev = d
	})
	if gpuDev == nil {
		if os.Getenv("MUSER_REQUIRE_CUDA") == "1" {
			t.Fatalf("MUSER_REQUIRE_CUDA=1 and no GPU: %s", gpuWhy)
		}
		t.Skipf("no GPU: %s", gpuWhy)
	}
	return gpuDev
}

func open(t testing.TB, path string, dev engine.Device, kv kvcache.DType) *engine.Model {
	t.Helper()
	m, err := engine.Open(path, engine.Options{Device: dev, KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func cpuDev() engine.Device { return cpu.New(cpu.Options{}) }

const shared = "../../../../shared"

// TestNewWithoutDriver: with MUSER_LIBCUDA naming a missing file, New
// fails with ErrNoDriver and names the file (what --device cuda reports
// on a machine without a GPU).
func TestNewWithoutDriver(t *testing.T) {
	lib := filepath.Join(t.TempDir(), "libcuda.so.1")
	t.Setenv("MUSER_LIBCUDA", lib)
	d, err := New(Options{})
	if err == nil {
		d.Close()
		t.Fatal("New succeeded with MUSER_LIBCUDA naming a missing file")
	}
	if !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), lib) {
		t.Errorf("New: %v; want ErrNoDriver naming %s", err, lib)
	}
}

// TestGPUNumericsGolden: the GPU computes the recorded digests of the CPU
// engine's exact numerics (enginetest.Goldens), KV and logits.
func TestGPUNumericsGolden(t *testing.T) {
	d := gpu(t)
	for _, g := range enginetest.Goldens {
		t.Run(g.Name, func(t *testing.T) {
			m := open(t, enginetest.GoldenModel(t, g, shared), d, kvcache.DTypeF16)
			kv, logits := enginetest.NumericsDigests(t, m, g.Prompt())
			if kv != g.KV || logits != g.Logits {
				t.Errorf("GPU: KV digest %s (CPU %s), logits digest %s (CPU %s)", kv, g.KV, logits, g.Logits)
			}
		})
	}
}

// gpuQuants are the weight types the tiny models are written in (the
// types ggml.Quantize writes; Q6_K and the other K-quants' kernels are
// checked by internal/cukernels' suite).
var gpuQuants = []ggml.Type{ggml.TypeF32, ggml.TypeF16, ggml.TypeBF16, ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeQ5_0, ggml.TypeNVFP4}

// TestGPUExactness runs the exactness property test with the GPU model
// as the subject and the CPU engine as the variant: every split point,
// decode, mixed batches and the prefix store on the GPU, and the GPU's
// logits and KV equal to the CPU's, for each architecture and weight type
// (and an f32 cache, and a device whose decode attention is fused only up
// to shortFused positions).
func TestGPUExactness(t *testing.T) {
	d := gpu(t)
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		for _, q := range gpuQuants {
			t.Run(arch+"/"+q.String(), func(t *testing.T) {
				path := enginetest.TinyModel(t, arch, q)
				enginetest.CheckExactness(t, open(t, path, d, kvcache.DTypeF16), open(t, path, cpuDev(), kvcache.DTypeF16), 5, 1, 40)
			})
		}
	}
	t.Run("qwen2/Q4_K_M", func(t *testing.T) {
		path := mixModel(t, "qwen2")
		enginetest.CheckExactness(t, open(t, path, d, kvcache.DTypeF16), open(t, path, cpuDev(), kvcache.DTypeF16), 5, 1, 40)
	})
	t.Run("qwen2/Q8_0/fused-to-24", func(t *testing.T) {
		// Decode steps and runs on both sides of the fused attention's
		// bound.
		path := enginetest.TinyModel(t, "qwen2", ggml.TypeQ8_0)
		enginetest.CheckExactness(t, open(t, path, gpuShortFused(t), kvcache.DTypeF16), open(t, path, cpuDev(), kvcache.DTypeF16), 5, 1, 40)
	})
	t.Run("stories260K/f32-cache", func(t *testing.T) {
		g := enginetest.Goldens[0]
		path := enginetest.GoldenModel(t, g, shared)
		enginetest.CheckExactness(t, open(t, path, d, kvcache.DTypeF32), open(t, path, cpuDev(), kvcache.DTypeF32), 6, 2, 70)
	})
}

// mixModel writes the tiny random model of arch in llama.cpp's Q4_K_M mix
// (seed 7) and returns its path: matrices of one block in several types.
func mixModel(t *testing.T, arch string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny-"+arch+"-Q4_K_M.gguf")
	if err := enginetest.WriteMixFile(path, enginetest.Tiny(arch), enginetest.Q4KM, 7); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestGPUGroupedProducts checks which matrices the upload lays end to
// end: the Q, K and V matrices (and their biases) where the three share
// a type and a row length, the gate and up matrices likewise, each
// member a view at its offset in the group; a block whose V matrix has
// another type keeps three separate ones. The Q4_K_M-mix model must have
// blocks of both kinds, so that TestGPUExactness, which checks the
// results, covers both one-row paths.
func TestGPUGroupedProducts(t *testing.T) {
	d := gpu(t)
	for _, c := range []struct {
		name  string
		path  string
		mixed bool // some blocks grouped, some not
	}{{"qwen2/Q8_0", enginetest.TinyModel(t, "qwen2", ggml.TypeQ8_0), false}, {"qwen2/Q4_K_M", mixModel(t, "qwen2"), true}} {
		t.Run(c.name, func(t *testing.T) {
			m := open(t, c.path, d, kvcache.DTypeF16)
			b := m.Backend().(*backend)
			grouped := 0
			for i, l := range b.layers {
				q, k, v := b.w.Layers[i].Wq, b.w.Layers[i].Wk, b.w.Layers[i].Wv
				want := q.Type == k.Type && k.Type == v.Type
				if got := l.qkv.p != 0; got != want {
					t.Errorf("block %d: Q, K, V of %s, %s, %s grouped %v, want %v", i, q.Type, k.Type, v.Type, got, want)
				}
				if want {
					grouped++
					if l.wk.p != l.wq.p+cu.DevicePtr(len(q.Data)) || l.wv.p != l.wk.p+cu.DevicePtr(len(k.Data)) || l.qkv.t.Rows != q.Rows+k.Rows+v.Rows {
						t.Errorf("block %d: Q, K, V views at %#x, %#x, %#x, %d rows: not end to end", i, l.wq.p, l.wk.p, l.wv.p, l.qkv.t.Rows)
					}
				}
				if l.bq == 0 || l.bk != l.bq+cu.DevicePtr(4*q.Rows) || l.bv != l.bk+cu.DevicePtr(4*k.Rows) {
					t.Errorf("block %d: biases at %#x, %#x, %#x: not end to end", i, l.bq, l.bk, l.bv)
				}
				g, u := b.w.Layers[i].Gate, b.w.Layers[i].Up
				if got, want := l.gateUp.p != 0, g.Type == u.Type; got != want {
					t.Errorf("block %d: gate, up of %s, %s grouped %v, want %v", i, g.Type, u.Type, got, want)
				}
			}
			if all := len(b.layers); c.mixed && (grouped == 0 || grouped == all) || !c.mixed && grouped != all {
				t.Errorf("%d of %d blocks with Q, K and V grouped, want %s", grouped, all, map[bool]string{true: "some", false: "all"}[c.mixed])
			}
		})
	}
}

// TestGPUCrossDevice moves KV between the devices mid-prompt: a prefix
// computed on one and continued on the other gives the logits and KV of
// a whole prefill on either.
func TestGPUCrossDevice(t *testing.T) {
	d := gpu(t)
	path := enginetest.TinyModel(t, "qwen2", ggml.TypeQ8_0)
	g, c := open(t, path, d, kvcache.DTypeF16), open(t, path, cpuDev(), kvcache.DTypeF16)
	V := g.Config().Vocab
	p := enginetest.RandomTokens(rand.New(rand.NewPCG(1, 2)), 150, V)
	cseq, full := enginetest.Prefill(t, c, p)
	fullKV := enginetest.KVBytes(t, cseq, len(p))
	for _, s := range []int{1, 64, 77, 128, 149} {
		for _, dir := range []struct {
			name     string
			from, to *engine.Model
		}{{"cpu→gpu", c, g}, {"gpu→cpu", g, c}} {
			t.Run(fmt.Sprintf("%s/%d", dir.name, s), func(t *testing.T) {
				a, _ := dir.from.NewSequence(len(p))
				defer a.Close()
				if err := dir.from.Forward(context.Background(), []engine.Step{{Seq: a, Tokens: p[:s]}}); err != nil {
					t.Fatal(err)
				}
				kv, err := a.ExportBlock(0, s)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := dir.to.NewSequence(len(p))
				defer b.Close()
				if err := b.ImportBlock(p[:s], kv); err != nil {
					t.Fatal(err)
				}
				st := []engine.Step{{Seq: b, Tokens: p[s:], Output: engine.OutputAll}}
				if err := dir.to.Forward(context.Background(), st); err != nil {
					t.Fatal(err)
				}
				enginetest.RequireSame(t, "logits after the move", st[0].Logits, full[s*V:])
				if !slices.Equal(enginetest.KVBytes(t, b, len(p)), fullKV) {
					t.Fatal("KV after the move differs from the CPU's whole prefill")
				}
			})
		}
	}
}

// TestGPUKVErrors: a cache refuses positions past its maximum and a
// payload of the wrong size, leaving what it holds.
func TestGPUKVErrors(t *testing.T) {
	d := gpu(t)
	m := open(t, enginetest.TinyModel(t, "llama", ggml.TypeQ8_0), d, kvcache.DTypeF16)
	s, err := m.NewSequence(8)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.KV().Reserve(9); !errors.Is(err, kvcache.ErrFull) {
		t.Errorf("Reserve(9) of an 8-token cache: %v, want ErrFull", err)
	}
	if err := s.ImportBlock([]int32{1, 2}, make([]byte, 3)); !errors.Is(err, kvcache.ErrChunkSize) || s.Len() != 0 {
		t.Errorf("import of 3 bytes: %v (sequence %d tokens), want ErrChunkSize and nothing imported", err, s.Len())
	}
	if err := m.Forward(context.Background(), []engine.Step{{Seq: s, Tokens: []int32{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.KV().ExportBlock(nil, 2, 300); !errors.Is(err, kvcache.ErrFull) {
		t.Errorf("export past the maximum: %v, want ErrFull", err)
	}
}

// TestGPUHiddenStates: the GPU returns the CPU engine's final-normed
// hidden states bit for bit, with logits or without them, for every row
// or the last, in batches that mix sequences and more rows than one
// logits group.
func TestGPUHiddenStates(t *testing.T) {
	d := gpu(t)
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		for _, q := range []ggml.Type{ggml.TypeQ8_0, ggml.TypeQ4_K, ggml.TypeF16} {
			t.Run(arch+"/"+q.String(), func(t *testing.T) {
				path := enginetest.TinyModel(t, arch, q)
				g, c := open(t, path, d, kvcache.DTypeF16), open(t, path, cpuDev(), kvcache.DTypeF16)
				rng := rand.New(rand.NewPCG(3, 4))
				V := g.Config().Vocab
				prompts := [][]int32{enginetest.RandomTokens(rng, 150, V), enginetest.RandomTokens(rng, 9, V), enginetest.RandomTokens(rng, 1, V)}
				shapes := []struct{ out, hid engine.Output }{
					{engine.OutputAll, engine.OutputAll},
					{engine.OutputNone, engine.OutputAll},
					{engine.OutputLast, engine.OutputLast},
				}
				run := func(m *engine.Model) [][]float32 {
					var steps []engine.Step
					for i, p := range prompts {
						s, err := m.NewSequence(len(p))
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { s.Close() })
						sh := shapes[i%len(shapes)]
						steps = append(steps, engine.Step{Seq: s, Tokens: p, Output: sh.out, Hidden: sh.hid})
					}
					if err := m.Forward(context.Background(), steps); err != nil {
						t.Fatal(err)
					}
					var out [][]float32
					for _, st := range steps {
						out = append(out, st.HiddenStates, st.Logits)
					}
					return out
				}
				gg, cc := run(g), run(c)
				for i := range gg {
					what := "hidden states"
					if i%2 == 1 {
						what = "logits"
					}
					enginetest.RequireSame(t, fmt.Sprintf("step %d %s", i/2, what), gg[i], cc[i])
				}
			})
		}
	}
}
