package engine

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"

	"github.com/zeebo/blake3"

	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/gguf"
	"github.com/muserhq/muser/infer/kernels"
	"github.com/muserhq/muser/infer/kvcache"
)

// KeyArchitecture is the metadata key naming a model's architecture.
const KeyArchitecture = "general.architecture"

// Options configures Load.
type Options struct {
	// Threads is the number of worker goroutines for matrix products and
	// attention; 0 means runtime.NumCPU(). Results do not depend on it.
	Threads int
	// Pool, if set, is used instead of a pool of Threads workers (several
	// models may share one); the Model does not close it.
	Pool *kernels.Pool
	// KV is the element type of KV caches (default f16).
	KV kvcache.DType
	// BatchSize is the most tokens one pass through the layers processes;
	// longer batches are split. 0 means 512. Results do not depend on it.
	BatchSize int
}

// Model is a loaded decoder-only transformer whose weights stay in the
// GGUF file's memory mapping. Its methods are safe for concurrent use;
// Forward calls run one at a time.
type Model struct {
	cfg     Config
	arch    Arch
	file    *gguf.File
	ownFile bool
	pool    *kernels.Pool
	ownPool bool
	kv      kvcache.DType
	batch   int

	tokEmbd *kernels.Matrix
	output  *kernels.Matrix
	outNorm []float32
	layers  []layer

	// ropeStep is base^(-2/RopeDim) rounded to float32, the ratio of
	// successive RoPE frequencies.
	ropeStep float32

	mu     sync.Mutex // serialises Forward; guards ws and closed
	ws     workspace
	closed bool

	digestOnce sync.Once
	digest     [32]byte
}

type layer struct {
	attnNorm          []float32
	wq, wk, wv, wo    *kernels.Matrix
	bq, bk, bv, bo    []float32
	qNorm, kNorm      []float32
	ffnNorm           []float32
	wGate, wUp, wDown *kernels.Matrix
}

// Open opens the GGUF file at path and loads it. The Model owns the file
// and unmaps it on Close.
func Open(path string, opt Options) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := Load(f, opt)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.ownFile = true
	return m, nil
}

// Load binds a model to the tensors of f, which must stay open while the
// Model is used. Weight matrices are not copied; norms, biases and RoPE
// factors (vectors) are decoded to float32.
func Load(f *gguf.File, opt Options) (*Model, error) {
	name, err := f.Meta.String(KeyArchitecture)
	if err != nil {
		return nil, &HParamError{Key: KeyArchitecture, Err: err}
	}
	a, ok := LookupArch(name)
	if !ok {
		return nil, &HParamError{Key: KeyArchitecture, Err: ErrUnknownArch,
			Reason: fmt.Sprintf("%q is not supported (supported: %v)", name, Archs())}
	}
	cfg, err := readConfig(&f.Meta, a)
	if err != nil {
		return nil, err
	}
	if opt.KV != kvcache.DTypeF16 && opt.KV != kvcache.DTypeF32 {
		return nil, fmt.Errorf("%w: kv dtype %v", ErrUnsupported, opt.KV)
	}
	m := &Model{cfg: *cfg, arch: a, file: f, kv: opt.KV, batch: opt.BatchSize}
	if m.batch <= 0 {
		m.batch = 512
	}
	if err := m.bind(); err != nil {
		return nil, err
	}
	if cfg.RopeDim > 0 {
		m.ropeStep = float32(math.Pow(float64(cfg.RopeBase), -2/float64(cfg.RopeDim)))
	}
	m.pool = opt.Pool
	if m.pool == nil {
		threads := opt.Threads
		if threads <= 0 {
			threads = runtime.NumCPU()
		}
		m.pool, m.ownPool = kernels.NewPool(threads), true
	}
	return m, nil
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

// matrix binds a 2-D weight of rows×cols (ggml shape [cols rows]).
func (b *binder) matrix(name string, p Presence, cols, rows int) (*kernels.Matrix, error) {
	t, err := b.tensor(name, p, cols, rows)
	if t == nil || err != nil {
		return nil, err
	}
	m, err := kernels.NewMatrix(t.Type, rows, cols, b.f.Data(t))
	if err != nil {
		return nil, &TensorError{Name: name, Err: errors.Join(ErrUnsupported, err),
			Reason: fmt.Sprintf("type %v: %v", t.Type, err)}
	}
	return m, nil
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

func (m *Model) bind() error {
	c := &m.cfg
	b := &binder{f: m.file}
	emb, ok := m.file.Tensor("token_embd.weight")
	if !ok {
		return &TensorError{Name: "token_embd.weight", Reason: "missing", Err: ErrTensor}
	}
	if len(emb.Shape) != 2 || emb.Shape[0] != int64(c.Hidden) || emb.Shape[1] < 1 || emb.Shape[1] > maxVocab {
		return &TensorError{Name: "token_embd.weight", Err: ErrTensor,
			Reason: fmt.Sprintf("shape %v, want [%d vocab] with vocab 1..%d", emb.Shape, c.Hidden, maxVocab)}
	}
	c.Vocab = int(emb.Shape[1])
	var err error
	if m.tokEmbd, err = b.matrix("token_embd.weight", Required, c.Hidden, c.Vocab); err != nil {
		return err
	}
	if !m.tokEmbd.Type.CanDequantize() {
		return &TensorError{Name: "token_embd.weight", Err: ErrUnsupported, Reason: fmt.Sprintf("type %v cannot be decoded", m.tokEmbd.Type)}
	}
	if m.outNorm, err = b.vector("output_norm.weight", Required, c.Hidden); err != nil {
		return err
	}
	if m.output, err = b.matrix("output.weight", Optional, c.Hidden, c.Vocab); err != nil {
		return err
	}
	if m.output == nil {
		m.output = m.tokEmbd // tied embeddings
	}
	if c.RopeFreqs, err = b.vector("rope_freqs.weight", m.arch.RopeFreqs, c.RopeDim/2); err != nil {
		return err
	}
	for _, v := range c.RopeFreqs {
		if v <= 0 {
			return &TensorError{Name: "rope_freqs.weight", Err: ErrTensor, Reason: fmt.Sprintf("holds %v, want positive factors", v)}
		}
	}
	q, kv := c.Heads*c.HeadDim, c.KVRow()
	m.layers = make([]layer, c.Layers)
	for i := range m.layers {
		l := &m.layers[i]
		n := func(s string) string { return fmt.Sprintf("blk.%d.%s", i, s) }
		steps := []func() error{
			func() (err error) { l.attnNorm, err = b.vector(n("attn_norm.weight"), Required, c.Hidden); return },
			func() (err error) { l.wq, err = b.matrix(n("attn_q.weight"), Required, c.Hidden, q); return },
			func() (err error) { l.wk, err = b.matrix(n("attn_k.weight"), Required, c.Hidden, kv); return },
			func() (err error) { l.wv, err = b.matrix(n("attn_v.weight"), Required, c.Hidden, kv); return },
			func() (err error) { l.wo, err = b.matrix(n("attn_output.weight"), Required, q, c.Hidden); return },
			func() (err error) { l.bq, err = b.vector(n("attn_q.bias"), m.arch.QKVBias, q); return },
			func() (err error) { l.bk, err = b.vector(n("attn_k.bias"), m.arch.QKVBias, kv); return },
			func() (err error) { l.bv, err = b.vector(n("attn_v.bias"), m.arch.QKVBias, kv); return },
			func() (err error) { l.bo, err = b.vector(n("attn_output.bias"), m.arch.OutBias, c.Hidden); return },
			func() (err error) { l.qNorm, err = b.vector(n("attn_q_norm.weight"), m.arch.QKNorm, c.HeadDim); return },
			func() (err error) { l.kNorm, err = b.vector(n("attn_k_norm.weight"), m.arch.QKNorm, c.HeadDim); return },
			func() (err error) { l.ffnNorm, err = b.vector(n("ffn_norm.weight"), Required, c.Hidden); return },
			func() (err error) { l.wGate, err = b.matrix(n("ffn_gate.weight"), Required, c.Hidden, c.FFN); return },
			func() (err error) { l.wUp, err = b.matrix(n("ffn_up.weight"), Required, c.Hidden, c.FFN); return },
			func() (err error) { l.wDown, err = b.matrix(n("ffn_down.weight"), Required, c.FFN, c.Hidden); return },
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return err
			}
		}
		if (l.bq == nil) != (l.bk == nil) || (l.bq == nil) != (l.bv == nil) {
			return &TensorError{Name: n("attn_q.bias"), Err: ErrTensor, Reason: "Q, K and V biases must be all present or all absent"}
		}
		if (l.qNorm == nil) != (l.kNorm == nil) {
			return &TensorError{Name: n("attn_q_norm.weight"), Err: ErrTensor, Reason: "Q and K norms must be both present or both absent"}
		}
		if i > 0 && ((l.bq != nil) != c.QKVBias || (l.qNorm != nil) != c.QKNorm || (l.bo != nil) != c.OutBias) {
			return &TensorError{Name: n("attn_q.weight"), Err: ErrTensor, Reason: "layers differ in which biases or norms they have"}
		}
		c.QKVBias, c.QKNorm, c.OutBias = l.bq != nil, l.qNorm != nil, l.bo != nil
	}
	return nil
}

// Config returns the model's hyperparameters.
func (m *Model) Config() Config { return m.cfg }

// File returns the GGUF file the model reads its weights from.
func (m *Model) File() *gguf.File { return m.file }

// Threads returns the number of worker goroutines.
func (m *Model) Threads() int { return m.pool.Threads() }

// KVType returns the element type of the model's KV caches.
func (m *Model) KVType() kvcache.DType { return m.kv }

// Close releases the worker pool (if the Model made it) and the file (if
// Open opened it). Sequences of the model must not be used afterwards.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.ownPool {
		m.pool.Close()
	}
	if m.ownFile {
		return m.file.Close()
	}
	return nil
}

// float32sDigest returns the first 16 hex digits of BLAKE3 over the
// little-endian bytes of v, domain separated.
func float32sDigest(v []float32) string {
	h := blake3.New()
	h.Write([]byte("muser/engine/float32s/v1\x00"))
	var b [4]byte
	for _, x := range v {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}
