package cuda

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cu"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cukernels"
	"github.com/muserhq/muser/infer/kvcache"
)

// MaxRows is the most rows one Forward call takes (Backend.MaxRows): a
// long prefill is computed in windows of this many tokens.
const MaxRows = 2048

// logitRows is the most rows whose logits one output product computes.
const logitRows = 256

// mat is a weight matrix in device memory.
type mat struct {
	t   *engine.Tensor
	p   cu.DevicePtr
	act cukernels.Act
}

// layer is one block's weights in device memory; a vector the model
// lacks is 0.
type layer struct {
	attnNorm, ffnNorm cu.DevicePtr
	bq, bk, bv, bo    cu.DevicePtr
	qNorm, kNorm      cu.DevicePtr
	wq, wk, wv, wo    mat
	gate, up, down    mat
	// qkv and gateUp are the Q, K and V matrices and the gate and up
	// matrices laid end to end in one allocation, where each group has
	// one type and one row length (the members are views into it;
	// otherwise qkv.p or gateUp.p is 0); bq, bk and bv always lie end to
	// end, so bq is the group's bias. A one-row pass multiplies each
	// group in one launch.
	qkv, gateUp mat
}

// backend is one model bound on a GPU.
type backend struct {
	d   *Device
	w   *engine.Weights
	cfg *engine.Config
	kv  kvcache.DType

	tokEmbd, output mat
	outNorm         cu.DevicePtr
	layers          []layer
	weights         []cu.DevicePtr // every upload, freed by Close

	mu     sync.Mutex // guards ws, rope, graphs, rec and closed
	ws     workspace
	graphs *cu.Graphs        // the pass graphs (device.go, GraphRows)
	rec    []cu.KernelLaunch // a graph pass's launches, reused
	deps   []int             // their After lists
	rope   []float32         // host table of Rope.Angles: [positions][RopeDim]
	closed bool
}

// upload copies the weights to the device (on the device's thread).
func (b *backend) upload(c *cu.Ctx) error {
	put := func(data []byte) (cu.DevicePtr, error) {
		p, err := c.Alloc(uint64(len(data)))
		if err != nil {
			return 0, err
		}
		b.weights = append(b.weights, p)
		return p, c.CopyHtoD(p, data)
	}
	vec := func(v []float32) (cu.DevicePtr, error) {
		if v == nil {
			return 0, nil
		}
		return put(f32Bytes(v))
	}
	matrix := func(t *engine.Tensor) (mat, error) {
		m := mat{t: t}
		var err error
		if m.act, err = cukernels.ActOf(t.Type); err != nil && t != &b.w.TokEmbd {
			return m, err
		}
		if m.p, err = put(t.Data); err != nil {
			return m, fmt.Errorf("uploading %s: %w", t.Name, err)
		}
		return m, nil
	}
	// group uploads the matrices srcs end to end into one allocation when
	// they share a type and a row length, setting dsts to views into it,
	// and returns the group; otherwise it uploads each alone.
	group := func(name string, dsts []*mat, srcs []*engine.Tensor) (mat, error) {
		t0, total := srcs[0], 0
		same := true
		for _, t := range srcs {
			same = same && t.Type == t0.Type && t.Cols == t0.Cols
			total += len(t.Data)
		}
		act, aerr := cukernels.ActOf(t0.Type)
		if !same || aerr != nil {
			for i, t := range srcs {
				var err error
				if *dsts[i], err = matrix(t); err != nil {
					return mat{}, err
				}
			}
			return mat{}, nil
		}
		p, err := c.Alloc(uint64(total))
		if err != nil {
			return mat{}, fmt.Errorf("uploading %s: %w", name, err)
		}
		b.weights = append(b.weights, p)
		g := mat{t: &engine.Tensor{Name: name, Type: t0.Type, Cols: t0.Cols}, p: p, act: act}
		off := cu.DevicePtr(0)
		for i, t := range srcs {
			if err := c.CopyHtoD(p+off, t.Data); err != nil {
				return mat{}, fmt.Errorf("uploading %s: %w", t.Name, err)
			}
			*dsts[i] = mat{t: t, p: p + off, act: act}
			off += cu.DevicePtr(len(t.Data))
			g.t.Rows += t.Rows
		}
		return g, nil
	}
	w := b.w
	var err error
	if b.tokEmbd, err = matrix(&w.TokEmbd); err != nil {
		return err
	}
	b.output = b.tokEmbd
	if !w.Tied {
		if b.output, err = matrix(&w.Output); err != nil {
			return err
		}
	}
	if b.outNorm, err = vec(w.OutNorm); err != nil {
		return err
	}
	b.layers = make([]layer, len(w.Layers))
	for i := range w.Layers {
		l, d := &w.Layers[i], &b.layers[i]
		for _, v := range []struct {
			dst *cu.DevicePtr
			src []float32
		}{{&d.attnNorm, l.AttnNorm}, {&d.ffnNorm, l.FFNNorm},
			{&d.bo, l.Bo}, {&d.qNorm, l.QNorm}, {&d.kNorm, l.KNorm}} {
			if *v.dst, err = vec(v.src); err != nil {
				return err
			}
		}
		if err := b.uploadBiases(d, l, vec); err != nil {
			return err
		}
		if d.qkv, err = group(fmt.Sprintf("blk.%d.attn_qkv", i), []*mat{&d.wq, &d.wk, &d.wv}, []*engine.Tensor{&l.Wq, &l.Wk, &l.Wv}); err != nil {
			return err
		}
		if d.gateUp, err = group(fmt.Sprintf("blk.%d.ffn_gate_up", i), []*mat{&d.gate, &d.up}, []*engine.Tensor{&l.Gate, &l.Up}); err != nil {
			return err
		}
		for _, m := range []struct {
			dst *mat
			src *engine.Tensor
		}{{&d.wo, &l.Wo}, {&d.down, &l.Down}} {
			if *m.dst, err = matrix(m.src); err != nil {
				return err
			}
		}
	}
	return nil
}

// uploadBiases uploads layer l's Q, K and V biases into d, the three end
// to end in one allocation (d.bk and d.bv views into it); a layer has all
// three or none (engine's weights check).
func (b *backend) uploadBiases(d *layer, l *engine.Layer, vec func([]float32) (cu.DevicePtr, error)) error {
	if l.Bq == nil {
		return nil
	}
	p, err := vec(slices.Concat(l.Bq, l.Bk, l.Bv))
	if err != nil {
		return err
	}
	d.bq = p
	d.bk = p + cu.DevicePtr(4*len(l.Bq))
	d.bv = d.bk + cu.DevicePtr(4*len(l.Bk))
	return nil
}

// f32Bytes returns the bytes of v (the device and every host muser
// builds for are little-endian).
func f32Bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// Numerics returns engine.EngineName: every kernel computes the CPU
// engine's bits (internal/cukernels, "Exactness").
func (b *backend) Numerics() string { return engine.EngineName }

// MaxRows returns MaxRows.
func (b *backend) MaxRows() int { return MaxRows }

// DecodeBatch returns -1: the decode kernels take any number of tokens,
// in groups of 8, at one read of the weights per group.
func (b *backend) DecodeBatch() int { return -1 }

// HiddenStates reports that Forward fills Row.Hidden
// (engine.HiddenBackend): the output norm's result, copied back with the
// logits.
func (b *backend) HiddenStates() bool { return true }

// NewKV returns an empty device-memory cache for up to maxTokens tokens.
func (b *backend) NewKV(maxTokens int) (engine.KV, error) {
	c := b.cfg
	if maxTokens <= 0 {
		return nil, fmt.Errorf("%w: a cache of %d tokens", kvcache.ErrBadShape, maxTokens)
	}
	n := c.Layers
	return &kv{b: b, max: maxTokens, rowBytes: c.KVRow() * b.kv.Size(), k: make([]cu.DevicePtr, n), v: make([]cu.DevicePtr, n)}, nil
}

// Close frees the weights and buffers on the device.
func (b *backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	bufs := append(b.weights, b.ws.all()...)
	hosts := []*cu.HostBuf{b.ws.stage, b.ws.pinned}
	b.weights, b.ws = nil, workspace{}
	graphs := b.graphs
	b.graphs, b.rec = nil, nil
	return b.d.dev.Do(func(c *cu.Ctx) error {
		if err := c.SyncAll(); err != nil {
			return err
		}
		if graphs != nil {
			if err := c.DestroyGraphs(graphs); err != nil {
				return err
			}
		}
		for _, h := range hosts {
			if h == nil {
				continue
			}
			if err := c.FreeHost(h); err != nil {
				return err
			}
		}
		for _, p := range bufs {
			if err := c.Free(p); err != nil {
				return err
			}
		}
		return nil
	})
}

// ropeTable returns the host table of Rope.Angles for positions [0, n).
func (b *backend) ropeTable(n int) []float32 {
	d := b.cfg.RopeDim
	for have := len(b.rope) / max(d, 1); have < n; have++ {
		b.rope = append(b.rope, make([]float32, d)...)
		b.w.Rope.Angles(b.rope[have*d:(have+1)*d], have)
	}
	return b.rope
}
