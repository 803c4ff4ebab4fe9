package engine

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
)

// Tensor is a weight matrix as the file holds it: Rows rows of Cols values
// of ggml type Type, row after row, in Data (usually the file's memory
// mapping; backends must not modify it). The front has checked that Data
// holds exactly Rows whole rows of that type.
type Tensor struct {
	Name       string
	Type       ggml.Type
	Rows, Cols int
	Data       []byte
}

// Layer holds one transformer block's weights. Vectors are decoded to
// float32; an optional vector the model lacks is nil.
type Layer struct {
	AttnNorm       []float32
	Wq, Wk, Wv, Wo Tensor
	Bq, Bk, Bv, Bo []float32
	QNorm, KNorm   []float32 // per-head RMSNorm weights (HeadDim values)
	FFNNorm        []float32
	Gate, Up, Down Tensor
}

// Weights is a model bound to its file, backend-neutral: the hyperparameters,
// every weight matrix where the file holds it, the vectors decoded to
// float32, and the RoPE schedule. A Device binds it for its kernels.
type Weights struct {
	Config  Config
	TokEmbd Tensor
	// Output is the output projection: output.weight, or token_embd.weight
	// when the model ties them (Tied).
	Output  Tensor
	Tied    bool
	OutNorm []float32
	Layers  []Layer
	Rope    Rope
}

// Matrices returns every weight matrix of w once (the output matrix only
// when it is not the embedding).
func (w *Weights) Matrices() []*Tensor {
	ms := []*Tensor{&w.TokEmbd}
	if !w.Tied {
		ms = append(ms, &w.Output)
	}
	for i := range w.Layers {
		l := &w.Layers[i]
		ms = append(ms, &l.Wq, &l.Wk, &l.Wv, &l.Wo, &l.Gate, &l.Up, &l.Down)
	}
	return ms
}

// bindWeights looks up the tensors of architecture a with hyperparameters
// cfg in f, checks their shapes and types, and decodes the vectors. It
// fills cfg.Vocab, cfg.RopeFreqs and the bias and norm switches.
func bindWeights(f *gguf.File, a Arch, cfg *Config) (*Weights, error) {
	b := &binder{f: f}
	w := &Weights{}
	c := cfg
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, &TensorError{Name: "token_embd.weight", Reason: "missing", Err: ErrTensor}
	}
	if len(emb.Shape) != 2 || emb.Shape[0] != int64(c.Hidden) || emb.Shape[1] < 1 || emb.Shape[1] > maxVocab {
		return nil, &TensorError{Name: "token_embd.weight", Err: ErrTensor,
			Reason: fmt.Sprintf("shape %v, want [%d vocab] with vocab 1..%d", emb.Shape, c.Hidden, maxVocab)}
	}
	c.Vocab = int(emb.Shape[1])
	var err error
	if err = b.matrix(&w.TokEmbd, "token_embd.weight", Required, c.Hidden, c.Vocab); err != nil {
		return nil, err
	}
	if !w.TokEmbd.Type.CanDequantize() {
		return nil, &TensorError{Name: "token_embd.weight", Err: ErrUnsupported, Reason: fmt.Sprintf("type %v cannot be decoded", w.TokEmbd.Type)}
	}
	if w.OutNorm, err = b.vector("output_norm.weight", Required, c.Hidden); err != nil {
		return nil, err
	}
	if err = b.matrix(&w.Output, "output.weight", Optional, c.Hidden, c.Vocab); err != nil {
		return nil, err
	}
	if w.Output.Data == nil {
		w.Output, w.Tied = w.TokEmbd, true
	}
	if c.RopeFreqs, err = b.vector("rope_freqs.weight", a.RopeFreqs, c.RopeDim/2); err != nil {
		return nil, err
	}
	for _, v := range c.RopeFreqs {
		if v <= 0 {
			return nil, &TensorError{Name: "rope_freqs.weight", Err: ErrTensor, Reason: fmt.Sprintf("holds %v, want positive factors", v)}
		}
	}
	w.Layers = make([]Layer, c.Layers)
	for i := range w.Layers {
		if err := b.layer(&w.Layers[i], i, a, c); err != nil {
			return nil, err
		}
	}
	w.Config = *c
	w.Rope = newRope(c)
	return w, nil
}

// binder looks tensors up and checks their shapes.
type binder struct {
	f *gguf.File
}

func (b *binder) tensor(name string, p Presence, shape ...int) (*gguf.TensorInfo, error) {
	t, ok := b.f.Tensor(name)
	if !ok {
		if p == Required {
			return nil, &TensorError{Name: name, Reason: "missing", Err: ErrTensor}
		}
		return nil, nil
	}
	if p == Absent {
		return nil, nil // present but unused by this architecture
	}
	got := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		got[i] = int(d)
	}
	// Trailing dimensions of 1 are equivalent to missing ones.
	for len(got) > len(shape) && got[len(got)-1] == 1 {
		got = got[:len(got)-1]
	}
	if !slices.Equal(got, shape) {
		return nil, &TensorError{Name: name, Err: ErrTensor,
			Reason: fmt.Sprintf("shape %v, want %v", t.Shape, shape)}
	}
	return t, nil
}

// matrix binds a 2-D weight of rows×cols (ggml shape [cols rows]) into
// dst, leaving dst zero when an optional tensor is absent. The type must
// be a block type whose rows hold whole blocks, and the data exactly rows
// such rows.
func (b *binder) matrix(dst *Tensor, name string, p Presence, cols, rows int) error {
	t, err := b.tensor(name, p, cols, rows)
	if t == nil || err != nil {
		return err
	}
	rb, err := t.Type.RowSize(cols)
	if err != nil {
		return &TensorError{Name: name, Err: errors.Join(ErrUnsupported, err),
			Reason: fmt.Sprintf("type %v: %v", t.Type, err)}
	}
	data := b.f.Data(t)
	if len(data) != rb*rows {
		return &TensorError{Name: name, Err: ErrTensor,
			Reason: fmt.Sprintf("%d bytes of data, want %d (%d rows of %d)", len(data), rb*rows, rows, rb)}
	}
	*dst = Tensor{Name: name, Type: t.Type, Rows: rows, Cols: cols, Data: data}
	return nil
}

// vector decodes a 1-D tensor of n elements to float32.
func (b *binder) vector(name string, p Presence, n int) ([]float32, error) {
	t, err := b.tensor(name, p, n)
	if t == nil || err != nil {
		return nil, err
	}
	out := make([]float32, n)
	if err := ggml.Dequantize(t.Type, b.f.Data(t), out); err != nil {
		return nil, &TensorError{Name: name, Err: errors.Join(ErrUnsupported, err),
			Reason: fmt.Sprintf("type %v: %v", t.Type, err)}
	}
	for i, v := range out {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, &TensorError{Name: name, Err: ErrTensor, Reason: fmt.Sprintf("element %d is %v", i, v)}
		}
	}
	return out, nil
}

// layer binds block i and updates the bias and norm switches of c.
func (b *binder) layer(l *Layer, i int, a Arch, c *Config) error {
	q, kv := c.Heads*c.HeadDim, c.KVRow()
	n := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
	steps := []func() error{
		func() (err error) { l.AttnNorm, err = b.vector(n("attn_norm.weight"), Required, c.Hidden); return },
		func() error { return b.matrix(&l.Wq, n("attn_q.weight"), Required, c.Hidden, q) },
		func() error { return b.matrix(&l.Wk, n("attn_k.weight"), Required, c.Hidden, kv) },
		func() error { return b.matrix(&l.Wv, n("attn_v.weight"), Required, c.Hidden, kv) },
		func() error { return b.matrix(&l.Wo, n("attn_output.weight"), Required, q, c.Hidden) },
		func() (err error) { l.Bq, err = b.vector(n("attn_q.bias"), a.QKVBias, q); return },
		func() (err error) { l.Bk, err = b.vector(n("attn_k.bias"), a.QKVBias, kv); return },
		func() (err error) { l.Bv, err = b.vector(n("attn_v.bias"), a.QKVBias, kv); return },
		func() (err error) { l.Bo, err = b.vector(n("attn_output.bias"), a.OutBias, c.Hidden); return },
		func() (err error) { l.QNorm, err = b.vector(n("attn_q_norm.weight"), a.QKNorm, c.HeadDim); return },
		func() (err error) { l.KNorm, err = b.vector(n("attn_k_norm.weight"), a.QKNorm, c.HeadDim); return },
		func() (err error) { l.FFNNorm, err = b.vector(n("ffn_norm.weight"), Required, c.Hidden); return },
		func() error { return b.matrix(&l.Gate, n("ffn_gate.weight"), Required, c.Hidden, c.FFN) },
		func() error { return b.matrix(&l.Up, n("ffn_up.weight"), Required, c.Hidden, c.FFN) },
		func() error { return b.matrix(&l.Down, n("ffn_down.weight"), Required, c.FFN, c.Hidden) },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	if (l.Bq == nil) != (l.Bk == nil) || (l.Bq == nil) != (l.Bv == nil) {
		return &TensorError{Name: n("attn_q.bias"), Err: ErrTensor, Reason: "Q, K and V biases must be all present or all absent"}
	}
	if (l.QNorm == nil) != (l.KNorm == nil) {
		return &TensorError{Name: n("attn_q_norm.weight"), Err: ErrTensor, Reason: "Q and K norms must be both present or both absent"}
	}
	if i > 0 && ((l.Bq != nil) != c.QKVBias || (l.QNorm != nil) != c.QKNorm || (l.Bo != nil) != c.OutBias) {
		return &TensorError{Name: n("attn_q.weight"), Err: ErrTensor, Reason: "layers differ in which biases or norms they have"}
	}
	c.QKVBias, c.QKNorm, c.OutBias = l.Bq != nil, l.QNorm != nil, l.Bo != nil
	return nil
}
