package cuda

import (
	"context"
	"fmt"
	"slices"
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
	qkv    cu.DevicePtr // a one-row pass's q, k and v end to end (layer.qkv)
	gu     cu.DevicePtr // a one-row pass's gate and up end to end (layer.gateUp)
	in     cu.DevicePtr // a pass's inputs, laid out by inputs
	stage  *cu.HostBuf  // their pinned host copy, uploaded by one copy per pass
	acts   map[cukernels.Act]cukernels.ActBufs
	actBuf []cu.DevicePtr
	logits cu.DevicePtr // float [logitRows][vocab]
	s      cu.DevicePtr // attention scores [n][heads][ld]
	sBytes int64
	m      cu.DevicePtr // their maxima per 64 keys and the decode softmax's and weighted sum's part sums (cukernels.Attention.MBytes)
	mBytes int64
	inv    cu.DevicePtr // the softmax's 1/sum [n][heads] (tiled attention)
	host   []float32    // staging for the logits of larger groups
	hostH  []float32    // staging for hidden states
	// pinned takes the logits of a group of at most pinnedLogitRows
	// rows (a decode step's): a copy from device memory into pinned host
	// memory runs at the bus's speed, into Go memory through the
	// driver's own staging at a fraction of it. Allocated at first use.
	pinned *cu.HostBuf
}

// all returns every allocation of w.
func (w *workspace) all() []cu.DevicePtr {
	var ps []cu.DevicePtr
	for _, p := range []cu.DevicePtr{w.x, w.xn, w.q, w.att, w.k, w.v, w.o, w.ffA, w.ffB, w.qkv, w.gu, w.in, w.logits, w.s, w.m, w.inv} {
		if p != 0 {
			ps = append(ps, p)
		}
	}
	return append(ps, w.actBuf...)
}

// ensure grows the row buffers to n rows, the scores to sBytes and their
// maxima (with the decode softmax's and weighted sum's part sums) to
// mBytes.
func (b *backend) ensure(c *cu.Ctx, n int, sBytes, mBytes int64) error {
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
	for _, a := range []struct {
		p     *cu.DevicePtr
		have  *int64
		bytes int64
		name  string
	}{{&w.s, &w.sBytes, sBytes, "attention scratch"}, {&w.m, &w.mBytes, mBytes, "attention maxima"}} {
		if a.bytes <= *a.have {
			continue
		}
		if err := c.SyncAll(); err != nil {
			return err
		}
		if err := alloc(a.p, a.bytes); err != nil {
			return fmt.Errorf("%s of %d MiB: %w", a.name, a.bytes>>20, err)
		}
		*a.have = a.bytes
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
		{&w.qkv, 4 * (Q + 2*KV)}, {&w.gu, 4 * 2 * F},
		{&w.in, int64(inputs(cfg, n).size)},
		{&w.logits, 4 * int64(min(n, logitRows)) * int64(cfg.Vocab)},
		{&w.inv, 4 * N * int64(cfg.Heads)},
	} {
		if err := alloc(a.p, a.bytes); err != nil {
			return fmt.Errorf("forward buffers for %d rows: %w", n, err)
		}
	}
	if w.stage != nil {
		if err := c.FreeHost(w.stage); err != nil {
			return err
		}
		w.stage = nil
	}
	var err error
	if w.stage, err = c.HostAlloc(inputs(cfg, n).size); err != nil {
		return fmt.Errorf("pinned input buffer for %d rows: %w", n, err)
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
	rowidx []int32 // rows that want logits or hidden states
	tiles  []int32
	kvs    []uint64 // [2][layers][n]
	cs     []float32
	maxPos int
	ld     int
	// runs: a pass of at most GraphRows rows whose sequences' rows are
	// runs (consecutive rows at consecutive positions, at most
	// cukernels.AttnFusedRun a run) and whose contexts are at most
	// Options.FusedAttention positions, so the layers may attend with
	// cukernels.RoPEAttention; first holds each row's run's first row.
	runs  bool
	first []int32
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
		if r.Logits != nil || r.Hidden != nil {
			p.rowidx = append(p.rowidx, int32(i))
		}
	}
	if n <= RowAttnRows {
		p.tiles = rowTiles(n)
	} else {
		p.tiles = cukernels.AttnTiles(p.kvs[:n], p.pos, cfg.Heads, cfg.KVHeads, cfg.HeadDim)
	}
	if p.maxPos < b.d.fusedN {
		p.first, p.runs = runFirsts(rows)
	}
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

// RowAttnRows is the most rows of a forward pass that attend row by row,
// each row a tile of its own, with the attention kernels made for decode
// steps (a block per row and head for the softmax, rather than tiles of
// consecutive positions sharing their K and V loads). A speculative
// verification step is a few consecutive rows of one sequence: tiled,
// their softmax would be one block's work over the whole context. Every
// output element keeps its order either way, so the bits are the same.
const RowAttnRows = 16

// runFirsts returns, for a pass of at most GraphRows rows whose
// sequences' rows are runs (consecutive rows at consecutive positions, at
// most cukernels.AttnFusedRun of them), each row's run's first row, and
// true; for any other pass nil and false.
func runFirsts(rows []engine.Row) ([]int32, bool) {
	if len(rows) > GraphRows {
		return nil, false
	}
	first := make([]int32, len(rows))
	for i, r := range rows {
		if i > 0 && r.KV == rows[i-1].KV {
			f := first[i-1]
			if r.Pos != rows[i-1].Pos+1 || i-int(f) >= cukernels.AttnFusedRun {
				return nil, false
			}
			first[i] = f
			continue
		}
		for _, o := range rows[:i] {
			if o.KV == r.KV {
				return nil, false // the sequence's rows are apart
			}
		}
		first[i] = int32(i)
	}
	return first, true
}

// rowTiles returns the tile bounds of n rows, a tile per row.
func rowTiles(n int) []int32 {
	t := make([]int32, n+1)
	for i := range t {
		t[i] = int32(i)
	}
	return t
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
	mBytes := cukernels.Attention{Heads: cfg.Heads, Dim: cfg.HeadDim, N: p.n, NTiles: len(p.tiles) - 1, LD: p.ld}.MBytes()
	return b.d.dev.Do(func(c *cu.Ctx) error {
		if err := b.ensure(c, p.n, sBytes, mBytes); err != nil {
			return err
		}
		r := &run{b: b, c: c, p: p}
		var before cu.GraphStats
		if b.d.graphs && p.n <= GraphRows {
			if b.graphs == nil {
				b.graphs = cu.NewGraphs(maxGraphs * b.d.graphLaunches(len(b.layers)))
			}
			r.graph, before = true, b.graphs.Stats()
			b.rec, b.deps = b.rec[:0], b.deps[:0]
		}
		defer func() {
			after := before
			if r.graph {
				after = b.graphs.Stats()
			}
			b.d.count(r.direct, before, after)
		}()
		r.upload()
		r.embed()
		for li := range b.layers {
			if r.err == nil {
				r.err = ctx.Err()
			}
			r.layer(li)
			if r.graph && (li+1)%b.d.glay == 0 && li+1 < len(b.layers) {
				// This graph launch runs while the host records the next.
				r.flush()
			}
		}
		r.logits(rows)
		if r.err == nil && b.d.prof != nil {
			r.err = b.d.prof.collect(c)
		}
		if r.err != nil {
			// What was queued still reads the pinned inputs; the next
			// pass writes them only once it is done.
			c.Sync(c.Stream())
		}
		return r.err
	})
}

// run is one Forward on the device's thread; the first error stops it.
type run struct {
	b      *backend
	c      *cu.Ctx
	p      *batch
	err    error
	graph  bool  // record the launches into b.rec and run them as a graph (flush)
	tail   []int // graph pass: the launches the next one waits for (nil: the one before it)
	direct int   // kernels launched directly
	// the device copies of the batch's inputs (upload)
	tokens, pos, rowidx, tiles, first cu.DevicePtr
	kvs, cs                           cu.DevicePtr
}

func dp(p cu.DevicePtr) cukernels.DevPtr { return cukernels.DevPtr(p) }

// launch runs l unless an error came first; in a graph pass it records
// l for flush.
func (r *run) launch(l cukernels.Launch, err error) {
	if r.err != nil {
		return
	}
	if err != nil {
		r.err = err
		return
	}
	d := r.b.d
	f, err := d.function(r.c, l)
	if err != nil {
		r.err = err
		return
	}
	if r.graph {
		b := r.b
		var after []int
		if r.tail != nil {
			lo := len(b.deps)
			b.deps = append(b.deps, r.tail...)
			after = b.deps[lo:len(b.deps):len(b.deps)]
			r.tail = nil
		}
		// Every kernel of the module waits for its predecessors before it
		// touches what they write (cukernels: TestArtifacts, checkEarlyWait).
		b.rec = append(b.rec, cu.KernelLaunch{F: f, Grid: l.Grid, Block: l.Block, Shared: l.Shared, Args: l.Args, After: after,
			Early: b.d.early})
		return
	}
	r.direct++
	r.err = d.launchNow(r.c, f, l)
}

// flush runs the launches a graph pass recorded as one graph launch
// (cu.Ctx.RunGraph): a held graph of the same kernels with its changed
// nodes set, or a new one.
func (r *run) flush() {
	b := r.b
	if !r.graph || len(b.rec) == 0 {
		return
	}
	if r.err == nil {
		r.err = r.c.RunGraph(b.graphs, b.rec, r.c.Stream())
	}
	clear(b.rec) // drop the arguments' references
	b.rec, b.deps, r.tail = b.rec[:0], b.deps[:0], nil
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

// inputLayout is where a pass of n rows finds its inputs in
// workspace.in (and stage): tokens, positions, row indices, tiles and
// the runs' first rows (int32, n+1 slots each) from 0, stride bytes
// apart; each row's K and V address per layer (uint64 [2][layers][n]) at
// kvs; the RoPE angles (float32 [n][RopeDim]) at cs; size bytes in all.
type inputLayout struct {
	stride, kvs, cs, size int
}

func inputs(cfg *engine.Config, n int) inputLayout {
	var l inputLayout
	l.stride = 4 * (n + 1)
	l.kvs = (5*l.stride + 7) &^ 7
	l.cs = l.kvs + 8*2*cfg.Layers*n
	l.size = max(l.cs+4*n*cfg.RopeDim, 16)
	return l
}

// upload copies the batch's tokens, positions, row indices, tiles, cache
// addresses and RoPE angles to the device: one asynchronous copy on the
// device's stream from the pinned stage, which nothing writes again
// before the pass has synchronised.
func (r *run) upload() {
	w, p := &r.b.ws, r.p
	l := inputs(r.b.cfg, p.n)
	buf := w.stage.Bytes()[:l.size]
	copy(buf, i32Bytes(p.tokens))
	copy(buf[l.stride:], i32Bytes(p.pos))
	copy(buf[2*l.stride:], i32Bytes(p.rowidx))
	copy(buf[3*l.stride:], i32Bytes(p.tiles))
	copy(buf[4*l.stride:], i32Bytes(p.first))
	copy(buf[l.kvs:], u64Bytes(p.kvs))
	copy(buf[l.cs:], f32Bytes(p.cs))
	in := w.in
	r.tokens, r.pos, r.rowidx, r.tiles = in, in+cu.DevicePtr(l.stride), in+cu.DevicePtr(2*l.stride), in+cu.DevicePtr(3*l.stride)
	r.first = in + cu.DevicePtr(4*l.stride)
	r.kvs, r.cs = in+cu.DevicePtr(l.kvs), in+cu.DevicePtr(l.cs)
	if r.err == nil {
		r.err = r.c.CopyHtoDAsync(in, buf, r.c.Stream())
	}
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
	ms := make([]*mat, len(ps))
	for i, pr := range ps {
		ms[i] = pr.m
	}
	r.quantize(x, n, cols, ms...)
	for _, pr := range ps {
		r.matmul(pr.m, x, pr.y, n)
	}
}

// quantize quantizes the n rows of cols floats at x once for each
// activation form the matrices ms take (none for float activations).
func (r *run) quantize(x cu.DevicePtr, n, cols int, ms ...*mat) {
	var done [8]cukernels.Act
	nd := 0
	for _, m := range ms {
		a := m.act
		if a == cukernels.ActF32 || slices.Contains(done[:nd], a) {
			continue
		}
		l, ok, err := cukernels.QuantizeActs(a, dp(x), r.b.ws.acts[a], n, cols)
		if ok || err != nil {
			r.launch(l, err)
		}
		if nd < len(done) {
			done[nd] = a
			nd++
		}
	}
}

// fusedAct returns the activation form every matrix of ms takes, and ok
// when it is one a normalization can quantize into as it writes its
// output (cukernels.FusedQuant): the normalization then replaces the
// separate quantization.
func (r *run) fusedAct(ms ...*mat) (cukernels.Act, bool) {
	a := ms[0].act
	for _, m := range ms[1:] {
		if m.act != a {
			return a, false
		}
	}
	return a, cukernels.FusedQuant(a)
}

// matmul multiplies the n rows at x (as quantize left them for m's
// activation form) by m into y.
func (r *run) matmul(m *mat, x, y cu.DevicePtr, n int) {
	r.launch(r.matMul(m, x, y, n).Launch())
}

func (r *run) matMul(m *mat, x, y cu.DevicePtr, n int) cukernels.MatMul {
	return m.mul(r.b.ws.acts, x, y, n)
}

// mul describes the product of the n rows at x by m into y: float rows
// read at x, or the activations quantized for m in acts.
func (m *mat) mul(acts map[cukernels.Act]cukernels.ActBufs, x, y cu.DevicePtr, n int) cukernels.MatMul {
	bufs := cukernels.ActBufs{X: dp(x)}
	if m.act != cukernels.ActF32 {
		bufs = acts[m.act]
	}
	t := m.t
	return cukernels.MatMul{Type: t.Type, W: dp(m.p), Rows: t.Rows, Cols: t.Cols, Acts: bufs, Y: dp(y), N: n}
}

// matmulBias is matmul followed by y += bias (cols floats per row; none
// when bias is 0), in the product's epilogue where it has one.
func (r *run) matmulBias(m *mat, x, y cu.DevicePtr, n int, bias cu.DevicePtr) {
	mm := r.matMul(m, x, y, n)
	if bias == 0 || mm.Epilogue() {
		mm.Bias = dp(bias)
		r.launch(mm.Launch())
		return
	}
	r.launch(mm.Launch())
	r.launch(cukernels.AddBias(dp(y), dp(bias), n, m.t.Rows))
}

// matmulAdd sets res = res + x·m (the residual), in the product's
// epilogue where it has one, else through tmp.
func (r *run) matmulAdd(m *mat, x, res, tmp cu.DevicePtr, n int) {
	mm := r.matMul(m, x, res, n)
	if mm.Epilogue() {
		mm.Res = dp(res)
		r.launch(mm.Launch())
		return
	}
	mm.Y = dp(tmp)
	r.launch(mm.Launch())
	r.launch(cukernels.Add(dp(res), dp(tmp), dp(res), n*m.t.Rows))
}

// parallel runs each branch's launches in order. In a graph pass the
// branches wait for what came before but not for each other, so their
// kernels may run at the same time, and the launch after parallel waits
// for every branch; a branch may touch no buffer another one writes.
// Launched directly, the branches run one after the other.
func (r *run) parallel(branches ...func()) {
	if !r.graph || len(branches) == 0 {
		for _, f := range branches {
			f()
		}
		return
	}
	start := r.frontier()
	var ends []int
	for _, f := range branches {
		r.tail = start
		n0 := len(r.b.rec)
		f()
		if len(r.b.rec) == n0 {
			ends = append(ends, start...)
		} else {
			ends = append(ends, r.frontier()...)
		}
	}
	slices.Sort(ends)
	r.tail = slices.Compact(ends)
}

// frontier returns the launches the next launch of a graph pass waits
// for.
func (r *run) frontier() []int {
	if r.tail != nil {
		return r.tail
	}
	if n := len(r.b.rec); n > 0 {
		return []int{n - 1}
	}
	return []int{}
}

// layer runs block li for every row. The Q, K and V products (each with
// its bias and head norm), and the gate and up products, are parallel
// branches (they read the same activations and write their own buffers);
// a one-row pass whose group of matrices lies end to end (layer.qkv with
// RoPE, layer.gateUp) multiplies the group in one launch instead, into
// workspace.qkv or workspace.gu: each output row is the same product of
// the same row either way. With RoPE, a pass whose rows are short runs
// over short contexts (batch.runs) rotates, stores and attends in one launch
// (cukernels.RoPEAttention); any other pass rotates q and k and stores k
// and v in one launch (cukernels.RoPEKVStore), then attends
// (cukernels.Attention); without RoPE the KV store follows the K and V
// branches. Both ways compute the same bits.
func (r *run) layer(li int) {
	b, w, p, cfg := r.b, &r.b.ws, r.p, r.b.cfg
	L := &b.layers[li]
	n := p.n
	H, Q, KV, F, D := cfg.Hidden, cfg.Heads*cfg.HeadDim, cfg.KVRow(), cfg.FFN, cfg.HeadDim
	neox := cfg.Rope == engine.RopeNeoX
	if a, ok := r.fusedAct(&L.wq, &L.wk, &L.wv); ok {
		r.launch(cukernels.RMSNormQuant(dp(w.x), 0, dp(w.xn), dp(L.attnNorm), n, H, cfg.Eps, a, w.acts[a]))
	} else {
		r.launch(cukernels.RMSNorm(dp(w.x), 0, dp(w.xn), dp(L.attnNorm), n, H, cfg.Eps))
		r.quantize(w.xn, n, H, &L.wq, &L.wk, &L.wv)
	}
	qp, kp, vp := w.q, w.k, w.v
	grouped := n == 1 && L.qkv.p != 0 && cfg.RopeDim > 0
	if grouped {
		qp = w.qkv
		kp = qp + cu.DevicePtr(4*Q)
		vp = kp + cu.DevicePtr(4*KV)
	}
	qNorm := func() {
		if L.qNorm != 0 {
			r.launch(cukernels.RMSNormHeads(dp(qp), n, cfg.Heads, D, Q, dp(L.qNorm), cfg.Eps))
		}
	}
	kNorm := func() {
		if L.qNorm != 0 {
			r.launch(cukernels.RMSNormHeads(dp(kp), n, cfg.KVHeads, D, KV, dp(L.kNorm), cfg.Eps))
		}
	}
	qBranch := func(rope bool) {
		r.matmulBias(&L.wq, w.xn, qp, n, L.bq)
		qNorm()
		if rope {
			r.launch(cukernels.RoPE(dp(qp), n, cfg.Heads, D, Q, cfg.RopeDim, neox, dp(r.cs)))
		}
	}
	kBranch := func(rope bool) {
		r.matmulBias(&L.wk, w.xn, kp, n, L.bk)
		kNorm()
		if rope {
			r.launch(cukernels.RoPE(dp(kp), n, cfg.KVHeads, D, KV, cfg.RopeDim, neox, dp(r.cs)))
		}
	}
	vBranch := func() {
		r.matmulBias(&L.wv, w.xn, vp, n, L.bv)
	}
	f16 := b.kv == kvcache.DTypeF16
	kc := r.kvs + cu.DevicePtr(8*li*n)
	vc := r.kvs + cu.DevicePtr(8*(cfg.Layers+li)*n)
	ropeKV := cukernels.RoPEKVStore{F16: f16, Q: dp(qp), K: dp(kp), V: dp(vp), N: n, Heads: cfg.Heads,
		KVHeads: cfg.KVHeads, Dim: D, RopeDim: cfg.RopeDim, NeoX: neox, CS: dp(r.cs), KC: dp(kc), VC: dp(vc),
		Pos: dp(r.pos)}
	switch {
	case grouped:
		r.matmulBias(&L.qkv, w.xn, w.qkv, n, L.bq)
		r.parallel(qNorm, kNorm)
	case cfg.RopeDim > 0:
		r.parallel(func() { qBranch(false) }, func() { kBranch(false) }, vBranch)
	default:
		r.parallel(func() { qBranch(true) }, func() {
			r.parallel(func() { kBranch(true) }, vBranch)
			r.launch(cukernels.KVStore(f16, dp(kp), dp(vp), n, KV, dp(kc), dp(vc), dp(r.pos)))
		})
	}
	att := cukernels.Attention{F16: f16, Heads: cfg.Heads, KVHeads: cfg.KVHeads, Dim: D, N: n,
		Q: dp(qp), Out: dp(w.att), KC: dp(kc), VC: dp(vc), Pos: dp(r.pos), Tiles: dp(r.tiles),
		NTiles: len(p.tiles) - 1, MaxPos: p.maxPos, S: dp(w.s), LD: p.ld, M: dp(w.m), Inv: dp(w.inv)}
	// A decode batch's attention quantizes its output for the output
	// product itself where it can.
	quantized := att.QuantizesOut(L.wo.act)
	if quantized {
		att.OutAct, att.OutQ = L.wo.act, w.acts[L.wo.act]
	}
	fused := cukernels.RoPEAttention{RoPEKVStore: ropeKV, First: dp(r.first), Out: dp(w.att), MaxPos: p.maxPos,
		OutAct: att.OutAct, OutQ: att.OutQ}
	if p.runs && fused.Fits() {
		r.launch(fused.Launch())
	} else {
		if cfg.RopeDim > 0 {
			r.launch(ropeKV.Launch())
		}
		ls, err := att.Launches()
		for _, l := range ls {
			r.launch(l, err)
		}
	}
	if quantized {
		r.matmul(&L.wo, w.att, w.o, n)
	} else {
		r.products(w.att, n, Q, product{&L.wo, w.o})
	}
	if a, ok := r.fusedAct(&L.gate, &L.up); ok {
		r.launch(cukernels.AddRMSNormQuant(dp(w.x), dp(w.o), dp(L.bo), dp(L.ffnNorm), dp(w.xn), n, H, cfg.Eps, a, w.acts[a]))
	} else {
		r.launch(cukernels.AddRMSNorm(dp(w.x), dp(w.o), dp(L.bo), dp(L.ffnNorm), dp(w.xn), n, H, cfg.Eps))
		r.quantize(w.xn, n, H, &L.gate, &L.up)
	}
	gp, up := w.ffA, w.ffB
	if n == 1 && L.gateUp.p != 0 {
		gp, up = w.gu, w.gu+cu.DevicePtr(4*F)
		r.matmul(&L.gateUp, w.xn, w.gu, n)
	} else {
		r.parallel(func() { r.matmul(&L.gate, w.xn, gp, n) }, func() { r.matmul(&L.up, w.xn, up, n) })
	}
	if a, ok := r.fusedAct(&L.down); ok {
		r.launch(cukernels.SiLUMulQuant(dp(gp), dp(up), dp(gp), n, F, a, w.acts[a]))
	} else {
		r.launch(cukernels.SiLUMul(dp(gp), dp(up), dp(gp), n*F))
		r.quantize(gp, n, F, &L.down)
	}
	r.matmulAdd(&L.down, gp, w.x, w.o, n)
}

// pinnedLogitRows is the most rows whose logits go through the pinned
// buffer (workspace.pinned): a decode step's, up to 8 streams.
const pinnedLogitRows = 8

// queueLogits queues the copy of the first count floats of w.logits into
// the pinned buffer, allocating it at first use.
func (r *run) queueLogits(count int) {
	w := &r.b.ws
	if w.pinned == nil {
		if w.pinned, r.err = r.c.HostAlloc(4 * pinnedLogitRows * r.b.cfg.Vocab); r.err != nil {
			r.err = fmt.Errorf("pinned logits buffer: %w", r.err)
			return
		}
	}
	r.err = r.c.CopyDtoHAsync(w.pinned.Bytes()[:4*count], w.logits, r.c.Stream())
}

// copyLogits copies the logits of the rows of g (one logits group, in
// w.logits in g's order) into their Logits: from the pinned buffer when
// queueLogits has filled it (pinned), else through w.host.
func (r *run) copyLogits(rows []engine.Row, g []int32, V int, pinned bool) {
	w, m := &r.b.ws, len(g)
	var host []float32
	if pinned {
		host = unsafe.Slice((*float32)(unsafe.Pointer(&w.pinned.Bytes()[0])), m*V)
	} else {
		if cap(w.host) < m*V {
			w.host = make([]float32, logitRows*V)
		}
		host = w.host[:m*V]
		if r.err = r.c.CopyDtoH(f32Bytes(host), w.logits); r.err != nil {
			return
		}
	}
	for j, i := range g {
		copy(rows[i].Logits, host[j*V:(j+1)*V])
	}
}

// hidden copies the output norm's result of the rows of g (one logits
// group, whose normed rows w.xn holds in g's order) that want it into
// their Hidden.
func (r *run) hidden(rows []engine.Row, g []int32) {
	want := false
	for _, i := range g {
		want = want || rows[i].Hidden != nil
	}
	if !want || r.err != nil {
		return
	}
	w, H := &r.b.ws, r.b.cfg.Hidden
	if cap(w.hostH) < len(g)*H {
		w.hostH = make([]float32, logitRows*H)
	}
	host := w.hostH[:len(g)*H]
	if r.err = r.c.CopyDtoH(f32Bytes(host), w.xn); r.err != nil {
		return
	}
	for j, i := range g {
		copy(rows[i].Hidden, host[j*H:(j+1)*H])
	}
}

// logits computes the output of the rows that want it, logitRows at a
// time, and copies it into their Logits; the output norm's result of the
// rows that want it goes to their Hidden (the exact numerics make it the
// CPU engine's hidden state, bit for bit).
func (r *run) logits(rows []engine.Row) {
	b, w, p, cfg := r.b, &r.b.ws, r.p, r.b.cfg
	H, V := cfg.Hidden, cfg.Vocab
	for lo := 0; lo < len(p.rowidx) && r.err == nil; lo += logitRows {
		g := p.rowidx[lo:min(lo+logitRows, len(p.rowidx))]
		m := len(g)
		out := false // whether a row of g wants logits (not only its hidden state)
		for _, i := range g {
			out = out || rows[i].Logits != nil
		}
		rowidx := dp(r.rowidx + cu.DevicePtr(4*lo))
		if a, ok := r.fusedAct(&b.output); ok {
			r.launch(cukernels.RMSNormQuant(dp(w.x), rowidx, dp(w.xn), dp(b.outNorm), m, H, cfg.Eps, a, w.acts[a]))
			if out {
				r.matmul(&b.output, w.xn, w.logits, m)
			}
		} else {
			r.launch(cukernels.RMSNorm(dp(w.x), rowidx, dp(w.xn), dp(b.outNorm), m, H, cfg.Eps))
			if out {
				r.products(w.xn, m, H, product{&b.output, w.logits})
			}
		}
		r.flush()
		if r.err != nil {
			return
		}
		pinned := out && m <= pinnedLogitRows
		if pinned {
			// Queued behind the product, so one wait covers both.
			r.queueLogits(m * V)
			if r.err != nil {
				return
			}
		}
		if r.err = r.c.Sync(r.c.Stream()); r.err != nil {
			return
		}
		if out {
			r.copyLogits(rows, g, V, pinned)
		}
		r.hidden(rows, g)
	}
	r.flush()
	if r.err == nil {
		r.err = r.c.Sync(r.c.Stream())
	}
}
