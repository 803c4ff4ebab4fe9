package blockdraft

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kernels"
)

// Model is a loaded block drafter: its hyperparameters, its weight
// matrices bound for infer/kernels where the file holds them, its vectors
// decoded to float32, and a worker pool. Its methods are safe for
// concurrent use; Draft calls run one at a time.
type Model struct {
	cfg     Config
	file    *gguf.File
	ownFile bool
	pool    *kernels.Pool

	tokEmbd *kernels.Matrix // token_embd.weight: V rows of D
	mask    []float32       // mask_embd.weight decoded: B-1 rows of D
	fc      *kernels.Matrix // D rows of D+H
	layers  []layer
	outNorm []float32
	output  *kernels.Matrix // V rows of D
	rope    []float32       // [B][hd/2] pairs cos, sin of position j

	mu     sync.Mutex // serialises Draft; guards ws and closed
	ws     workspace
	closed bool
}

// layer is one transformer block's weights.
type layer struct {
	attnNorm, ffnNorm []float32
	wq, wk, wv, wo    *kernels.Matrix
	gate, up, down    *kernels.Matrix
}

// Open opens the GGUF file at path and loads it with a pool of threads
// workers (threads < 1: runtime.GOMAXPROCS(0)). The Model owns the file
// and unmaps it on Close.
func Open(path string, threads int) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := Load(f, threads)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.ownFile = true
	return m, nil
}

// Load binds a drafter to the tensors of f, which must stay open while the
// Model is used (Close does not close it), after checking every key and
// tensor docs/blockdraft.md names. Weight matrices are not copied; norm
// vectors and the mask embeddings are decoded to float32. The Model runs
// its products on a pool of threads workers (threads < 1:
// runtime.GOMAXPROCS(0)); results do not depend on threads.
func Load(f *gguf.File, threads int) (*Model, error) {
	cfg, err := readConfig(&f.Meta)
	if err != nil {
		return nil, err
	}
	m := &Model{cfg: cfg, file: f}
	if err := m.bind(); err != nil {
		return nil, err
	}
	m.rope = ropeTable(&cfg)
	m.pool = kernels.NewPool(threads)
	return m, nil
}

// bind looks up and checks every tensor.
func (m *Model) bind() error {
	c := &m.cfg
	D, H, V, B, F := c.Hidden, c.TargetHidden, c.Vocab, c.BlockSize, c.FFN
	Q, KV := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	var err error
	if m.tokEmbd, err = m.matrix("token_embd.weight", D, V, true); err != nil {
		return err
	}
	mask, err := m.matrix("mask_embd.weight", D, B-1, true)
	if err != nil {
		return err
	}
	m.mask = make([]float32, (B-1)*D)
	// The type decodes and the size was checked: Dequantize cannot fail.
	if err := ggml.Dequantize(mask.Type, mask.Data, m.mask); err != nil {
		return &TensorError{Name: "mask_embd.weight", Err: errors.Join(ErrUnsupported, err), Reason: err.Error()}
	}
	if m.fc, err = m.matrix("fc.weight", D+H, D, false); err != nil {
		return err
	}
	m.layers = make([]layer, c.Layers)
	for i := range m.layers {
		l := &m.layers[i]
		n := func(s string) string { return layerTensor(i, s) }
		if l.attnNorm, err = m.vector(n("attn_norm.weight"), D); err != nil {
			return err
		}
		for _, p := range []struct {
			dst        **kernels.Matrix
			name       string
			cols, rows int
		}{
			{&l.wq, n("attn_q.weight"), D, Q},
			{&l.wk, n("attn_k.weight"), D, KV},
			{&l.wv, n("attn_v.weight"), D, KV},
			{&l.wo, n("attn_output.weight"), Q, D},
		} {
			if *p.dst, err = m.matrix(p.name, p.cols, p.rows, false); err != nil {
				return err
			}
		}
		if l.ffnNorm, err = m.vector(n("ffn_norm.weight"), D); err != nil {
			return err
		}
		for _, p := range []struct {
			dst        **kernels.Matrix
			name       string
			cols, rows int
		}{
			{&l.gate, n("ffn_gate.weight"), D, F},
			{&l.up, n("ffn_up.weight"), D, F},
			{&l.down, n("ffn_down.weight"), F, D},
		} {
			if *p.dst, err = m.matrix(p.name, p.cols, p.rows, false); err != nil {
				return err
			}
		}
	}
	if m.outNorm, err = m.vector("output_norm.weight", D); err != nil {
		return err
	}
	m.output, err = m.matrix("output.weight", D, V, false)
	return err
}

// tensor looks name up and checks its dimensions against want (ggml
// order); trailing dimensions of 1 are equivalent to missing ones.
func (m *Model) tensor(name string, want ...int64) (*gguf.TensorInfo, error) {
	t, ok := m.file.Tensor(name)
	if !ok {
		return nil, &TensorError{Name: name, Reason: "missing", Err: ErrShape}
	}
	trim := func(s []int64) []int64 {
		for len(s) > 0 && s[len(s)-1] == 1 {
			s = s[:len(s)-1]
		}
		return s
	}
	if !slices.Equal(trim(t.Shape), trim(want)) {
		return nil, &TensorError{Name: name, Err: ErrShape, Reason: fmt.Sprintf("shape %v, want %v", t.Shape, want)}
	}
	return t, nil
}

// matrix binds the 2-D tensor name of rows rows of cols values (ggml shape
// [cols rows]). decode asks for a type ggml decodes (the embeddings, read
// row by row); otherwise the type must be one the kernels multiply.
func (m *Model) matrix(name string, cols, rows int, decode bool) (*kernels.Matrix, error) {
	t, err := m.tensor(name, int64(cols), int64(rows))
	if err != nil {
		return nil, err
	}
	if decode {
		if !t.Type.CanDequantize() {
			return nil, &TensorError{Name: name, Err: ErrUnsupported, Reason: fmt.Sprintf("type %v cannot be decoded", t.Type)}
		}
		return m.rawMatrix(t, rows, cols)
	}
	km, err := kernels.NewMatrix(t.Type, rows, cols, m.file.Data(t))
	if err != nil {
		if errors.Is(err, kernels.ErrUnsupportedType) {
			return nil, &TensorError{Name: name, Err: errors.Join(ErrUnsupported, err), Reason: fmt.Sprintf("type %v: %v", t.Type, err)}
		}
		return nil, &TensorError{Name: name, Err: errors.Join(ErrShape, err), Reason: err.Error()}
	}
	return km, nil
}

// rawMatrix describes an embedding, read row by row with ggml.Dequantize
// (never multiplied): only Type, Rows, Cols, Data and RowBytes are set.
func (m *Model) rawMatrix(t *gguf.TensorInfo, rows, cols int) (*kernels.Matrix, error) {
	rb, err := t.Type.RowSize(cols)
	if err != nil {
		return nil, &TensorError{Name: t.Name, Err: errors.Join(ErrUnsupported, err), Reason: fmt.Sprintf("type %v: %v", t.Type, err)}
	}
	data := m.file.Data(t)
	if len(data)/rb != rows || len(data)%rb != 0 {
		return nil, &TensorError{Name: t.Name, Err: ErrShape,
			Reason: fmt.Sprintf("%d bytes of data, want %d rows of %d", len(data), rows, rb)}
	}
	return &kernels.Matrix{Type: t.Type, Rows: rows, Cols: cols, Data: data, RowBytes: rb}, nil
}

// vector decodes the F32 norm vector name of n elements; every element
// must be finite.
func (m *Model) vector(name string, n int) ([]float32, error) {
	t, err := m.tensor(name, int64(n))
	if err != nil {
		return nil, err
	}
	if t.Type != ggml.TypeF32 {
		return nil, &TensorError{Name: name, Err: ErrUnsupported, Reason: fmt.Sprintf("type %v, want F32", t.Type)}
	}
	out := make([]float32, n)
	if err := ggml.Dequantize(t.Type, m.file.Data(t), out); err != nil {
		return nil, &TensorError{Name: name, Err: errors.Join(ErrShape, err), Reason: err.Error()}
	}
	for i, v := range out {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, &TensorError{Name: name, Err: ErrShape, Reason: fmt.Sprintf("element %d is %v", i, v)}
		}
	}
	return out, nil
}

// ropeTable returns cos θ, sin θ of every position j < B and pair i <
// hd/2, θ = j·base^(-2i/hd), each computed in float64 and rounded to
// float32.
func ropeTable(c *Config) []float32 {
	half := c.HeadDim / 2
	t := make([]float32, c.BlockSize*half*2)
	for j := range c.BlockSize {
		for i := range half {
			theta := float64(j) * math.Pow(float64(c.RopeBase), -2*float64(i)/float64(c.HeadDim))
			s, co := math.Sincos(theta)
			t[(j*half+i)*2], t[(j*half+i)*2+1] = float32(co), float32(s)
		}
	}
	return t
}

// Config returns the drafter's hyperparameters.
func (m *Model) Config() Config { return m.cfg }

// BlockSize returns B, the positions of a block: a draft holds at most
// B-1 tokens.
func (m *Model) BlockSize() int { return m.cfg.BlockSize }

// TargetHidden returns H, the length of the target hidden state a Request
// carries.
func (m *Model) TargetHidden() int { return m.cfg.TargetHidden }

// Vocab returns V, the number of tokens of the drafter's (the target's)
// vocabulary.
func (m *Model) Vocab() int { return m.cfg.Vocab }

// TargetName returns the target model's general.name as the drafter file
// records it (informational: CheckTarget does not compare it).
func (m *Model) TargetName() string { return m.cfg.TargetName }

// File returns the GGUF file the drafter reads its weights from (its
// metadata holds the target's tokenizer.ggml.* keys).
func (m *Model) File() *gguf.File { return m.file }

// Threads returns the number of goroutines that compute a Draft call.
func (m *Model) Threads() int { return m.pool.Threads() }

// CheckTarget reports whether the drafter fits a target model whose
// final-normed hidden state has hidden floats and whose vocabulary has
// vocab tokens (engine.Config's Hidden and Vocab): a difference is a
// *TargetMismatchError. It does not compare the tokenizers themselves:
// the caller compares tokenizer.FromGGUF(m.File().Meta) with the
// target's (serve/sched's CheckDraftTokenizer does that for draft models).
func (m *Model) CheckTarget(hidden, vocab int) error {
	if hidden != m.cfg.TargetHidden {
		return &TargetMismatchError{Field: "hidden size", Drafter: m.cfg.TargetHidden, Target: hidden}
	}
	if vocab != m.cfg.Vocab {
		return &TargetMismatchError{Field: "vocabulary size", Drafter: m.cfg.Vocab, Target: vocab}
	}
	return nil
}

// Close stops the worker pool and unmaps the file if Open opened it. A
// closed Model's Draft returns ErrClosed. Close is safe to call more than
// once.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.pool.Close()
	if m.ownFile {
		return m.file.Close()
	}
	return nil
}

// layerTensor names tensor s of layer i ("blk.I.S").
func layerTensor(i int, s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
