package cuda

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cu"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cukernels"
	"github.com/muserhq/muser/infer/engine/enginetest"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kvcache"
)

// extraGPU is one more handle on the test GPU, with other options,
// opened once.
type extraGPU struct {
	once sync.Once
	dev  *Device
	err  error
}

// get opens x with o (the image as gpu's) on its first call and returns
// it; what says how it differs, for the failure.
func (x *extraGPU) get(t testing.TB, o Options, what string) *Device {
	t.Helper()
	gpu(t)
	x.once.Do(func() {
		o.PTX = os.Getenv("MUSER_CUDA_IMAGE") == "ptx"
		x.dev, x.err = New(o)
	})
	if x.err != nil {
		t.Fatalf("a second handle on the GPU, %s: %v", what, x.err)
	}
	return x.dev
}

var directGPU, layeredGPU, shortFusedGPU, directShortFusedGPU extraGPU

// gpuDirect returns a handle on the test GPU that launches every kernel
// from the host (Options.NoGraphs).
func gpuDirect(t testing.TB) *Device {
	return directGPU.get(t, Options{NoGraphs: true}, "without graphs")
}

// shortFused is the context up to which gpuShortFused attends in one
// launch: the tests' decodes pass it, so their passes take both paths.
const shortFused = 24

// gpuShortFused returns a handle on the test GPU whose passes attend in
// one launch only up to shortFused positions (Options.FusedAttention);
// gpuDirectShortFused launches the same kernels from the host.
func gpuShortFused(t testing.TB) *Device {
	return shortFusedGPU.get(t, Options{FusedAttention: shortFused}, "with fused attention up to 24 positions")
}

func gpuDirectShortFused(t testing.TB) *Device {
	return directShortFusedGPU.get(t, Options{NoGraphs: true, FusedAttention: shortFused}, "without graphs, with fused attention up to 24 positions")
}

// gpuLayered returns a handle on the test GPU whose graph passes launch
// one graph per layer (Options.GraphLayers 1).
func gpuLayered(t testing.TB) *Device {
	return layeredGPU.get(t, Options{GraphLayers: 1}, "with a graph a layer")
}

// pair runs the same steps on a model of each device and requires the
// same logits bit for bit.
type pair struct {
	t    *testing.T
	m    [2]*engine.Model
	seqs [2][]*engine.Sequence
	rng  *rand.Rand
	V    int
}

// seq opens a sequence of up to max tokens on both models; its index.
func (p *pair) seq(max int) int {
	for i, m := range p.m {
		s, err := m.NewSequence(max)
		if err != nil {
			p.t.Fatal(err)
		}
		p.t.Cleanup(func() { s.Close() })
		p.seqs[i] = append(p.seqs[i], s)
	}
	return len(p.seqs[0]) - 1
}

// part is one sequence's share of a step: n tokens (random, or the
// previous step's greedy choice when n is 0).
type part struct {
	seq, n int
}

// step runs one Forward of the parts on both models, every row wanting
// logits, and compares them.
func (p *pair) step(what string, parts ...part) {
	p.t.Helper()
	var toks [][]int32
	for _, pt := range parts {
		if pt.n == 0 {
			s := p.seqs[0][pt.seq]
			toks = append(toks, []int32{int32((s.Len()*7919 + 13) % p.V)})
			continue
		}
		toks = append(toks, enginetest.RandomTokens(p.rng, pt.n, p.V))
	}
	var logits [2][][]float32
	for i, m := range p.m {
		var st []engine.Step
		for j, pt := range parts {
			st = append(st, engine.Step{Seq: p.seqs[i][pt.seq], Tokens: toks[j], Output: engine.OutputAll})
		}
		if err := m.Forward(context.Background(), st); err != nil {
			p.t.Fatalf("%s: %v", what, err)
		}
		for _, s := range st {
			logits[i] = append(logits[i], s.Logits)
		}
	}
	for j := range parts {
		enginetest.RequireSame(p.t, fmt.Sprintf("%s: part %d logits, graphs against direct launches", what, j), logits[0][j], logits[1][j])
	}
}

// sameKV requires every sequence's KV to be the same on both models.
func (p *pair) sameKV() {
	p.t.Helper()
	for j := range p.seqs[0] {
		a, b := p.seqs[0][j], p.seqs[1][j]
		if a.Len() != b.Len() {
			p.t.Fatalf("sequence %d: %d tokens with graphs, %d without", j, a.Len(), b.Len())
		}
		if a.Len() > 0 && !slices.Equal(enginetest.KVBytes(p.t, a, a.Len()), enginetest.KVBytes(p.t, b, b.Len())) {
			p.t.Fatalf("sequence %d: KV of %d tokens differs between graphs and direct launches", j, a.Len())
		}
	}
}

// TestGPUGraphsMatchDirect runs the same forward passes with graphs
// (passes of at most GraphRows rows) and with every kernel launched from
// the host, and requires the logits of every row and the KV bit for bit
// equal: decode at growing positions (the attention's grid and scratch
// stride change), batches that change shape, the row buffers and the
// attention scratch regrown in the middle, a pass too large for a graph,
// and KV imported into a fresh sequence. The launch counts show that the
// graph side ran graphs and reused them, and, where the decode attention
// is not fused (its grid follows the context), set changed nodes.
func TestGPUGraphsMatchDirect(t *testing.T) {
	if d := gpu(t); !d.graphs {
		t.Skipf("%s runs no graphs", d.Name())
	}
	dd := gpuDirect(t)
	for _, c := range []struct {
		arch  string
		q     ggml.Type
		kv    kvcache.DType
		d, dd *Device
	}{
		{"qwen2", ggml.TypeQ8_0, kvcache.DTypeF16, gpu(t), dd}, {"qwen3", ggml.TypeQ4_K, kvcache.DTypeF16, gpu(t), dd},
		{"llama", ggml.TypeF16, kvcache.DTypeF32, gpu(t), dd},
		// A graph launch a layer: passes split into several graphs.
		{"qwen2", ggml.TypeQ8_0, kvcache.DTypeF16, gpuLayered(t), dd},
		// Decode steps past shortFused launch the attention's separate
		// kernels, whose grids change with the context: graphs reused
		// with their nodes set.
		{"qwen2", ggml.TypeQ8_0, kvcache.DTypeF16, gpuShortFused(t), gpuDirectShortFused(t)},
	} {
		d, dd := c.d, c.dd
		t.Run(fmt.Sprintf("%s/%s/%s/%d-layer-graphs/fused-%d", c.arch, c.q, c.kv, d.glay, d.fusedN), func(t *testing.T) {
			path := enginetest.TinyModel(t, c.arch, c.q)
			p := &pair{t: t, m: [2]*engine.Model{open(t, path, d, c.kv), open(t, path, dd, c.kv)}, rng: rand.New(rand.NewPCG(5, 6))}
			p.V = p.m[0].Config().Vocab
			g0, x0 := d.Launches(), dd.Launches()

			a := p.seq(600)
			p.step("prefill A, 20 rows", part{a, 20})
			for i := range 50 { // positions 20..69: the scratch stride grows twice
				p.step(fmt.Sprintf("decode A %d", i), part{a, 0})
			}
			b := p.seq(600)
			p.step("prefill B, 9 rows, beside A's decode", part{b, 9}, part{a, 0})
			for i := range 10 {
				p.step(fmt.Sprintf("decode A and B %d", i), part{a, 0}, part{b, 0})
			}
			c := p.seq(600)
			p.step("64 rows: C's prefill, A and B decode (row buffers regrow)", part{c, 62}, part{a, 0}, part{b, 0})
			for i := range 5 {
				p.step(fmt.Sprintf("decode A after the regrowth %d", i), part{a, 0})
			}
			p.step("100 rows: B's prefill (no graph)", part{b, 100})
			for i := range 5 {
				p.step(fmt.Sprintf("decode A, B, C %d", i), part{a, 0}, part{b, 0}, part{c, 0})
			}
			// KV moved in: A's first 64 positions, exported from the direct
			// side, imported into a fresh sequence on both.
			kv, err := p.seqs[1][a].ExportBlock(0, 64)
			if err != nil {
				t.Fatal(err)
			}
			e := p.seq(600)
			for i := range p.m {
				if err := p.seqs[i][e].ImportBlock(slices.Repeat([]int32{1}, 64), kv); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 5 {
				p.step(fmt.Sprintf("decode E (imported) and A %d", i), part{e, 0}, part{a, 0})
			}
			p.step("E continues with 3 rows", part{e, 3})
			p.sameKV()

			g, x := d.Launches(), dd.Launches()
			if x.GraphRuns != x0.GraphRuns || x.Direct == x0.Direct {
				t.Errorf("the NoGraphs device ran %d graphs and %d direct launches, want none and some", x.GraphRuns-x0.GraphRuns, x.Direct-x0.Direct)
			}
			passes := g.Passes - g0.Passes
			runs := g.GraphRuns - g0.GraphRuns
			per := int64(d.graphLaunches(p.m[0].Config().Layers))
			if passes != x.Passes-x0.Passes || runs != per*(passes-1) {
				t.Errorf("%d passes with graphs, %d without; %d graph runs, want %d for every pass but the 100-row one",
					passes, x.Passes-x0.Passes, runs, per)
			}
			if built := g.GraphsBuilt - g0.GraphsBuilt; built < 2 || built >= runs {
				t.Errorf("%d graphs built for %d graph runs, want at least 2 and some runs reusing one", built, runs)
			}
			if d.fusedN <= shortFused && g.NodesUpdated == g0.NodesUpdated {
				t.Error("no graph node was updated: the reuse path did not run")
			}
			if kernels := g.GraphKernels - g0.GraphKernels + g.Direct - g0.Direct; kernels != x.Direct-x0.Direct {
				t.Errorf("%d kernels with graphs, %d without; want the same", kernels, x.Direct-x0.Direct)
			}
			t.Logf("graphs: %d passes, %d graph runs of %d kernels, %d graphs built, %d nodes set; direct: %d kernels",
				passes, runs, g.GraphKernels-g0.GraphKernels, g.GraphsBuilt-g0.GraphsBuilt, g.NodesUpdated-g0.NodesUpdated, x.Direct-x0.Direct)
		})
	}
}

// TestGraphRecorder checks, without a GPU, what a graph pass records: the
// launches in program order, each waiting for the one before it except
// inside parallel, where every branch waits for what came before it and
// the launch after waits for the end of every branch (nested branches
// included; an empty branch passes its start through; no branches change
// nothing).
func TestGraphRecorder(t *testing.T) {
	d := &Device{fns: map[string]cu.Function{}, raised: map[string]uint32{}}
	b := &backend{d: d}
	r := &run{b: b, graph: true}
	k := func(name string) {
		r.launch(cukernels.Launch{Kernel: name, Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}}, nil)
	}
	for _, name := range []string{"norm", "quant", "q", "qbias", "k", "v", "kv", "attn", "gate", "up", "silu", "empty", "end"} {
		d.fns[name] = cu.Function{}
	}
	k("norm")
	k("quant")
	r.parallel(func() { k("q"); k("qbias") }, func() {
		r.parallel(func() { k("k") }, func() { k("v") })
		k("kv")
	})
	k("attn")
	r.parallel(func() { k("gate") }, func() { k("up") }, func() {})
	k("silu")
	r.parallel()
	k("end")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := []struct {
		name  string
		after []int // nil: the launch before
	}{
		{"norm", nil}, {"quant", nil},
		{"q", []int{1}}, {"qbias", nil},
		{"k", []int{1}}, {"v", []int{1}}, {"kv", []int{4, 5}},
		{"attn", []int{3, 6}},
		{"gate", []int{7}}, {"up", []int{7}},
		{"silu", []int{7, 8, 9}},
		{"end", nil},
	}
	if len(b.rec) != len(want) {
		t.Fatalf("recorded %d launches, want %d", len(b.rec), len(want))
	}
	for i, w := range want {
		got := b.rec[i].After
		if (got == nil) != (w.after == nil) || !slices.Equal(got, w.after) {
			t.Errorf("launch %d (%s) waits for %v, want %v", i, w.name, got, w.after)
		}
	}
	if r.direct != 0 {
		t.Errorf("%d direct launches in a graph pass, want 0", r.direct)
	}
	// flush without a Ctx is not possible; the recorder is reset by it.
	r.err = errors.New("stop")
	r.flush()
	if len(b.rec) != 0 || len(b.deps) != 0 || r.tail != nil {
		t.Errorf("after flush: %d launches, %d dependencies, tail %v; want none", len(b.rec), len(b.deps), r.tail)
	}
}
