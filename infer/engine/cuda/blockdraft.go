package cuda

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/muserhq/muser/infer/blockdraft"
	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cu"
	"github.com/muserhq/muser/infer/engine/cuda/internal/cukernels"
)

// draftLogitRows is the most positions whose logits one output product
// of the drafter computes (infer/blockdraft computes as many at a time;
// how rows are grouped never changes a result).
const draftLogitRows = 64

// drafter is a block drafter (infer/blockdraft) bound on a GPU: the fc
// inputs are made on the host (Model.Inputs), everything after them on
// the device with the kernels the target's backend uses, so the logits
// are the CPU drafter's bit for bit (every kernel computes its Go
// definition's bits; the bidirectional attention is the f32-cache
// attention with every row at position B-1 over its request's block).
type drafter struct {
	d   *Device
	m   *blockdraft.Model
	cfg blockdraft.Config

	fc, output mat
	outNorm    cu.DevicePtr
	layers     []draftLayer
	tensors    []engine.Tensor // what the mats point at
	weights    []cu.DevicePtr  // every upload, freed by Close

	mu     sync.Mutex // serialises calls; guards everything below
	ws     draftWorkspace
	in     []float32 // the host's fc inputs
	rows   []int     // the rows whose logits are wanted
	graphs *cu.Graphs
	rec    []cu.KernelLaunch
	closed bool
}

type draftLayer struct {
	attnNorm, ffnNorm cu.DevicePtr
	wq, wk, wv, wo    mat
	gate, up, down    mat
}

// draftWorkspace holds a call's device buffers for up to n rows.
type draftWorkspace struct {
	n        int
	in       cu.DevicePtr // float [n][D+H]
	x, xn, o cu.DevicePtr // float [n][D]
	q, att   cu.DevicePtr // float [n][NH·hd]
	k, v     cu.DevicePtr // float [n][NKV·hd]: each request's block is its "cache"
	ffA, ffB cu.DevicePtr // float [n][F]
	s        cu.DevicePtr // attention scores [n][NH][ld]
	m        cu.DevicePtr // attention maxima and part sums (cukernels.Attention.MBytes)
	consts   cu.DevicePtr // per row: RoPE table, cache addresses, positions, tiles (constLayout)
	rowidx   cu.DevicePtr // int32 [n]: the wanted rows
	logits   cu.DevicePtr // float [draftLogitRows][V]
	stage    *cu.HostBuf  // pinned: the fc inputs and wanted rows of a call
	acts     map[cukernels.Act]cukernels.ActBufs
	bufs     []cu.DevicePtr // every allocation above
	host     []float32      // the logits, copied back
	ld       int
}

// BindBlockDrafter uploads the block drafter m's weight matrices and
// vectors to the GPU and returns a blockdraft.Runner of its forward pass
// there (blockdraft.Binder): its tokens and logits are m's own, bit for
// bit. m must stay open while the Runner is used; closing the Runner
// frees the device's copies and leaves m open. A matrix type without a
// CUDA kernel is a *blockdraft.TensorError naming the tensor, a head
// dimension past the attention kernels' a *blockdraft.HParamError, both
// wrapping blockdraft.ErrUnsupported.
func (d *Device) BindBlockDrafter(m *blockdraft.Model) (blockdraft.Runner, error) {
	cfg := m.Config()
	if cfg.HeadDim > cukernels.MaxAttnDim {
		return nil, &blockdraft.HParamError{Key: blockdraft.KeyHeads, Err: blockdraft.ErrUnsupported,
			Reason: fmt.Sprintf("gives a head dimension of %d; the CUDA attention kernels take at most %d", cfg.HeadDim, cukernels.MaxAttnDim)}
	}
	w := m.Weights()
	ms := []*blockdraft.Matrix{&w.FC, &w.Output}
	for i := range w.Layers {
		l := &w.Layers[i]
		ms = append(ms, &l.Wq, &l.Wk, &l.Wv, &l.Wo, &l.Gate, &l.Up, &l.Down)
	}
	dr := &drafter{d: d, m: m, cfg: cfg, tensors: make([]engine.Tensor, len(ms))}
	for i, bm := range ms {
		if _, err := cukernels.ActOf(bm.Type); err != nil {
			return nil, &blockdraft.TensorError{Name: bm.Name, Err: errors.Join(blockdraft.ErrUnsupported, err),
				Reason: fmt.Sprintf("type %v has no CUDA kernel", bm.Type)}
		}
		dr.tensors[i] = engine.Tensor{Name: bm.Name, Type: bm.Type, Rows: bm.Rows, Cols: bm.Cols, Data: bm.Data}
	}
	if err := d.dev.Do(func(c *cu.Ctx) error { return dr.upload(c, &w) }); err != nil {
		dr.Close()
		return nil, err
	}
	return dr, nil
}

// upload copies the weights to the device (on the device's thread), in
// the order BindBlockDrafter listed the matrices.
func (dr *drafter) upload(c *cu.Ctx, w *blockdraft.Weights) error {
	put := func(data []byte) (cu.DevicePtr, error) {
		p, err := c.Alloc(uint64(max(len(data), 16)))
		if err != nil {
			return 0, err
		}
		dr.weights = append(dr.weights, p)
		return p, c.CopyHtoD(p, data)
	}
	next := 0
	matrix := func(dst *mat) error {
		t := &dr.tensors[next]
		next++
		act, _ := cukernels.ActOf(t.Type) // checked by BindBlockDrafter
		p, err := put(t.Data)
		if err != nil {
			return fmt.Errorf("uploading the block drafter's %s: %w", t.Name, err)
		}
		*dst = mat{t: t, p: p, act: act}
		return nil
	}
	if err := matrix(&dr.fc); err != nil {
		return err
	}
	if err := matrix(&dr.output); err != nil {
		return err
	}
	var err error
	if dr.outNorm, err = put(f32Bytes(w.OutNorm)); err != nil {
		return err
	}
	dr.layers = make([]draftLayer, len(w.Layers))
	for i := range w.Layers {
		l, dl := &w.Layers[i], &dr.layers[i]
		for _, m := range []*mat{&dl.wq, &dl.wk, &dl.wv, &dl.wo, &dl.gate, &dl.up, &dl.down} {
			if err := matrix(m); err != nil {
				return err
			}
		}
		if dl.attnNorm, err = put(f32Bytes(l.AttnNorm)); err != nil {
			return err
		}
		if dl.ffnNorm, err = put(f32Bytes(l.FFNNorm)); err != nil {
			return err
		}
	}
	return nil
}

// mats returns every matrix the drafter multiplies by.
func (dr *drafter) mats() []*mat {
	ms := []*mat{&dr.fc, &dr.output}
	for i := range dr.layers {
		l := &dr.layers[i]
		ms = append(ms, &l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down)
	}
	return ms
}

// constLayout is where a workspace of n rows keeps what depends only on
// n: each row's RoPE table (float [n][hd], position row mod B), the
// addresses of its request's K and V block (uint64 [n] each, at kc and
// vc), its attention position (int32 [n], B-1 for every row: the whole
// block) and the tiles (int32 [n+1], a row each).
type constLayout struct{ kc, vc, pos, tiles, size int }

func draftConsts(c *blockdraft.Config, n int) constLayout {
	var l constLayout
	l.kc = (4*n*c.HeadDim + 7) &^ 7
	l.vc = l.kc + 8*n
	l.pos = l.vc + 8*n
	l.tiles = l.pos + 4*n
	l.size = l.tiles + 4*(n+1)
	return l
}

// ensure grows the workspace to n rows (on the device's thread).
func (dr *drafter) ensure(c *cu.Ctx, n int) error {
	w := &dr.ws
	if n <= w.n {
		return nil
	}
	if err := c.SyncAll(); err != nil {
		return err
	}
	if err := dr.free(c); err != nil {
		return err
	}
	cfg := &dr.cfg
	N := int64(n)
	D, H, Q, KV, F := int64(cfg.Hidden), int64(cfg.TargetHidden), int64(cfg.Heads*cfg.HeadDim), int64(cfg.KVHeads*cfg.HeadDim), int64(cfg.FFN)
	w.ld = (cfg.BlockSize - 1 + 32) &^ 31
	lay := draftConsts(cfg, n)
	alloc := func(p *cu.DevicePtr, bytes int64) error {
		var err error
		if *p, err = c.Alloc(uint64(max(bytes, 16))); err != nil {
			return fmt.Errorf("block drafter buffers for %d rows: %w", n, err)
		}
		w.bufs = append(w.bufs, *p)
		return nil
	}
	for _, a := range []struct {
		p     *cu.DevicePtr
		bytes int64
	}{
		{&w.in, 4 * N * (D + H)}, {&w.x, 4 * N * D}, {&w.xn, 4 * N * D}, {&w.o, 4 * N * D},
		{&w.q, 4 * N * Q}, {&w.att, 4 * N * Q}, {&w.k, 4 * N * KV}, {&w.v, 4 * N * KV},
		{&w.ffA, 4 * N * F}, {&w.ffB, 4 * N * F},
		{&w.s, 4 * N * int64(cfg.Heads) * int64(w.ld)},
		{&w.m, cukernels.Attention{Heads: cfg.Heads, Dim: cfg.HeadDim, N: n, NTiles: n, LD: w.ld}.MBytes()},
		{&w.consts, int64(lay.size)}, {&w.rowidx, 4 * N},
		{&w.logits, 4 * int64(min(n, draftLogitRows)) * int64(cfg.Vocab)},
	} {
		if err := alloc(a.p, a.bytes); err != nil {
			return err
		}
	}
	w.acts = map[cukernels.Act]cukernels.ActBufs{}
	cols := max(cfg.Hidden+cfg.TargetHidden, cfg.Heads*cfg.HeadDim, cfg.FFN)
	for _, m := range dr.mats() {
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
			var p cu.DevicePtr
			if err := alloc(&p, a.bytes); err != nil {
				return err
			}
			*a.p = cukernels.DevPtr(p)
		}
		w.acts[m.act] = bufs
	}
	var err error
	if w.stage, err = c.HostAlloc(int(4*N*(D+H) + 4*N)); err != nil {
		return fmt.Errorf("pinned block drafter inputs for %d rows: %w", n, err)
	}
	if err := c.CopyHtoD(w.consts, dr.consts(n)); err != nil {
		return err
	}
	w.n = n
	return nil
}

// consts returns the bytes of the constants of n rows (constLayout).
func (dr *drafter) consts(n int) []byte {
	cfg, w := &dr.cfg, &dr.ws
	B, hd := cfg.BlockSize, cfg.HeadDim
	KV := cfg.KVHeads * hd
	lay := draftConsts(cfg, n)
	buf := make([]byte, lay.size)
	rope := dr.m.Weights().Rope
	cs := make([]float32, n*hd)
	kc, vc := make([]uint64, n), make([]uint64, n)
	pos := make([]int32, n)
	for i := range n {
		j, r := i%B, i/B
		copy(cs[i*hd:(i+1)*hd], rope[j*hd:(j+1)*hd])
		kc[i] = uint64(w.k) + uint64(4*r*B*KV)
		vc[i] = uint64(w.v) + uint64(4*r*B*KV)
		pos[i] = int32(B - 1)
	}
	copy(buf, f32Bytes(cs))
	copy(buf[lay.kc:], u64Bytes(kc))
	copy(buf[lay.vc:], u64Bytes(vc))
	copy(buf[lay.pos:], i32Bytes(pos))
	copy(buf[lay.tiles:], i32Bytes(rowTiles(n)))
	return buf
}

// free releases the workspace (on the device's thread).
func (dr *drafter) free(c *cu.Ctx) error {
	w := &dr.ws
	var errs []error
	for _, p := range w.bufs {
		errs = append(errs, c.Free(p))
	}
	if w.stage != nil {
		errs = append(errs, c.FreeHost(w.stage))
	}
	dr.ws = draftWorkspace{}
	return errors.Join(errs...)
}

// Draft computes every request's block on the GPU and writes its draft
// to its Tokens (blockdraft.Model.Draft's tokens).
func (dr *drafter) Draft(ctx context.Context, reqs []blockdraft.Request) error {
	return dr.run(ctx, reqs, nil)
}

// Logits computes reqs as Draft does, without writing their Tokens, and
// returns the logits behind each draft token (blockdraft.Model.Logits's,
// bit for bit).
func (dr *drafter) Logits(ctx context.Context, reqs []blockdraft.Request) ([][][]float32, error) {
	rs := make([]blockdraft.Request, len(reqs))
	for i, r := range reqs {
		r.Tokens = nil
		rs[i] = r
	}
	out := make([][][]float32, len(reqs))
	err := dr.run(ctx, rs, func(r int, logits []float32) {
		out[r] = append(out[r], slices.Clone(logits))
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Close frees the drafter's weights and buffers on the device; the Model
// stays open.
func (dr *drafter) Close() error {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.closed {
		return nil
	}
	dr.closed = true
	weights, graphs := dr.weights, dr.graphs
	dr.weights, dr.graphs, dr.rec = nil, nil, nil
	return dr.d.dev.Do(func(c *cu.Ctx) error {
		if err := c.SyncAll(); err != nil {
			return err
		}
		errs := []error{dr.free(c)}
		if graphs != nil {
			errs = append(errs, c.DestroyGraphs(graphs))
		}
		for _, p := range weights {
			errs = append(errs, c.Free(p))
		}
		return errors.Join(errs...)
	})
}

// run computes reqs; keep, if not nil, sees each wanted position's logits
// in order (request r's positions 1, 2, …).
func (dr *drafter) run(ctx context.Context, reqs []blockdraft.Request, keep func(r int, logits []float32)) error {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	if dr.closed {
		return blockdraft.ErrClosed
	}
	if len(reqs) == 0 {
		return nil
	}
	cfg := &dr.cfg
	B, D, H := cfg.BlockSize, cfg.Hidden, cfg.TargetHidden
	n := len(reqs) * B
	dr.in = slices.Grow(dr.in[:0], n*(D+H))[:n*(D+H)]
	if err := dr.m.Inputs(reqs, dr.in); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dr.rows = dr.m.OutputRows(reqs, dr.rows)
	rowidx := make([]int32, len(dr.rows))
	for i, r := range dr.rows {
		rowidx[i] = int32(r)
	}
	return dr.d.dev.Do(func(c *cu.Ctx) error {
		if err := dr.ensure(c, n); err != nil {
			return err
		}
		p := &draftPass{dr: dr, c: c, n: n, graph: dr.d.graphs}
		p.upload(rowidx)
		p.forward()
		for lo := 0; lo < len(dr.rows) && p.err == nil; lo += draftLogitRows {
			rows := dr.rows[lo:min(lo+draftLogitRows, len(dr.rows))]
			p.logits(lo, len(rows))
			p.flush()
			if p.err != nil {
				break
			}
			host := dr.ws.host[:len(rows)*cfg.Vocab]
			if p.err = c.CopyDtoH(f32Bytes(host), dr.ws.logits); p.err != nil {
				break
			}
			for i, row := range rows {
				r := row / B
				l := host[i*cfg.Vocab : (i+1)*cfg.Vocab]
				reqs[r].Tokens = append(reqs[r].Tokens, blockdraft.Argmax(l))
				if keep != nil {
					keep(r, l)
				}
			}
		}
		if p.err == nil && dr.d.prof != nil {
			p.err = dr.d.prof.collect(c)
		}
		if p.err != nil {
			c.Sync(c.Stream()) // what was queued still reads the pinned inputs
		}
		return p.err
	})
}

// draftPass is one drafter call's launches on the device's thread; the
// first error stops it. In a graph pass (the device runs small passes as
// graphs) the launches are recorded in order and run as one graph at each
// flush.
type draftPass struct {
	dr    *drafter
	c     *cu.Ctx
	n     int
	graph bool
	err   error
}

func (p *draftPass) launch(l cukernels.Launch, err error) {
	if p.err != nil {
		return
	}
	if err != nil {
		p.err = err
		return
	}
	d := p.dr.d
	f, err := d.function(p.c, l)
	if err != nil {
		p.err = err
		return
	}
	if p.graph && d.prof == nil {
		p.dr.rec = append(p.dr.rec, cu.KernelLaunch{F: f, Grid: l.Grid, Block: l.Block, Shared: l.Shared, Args: l.Args,
			Early: p.dr.d.early})
		return
	}
	p.err = d.launchNow(p.c, f, l)
}

// flush runs the recorded launches as one graph and waits for them.
func (p *draftPass) flush() {
	dr := p.dr
	if len(dr.rec) > 0 {
		if p.err == nil {
			if dr.graphs == nil {
				dr.graphs = cu.NewGraphs(maxGraphs)
			}
			p.err = p.c.RunGraph(dr.graphs, dr.rec, p.c.Stream())
		}
		clear(dr.rec)
		dr.rec = dr.rec[:0]
	}
	if p.err == nil {
		p.err = p.c.Sync(p.c.Stream())
	}
}

// upload copies the fc inputs and the wanted rows to the device from the
// pinned stage.
func (p *draftPass) upload(rowidx []int32) {
	dr, w := p.dr, &p.dr.ws
	in := f32Bytes(dr.in)
	buf := w.stage.Bytes()
	copy(buf, in)
	copy(buf[len(in):], i32Bytes(rowidx))
	if p.err == nil {
		p.err = p.c.CopyHtoDAsync(w.in, buf[:len(in)], p.c.Stream())
	}
	if p.err == nil && len(rowidx) > 0 {
		p.err = p.c.CopyHtoDAsync(w.rowidx, buf[len(in):len(in)+4*len(rowidx)], p.c.Stream())
	}
}

// quantize quantizes the n rows of cols floats at x for m's activation
// form (nothing for float activations).
func (p *draftPass) quantize(x cu.DevicePtr, n, cols int, m *mat) {
	if m.act == cukernels.ActF32 {
		return
	}
	l, ok, err := cukernels.QuantizeActs(m.act, dp(x), p.dr.ws.acts[m.act], n, cols)
	if ok || err != nil {
		p.launch(l, err)
	}
}

// matMul describes the product of the n rows at x (as quantize left them
// for m) by m into y.
func (p *draftPass) matMul(m *mat, x, y cu.DevicePtr, n int) cukernels.MatMul {
	return m.mul(p.dr.ws.acts, x, y, n)
}

// norm writes rmsnorm(x[rows]) ⊙ w to dst for the products of ms (which
// share one activation form), quantized for them; rowidx 0 takes rows
// 0..n-1.
func (p *draftPass) norm(x, rowidx, dst, w cu.DevicePtr, n, cols int, ms ...*mat) {
	ws, eps := &p.dr.ws, p.dr.cfg.Eps
	a := ms[0].act
	same := true
	for _, m := range ms[1:] {
		same = same && m.act == a
	}
	if same && cukernels.FusedQuant(a) {
		p.launch(cukernels.RMSNormQuant(dp(x), dp(rowidx), dp(dst), dp(w), n, cols, eps, a, ws.acts[a]))
		return
	}
	p.launch(cukernels.RMSNorm(dp(x), dp(rowidx), dp(dst), dp(w), n, cols, eps))
	p.quantizeFor(dst, n, cols, ms...)
}

// quantizeFor quantizes the n rows at x once per activation form of ms.
func (p *draftPass) quantizeFor(x cu.DevicePtr, n, cols int, ms ...*mat) {
	var done []cukernels.Act
	for _, m := range ms {
		if !slices.Contains(done, m.act) {
			p.quantize(x, n, cols, m)
			done = append(done, m.act)
		}
	}
}

// forward runs fc and the layers over the call's n rows, leaving the
// residual stream in x.
func (p *draftPass) forward() {
	dr, w, cfg, n := p.dr, &p.dr.ws, &p.dr.cfg, p.n
	D, hd := cfg.Hidden, cfg.HeadDim
	Q, KV, F := cfg.Heads*hd, cfg.KVHeads*hd, cfg.FFN
	// The constants were laid out for the rows the workspace holds,
	// which may be more than this call's.
	lay := draftConsts(cfg, w.n)
	cs := w.consts
	kc, vc := cs+cu.DevicePtr(lay.kc), cs+cu.DevicePtr(lay.vc)
	pos, tiles := cs+cu.DevicePtr(lay.pos), cs+cu.DevicePtr(lay.tiles)

	p.quantize(w.in, n, D+cfg.TargetHidden, &dr.fc)
	p.launch(p.matMul(&dr.fc, w.in, w.x, n).Launch())
	for li := range dr.layers {
		L := &dr.layers[li]
		p.norm(w.x, 0, w.xn, L.attnNorm, n, D, &L.wq, &L.wk, &L.wv)
		p.launch(p.matMul(&L.wq, w.xn, w.q, n).Launch())
		p.launch(p.matMul(&L.wk, w.xn, w.k, n).Launch())
		p.launch(p.matMul(&L.wv, w.xn, w.v, n).Launch())
		p.launch(cukernels.RoPE(dp(w.q), n, cfg.Heads, hd, Q, hd, false, dp(cs)))
		p.launch(cukernels.RoPE(dp(w.k), n, cfg.KVHeads, hd, KV, hd, false, dp(cs)))
		ls, err := cukernels.Attention{Heads: cfg.Heads, KVHeads: cfg.KVHeads, Dim: hd, N: n,
			Q: dp(w.q), Out: dp(w.att), KC: dp(kc), VC: dp(vc), Pos: dp(pos), Tiles: dp(tiles),
			NTiles: n, MaxPos: cfg.BlockSize - 1, S: dp(w.s), LD: w.ld, M: dp(w.m)}.Launches()
		for _, l := range ls {
			p.launch(l, err)
		}
		p.quantize(w.att, n, Q, &L.wo)
		p.launch(p.matMul(&L.wo, w.att, w.o, n).Launch())
		// x += o, then the FFN's norm (kernels.Add, kernels.RMSNorm).
		if a := L.gate.act; a == L.up.act && cukernels.FusedQuant(a) {
			p.launch(cukernels.AddRMSNormQuant(dp(w.x), dp(w.o), 0, dp(L.ffnNorm), dp(w.xn), n, D, cfg.Eps, a, w.acts[a]))
		} else {
			p.launch(cukernels.AddRMSNorm(dp(w.x), dp(w.o), 0, dp(L.ffnNorm), dp(w.xn), n, D, cfg.Eps))
			p.quantizeFor(w.xn, n, D, &L.gate, &L.up)
		}
		p.launch(p.matMul(&L.gate, w.xn, w.ffA, n).Launch())
		p.launch(p.matMul(&L.up, w.xn, w.ffB, n).Launch())
		if a := L.down.act; cukernels.FusedQuant(a) {
			p.launch(cukernels.SiLUMulQuant(dp(w.ffA), dp(w.ffB), dp(w.ffA), n, F, a, w.acts[a]))
		} else {
			p.launch(cukernels.SiLUMul(dp(w.ffA), dp(w.ffB), dp(w.ffA), n*F))
			p.quantize(w.ffA, n, F, &L.down)
		}
		// x += down·ffA (kernels.Add after the product).
		mm := p.matMul(&L.down, w.ffA, w.x, n)
		if mm.Epilogue() {
			mm.Res = dp(w.x)
			p.launch(mm.Launch())
		} else {
			mm.Y = dp(w.o)
			p.launch(mm.Launch())
			p.launch(cukernels.Add(dp(w.x), dp(w.o), dp(w.x), n*D))
		}
	}
}

// logits computes the output logits of the m wanted rows from the lo-th
// on into ws.logits.
func (p *draftPass) logits(lo, m int) {
	dr, w, cfg := p.dr, &p.dr.ws, &p.dr.cfg
	p.norm(w.x, w.rowidx+cu.DevicePtr(4*lo), w.xn, dr.outNorm, m, cfg.Hidden, &dr.output)
	p.launch(p.matMul(&dr.output, w.xn, w.logits, m).Launch())
	if need := m * cfg.Vocab; cap(w.host) < need {
		w.host = make([]float32, min(p.n, draftLogitRows)*cfg.Vocab)
	}
}

var _ blockdraft.Binder = (*Device)(nil)
