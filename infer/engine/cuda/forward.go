package cuda

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cu"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cukernels"
	"github.com/muserhq/muser/infer/kvcache"
)

// workspace holds a forward pass's device buffers, grown to the largest
// batch and context seen; each field is one allocation (0 when none).
type workspace struct {
	n      int // rows the row buffers hold
	x, xn  cu.DevicePtr
	q, att cu.DevicePtr
	k, v   cu.DevicePtr
	o      cu.DevicePtr
	ffA    cu.DevicePtr
	ffB    cu.DevicePtr
	cs     cu.DevicePtr
	ints   cu.DevicePtr // tokens, positions, rowidx, tiles: int32 [4][n+1]
	kvs    cu.DevicePtr // uint64 [2][layers][n]: each row's K and V address per layer
	acts   map[cukernels.Act]cukernels.ActBufs
	actBuf []cu.DevicePtr
	logits cu.DevicePtr // float [logitRows][vocab]
	s      cu.DevicePtr // attention scores [n][heads][ld]
	sBytes int64
	host   []float32 // staging for logits
}

// all returns every allocation of w.
func (w *workspace) all() []cu.DevicePtr {
	var ps []cu.DevicePtr
	for _, p := range []cu.DevicePtr{w.x, w.xn, w.q, w.att, w.k, w.v, w.o, w.ffA, w.ffB, w.cs, w.ints, w.kvs, w.logits, w.s} {
		if p != 0 {
			ps = append(ps, p)
		}
	}
	return append(ps, w.actBuf...)
}

// ensure grows the row buffers to n rows and the scores to sBytes.
func (b *backend) ensure(c *cu.Ctx, n int, sBytes int64) error {
	w := &b.ws
	cfg := b.cfg
	alloc := func(p *cu.DevicePtr, bytes int64) error {
		if *p != 0 {
			if err := c.Free(*p); err != nil {
				return err
			}
			*p = 0
		}
		var err error
		*p, err = c.Alloc(uint64(max(bytes, 16)))
		return err
	}
	if sBytes > w.sBytes {
		if err := c.SyncAll(); err != nil {
			return err
		}
		if err := alloc(&w.s, sBytes); err != nil {
			return fmt.Errorf("attention scratch of %d MiB: %w", sBytes>>20, err)
		}
		w.sBytes = sBytes
	}
	if n <= w.n {
		return nil
	}
	if err := c.SyncAll(); err != nil {
		return err
	}
	N := int64(n)
	H, Q, KV, F := int64(cfg.Hidden), int64(cfg.Heads*cfg.HeadDim), int64(cfg.KVRow()), int64(cfg.FFN)
	for _, a := range []struct {
		p     *cu.DevicePtr
		bytes int64
	}{
		{&w.x, 4 * N * H}, {&w.xn, 4 * N * H}, {&w.o, 4 * N * H},
		{&w.q, 4 * N * Q}, {&w.att, 4 * N * Q},
		{&w.k, 4 * N * KV}, {&w.v, 4 * N * KV},
		{&w.ffA, 4 * N * F}, {&w.ffB, 4 * N * F},
		{&w.cs, 4 * N * int64(max(cfg.RopeDim, 1))},
		{&w.ints, 4 * 4 * (N + 1)},
		{&w.kvs, 8 * 2 * int64(cfg.Layers) * N},
		{&w.logits, 4 * int64(min(n, logitRows)) * int64(cfg.Vocab)},
	} {
		if err := alloc(a.p, a.bytes); err != nil {
			return fmt.Errorf("forward buffers for %d rows: %w", n, err)
		}
	}
	for _, p := range w.actBuf {
		if err := c.Free(p); err != nil {
			return err
		}
	}
	w.actBuf, w.acts = nil, map[cukernels.Act]cukernels.ActBufs{}
	cols := max(cfg.Hidden, cfg.Heads*cfg.HeadDim, cfg.FFN)
	for _, m := range b.matrices() {
		if _, ok := w.acts[m.act]; ok || m.act == cukernels.ActF32 {
			continue
		}
		var bufs cukernels.ActBufs
		x, q, d, ext := cukernels.ActSizes(m.act, n, cols)
		for _, a := range []struct {
			p     *cukernels.DevPtr
			bytes int64
		}{{&bufs.X, x}, {&bufs.Q, q}, {&bufs.D, d}, {&bufs.Ext, ext}} {
			if a.bytes == 0 {
				continue
			}
			p, err := c.Alloc(uint64(a.bytes))
			if err != nil {
				return fmt.Errorf("activation buffers for %d rows: %w", n, err)
			}
			w.actBuf = append(w.actBuf, p)
			*a.p = cukernels.DevPtr(p)
		}
		w.acts[m.act] = bufs
	}
	w.n = n
	return nil
}

// matrices returns every matrix the forward pass multiplies by.
func (b *backend) matrices() []*mat {
	ms := []*mat{&b.output}
	for i := range b.layers {
		l := &b.layers[i]
		ms = append(ms, &l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down)
	}
	return ms
}

// batch is a Forward call's host-side plan.
type batch struct {
	n      int
	tokens []int32
	pos    []int32
	rowidx []int32 // rows that want logits
	tiles  []int32
	kvs    []uint64 // [2][layers][n]
	cs     []float32
	maxPos int
	ld     int
}

// plan checks rows and lays out what Forward uploads.
func (b *backend) plan(rows []engine.Row) (*batch, error) {
	cfg := b.cfg
	n, L := len(rows), cfg.Layers
	p := &batch{n: n, tokens: make([]int32, n), pos: make([]int32, n), kvs: make([]uint64, 2*L*n)}
	for i, r := range rows {
		x, ok := r.KV.(*kv)
		if !ok || x.b != b {
			return nil, fmt.Errorf("%w: row %d: a KV cache of another backend", engine.ErrBatch, i)
		}
		p.tokens[i], p.pos[i] = r.Token, int32(r.Pos)
		p.maxPos = max(p.maxPos, r.Pos)
		for l := range L {
			p.kvs[l*n+i], p.kvs[(L+l)*n+i] = x.addrs(l)
		}
		if r.Logits != nil {
			p.rowidx = append(p.rowidx, int32(i))
		}
	}
	p.tiles = cukernels.AttnTiles(p.kvs[:n], p.pos, cfg.Heads, cfg.KVHeads, cfg.HeadDim)
	p.ld = (p.maxPos + 32) &^ 31
	d := cfg.RopeDim
	if d > 0 {
		table := b.ropeTable(p.maxPos + 1)
		p.cs = make([]float32, n*d)
		for i, pos := range p.pos {
			copy(p.cs[i*d:(i+1)*d], table[int(pos)*d:int(pos+1)*d])
		}
	}
	return p, nil
}

// Forward computes rows on the GPU, kernel after kernel in the CPU
// engine's order (internal/cukernels, "Using it"): every row's K and V go
// to its cache, and the logits of the rows that want them come back.
func (b *backend) Forward(ctx context.Context, rows []engine.Row) error {
	if len(rows) == 0 {
		return nil
	}
	if len(rows) > MaxRows {
		return fmt.Errorf("%w: %d rows, at most %d per call", engine.ErrBatch, len(rows), MaxRows)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return engine.ErrClosed
	}
	p, err := b.plan(rows)
	if err != nil {
		return err
	}
	cfg := b.cfg
	sBytes := 4 * int64(p.n) * int64(cfg.Heads) * int64(p.ld)
	return b.d.dev.Do(func(c *cu.Ctx) error {
		if err := b.ensure(c, p.n, sBytes); err != nil {
			return err
		}
		r := &run{b: b, c: c, p: p}
		r.upload()
		r.embed()
		for li := range b.layers {
			if r.err == nil {
				r.err = ctx.Err()
			}
			r.layer(li)
		}
		r.logits(rows)
		if r.err == nil && b.d.prof != nil {
			r.err = b.d.prof.collect(c)
		}
		return r.err
	})
}

// run is one Forward on the device's thread; the first error stops it.
type run struct {
	b   *backend
	c   *cu.Ctx
	p   *batch
	err error
	// the device copies of the batch's int32 arrays
	tokens, pos, rowidx, tiles cu.DevicePtr
}

func dp(p cu.DevicePtr) cukernels.DevPtr { return cukernels.DevPtr(p) }

// launch runs l unless an error came first.
func (r *run) launch(l cukernels.Launch, err error) {
	if r.err != nil {
		return
	}
	if err != nil {
		r.err = err
		return
	}
	f, ok := r.b.d.fns[l.Kernel]
	if !ok {
		r.err = fmt.Errorf("cuda: kernel %s is not loaded", l.Kernel)
		return
	}
	if l.Shared > 48<<10 {
		if r.err = r.c.SetMaxDynamicShared(f, int(l.Shared)); r.err != nil {
			return
		}
	}
	prof := r.b.d.prof
	if prof != nil {
		if r.err = prof.begin(r.c, l.Kernel); r.err != nil {
			return
		}
	}
	r.err = r.c.Launch(f, l.Grid, l.Block, l.Shared, r.c.Stream(), l.Args...)
	if prof != nil && r.err == nil {
		r.err = prof.end(r.c)
	}
}

func (r *run) up(dst cu.DevicePtr, src []byte) {
	if r.err == nil && len(src) > 0 {
		r.err = r.c.CopyHtoD(dst, src)
	}
}

func i32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func u64Bytes(v []uint64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}

// upload copies the batch's tokens, positions, row indices, tiles, cache
// addresses and RoPE angles to the device.
func (r *run) upload() {
	w, p := &r.b.ws, r.p
	stride := cu.DevicePtr(4 * (p.n + 1))
	r.tokens, r.pos, r.rowidx, r.tiles = w.ints, w.ints+stride, w.ints+2*stride, w.ints+3*stride
	r.up(r.tokens, i32Bytes(p.tokens))
	r.up(r.pos, i32Bytes(p.pos))
	r.up(r.rowidx, i32Bytes(p.rowidx))
	r.up(r.tiles, i32Bytes(p.tiles))
	r.up(w.kvs, u64Bytes(p.kvs))
	r.up(w.cs, f32Bytes(p.cs))
}

func (r *run) embed() {
	b, w := r.b, &r.b.ws
	t := b.tokEmbd.t
	r.launch(cukernels.Embed(t.Type, dp(b.tokEmbd.p), t.Rows, t.Cols, dp(r.tokens), r.p.n, dp(w.x)))
}

// product is one matrix product's output.
type product struct {
	m *mat
	y cu.DevicePtr
}

// products multiplies the n rows of cols floats at x by each matrix,
// quantizing x once per activation form.
func (r *run) products(x cu.DevicePtr, n, cols int, ps ...product) {
	done := map[cukernels.Act]bool{}
	for _, pr := range ps {
		a := pr.m.act
		bufs := cukernels.ActBufs{X: dp(x)}
		if a != cukernels.ActF32 {
			bufs = r.b.ws.acts[a]
			if !done[a] {
				l, ok, err := cukernels.QuantizeActs(a, dp(x), bufs, n, cols)
				if ok || err != nil {
					r.launch(l, err)
				}
				done[a] = true
			}
		}
		t := pr.m.t
		r.launch(cukernels.MatMul{Type: t.Type, W: dp(pr.m.p), Rows: t.Rows, Cols: t.Cols, Acts: bufs, Y: dp(pr.y), N: n}.Launch())
	}
}

// layer runs block li for every row.
func (r *run) layer(li int) {
	b, w, p, cfg := r.b, &r.b.ws, r.p, r.b.cfg
	L := &b.layers[li]
	n := p.n
	H, Q, KV, F, D := cfg.Hidden, cfg.Heads*cfg.HeadDim, cfg.KVRow(), cfg.FFN, cfg.HeadDim
	r.launch(cukernels.RMSNorm(dp(w.x), 0, dp(w.xn), dp(L.attnNorm), n, H, cfg.Eps))
	r.products(w.xn, n, H, product{&L.wq, w.q}, product{&L.wk, w.k}, product{&L.wv, w.v})
	if L.bq != 0 {
		r.launch(cukernels.AddBias(dp(w.q), dp(L.bq), n, Q))
		r.launch(cukernels.AddBias(dp(w.k), dp(L.bk), n, KV))
		r.launch(cukernels.AddBias(dp(w.v), dp(L.bv), n, KV))
	}
	if L.qNorm != 0 {
		r.launch(cukernels.RMSNormHeads(dp(w.q), n, cfg.Heads, D, Q, dp(L.qNorm), cfg.Eps))
		r.launch(cukernels.RMSNormHeads(dp(w.k), n, cfg.KVHeads, D, KV, dp(L.kNorm), cfg.Eps))
	}
	if cfg.RopeDim > 0 {
		neox := cfg.Rope == engine.RopeNeoX
		r.launch(cukernels.RoPE(dp(w.q), n, cfg.Heads, D, Q, cfg.RopeDim, neox, dp(w.cs)))
		r.launch(cukernels.RoPE(dp(w.k), n, cfg.KVHeads, D, KV, cfg.RopeDim, neox, dp(w.cs)))
	}
	f16 := b.kv == kvcache.DTypeF16
	kc := w.kvs + cu.DevicePtr(8*li*n)
	vc := w.kvs + cu.DevicePtr(8*(cfg.Layers+li)*n)
	r.launch(cukernels.KVStore(f16, dp(w.k), dp(w.v), n, KV, dp(kc), dp(vc), dp(r.pos)))
	ls, err := cukernels.Attention{F16: f16, Heads: cfg.Heads, KVHeads: cfg.KVHeads, Dim: D, N: n,
		Q: dp(w.q), Out: dp(w.att), KC: dp(kc), VC: dp(vc), Pos: dp(r.pos), Tiles: dp(r.tiles),
		NTiles: len(p.tiles) - 1, MaxPos: p.maxPos, S: dp(w.s), LD: p.ld}.Launches()
	for _, l := range ls {
		r.launch(l, err)
	}
	r.products(w.att, n, Q, product{&L.wo, w.o})
	r.launch(cukernels.AddRMSNorm(dp(w.x), dp(w.o), dp(L.bo), dp(L.ffnNorm), dp(w.xn), n, H, cfg.Eps))
	r.products(w.xn, n, H, product{&L.gate, w.ffA}, product{&L.up, w.ffB})
	r.launch(cukernels.SiLUMul(dp(w.ffA), dp(w.ffB), dp(w.ffA), n*F))
	r.products(w.ffA, n, F, product{&L.down, w.o})
	r.launch(cukernels.Add(dp(w.x), dp(w.o), dp(w.x), n*H))
}

// logits computes the output of the rows that want it, logitRows at a
// time, and copies it into their Logits.
func (r *run) logits(rows []engine.Row) {
	b, w, p, cfg := r.b, &r.b.ws, r.p, r.b.cfg
	H, V := cfg.Hidden, cfg.Vocab
	for lo := 0; lo < len(p.rowidx) && r.err == nil; lo += logitRows {
		g := p.rowidx[lo:min(lo+logitRows, len(p.rowidx))]
		m := len(g)
		r.launch(cukernels.RMSNorm(dp(w.x), dp(r.rowidx+cu.DevicePtr(4*lo)), dp(w.xn), dp(b.outNorm), m, H, cfg.Eps))
		r.products(w.xn, m, H, product{&b.output, w.logits})
		if r.err != nil {
			return
		}
		if r.err = r.c.Sync(r.c.Stream()); r.err != nil {
			return
		}
		if cap(w.host) < m*V {
			w.host = make([]float32, logitRows*V)
		}
		host := w.host[:m*V]
		if r.err = r.c.CopyDtoH(f32Bytes(host), w.logits); r.err != nil {
			return
		}
		for j, i := range g {
			copy(rows[i].Logits, host[j*V:(j+1)*V])
		}
	}
	if r.err == nil {
		r.err = r.c.Sync(r.c.Stream())
	}
}
