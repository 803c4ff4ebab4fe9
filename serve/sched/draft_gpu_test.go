package sched

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/muserhq/muser/infer/defaultmodel"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cuda/cudatest"
	"github.com/muserhq/muser/infer/ggml"
)

// gpuModels opens the default model and its Q4_K copy on the GPU, or
// skips saying why there is none (MUSER_REQUIRE_CUDA=1 fails instead).
func gpuModels(t *testing.T) (target, draft *engine.Model) {
	t.Helper()
	dev := cudatest.Device(t)
	f, err := defaultmodel.File()
	if err != nil {
		t.Fatal(err)
	}
	if target, err = engine.Load(f, engine.Options{Device: dev}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { target.Close() })
	path := filepath.Join(t.TempDir(), "draft-q4k.gguf")
	if err := requantize(f, ggml.TypeQ4_K, path); err != nil {
		t.Fatal(err)
	}
	if draft, err = engine.Open(path, engine.Options{Device: dev}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { draft.Close() })
	return target, draft
}

// TestGPUSpeculationIsExact: on the CUDA backend, plain decoding and every
// draft lane (the draft model on the GPU too; a lane that conditions on
// the GPU's hidden states, each checked against the CPU engine's), alone
// and batched, give the
// events, finish reasons and stop words that plain decoding on the CPU
// gives. The two backends compute the same bits, and verification rows
// the same bits as one-token steps, so speculation on the GPU changes
// speed and nothing else, and a GPU host's output is a CPU host's.
func TestGPUSpeculationIsExact(t *testing.T) {
	target, draft := gpuModels(t)
	e := loadDefault(t)
	g := &env{model: target, tok: e.tok}
	for _, seed := range []uint64{1, 2} {
		cases := specCases(t, e, 6, seed)
		cpuPlain := e.newSched(t, nil, nil)
		gpuPlain := g.newSched(t, nil, nil)
		want := make([]fullOutput, len(cases))
		for i := range cases {
			want[i] = runAll(t, cpuPlain, cases[i:i+1])[0]
			sameOutput(t, fmt.Sprintf("seed%d/plain/request %d", seed, i), runAll(t, gpuPlain, cases[i:i+1])[0], want[i])
		}
		lanes := []struct {
			name string
			make func() Drafter
		}{
			{"lookup", func() Drafter { return &LookupDrafter{} }},
			{"model-q4k", func() Drafter { return NewModelDrafter(draft) }},
			{"model-self", func() Drafter { return NewModelDrafter(target) }},
			{"model-q4k-window20", func() Drafter { d := NewModelDrafter(draft); d.Window = 20; return d }},
			{"lookup+model-q4k", func() Drafter { return NewChainDrafter(&LookupDrafter{}, NewModelDrafter(draft)) }},
			// Wants hidden states, and checks each one the GPU hands out
			// against the CPU engine's (draft_hidden_test.go).
			{"hidden-probe", func() Drafter { return &hiddenProbe{model: e.model, want: true, seqs: fullSeqs(cases, want)} }},
		}
		for _, lane := range lanes {
			for _, dmax := range []int{1, 4, 8} {
				for _, slots := range []int{1, 3} {
					name := fmt.Sprintf("seed%d/%s/max%d/slots%d", seed, lane.name, dmax, slots)
					t.Run(name, func(t *testing.T) {
						d := lane.make()
						defer d.Close()
						s := g.newSched(t, nil, func(c *Config) { c.Drafter, c.DraftMax, c.Slots, c.DraftIgnoreCost = d, dmax, slots, true })
						runLane(t, s, cases, want, slots)
						if p, ok := d.(*hiddenProbe); ok {
							p.report(t)
						}
						st := s.DraftStats()
						if st.Drafted == 0 {
							t.Errorf("%s lane drafted nothing: the verification path was not exercised", lane.name)
						}
						if lane.name != "lookup" && st.Accepted == 0 {
							t.Errorf("%s lane: accepted %d of %d, want some", lane.name, st.Accepted, st.Drafted)
						}
						t.Logf("%s: %+v acceptance %.2f tokens/step %.2f", name, st, st.AcceptanceRate(), st.TokensPerStep())
					})
				}
			}
		}
	}
}
