package cuda

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/blockdraft/blockdrafttest"
	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/ggml"
)

// draftModel writes a random block drafter for the embedded default
// model's tokenizer and opens it on the CPU.
func draftModel(t *testing.T, o blockdrafttest.Options) *blockdraft.Model {
	t.Helper()
	target, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "block.gguf")
	if err := blockdrafttest.WriteFile(path, target, o); err != nil {
		t.Fatal(err)
	}
	m, err := blockdraft.Open(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// draftRequests returns n requests with random hidden states and anchors
// and draft lengths from 1 to past the block.
func draftRequests(m *blockdraft.Model, n int, seed uint64) []blockdraft.Request {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := m.Config()
	reqs := make([]blockdraft.Request, n)
	for i := range reqs {
		h := make([]float32, c.TargetHidden)
		for j := range h {
			h[j] = float32(rng.NormFloat64())
		}
		reqs[i] = blockdraft.Request{Hidden: h, Anchor: int32(rng.IntN(c.Vocab)), Max: []int{1, c.BlockSize - 1, 3, 99}[i%4]}
	}
	return reqs
}

// TestGPUBlockDrafter: the block drafter on the GPU gives the CPU
// drafter's logits and tokens bit for bit, at several shapes and types
// (head dimensions for both attention score kernels, more wanted rows
// than one output product takes), whatever the batch, growing and
// shrinking its workspace; closing it leaves the model open.
func TestGPUBlockDrafter(t *testing.T) {
	dev := gpu(t)
	ctx := context.Background()
	small := blockdrafttest.Small()
	spec := blockdrafttest.Spec()
	for _, tc := range []struct {
		name  string
		o     blockdrafttest.Options
		calls []int // requests per call
	}{
		{"small-f32", small, []int{1, 3}},
		{"spec-q8_0", spec, []int{1, 4, 2}},
		{"b16-q8_0-chunks", blockdrafttest.Options{Hidden: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 512, Block: 16, Seed: 3, Type: ggml.TypeQ8_0}, []int{10, 1}},
		{"hd160-q8_0", blockdrafttest.Options{Hidden: 320, Layers: 1, Heads: 2, KVHeads: 1, FFN: 320, Block: 8, Seed: 4, Type: ggml.TypeQ8_0}, []int{2}},
		{"f16", blockdrafttest.Options{Hidden: 128, Layers: 1, Heads: 4, KVHeads: 4, FFN: 256, Block: 6, Seed: 5, Type: ggml.TypeF16}, []int{3}},
		{"q4_k", blockdrafttest.Options{Hidden: 256, Layers: 1, Heads: 4, KVHeads: 2, FFN: 512, Block: 8, Seed: 6, Type: ggml.TypeQ4_K}, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := draftModel(t, tc.o)
			r, err := dev.BindBlockDrafter(m)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for call, n := range tc.calls {
				reqs := draftRequests(m, n, uint64(10*call+n))
				want, err := m.Logits(ctx, reqs)
				if err != nil {
					t.Fatal(err)
				}
				got, err := r.Logits(ctx, reqs)
				if err != nil {
					t.Fatal(err)
				}
				if diff := sameLogits(got, want); diff != "" {
					t.Fatalf("call %d (%d requests): %s", call, n, diff)
				}
				gr, wr := draftRequests(m, n, uint64(10*call+n)), draftRequests(m, n, uint64(10*call+n))
				if err := r.Draft(ctx, gr); err != nil {
					t.Fatal(err)
				}
				if err := m.Draft(ctx, wr); err != nil {
					t.Fatal(err)
				}
				for i := range gr {
					if fmt.Sprint(gr[i].Tokens) != fmt.Sprint(wr[i].Tokens) || len(gr[i].Tokens) != min(gr[i].Max, tc.o.Block-1) {
						t.Fatalf("call %d request %d: GPU drafted %v, the CPU %v", call, i, gr[i].Tokens, wr[i].Tokens)
					}
				}
			}
		})
	}
}

// sameLogits describes the first difference between two Logits results,
// bit for bit; "" when there is none.
func sameLogits(got, want [][][]float32) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d requests, want %d", len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			return fmt.Sprintf("request %d: %d positions, want %d", i, len(got[i]), len(want[i]))
		}
		for j := range want[i] {
			for k := range want[i][j] {
				if math.Float32bits(got[i][j][k]) != math.Float32bits(want[i][j][k]) {
					return fmt.Sprintf("request %d position %d logit %d: %v (%08x), the CPU's %v (%08x)", i, j+1, k,
						got[i][j][k], math.Float32bits(got[i][j][k]), want[i][j][k], math.Float32bits(want[i][j][k]))
				}
			}
		}
	}
	return ""
}

// TestGPUBlockDrafterRefuses: a request the CPU drafter refuses is refused
// the same way on the GPU before anything is computed, and a closed
// Runner refuses to draft while its model still drafts.
func TestGPUBlockDrafterRefuses(t *testing.T) {
	dev := gpu(t)
	ctx := context.Background()
	m := draftModel(t, blockdrafttest.Small())
	r, err := dev.BindBlockDrafter(m)
	if err != nil {
		t.Fatal(err)
	}
	reqs := draftRequests(m, 2, 1)
	reqs[1].Anchor = int32(m.Vocab())
	reqs[0].Tokens = []int32{42}
	var re *blockdraft.RequestError
	if err := r.Draft(ctx, reqs); !errors.As(err, &re) || re.Index != 1 || re.Field != "Anchor" {
		t.Fatalf("Draft with an anchor outside the vocabulary: %v, want a *RequestError for request 1's Anchor", err)
	}
	if len(reqs[0].Tokens) != 1 {
		t.Fatalf("a refused call wrote request 0's tokens: %v", reqs[0].Tokens)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	good := draftRequests(m, 1, 2)
	if err := r.Draft(ctx, good); !errors.Is(err, blockdraft.ErrClosed) {
		t.Fatalf("Draft after Close: %v, want ErrClosed", err)
	}
	if err := m.Draft(ctx, good); err != nil || len(good[0].Tokens) == 0 {
		t.Fatalf("the model after its Runner's Close: %v, tokens %v", err, good[0].Tokens)
	}
}

// BenchmarkGPUBlockDraft times one Draft call of the trained shape
// (blockdrafttest.Spec: D 512, 2 layers, F 1536, B 8, Q8_0, the default
// model's 2,048 tokens) for 1 and 4 requests of a full block on the GPU,
// beside the same drafter on the CPU with 16 and 2 threads: ns/op per
// call (inputs made and uploaded, the pass, the logits copied back).
//
//	cuda.test -test.run '^$' -test.bench BenchmarkGPUBlockDraft
func BenchmarkGPUBlockDraft(b *testing.B) {
	dev := gpu(b)
	target, err := defaultmodel.File()
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "spec.gguf")
	if err := blockdrafttest.WriteFile(path, target, blockdrafttest.Spec()); err != nil {
		b.Fatal(err)
	}
	for _, on := range []string{"gpu", "cpu-16", "cpu-2"} {
		threads := map[string]int{"gpu": 1, "cpu-16": 16, "cpu-2": 2}[on]
		m, err := blockdraft.Open(path, threads)
		if err != nil {
			b.Fatal(err)
		}
		var r blockdraft.Runner = m
		if on == "gpu" {
			if r, err = dev.BindBlockDrafter(m); err != nil {
				b.Fatal(err)
			}
		}
		for _, n := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/requests=%d", on, n), func(b *testing.B) {
				reqs := draftRequests(m, n, 1)
				for i := range reqs {
					reqs[i].Max = m.BlockSize() - 1
				}
				ctx := context.Background()
				if err := r.Draft(ctx, reqs); err != nil { // warm the buffers
					b.Fatal(err)
				}
				for b.Loop() {
					if err := r.Draft(ctx, reqs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		if r != blockdraft.Runner(m) {
			r.Close()
		}
		m.Close()
	}
}
