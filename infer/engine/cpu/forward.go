package cpu

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/muserhq/muser/infer/engine"
	"github.com/muserhq/muser/infer/ggml"
	"github.com/muserhq/muser/infer/kernels"
	"github.com/muserhq/muser/infer/kvcache"
)

// row is one token of a batch, flattened.
type row struct {
	kv  *kvcache.Cache
	tok int32
	pos int
	out []float32 // where its logits go; nil when not wanted
	hid []float32 // where its final-normed hidden state goes; nil when not wanted
}

// workspace holds Forward's buffers, grown to the largest batch seen.
type workspace struct {
	n        int
	x, xn    []float32     // [n][hidden]
	q, att   []float32     // [n][heads·head_dim]
	k, v     []float32     // [n][kv_heads·head_dim]
	ffA, ffB []float32     // [n][ffn]
	rope     []float32     // [n][rope_dim]: cos, sin per rotated pair
	logits   []float32     // [logitRows][vocab]
	attn     []attnScratch // per attention work chunk
	tiles    []attnTile
	rows     []row
	outRows  []int
}

// logitRows is the most tokens whose logits one output product computes
// (bounding the buffer at logitRows·vocab floats).
const logitRows = 64

func (w *workspace) ensure(c *engine.Config, n int) {
	if n <= w.n {
		return
	}
	w.n = n
	q, kv := c.Heads*c.HeadDim, c.KVRow()
	w.x = make([]float32, n*c.Hidden)
	w.xn = make([]float32, n*c.Hidden)
	w.q = make([]float32, n*q)
	w.att = make([]float32, n*q)
	w.k = make([]float32, n*kv)
	w.v = make([]float32, n*kv)
	w.ffA = make([]float32, n*c.FFN)
	w.ffB = make([]float32, n*c.FFN)
	w.rope = make([]float32, n*c.RopeDim)
}

// Forward computes rows (engine.Backend): every row's KV must be a cache
// this backend made.
func (b *backend) Forward(ctx context.Context, rows []engine.Row) error {
	rs := b.ws.rows[:0]
	for i, r := range rows {
		c, ok := r.KV.(*kvcache.Cache)
		if !ok || c.DType() != b.kv {
			return fmt.Errorf("%w: row %d: a KV cache of another backend", engine.ErrBatch, i)
		}
		rs = append(rs, row{kv: c, tok: r.Token, pos: r.Pos, out: r.Logits, hid: r.Hidden})
	}
	b.ws.rows = rs
	defer clear(b.ws.rows) // drop references to caches and logits
	return b.forwardRows(ctx, rs)
}

// each runs f(i) for i in [0,n) on the pool.
func (b *backend) each(n int, f func(i int)) {
	if n == 1 {
		f(0)
		return
	}
	b.pool.Parallel(n, f)
}

// forwardRows runs at most MaxRows rows through the model.
func (b *backend) forwardRows(ctx context.Context, rows []row) error {
	c := b.cfg
	n := len(rows)
	w := &b.ws
	w.ensure(c, n)
	H, Q, KV, F := c.Hidden, c.Heads*c.HeadDim, c.KVRow(), c.FFN
	x, xn := w.x[:n*H], w.xn[:n*H]
	q, k, v, att := w.q[:n*Q], w.k[:n*KV], w.v[:n*KV], w.att[:n*Q]
	ffA, ffB := w.ffA[:n*F], w.ffB[:n*F]

	b.each(n, func(i int) {
		b.embed(x[i*H:(i+1)*H], rows[i].tok)
		b.w.Rope.Angles(w.rope[i*c.RopeDim:(i+1)*c.RopeDim], rows[i].pos)
	})
	for li := range b.layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		L := &b.layers[li]
		b.each(n, func(i int) { kernels.RMSNorm(xn[i*H:(i+1)*H], x[i*H:(i+1)*H], L.AttnNorm, c.Eps) })
		b.pool.MatMul(q, L.wq, xn, n)
		b.pool.MatMul(k, L.wk, xn, n)
		b.pool.MatMul(v, L.wv, xn, n)
		b.each(n, func(i int) {
			b.qkv(li, L, rows[i], q[i*Q:(i+1)*Q], k[i*KV:(i+1)*KV], v[i*KV:(i+1)*KV], w.rope[i*c.RopeDim:(i+1)*c.RopeDim])
		})
		b.attention(li, rows, q, att)
		b.pool.MatMul(xn, L.wo, att, n)
		b.each(n, func(i int) {
			xi, oi := x[i*H:(i+1)*H], xn[i*H:(i+1)*H]
			if L.Bo != nil {
				kernels.Add(oi, oi, L.Bo)
			}
			kernels.Add(xi, xi, oi)
			kernels.RMSNorm(oi, xi, L.FFNNorm, c.Eps)
		})
		b.pool.MatMul(ffA, L.wGate, xn, n)
		b.pool.MatMul(ffB, L.wUp, xn, n)
		b.each(n, func(i int) { kernels.SiLUMul(ffA[i*F:(i+1)*F], ffA[i*F:(i+1)*F], ffB[i*F:(i+1)*F]) })
		b.pool.MatMul(xn, L.wDown, ffA, n)
		b.each(n, func(i int) { kernels.Add(x[i*H:(i+1)*H], x[i*H:(i+1)*H], xn[i*H:(i+1)*H]) })
	}
	b.hidden(rows, x)
	return b.logits(rows, x)
}

// HiddenStates reports that Forward fills Row.Hidden
// (engine.HiddenBackend).
func (b *backend) HiddenStates() bool { return true }

// hidden writes the final-normed hidden state of the rows that want it:
// the same RMSNorm of the same row that logits computes before the output
// product.
func (b *backend) hidden(rows []row, x []float32) {
	c := b.cfg
	H := c.Hidden
	if !slices.ContainsFunc(rows, func(r row) bool { return r.hid != nil }) {
		return
	}
	b.each(len(rows), func(i int) {
		if h := rows[i].hid; h != nil {
			kernels.RMSNorm(h[:H], x[i*H:(i+1)*H], b.w.OutNorm, c.Eps)
		}
	})
}

// embed writes token tok's embedding row to dst.
func (b *backend) embed(dst []float32, tok int32) {
	e := b.tokEmbd
	// The row size and type were checked by NewMatrix and Load, so
	// Dequantize cannot fail here.
	_ = ggml.Dequantize(e.Type, e.Data[int(tok)*e.RowBytes:(int(tok)+1)*e.RowBytes], dst)
}

// logits computes the output for the rows that want it, logitRows at a time.
func (b *backend) logits(rows []row, x []float32) error {
	c := b.cfg
	w := &b.ws
	H, V := c.Hidden, c.Vocab
	want := w.outRows[:0]
	for i, r := range rows {
		if r.out != nil {
			want = append(want, i)
		}
	}
	w.outRows = want
	for lo := 0; lo < len(want); lo += logitRows {
		g := want[lo:min(lo+logitRows, len(want))]
		if len(w.logits) < len(g)*V {
			w.logits = make([]float32, min(len(want), logitRows)*V)
		}
		xn := w.xn[:len(g)*H]
		b.each(len(g), func(j int) {
			i := g[j]
			kernels.RMSNorm(xn[j*H:(j+1)*H], x[i*H:(i+1)*H], b.w.OutNorm, c.Eps)
		})
		b.pool.MatMul(w.logits, b.output, xn, len(g))
		for j, i := range g {
			copy(rows[i].out, w.logits[j*V:(j+1)*V])
		}
	}
	return nil
}

// qkv finishes one token's Q, K and V of layer li: biases, Q/K norms,
// RoPE, then stores K and V in the token's sequence cache.
func (b *backend) qkv(li int, L *layer, r row, q, k, v, rope []float32) {
	c := b.cfg
	if L.Bq != nil {
		kernels.Add(q, q, L.Bq)
		kernels.Add(k, k, L.Bk)
		kernels.Add(v, v, L.Bv)
	}
	D := c.HeadDim
	if L.QNorm != nil {
		for h := 0; h < c.Heads; h++ {
			kernels.RMSNorm(q[h*D:(h+1)*D], q[h*D:(h+1)*D], L.QNorm, c.Eps)
		}
		for h := 0; h < c.KVHeads; h++ {
			kernels.RMSNorm(k[h*D:(h+1)*D], k[h*D:(h+1)*D], L.KNorm, c.Eps)
		}
	}
	for h := 0; h < c.Heads; h++ {
		b.rotate(q[h*D:(h+1)*D], rope)
	}
	for h := 0; h < c.KVHeads; h++ {
		b.rotate(k[h*D:(h+1)*D], rope)
	}
	row := c.KVRow()
	off := r.pos * row
	cache := r.kv
	if cache.DType() == kvcache.DTypeF16 {
		f32ToF16s(cache.K16(li)[off:off+row], k)
		f32ToF16s(cache.V16(li)[off:off+row], v)
	} else {
		copy(cache.K32(li)[off:off+row], k)
		copy(cache.V32(li)[off:off+row], v)
	}
}

// rotate applies RoPE to one head's vector. Every product is rounded to
// float32 before the sum (explicit conversions forbid FMA fusion, so the
// result is the same on every architecture).
func (b *backend) rotate(x, cs []float32) {
	c := b.cfg
	half := c.RopeDim / 2
	for i := 0; i < half; i++ {
		co, s := cs[2*i], cs[2*i+1]
		a, b := 2*i, 2*i+1
		if c.Rope == engine.RopeNeoX {
			a, b = i, i+half
		}
		x0, x1 := x[a], x[b]
		x[a] = float32(x0*co) - float32(x1*s)
		x[b] = float32(x0*s) + float32(x1*co)
	}
}

// attnTileQueries is about how many queries an attention tile holds (at
// least; see attention): the
// query heads of one KV head for as many consecutive tokens of one
// sequence as fit. Each K and V row is read once per tile.
const attnTileQueries = 16

// attnTile is a run of consecutive rows of one sequence whose queries
// are computed together, one KV head at a time.
type attnTile struct{ lo, hi int }

// attnScratch is one work chunk's attention buffers.
type attnScratch struct {
	q   []float32 // the tile's queries rounded to f16, [nq][head_dim]
	s   []float32 // their scores, then weights, [nq][ld]
	y   []float32 // their outputs, [nq][head_dim] (f32 cache: a part's sums)
	t   []float32 // the weighted sum's part sums after the first, [nq][head_dim]
	n   []int     // positions each query attends to
	one []float32 // f32 cache: one query's scores
}

// attention computes att = softmax(q·Kᵀ/√d)·V per token and head over
// positions 0..pos of the token's sequence, reading K and V back from the
// cache (so a restored prefix and a recomputed one are used identically).
// With an f16 cache, q and the attention weights are rounded to f16 before
// they multiply the f16 K and V rows, as llama.cpp's CPU attention does
// (its KQ and KQV products take f16 operands); products and sums are f32.
//
// Work is split into tasks of one KV head and one tile of consecutive
// tokens of a sequence; a task computes all the tile's query heads of
// that KV head together (kernels.ScoresF16, kernels.WeightedSumF16), so
// each cached row is loaded once per tile. Every query's arithmetic is
// the same whatever its tile, task or thread (doc.go, "Exactness").
func (b *backend) attention(li int, rows []row, q, att []float32) {
	c := b.cfg
	w := &b.ws
	group := c.Heads / c.KVHeads
	// Tokens per tile: about attnTileQueries queries, a multiple of 4
	// where that takes at most 4 tokens (the kernels share V rows among
	// groups of 4 queries).
	per := max(1, attnTileQueries/group)
	for p := per; p <= 4; p++ {
		if p*group%4 == 0 {
			per = p
			break
		}
	}
	tiles := w.tiles[:0]
	for lo := 0; lo < len(rows); {
		hi := lo + 1
		for hi < len(rows) && hi-lo < per && rows[hi].kv == rows[lo].kv && rows[hi].pos == rows[hi-1].pos+1 {
			hi++
		}
		tiles = append(tiles, attnTile{lo, hi})
		lo = hi
	}
	w.tiles = tiles
	// Few tiles (decode) on many threads: split each GQA group's query
	// heads over several tasks so every thread has work.
	split := 1
	for split < group && len(tiles)*c.KVHeads*split < b.pool.Threads() {
		split++
	}
	hpt := (group + split - 1) / split // query heads per task
	split = (group + hpt - 1) / hpt
	tasks := len(tiles) * c.KVHeads * split
	chunks := min(tasks, 4*b.pool.Threads())
	for len(w.attn) < chunks {
		w.attn = append(w.attn, attnScratch{})
	}
	// Chunk ci takes tasks ci, ci+chunks, ...: later tokens attend to more
	// positions, so interleaving balances the chunks.
	b.each(chunks, func(ci int) {
		sc := &w.attn[ci]
		for t := ci; t < tasks; t += chunks {
			kv, part := t%(c.KVHeads*split)/split, t%split
			g0 := part * hpt
			b.attendTile(li, rows, tiles[t/(c.KVHeads*split)], kv, g0, min(g0+hpt, group), q, att, sc)
		}
	})
}

// attendTile computes the outputs of query heads g0..g1-1 of KV head
// kvh's group for the tokens of tile tl.
func (b *backend) attendTile(li int, rows []row, tl attnTile, kvh, g0, g1 int, q, att []float32, sc *attnScratch) {
	c := b.cfg
	D, Q, stride := c.HeadDim, c.Heads*c.HeadDim, c.KVRow()
	group := c.Heads / c.KVHeads
	scale := float32(1 / math.Sqrt(float64(D)))
	cache := rows[tl.lo].kv
	off := kvh * D
	if cache.DType() != kvcache.DTypeF16 {
		K, V := cache.K32(li), cache.V32(li)
		sc.y = slices.Grow(sc.y[:0], D)[:D]
		for i := tl.lo; i < tl.hi; i++ {
			n := rows[i].pos + 1
			sc.one = slices.Grow(sc.one[:0], n)[:n]
			s := sc.one
			for h := kvh*group + g0; h < kvh*group+g1; h++ {
				qh := q[i*Q+h*D : i*Q+(h+1)*D]
				out := att[i*Q+h*D : i*Q+(h+1)*D]
				for j := range n {
					s[j] = kernels.Dot(K[j*stride+off:j*stride+off+D], qh) * scale
				}
				kernels.Softmax(s)
				kernels.AXPYParts(out, sc.y, s, V[off:], stride)
			}
		}
		return
	}
	ng := g1 - g0
	nq := (tl.hi - tl.lo) * ng
	ld := rows[tl.hi-1].pos + 1 // the tile's longest row of scores
	sc.q = slices.Grow(sc.q[:0], nq*D)[:nq*D]
	sc.y = slices.Grow(sc.y[:0], nq*D)[:nq*D]
	sc.t = slices.Grow(sc.t[:0], nq*D)[:nq*D]
	sc.s = slices.Grow(sc.s[:0], nq*ld)[:nq*ld]
	sc.n = slices.Grow(sc.n[:0], nq)[:nq]
	for i := tl.lo; i < tl.hi; i++ {
		for g := range ng {
			qi := (i-tl.lo)*ng + g
			h := kvh*group + g0 + g
			copy(sc.q[qi*D:(qi+1)*D], q[i*Q+h*D:i*Q+(h+1)*D])
			sc.n[qi] = rows[i].pos + 1
		}
	}
	kernels.RoundF16s(sc.q)
	K, V := cache.K16(li)[off:], cache.V16(li)[off:]
	// Scores against every position the tile's last token sees; the
	// earlier tokens ignore their extra columns (those rows are written:
	// they are the tile's own tokens).
	kernels.ScoresF16(sc.s, ld, K, stride, sc.q, D, nq, ld, scale)
	for qi, n := range sc.n {
		s := sc.s[qi*ld : qi*ld+n]
		kernels.Softmax(s)
		kernels.RoundF16s(s)
	}
	kernels.WeightedSumF16(sc.y, D, sc.s, ld, V, stride, D, sc.n, sc.t)
	for i := tl.lo; i < tl.hi; i++ {
		for g := range ng {
			qi := (i-tl.lo)*ng + g
			h := kvh*group + g0 + g
			copy(att[i*Q+h*D:i*Q+(h+1)*D], sc.y[qi*D:(qi+1)*D])
		}
	}
}
