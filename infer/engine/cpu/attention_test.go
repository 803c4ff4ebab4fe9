package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kernels"
)

// attentionPerQuery is the phase-1 attention, one query head at a time
// with the row kernels: the definition the tiled attention must match bit
// for bit.
func attentionPerQuery(m *backend, li int, rows []row, q, att []float32) {
	c := m.cfg
	D, Q, stride := c.HeadDim, c.Heads*c.HeadDim, c.KVRow()
	group := c.Heads / c.KVHeads
	scale := float32(1 / math.Sqrt(float64(D)))
	qr := make([]float32, D)
	for i, r := range rows {
		n := r.pos + 1
		sc := make([]float32, n)
		for h := range c.Heads {
			out := att[i*Q+h*D : i*Q+(h+1)*D]
			clear(out)
			off := (h / group) * D
			copy(qr, q[i*Q+h*D:i*Q+(h+1)*D])
			roundF16s(qr)
			kernels.DotF16Rows(sc, r.kv.K16(li)[off:], stride, qr)
			for j := range sc {
				sc[j] *= scale
			}
			kernels.Softmax(sc)
			roundF16s(sc)
			kernels.AXPYF16Parts(out, make([]float32, D), sc, r.kv.V16(li)[off:], stride)
		}
	}
}

// TestAttentionMatchesPerQuery runs the tiled attention on batches that
// cross the tile and key-block sizes — long runs of one sequence, two
// sequences interleaved, single decode rows, positions that skip — and
// compares every output with the per-query definition, on every kernel
// variant and at 1 and 3 threads.
func TestAttentionMatchesPerQuery(t *testing.T) {
	for _, arch := range []string{"qwen2", "qwen3", "llama", "gqa7"} {
		var path string
		if arch == "gqa7" {
			// Qwen2.5-0.5B's grouping: 7 query heads per KV head, so
			// tiles of 4 tokens hold 28 queries.
			s := enginetest.Tiny("qwen2")
			s.Name, s.Heads, s.KVHeads = "tiny-gqa7", 14, 2
			path = filepath.Join(t.TempDir(), "gqa7.gguf")
			if err := enginetest.WriteFile(path, s, ggml.TypeQ8_0, 3); err != nil {
				t.Fatal(err)
			}
		} else {
			path = tinyModel(t, arch, ggml.TypeQ8_0)
		}
		for _, threads := range []int{1, 3, 16} {
			m := openModel(t, path, threads)
			c := m.Config()
			r := rand.New(rand.NewPCG(5, uint64(threads)))
			const L = 300
			a, _ := enginetest.Prefill(t, m, enginetest.RandomTokens(r, L, c.Vocab))
			b, _ := enginetest.Prefill(t, m, enginetest.RandomTokens(r, 90, c.Vocab))
			batches := map[string][]row{}
			var long, mixed, decode, gaps []row
			for p := range L {
				long = append(long, row{kv: cacheOf(a), pos: p})
			}
			for p := range 90 {
				mixed = append(mixed, row{kv: cacheOf(a), pos: 150 + p}, row{kv: cacheOf(b), pos: p})
			}
			decode = []row{{kv: cacheOf(a), pos: L - 1}, {kv: cacheOf(b), pos: 89}, {kv: cacheOf(a), pos: 17}}
			for p := 3; p < L; p += 7 {
				gaps = append(gaps, row{kv: cacheOf(a), pos: p})
			}
			batches["long"], batches["mixed"], batches["decode"], batches["gaps"] = long, mixed, decode, gaps
			Q := c.Heads * c.HeadDim
			for name, rows := range batches {
				q := make([]float32, len(rows)*Q)
				for i := range q {
					q[i] = float32(r.NormFloat64() * 2)
				}
				want := make([]float32, len(q))
				old := kernels.SetISA(kernels.ISAGeneric)
				attentionPerQuery(backendOf(m), 1, rows, q, want)
				kernels.SetISA(old)
				for v := kernels.ISAGeneric; v <= kernels.BestISA(); v++ {
					t.Run(fmt.Sprintf("%s/threads%d/%s/%s", arch, threads, name, v), func(t *testing.T) {
						defer kernels.SetISA(kernels.SetISA(v))
						got := make([]float32, len(q))
						backendOf(m).attention(1, rows, slices.Clone(q), got)
						enginetest.RequireSame(t, "attention output", got, want)
					})
				}
			}
		}
	}
}

// TestExactnessLong runs the exactness property test (threads, every
// split point, decode vs prefill, mixed batches) on prompts long enough
// to span many attention tiles and key blocks.
func TestExactnessLong(t *testing.T) {
	if testing.Short() {
		t.Skip("long prompts; skipped in -short")
	}
	for _, arch := range []string{"qwen2", "qwen3"} {
		t.Run(arch, func(t *testing.T) {
			checkExactness(t, tinyModel(t, arch, ggml.TypeQ8_0), 1, 130)
		})
	}
}

// TestPrefillVariants checks that a long prefill's logits and KV are the
// same bits on every kernel variant.
func TestPrefillVariants(t *testing.T) {
	path := tinyModel(t, "qwen2", ggml.TypeQ8_0)
	m := openModel(t, path, 2)
	p := enginetest.RandomTokens(rand.New(rand.NewPCG(9, 9)), 260, m.Config().Vocab)
	old := kernels.SetISA(kernels.ISAGeneric)
	seq, want := enginetest.Prefill(t, m, p)
	wantKV := enginetest.KVBytes(t, seq, len(p))
	kernels.SetISA(old)
	for v := kernels.ISAGeneric + 1; v <= kernels.BestISA(); v++ {
		t.Run(v.String(), func(t *testing.T) {
			defer kernels.SetISA(kernels.SetISA(v))
			seq, got := enginetest.Prefill(t, m, p)
			enginetest.RequireSame(t, "logits", got, want)
			if !slices.Equal(enginetest.KVBytes(t, seq, len(p)), wantKV) {
				t.Fatal("KV differs from the portable variant")
			}
		})
	}
}
