package cpu

import (
	"errors"
	"fmt"
	"math"
	"runtime"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/kernels"
	"github.com/muserhq/muser/infer/kvcache"
)

// DefaultMaxRows is the most tokens one pass through the layers processes
// (Backend.MaxRows); the engine front splits longer batches.
const DefaultMaxRows = 512

// Options configures the CPU device.
type Options struct {
	// Threads is the number of worker goroutines for matrix products and
	// attention; 0 means runtime.NumCPU(). Results do not depend on it.
	Threads int
	// Pool, if set, is used instead of a pool of Threads workers (several
	// models may share one); backends do not close it.
	Pool *kernels.Pool
}

// Device is the CPU engine as an engine.Device.
type Device struct {
	opts Options
}

// New returns the CPU device.
func New(o Options) *Device {
	if o.Threads <= 0 {
		o.Threads = runtime.NumCPU()
	}
	if o.Pool != nil {
		o.Threads = o.Pool.Threads()
	}
	return &Device{opts: o}
}

// Name returns "cpu (N threads, ISA)", ISA the kernels' instruction-set
// variant (kernels.CurrentISA: amx, avx512, avx2 or generic).
func (d *Device) Name() string {
	return fmt.Sprintf("cpu (%d threads, %s)", d.opts.Threads, kernels.CurrentISA())
}

// backend is one model bound for the CPU kernels.
type backend struct {
	w       *engine.Weights
	cfg     *engine.Config
	pool    *kernels.Pool
	ownPool bool
	kv      kvcache.DType

	tokEmbd *kernels.Matrix
	output  *kernels.Matrix
	layers  []layer

	ws workspace
}

// layer holds one block's matrices bound for the kernels; its vectors are
// the front's.
type layer struct {
	*engine.Layer
	wq, wk, wv, wo    *kernels.Matrix
	wGate, wUp, wDown *kernels.Matrix
}

// HostWeights reports true: every pass reads the weights where they lie
// in host memory (engine.Open holds them resident).
func (d *Device) HostWeights() bool { return true }

// Bind binds w's matrices for the kernels (reading them where they lie)
// and starts the worker pool.
func (d *Device) Bind(w *engine.Weights, kv kvcache.DType) (engine.Backend, error) {
	b := &backend{w: w, cfg: &w.Config, kv: kv}
	var err error
	if b.tokEmbd, err = matrix(&w.TokEmbd); err != nil {
		return nil, err
	}
	b.output = b.tokEmbd
	if !w.Tied {
		if b.output, err = matrix(&w.Output); err != nil {
			return nil, err
		}
	}
	b.layers = make([]layer, len(w.Layers))
	for i := range w.Layers {
		l := &w.Layers[i]
		L := &b.layers[i]
		L.Layer = l
		for _, p := range []struct {
			dst **kernels.Matrix
			t   *engine.Tensor
		}{{&L.wq, &l.Wq}, {&L.wk, &l.Wk}, {&L.wv, &l.Wv}, {&L.wo, &l.Wo}, {&L.wGate, &l.Gate}, {&L.wUp, &l.Up}, {&L.wDown, &l.Down}} {
			if *p.dst, err = matrix(p.t); err != nil {
				return nil, err
			}
		}
	}
	b.pool = d.opts.Pool
	if b.pool == nil {
		b.pool, b.ownPool = kernels.NewPool(d.opts.Threads), true
	}
	return b, nil
}

// matrix binds t for the kernels; a type they cannot multiply is a
// *engine.TensorError naming it.
func matrix(t *engine.Tensor) (*kernels.Matrix, error) {
	m, err := kernels.NewMatrix(t.Type, t.Rows, t.Cols, t.Data)
	if err != nil {
		return nil, &engine.TensorError{Name: t.Name, Err: errors.Join(engine.ErrUnsupported, err),
			Reason: fmt.Sprintf("type %v: %v", t.Type, err)}
	}
	return m, nil
}

// Numerics returns engine.EngineName: the CPU kernels define the exact
// numerics.
func (b *backend) Numerics() string { return engine.EngineName }

// NewKV returns an f16 or f32 host-memory cache (infer/kvcache).
func (b *backend) NewKV(maxTokens int) (engine.KV, error) {
	c := b.cfg
	return kvcache.New(kvcache.Shape{Layers: c.Layers, KVHeads: c.KVHeads, HeadDim: c.HeadDim}, b.kv, maxTokens)
}

// MaxRows returns DefaultMaxRows.
func (b *backend) MaxRows() int { return DefaultMaxRows }

// DecodeBatch returns the smallest kernels.MaxRawBatch of the model's
// weight matrices on this CPU, or -1 when every one is read in place at
// any batch size. Up to that many tokens the kernels multiply against the
// quantized weights where they lie; beyond it they first unpack the
// weights into panels, a cost per call that a few decode tokens do not
// repay, so a step of more decode tokens is better split
// (docs/benchmarks.md, "serve"). For a Q8_0 model with AVX-512 that is -1;
// for a Q4_K one (Q4_K, Q5_0, Q6_K rows), 128 (4 with
// kernels.SetMultiToken(false)).
func (b *backend) DecodeBatch() int {
	n := math.MaxInt
	for _, t := range b.w.Matrices() {
		n = min(n, kernels.MaxRawBatch(t.Type))
	}
	if n == math.MaxInt {
		return -1
	}
	return n
}

// Close stops the worker pool if the backend started it.
func (b *backend) Close() error {
	if b.ownPool {
		b.pool.Close()
	}
	return nil
}
