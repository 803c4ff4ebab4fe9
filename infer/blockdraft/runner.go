package blockdraft

import (
	"context"

	"github.com/muserhq/muser/infer/kernels"
)

// A Runner computes drafts: a *Model on the CPU, or a device's binding of
// a Model (Binder). Every Runner of a Model gives the same tokens and
// logits for the same requests, bit for bit; they differ in speed only.
type Runner interface {
	// Draft computes every request's block in one forward pass and
	// writes its draft to its Tokens, as Model.Draft does.
	Draft(ctx context.Context, reqs []Request) error
	// Logits computes reqs as Draft does, without writing their Tokens,
	// and returns the logits behind each draft token, as Model.Logits
	// does.
	Logits(ctx context.Context, reqs []Request) ([][][]float32, error)
	// Close releases what the Runner holds. Closing a device's Runner
	// leaves its Model open.
	Close() error
}

// A Binder is a device that computes a drafter's forward pass: the CUDA
// backend's device (infer/engine/cuda) is one. A drafter whose target runs
// on such a device runs there too (serve/draftlane), so a draft costs a
// fraction of a target step rather than a CPU's pass.
type Binder interface {
	// BindBlockDrafter copies m's weights to the device and returns a
	// Runner of its forward pass there. m must stay open while the Runner
	// is used. A weight type the device cannot multiply is an error
	// wrapping ErrUnsupported.
	BindBlockDrafter(m *Model) (Runner, error)
}

// Matrix is a weight matrix as the file holds it (Data read in place from
// the mapped file), named.
type Matrix struct {
	Name string
	*kernels.Matrix
}

// LayerWeights are one layer's weights.
type LayerWeights struct {
	AttnNorm, FFNNorm              []float32
	Wq, Wk, Wv, Wo, Gate, Up, Down Matrix
}

// Weights are a loaded drafter's parameters, for a Binder that computes
// its forward pass: the matrices it multiplies and the decoded vectors.
// The embeddings are not among them: Inputs computes the rows they give.
// Nothing in them may be modified.
type Weights struct {
	FC, Output Matrix
	Layers     []LayerWeights
	OutNorm    []float32
	// Rope is the cos, sin table of every position j < B: pair i of
	// position j at Rope[j·HeadDim + 2i] (cos) and [j·HeadDim + 2i + 1]
	// (sin), as the CPU's rotation reads it.
	Rope []float32
}

// Weights returns m's parameters for a device (Binder).
func (m *Model) Weights() Weights {
	w := Weights{
		FC:      Matrix{"fc.weight", m.fc},
		Output:  Matrix{"output.weight", m.output},
		OutNorm: m.outNorm,
		Rope:    m.rope,
		Layers:  make([]LayerWeights, len(m.layers)),
	}
	for i := range m.layers {
		l := &m.layers[i]
		n := func(s string, km *kernels.Matrix) Matrix { return Matrix{layerTensor(i, s), km} }
		w.Layers[i] = LayerWeights{
			AttnNorm: l.attnNorm, FFNNorm: l.ffnNorm,
			Wq: n("attn_q.weight", l.wq), Wk: n("attn_k.weight", l.wk), Wv: n("attn_v.weight", l.wv),
			Wo: n("attn_output.weight", l.wo), Gate: n("ffn_gate.weight", l.gate), Up: n("ffn_up.weight", l.up),
			Down: n("ffn_down.weight", l.down),
		}
	}
	return w
}

var _ Runner = (*Model)(nil)
